"""Turning projection rows into :class:`Item` values, verdicts included, in one statement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from ._projection import Detail
from ._reader import Execute
from .items import Item, Meta, Verdict

__all__ = ["load_items", "rows_to_items"]

_meta = msgspec.json.Decoder(Meta)
_detail = msgspec.json.Decoder(Detail)
_tags = msgspec.json.Decoder(tuple[str, ...])
_CHUNK: Final = 500


class _VerdictRow(msgspec.Struct, array_like=True, frozen=True):
    seq: int
    trust: str
    previous: str
    actor: str
    reason: str
    at: str


_verdict_rows = msgspec.json.Decoder(tuple[_VerdictRow, ...])


def rows_to_items(found: Sequence[tuple[Any, ...]]) -> list[Item]:
    """Items for rows selected with a dialect's ``item_select``, in the same order."""
    items = []
    for row in found:
        seq, item_id, kind, ns, trust, confidence, observed, stored, text = row[:9]
        title, tags, meta, detail, verdicts = row[9:14]
        extra = _detail.decode(detail)
        items.append(
            Item(
                id=item_id,
                kind=kind,
                text=text,
                trust=trust,
                namespace=ns,
                observed_at=observed,
                seq=seq,
                stored_at=stored,
                title=title,
                confidence=confidence,
                tags=_tags.decode(tags),
                meta=_meta.decode(meta),
                turns=extra.turns,
                evidence=extra.evidence,
                sources=extra.sources,
                verdicts=tuple(
                    Verdict(
                        seq=v.seq,
                        trust=v.trust,  # type: ignore[arg-type]  # written from a Trust
                        previous=v.previous,  # type: ignore[arg-type]
                        actor=v.actor,
                        reason=v.reason,
                        at=v.at,
                    )
                    for v in _verdict_rows.decode(verdicts)
                ),
            )
        )
    return items


def load_items(execute: Execute, item_select: str, seqs: Sequence[int]) -> dict[int, Item]:
    """Items by seq (those forgotten meanwhile are simply absent)."""
    found: list[tuple[Any, ...]] = []
    for start in range(0, len(seqs), _CHUNK):
        part = list(seqs[start : start + _CHUNK])
        found.extend(
            execute(
                f"SELECT {item_select} FROM engine_items i "
                f"WHERE i.seq IN ({','.join('?' * len(part))})",
                part,
            )
        )
    return {item.seq: item for item in rows_to_items(found)}
