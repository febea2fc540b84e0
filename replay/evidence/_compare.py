"""A recorded result against a re-made one: scores within a tolerance, a readable diff.

Regression replay and a read proof's verifier both re-make a recorded read and
compare: a score within the tolerance counts as the recorded one (the model's
floating point differs across machines), and a change is shown as a diff that
names dropped, new and moved hits first. :func:`pick_embedder` is the embedder
both re-make reads with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Final

from memseal.engine.embedders import Embedder, HashingEmbedder, default_embedder
from memseal.replay.runs.divergence import field_diff

__all__ = ["DEFAULT_TOLERANCE", "close_scores", "describe", "pick_embedder"]

#: How far a re-made score may drift from the recorded one and still count as the same.
DEFAULT_TOLERANCE: Final = 0.05


def close_scores(recorded: Any, new: Any, tolerance: float) -> Any:
    """Take the recorded score wherever the new one is within the tolerance."""
    if isinstance(recorded, dict) and isinstance(new, dict):
        out = {}
        for k, v in new.items():
            r = recorded.get(k)
            if (
                k == "score"
                and isinstance(r, int | float)
                and isinstance(v, int | float)
                and math.isclose(r, v, abs_tol=tolerance)
            ):
                out[k] = r
            else:
                out[k] = close_scores(r, v, tolerance) if k in recorded else v
        return out
    if isinstance(recorded, list) and isinstance(new, list):
        return [
            close_scores(recorded[i], v, tolerance) if i < len(recorded) else v
            for i, v in enumerate(new)
        ]
    return new


def _hit_lists(value: Any) -> dict[str, list[Any]]:
    if not isinstance(value, dict):
        return {}
    return {
        k: v
        for k, v in value.items()
        if isinstance(v, list) and all(isinstance(h, dict) and "id" in h for h in v)
    }


def _short(text: Any) -> str:
    shown = str(text)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def describe(recorded: Any, new: Any) -> list[str]:
    """A readable diff: the hit lists first (dropped, new, moved), then every changed field."""
    lines: list[str] = []
    old_lists, new_lists = _hit_lists(recorded), _hit_lists(new)
    for key in sorted(set(old_lists) | set(new_lists)):
        before = [h["id"] for h in old_lists.get(key, [])]
        after = [h["id"] for h in new_lists.get(key, [])]
        if before == after:
            continue
        texts = {h["id"]: h.get("text") for h in [*old_lists.get(key, []), *new_lists.get(key, [])]}
        lines.append(f"{key}: recorded order {before}")
        lines.append(f"{key}: new order      {after}")
        for item in before:
            if item not in after:
                lines.append(f"{key}: dropped hit {item} {_short(texts.get(item))!r}")
        for item in after:
            if item not in before:
                lines.append(f"{key}: new hit {item} {_short(texts.get(item))!r}")
        for i, item in enumerate(after):
            if item in before and before.index(item) != i:
                lines.append(f"{key}: {item} moved from rank {before.index(item) + 1} to {i + 1}")
    return lines + field_diff(recorded, new)


_HASHING = re.compile(r"hashing-v1/.*/dim(\d+)")


def pick_embedder(embedders: Sequence[str], choice: str) -> Embedder | None:
    """``none``, ``hashing``, ``default`` (MiniLM when installed), or else (``auto``) the
    one of ``embedders`` (what a recording's data folder used) available here, or None."""
    if choice == "none":
        return None
    if choice == "hashing":
        return HashingEmbedder()
    if choice == "default":
        return default_embedder()
    for known in embedders:
        found = _HASHING.fullmatch(known)
        if found:
            return HashingEmbedder(int(found.group(1)))
    if embedders:
        chosen = default_embedder()
        if chosen is not None and chosen.id in embedders:
            return chosen
    return None
