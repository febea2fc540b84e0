"""Comparing a re-derived read with the recorded one (step 7 of :func:`verify_read`).

Byte for byte (canonical JSON) first. Where that cannot hold for a reason the
proof itself shows, the comparison narrows by exactly that much, and says so:

- a ``next_cursor`` names its request by a ref keyed with the instance secret,
  which no proof carries: the ref is not compared, the page it points at is;
- texts outside the reach are withheld: SQLite's BM25 scores cannot be
  re-derived, so a full-text read's scores are not compared (ids, order,
  texts and every other field still are); a semantic read's cosine scores
  depend on no other text, so they always are, and so are the scores of a
  read PostgreSQL ranked (``ts_rank`` reads no corpus statistics);
- the recorded embedder is not available here: scores within the tolerance
  bundle replay uses.

Anything else that differs is a :class:`ReadProofError` naming the field.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from memseal.engine.embedders import Embedder
from memseal.ledger.errors import InvalidRequest

from ._compare import close_scores, describe, pick_embedder
from ._read_proof_format import ReadProof, fail

__all__ = ["EmbedderChoice", "Matched", "choose_embedder", "compare"]

Matched = Literal["byte for byte", "within tolerance"]
EmbedderChoice = Literal["auto", "hashing", "default", "none"]
_canonical = msgspec.json.Encoder(order="deterministic")


def choose_embedder(embedders: Sequence[str], choice: EmbedderChoice | Embedder) -> Embedder | None:
    """The embedder to re-derive with: ``auto`` is the one the proof names when it is
    available here (the hashing embedder always is; MiniLM when installed), else none."""
    if not isinstance(choice, str):
        return choice
    if choice not in ("none", "hashing", "default", "auto"):
        raise InvalidRequest(f"`embedder`: {choice!r} is not auto, hashing, default or none")
    return pick_embedder(embedders, choice)


def _cursor_parts(value: str) -> list[Any] | None:
    """A cursor's fields ``[v, op, query ref, seq, offset]``, or None if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        parts = msgspec.json.decode(raw)
    except (binascii.Error, ValueError, msgspec.DecodeError):
        return None
    return parts if isinstance(parts, list) and len(parts) >= 3 else None


def _same_cursors(recorded: Any, new: Any) -> tuple[Any, bool]:
    """``new`` with each ``next_cursor`` that differs from the recorded one only in its keyed
    query ref taken as recorded; and whether one was."""
    if isinstance(recorded, dict) and isinstance(new, dict):
        out: dict[str, Any] = {}
        taken = False
        for key, value in new.items():
            old = recorded.get(key)
            if key == "next_cursor" and isinstance(old, str) and isinstance(value, str):
                mine, theirs = _cursor_parts(value), _cursor_parts(old)
                if (
                    mine is not None
                    and theirs is not None
                    and mine != theirs
                    and mine[:2] + mine[3:] == theirs[:2] + theirs[3:]
                ):
                    out[key], taken = old, True
                    continue
            if key in recorded:
                out[key], inner = _same_cursors(old, value)
                taken = taken or inner
            else:
                out[key] = value
        return out, taken
    if isinstance(recorded, list) and isinstance(new, list):
        items = [
            _same_cursors(recorded[i], v) if i < len(recorded) else (v, False)
            for i, v in enumerate(new)
        ]
        return [v for v, _ in items], any(t for _, t in items)
    return new, False


def _without_scores(recorded: Any, new: Any) -> Any:
    """``new`` with every score it shares with ``recorded`` taken as recorded."""
    return close_scores(recorded, new, float("inf"))


def compare(
    proof: ReadProof,
    recorded: Any,
    derived: Any,
    *,
    seq: int,
    withheld: int,
    embedder: Embedder | None,
    tolerance: float,
    bm25: bool = True,
    vectors: bool = True,
) -> tuple[Matched, str]:
    """Step 7: how the re-derived result matched, or ReadProofError naming what differs.

    ``bm25`` says whether the read's scores come from full-text ranking: only then do
    withheld texts excuse the scores (the caller passes none for a PostgreSQL read).
    ``vectors`` whether it searched an embedder's vectors: only then does an embedder not
    available here excuse them.
    """
    if _canonical.encode(derived) == _canonical.encode(recorded):
        return "byte for byte", ""
    derived, taken = _same_cursors(recorded, derived)
    cursor = ""
    if taken:
        cursor = (
            "the next_cursor's query ref is keyed by the instance secret, which no proof "
            "carries, so it is not compared (the page it points at is)"
        )
        if _canonical.encode(derived) == _canonical.encode(recorded):
            return "within tolerance", f"{cursor}; every other field byte for byte"
    how, why = _compare_rest(
        proof,
        recorded,
        derived,
        seq=seq,
        withheld=withheld if bm25 else 0,
        embedder=embedder,
        tolerance=tolerance,
        cursor=cursor,
        vectors=vectors,
    )
    return how, f"{why}; {cursor}" if cursor else why


def _compare_rest(
    proof: ReadProof,
    recorded: Any,
    derived: Any,
    *,
    seq: int,
    withheld: int,
    embedder: Embedder | None,
    tolerance: float,
    cursor: str,
    vectors: bool,
) -> tuple[Matched, str]:
    missing = embedder is None or embedder.id not in proof.embedders
    other_embedder = vectors and bool(proof.embedders) and missing
    # Why no exact score can be re-derived here; ids, order, texts and every other field
    # must still match.
    unscored: list[str] = []
    if withheld:
        unscored.append(
            f"{withheld} stored item(s) outside the read's reach are withheld and BM25 "
            "statistics span the whole index (a proof made with --disclose all has them)"
        )
    embedder_note = (
        f"the recorded embedder {', '.join(proof.embedders)} is not available here"
        if other_embedder
        else ""
    )
    if unscored:
        if _without_scores(recorded, derived) == recorded:
            return "within tolerance", (
                f"scores not compared: {'; '.join(unscored)}; ids, order, texts and fields "
                "byte for byte"
            )
        hint = "; ".join(
            [*unscored, "so the ranking itself may differ here", *filter(None, [embedder_note])]
        )
    elif other_embedder:
        if close_scores(recorded, derived, tolerance) == recorded:
            return "within tolerance", f"scores within {tolerance:g}: {embedder_note}"
        hint = f"scores compared within {tolerance:g}; {embedder_note}"
    else:
        hint = ""
    lines = describe(recorded, derived)
    shown = "; ".join(lines[:6]) + (f"; ... ({len(lines) - 6} more)" if len(lines) > 6 else "")
    raise fail(
        f"the re-derived result of step {proof.step} differs from the recorded one: "
        f"{shown or 'the values differ'}"
        + (f" ({hint})" if hint else "")
        + (f" ({cursor})" if cursor else ""),
        "result",
        seq,
        "result",
    )
