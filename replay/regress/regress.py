"""Regression replay: re-execute a bundle's recorded calls with the current code and compare.

The engine has no time travel, so each call runs against a *temporary log*
rebuilt to the state the call observed. Entries are copied into it in seq
order (each with its original body, payload and time, so the projection
the engine derives from them is the one the run saw) until the log holds
exactly the call's ``observed_size`` entries; then the call runs live
through the tools layer with the run's scope, and its result is compared
with the recorded one. A call that wrote is re-executed too: its writes
land at the seqs the recorded writes took, and stand in for them.

Two sources of entries:

``exact`` (``--against DIR``)  every entry of the data folder the bundle
    came from (checked: the bundle's entries must be the folder's), and the
    folder's instance secret, so re-executed writes make the same item ids.
    The comparison is exact, field by field.
``bundle`` (the bundle alone)  only the bundle's entries; the gaps between
    them are filled with inert ``replay_gap`` entries so seqs (and
    ``ledger_ref``) stay put. Only the run's own reachable memory exists, so
    corpus-wide statistics (BM25) differ: ids, order, texts and fields are
    compared exactly, scores within a tolerance, and a page's cursor by
    what it continues (its text is keyed by the instance secret, so a later
    call continuing it is sent the re-made one). Without the folder's
    instance secret a re-executed write would make other item ids, so the
    run's writes are not re-executed: their recorded entries are applied.

The temporary log is signed by a throwaway key and deleted afterwards.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

import msgspec

from memseal.engine.currency import following
from memseal.engine.embedders import Embedder
from memseal.ledger.errors import (
    InvalidRequest,
    MemsealError,
    NotFound,
    Unsupported,
)
from memseal.replay.evidence._bundle_format import BundleCall, run_scope
from memseal.replay.evidence._compare import (
    DEFAULT_TOLERANCE,
    close_scores,
    describe,
    pick_embedder,
)
from memseal.replay.evidence._temp_log import Source, TempLog, clock_for, parse_time, temp_log
from memseal.replay.evidence.bundle import VerifiedBundle
from memseal.replay.evidence.source import Entries, EvidenceSource
from memseal.tools import MemoryTools, ToolScope

from ._reexec import Cursors

__all__ = [
    "DEFAULT_TOLERANCE",
    "RegressReport",
    "StepOutcome",
    "describe",
    "embedder_for",
    "pick_embedder",
    "ranked_as",
    "regress",
]

_RECORDED_ERRORS = (InvalidRequest, Unsupported, NotFound)
_encoder = msgspec.json.Encoder(order="deterministic")

Mode = Literal["exact", "bundle"]


class StepOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How one recorded step fared when re-executed: same, changed or skipped."""

    step: int
    tool: str
    status: Literal["same", "changed", "skipped"]
    diff: tuple[str, ...] = ()
    note: str = ""
    key: str | None = None  # the call's key (the model's tool-call id), when it has one


class RegressReport(msgspec.Struct, kw_only=True):
    """The outcome of re-executing a run's recorded calls, step by step."""

    run_id: str
    mode: Mode
    tolerance: float
    steps: list[StepOutcome]
    notes: list[str]
    results: dict[int, Any]  # the new result of each re-executed step

    @property
    def matched_by(self) -> Literal["key", "order"]:
        """How a re-run agent's calls are matched with this run's: by key when every
        recorded call is keyed, else by order (what :class:`Replayer` does)."""
        keyed = bool(self.steps) and all(s.key is not None for s in self.steps)
        return "key" if keyed else "order"

    def matching(self) -> str:
        """The report's line on the run's call keys and how its calls are matched."""
        keyed = sum(s.key is not None for s in self.steps)
        if self.matched_by == "key":
            return (
                f"calls: all {keyed} keyed (matched by key: a re-run agent that re-emits the "
                "recorded tool-call ids replays in any order)"
            )
        if keyed:
            return (
                f"calls: {keyed} of {len(self.steps)} keyed, the rest not (matched by order: "
                "a keyed replay needs every call keyed)"
            )
        return "calls: unkeyed (matched by order)"

    @property
    def changed(self) -> list[StepOutcome]:
        """The steps whose result differs from the recorded one."""
        return [s for s in self.steps if s.status == "changed"]

    def text(self) -> str:
        """The report as text for the CLI: how it ran, then each changed step."""
        how = (
            "exact: each call ran at the tree size it observed, against the data folder's log"
            if self.mode == "exact"
            else "bundle only: the run's own reachable memory; ids, order, texts and fields "
            f"compared exactly, scores within {self.tolerance:g}"
        )
        lines = [f"replay of run {self.run_id!r} ({how})", self.matching()]
        lines += [f"note: {n}" for n in self.notes]
        for s in self.steps:
            keyed = "" if s.key is None else f" key {s.key!r:.60}"
            head = f"step {s.step} {s.tool}{keyed}: {s.status}"
            lines.append(head + (f" ({s.note})" if s.note else ""))
            lines += [f"    {d}" for d in s.diff]
        changed = len(self.changed)
        skipped = sum(s.status == "skipped" for s in self.steps)
        ran = len(self.steps) - skipped
        tail = f" ({skipped} skipped)" if skipped else ""
        lines.append(
            f"{changed} of {ran} re-executed step(s) changed{tail}"
            if changed
            else f"all {ran} re-executed step(s) match{tail}"
        )
        return "\n".join(lines)


