"""Turning projection rows into :class:`Item` values (with their verdicts)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import msgspec

from ._projection import Detail
from .items import Item, Meta, Verdict

__all__ = ["ITEM_SELECT", "Rows", "load_items", "rows_to_items"]

Rows = Callable[[str, Sequence[Any]], Awaitable[list[tuple[Any, ...]]]]

#: The columns :func:`rows_to_items` reads, from ``engine_items AS i``.
ITEM_SELECT: Final = (
    "i.seq, i.id, i.kind, i.namespace, i.trust, i.confidence, i.observed_at, i.stored_at, "
    "i.text, i.title, i.tags, i.meta, i.detail"
)
_meta = msgspec.json.Decoder(Meta)
_detail = msgspec.json.Decoder(Detail)
_tags = msgspec.json.Decoder(tuple[str, ...])
_CHUNK: Final = 500


async def rows_to_items(rows: Rows, found: Sequence[tuple[Any, ...]]) -> list[Item]:
    """Items for rows selected with :data:`ITEM_SELECT`, in the same order."""
    verdicts: dict[int, list[Verdict]] = {}
    seqs = [row[0] for row in found]
    for start in range(0, len(seqs), _CHUNK):
        part = seqs[start : start + _CHUNK]
        for item, seq, trust, previous, actor, reason, at in await rows(
            "SELECT item, seq, trust, previous, actor, reason, at FROM engine_verdicts "
            f"WHERE item IN ({','.join('?' * len(part))}) ORDER BY seq",
            part,
        ):
            verdicts.setdefault(item, []).append(
                Verdict(seq=seq, trust=trust, previous=previous, actor=actor, reason=reason, at=at)
            )
    items = []
    for (
        seq,
        item_id,
        kind,
        ns,
        trust,
        confidence,
        observed,
        stored,
        text,
        title,
        tags,
        meta,
        detail,
    ) in found:
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
                verdicts=tuple(verdicts.get(seq, ())),
            )
        )
    return items


async def load_items(rows: Rows, seqs: Sequence[int]) -> dict[int, Item]:
    """Items by seq (those forgotten meanwhile are simply absent)."""
    found: list[tuple[Any, ...]] = []
    for start in range(0, len(seqs), _CHUNK):
        part = list(seqs[start : start + _CHUNK])
        found.extend(
            await rows(
                f"SELECT {ITEM_SELECT} FROM engine_items i "
                f"WHERE i.seq IN ({','.join('?' * len(part))})",
                part,
            )
        )
    return {item.seq: item for item in await rows_to_items(rows, found)}
