"""What differs between a recorded call and the one attempted at its step."""

from __future__ import annotations

from typing import Any

from memseal.ledger.errors import ReplayDivergence

__all__ = ["diverged", "field_diff"]

_MISSING = object()


def field_diff(recorded: Any, attempted: Any, path: str = "") -> list[str]:
    """Readable differences, one per changed field: ``path: recorded -> attempted``."""
    if isinstance(recorded, dict) and isinstance(attempted, dict):
        out: list[str] = []
        for key in sorted(set(recorded) | set(attempted), key=str):
            sub = f"{path}.{key}" if path else str(key)
            out += field_diff(recorded.get(key, _MISSING), attempted.get(key, _MISSING), sub)
        return out
    if (
        isinstance(recorded, list)
        and isinstance(attempted, list)
        and len(recorded) == len(attempted)
    ):
        out = []
        for i, (a, b) in enumerate(zip(recorded, attempted, strict=True)):
            out += field_diff(a, b, f"{path}[{i}]")
        return out
    if recorded == attempted:
        return []
    return [f"{path or '(value)'}: {_show(recorded)} -> {_show(attempted)}"]


def _show(value: Any) -> str:
    if value is _MISSING:
        return "(absent)"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def diverged(
    run_id: str,
    step: int,
    recorded: dict[str, Any] | None,
    attempted: dict[str, Any],
    reason: str = "a different call",
    *,
    past_end: bool = False,
) -> ReplayDivergence:
    """The error for a call that does not match its recorded step."""
    if past_end:
        diff = ["(nothing was recorded at this step)"]
        shown = "nothing"
    elif recorded is None:
        diff = ["(the recorded arguments were erased by a forget; the fingerprints differ)"]
        shown = "(erased)"
    else:
        diff = field_diff(recorded, attempted) or ["(same tool and arguments; the scope differs)"]
        shown = f"{recorded.get('tool')} {_show(recorded.get('arguments'))}"
    return ReplayDivergence(
        f"run {run_id!r} step {step}: {reason}; recorded {shown}, attempted "
        f"{attempted.get('tool')} {_show(attempted.get('arguments'))}; diff: " + "; ".join(diff),
        run_id=run_id,
        step=step,
        recorded=recorded,
        attempted=attempted,
        diff=tuple(diff),
    )
