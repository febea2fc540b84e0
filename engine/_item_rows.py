"""Turning projection rows into :class:`Item` values, verdicts included, in one statement.

Every row is checked as it is read: its ``content`` column is keyed blake3
(a key derived from the instance secret) of the title and text the
projection stored from the signed payload, so a row whose text, title or
turns were edited in the database no longer matches it, and the read raises
:class:`VerificationError` (step ``projection``) rather than serve it.
Without the secret no one can make a matching hash for new text. What the
hash does not cover (namespace, kind, trust, tags, meta, evidence, verdicts,
and a row moved whole to another seq) is left to ``memseal verify --deep``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from memseal.ledger.errors import VerificationError
from memseal.ledger.store import Execute

from ._projection import Detail, embed_text
from .events import Keyring
from .items import Item, Meta, Turn, Verdict
from .namespaces import Reach
from .results import Got

__all__ = ["check_row", "got_from_rows", "load_items", "rows_to_items"]

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


def check_row(
    keyring: Keyring,
    seq: int,
    item_id: str,
    kind: str,
    text: str,
    title: str | None,
    turns: tuple[Turn, ...] | None,
    content: str,
) -> None:
    """Raise unless the row's text is the text its keyed content hash was made from."""
    intact = keyring.content_hash(embed_text(title, text)) == content
    if intact and kind == "conversation":
        # The turns are served as they are stored: they must be the text that was hashed.
        intact = text == "\n".join(f"{turn.role}: {turn.text}" for turn in turns or ())
    if not intact:
        raise VerificationError(
            f"item {item_id}: its stored text no longer matches its content hash; the "
            "projection was altered outside memseal (run `memseal verify --deep`, then "
            "`memseal rebuild`)",
            seq=seq,
            step="projection",
        )


def rows_to_items(found: Sequence[tuple[Any, ...]], keyring: Keyring) -> list[Item]:
    """Items for rows selected with a dialect's ``item_select``, in the same order;
    each row is checked against its id first (see the module docstring)."""
    items = []
    for row in found:
        seq, item_id, kind, ns, trust, confidence, observed, stored, text = row[:9]
        title, tags, meta, detail, content, verdicts = row[9:15]
        extra = _detail.decode(detail)
        check_row(keyring, seq, item_id, kind, text, title, extra.turns, content)
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


def got_from_rows(
    found: Sequence[tuple[Any, ...]],
    wanted: Sequence[str],
    scope: Reach | None,
    floor: int,
    keyring: Keyring,
) -> Got:
    """:meth:`Engine.get`'s answer from the item rows of the ``wanted`` ids, each selected
    with its ``trust_rank`` last: out of ``scope`` is missing, under ``floor`` filtered."""
    visible = []
    filtered: set[str] = set()
    for row in found:
        if scope is not None and not scope.admits(row[3]):
            continue
        if row[-1] < floor:
            filtered.add(row[1])
        else:
            visible.append(row[:-1])
    by_id = {item.id: item for item in rows_to_items(visible, keyring)}
    return Got(
        items=tuple(by_id[i] for i in wanted if i in by_id),
        missing=tuple(i for i in wanted if i not in by_id and i not in filtered),
        filtered=tuple(i for i in wanted if i in filtered),
    )


def load_items(
    execute: Execute, item_select: str, seqs: Sequence[int], keyring: Keyring
) -> dict[int, Item]:
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
    return {item.seq: item for item in rows_to_items(found, keyring)}