def _plain(value: Any) -> Any:
    return msgspec.json.decode(_encoder.encode(value))


# -- comparison -----------------------------------------------------------------------------


def _blank_forgotten(recorded: Any, new: Any) -> Any:
    """Where the recorded text was erased, the new one is not compared."""
    if recorded == {"forgotten": True}:
        return recorded
    if isinstance(recorded, dict) and isinstance(new, dict):
        return {
            k: _blank_forgotten(recorded.get(k), v) if k in recorded else v for k, v in new.items()
        }
    if isinstance(recorded, list) and isinstance(new, list):
        return [
            _blank_forgotten(recorded[i], v) if i < len(recorded) else v for i, v in enumerate(new)
        ]
    return new


# -- the replay -----------------------------------------------------------------------------


def _error_result(error: MemsealError) -> dict[str, Any]:
    return {"error": {"type": type(error).__name__, "message": str(error)}}


async def regress(
    verified: VerifiedBundle,
    *,
    against: Path | None = None,
    embedder: Embedder | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> RegressReport:
    """Re-execute every recorded call of a verified bundle and compare (module docstring)."""
    source = EvidenceSource.of(verified, against)
    report = RegressReport(
        run_id=verified.run_id,
        mode=source.mode,
        tolerance=tolerance,
        steps=[],
        notes=[],
        results={},
    )
    scope = run_scope(verified)
    async with source.open() as entries:
        # Without the instance secret the ids of new items cannot be the recorded ones.
        secret = os.urandom(32) if entries.secret is None else entries.secret
        ranks_as = ranked_as(verified)
        if ranks_as == "postgresql":
            report.notes.append(
                "full text re-ranked as PostgreSQL ranks it (ts_rank, re-computed), as the "
                "recording's store did"
            )
        async with temp_log(secret, embedder, ranks_as=ranks_as) as log:
            await _replay_calls(source, entries, log, scope, report, tolerance)
    return report


async def _replay_calls(
    source: EvidenceSource,
    entries: Entries,
    log: TempLog,
    scope: ToolScope,
    report: RegressReport,
    tolerance: float,
) -> None:
    assert log.engine is not None
    tools = MemoryTools(log.engine, scope)
    replaced: set[int] = set()  # source seqs a re-executed write stands in for
    fed = 0  # source entries consumed
    cursors = Cursors()  # bundle mode: each recorded next_cursor, as re-made
    continued = {cur for c in source.calls if (cur := Cursors.continued(c.arguments))}

    async def feed(stop: int) -> None:
        nonlocal fed
        if stop <= fed:
            return
        batch = [s for s in await entries.read(fed, stop) if _seq(s) not in replaced]
        fed = stop
        # Fill to keep seqs aligned where re-executed writes made fewer entries than recorded.
        if batch:
            await log.append(batch)

    for call in source.calls:
        body = call.call
        step, tool = body.step, body.tool
        key = body.key if isinstance(body.key, str) else None
        skipped = source.why_not_rerun(call)
        if skipped is None and not source.keeps_ids and not cursors.knows(call.arguments):
            skipped = "it continues a page the replay did not re-make with a cursor"
        if skipped is not None:
            report.steps.append(
                StepOutcome(step=step, tool=tool, status="skipped", note=skipped, key=key)
            )
            continue
        target = body.observed_size
        await feed(target)
        if log.size != target:
            report.notes.append(
                f"step {step} observed {target} entries but ran at {log.size} "
                "(earlier re-executed writes differ in size)"
            )
        new, error = await _rerun(call, entries, log, tools, cursors)
        report.results[step] = new
        if body.wrote:
            replaced.update(body.wrote)
            fed = max(fed, target)
        recorded = call.result
        if source.mode == "bundle":
            new = _as_the_bundle_shows(
                call, new, source, cursors, continued, tolerance, report.notes
            )
        new = _blank_forgotten(recorded, new)
        report.steps.append(_outcome(step, tool, key, recorded, new, error != body.error))


async def _rerun(
    call: BundleCall, entries: Entries, log: TempLog, tools: MemoryTools, cursors: Cursors
) -> tuple[Any, bool]:
    """``(the new result, whether it is a recorded kind of error)`` of ``call`` run live
    at its recorded time, under the currency rule it followed (``log.size`` is brought
    up to what it wrote)."""
    body = call.call
    target = body.observed_size
    written = await entries.read(target, target + len(body.wrote)) if body.wrote else []
    log.now = parse_time(clock_for(call, written))
    # The rule its reads followed when recorded (none before the rule existed).
    rule = body.currency if isinstance(body.currency, int) else None
    try:
        with following(rule):
            new: Any = _plain(await tools.call(body.tool, cursors.send(call.arguments)))
        error = False
    except _RECORDED_ERRORS as exc:
        new, error = _error_result(exc), True
    log.size = (await log.store.head()).size if log.store is not None else log.size
    return new, error


def _as_the_bundle_shows(
    call: BundleCall,
    new: Any,
    source: EvidenceSource,
    cursors: Cursors,
    continued: set[str],
    tolerance: float,
    notes: list[str],
) -> Any:
    """``new`` as compared with ``call``'s recorded result when the bundle is all there
    is: scores within ``tolerance``, its cursor as re-made, and memory the bundle does
    not carry excused (a note says so)."""
    recorded, step = call.result, call.call.step
    new = close_scores(recorded, new, tolerance)
    new = cursors.seen(recorded, new)
    if _past_the_bundle(recorded, new, source, call.call.observed_size, continued):
        # More matched than the page showed, in memory the bundle does not carry.
        new = {**new, "next_cursor": recorded["next_cursor"]}
        notes.append(
            f"step {step}: its next_cursor tells of memory past the page, which the "
            "bundle does not carry (another run's): compared without it"
        )
    if _filtered_past_the_bundle(recorded, new, source):
        new = {**new, "filtered": recorded["filtered"], "missing": recorded["missing"]}
        notes.append(
            f"step {step}: its filtered items are not carried by the bundle, so they "
            "read as missing: their items compared, filtered and missing as one"
        )
    return new


def _outcome(
    step: int, tool: str, key: str | None, recorded: Any, new: Any, error_differs: bool
) -> StepOutcome:
    """The step's outcome: changed when ``error_differs`` (an error where none was
    recorded, or the reverse) or the new result differs from the recorded one."""
    if error_differs or new != recorded:
        return StepOutcome(
            step=step, tool=tool, status="changed", diff=tuple(describe(recorded, new)), key=key
        )
    return StepOutcome(step=step, tool=tool, status="same", key=key)


def _past_the_bundle(
    recorded: Any, new: Any, source: EvidenceSource, size: int, continued: set[str]
) -> bool:
    """Whether a recorded page went on, the re-made one did not, and the bundle lacks
    entries before the read (so the memory past the page may be one of them). A page
    the run went on to continue is never excused: that call's items are carried."""
    return (
        isinstance(recorded, dict)
        and isinstance(new, dict)
        and isinstance(recorded.get("next_cursor"), str)
        and recorded["next_cursor"] not in continued
        and new.get("next_cursor") is None
        and not source.whole_below(size)
    )


def _filtered_past_the_bundle(recorded: Any, new: Any, source: EvidenceSource) -> bool:
    """Whether a get's re-made result differs from the recorded one only in ``filtered``
    items the bundle does not carry reading as ``missing`` (an item it carries that
    moved, or any other difference, is a change)."""
    if not (isinstance(recorded, dict) and isinstance(new, dict) and recorded.get("filtered")):
        return False
    keys = ("filtered", "missing")
    if not all(isinstance(d.get(k), list) for d in (recorded, new) for k in keys):
        return False
    moved = [i for i in recorded["filtered"] if i not in new["filtered"]]
    return (
        bool(moved)
        and not source.carries_any(moved)
        and new["filtered"] == [i for i in recorded["filtered"] if i not in moved]
        and sorted(new["missing"]) == sorted(recorded["missing"] + moved)
    )


def ranked_as(verified: VerifiedBundle) -> str:
    """The store whose full-text ranking a replay repeats, as the signed manifest states
    it (a bundle made before the manifest's ``ranked_by``: its reads section's, else SQLite)."""
    manifest = verified.manifest
    if manifest.ranked_by is not None:
        return manifest.ranked_by
    return "sqlite" if manifest.reads is None else manifest.reads.ranked_by


def embedder_for(verified: VerifiedBundle, choice: str = "auto") -> Embedder | None:
    """The embedder to replay with: ``none``, ``hashing``, ``default`` (MiniLM when
    installed), or ``auto``: the one the recording's data folder used, when known and
    available here (else exact search only, with a warning on stderr). ``auto`` reads
    the embedders the verified bundle's signed manifest states, never an unsigned field."""
    embedders = verified.manifest.embedders
    chosen = pick_embedder(embedders, choice)
    if chosen is None and embedders and choice not in ("none", "hashing", "default"):
        print(
            f"memseal replay: the recording used {', '.join(embedders)}; not available "
            "here, replaying with exact search only",
            file=sys.stderr,
        )
    return chosen


def _seq(source: Source | int) -> int:
    return source if isinstance(source, int) else source.seq
