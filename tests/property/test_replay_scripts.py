"""Strict replay as a property: a recorded script replays exactly, and any change is caught.

Hypothesis draws call scripts from a fixed vocabulary: stores (learnings with
or without tags, documents), fetches, recalls, lists, gets, explores, forgets
by id and by filter, and invalid calls (an empty query, a limit out of range,
a ``namespace`` key, an unknown tool, an unknown facet, empty ids, a forget
with nothing to forget...), which are recorded as errors. ``$first`` in an
argument stands for the id the script's first successful store returned, so
later arguments depend on earlier results, as an agent's do.

Each example records its script in a fresh folder (mode ``record``), reopens
the folder and checks, with new Run objects on the same run id:

* ``strict`` replay returns every step's result byte for byte, and raises
  every recorded error again with the same type and message. The one allowed
  difference: a step citing a memory that a later step of the script forgot
  comes back with its texts replaced by ``{"forgotten_at": seq}`` markers;
* a strict run that stops one step short raises ``ReplayDivergence`` at
  close, naming that step; one call past the recorded end raises
  ``ReplayDivergence`` at that call;
* any mutation of one step (another tool, one argument changed, two
  different steps swapped) raises ``ReplayDivergence`` at exactly that step,
  with a non-empty field diff, in ``strict`` and in ``resume`` (which fails
  closed without a fork: nothing is written).

Forgetting a memory also erases the explore results that showed its facet values.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

import memseal
from memseal.tools import ToolScope

RUN_ID = "scripted"
SCOPE = ToolScope.placed_at("team:acme/agent:writer")
ENCODER = msgspec.json.Encoder(order="deterministic")
RECORDED_ERRORS = (memseal.InvalidRequest, memseal.Unsupported, memseal.NotFound)
EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Call = tuple[str, dict[str, Any]]
Outcome = tuple[str, Any]  # ("ok", result bytes) or ("error", [type, message])

TEXTS = ["the deploy is on tuesday", "alice prefers dark mode", "invoices go out monthly"]
QUERIES = ["deploy", "dark mode", "invoices", "nothing matches this"]

# The vocabulary: every call a script may make (small variations of each tool's arguments).
VALID: list[Call] = [
    *(
        ("memory_store", {"learning": {"text": t}, **tags})
        for t in TEXTS
        for tags in ({}, {"tags": ["ops"]}, {"tags": ["ui"]})
    ),
    *(("memory_store", {"document": {"text": t, "title": "notes"}}) for t in TEXTS[:2]),
    *(
        ("memory_fetch", {"query": q, **extra})
        for q in QUERIES
        for extra in ({}, {"mode": "exact"}, {"limit": 1})
    ),
    *(("memory_recall", {"question": q}) for q in QUERIES),
    ("memory_list", {}),
    ("memory_list", {"limit": 2}),
    ("memory_get", {"ids": ["$first", "no-such-id"]}),
    ("memory_get", {"ids": ["$first"]}),
    ("memory_explore", {"facet": "kind"}),
    ("memory_explore", {"facet": "tag"}),
    ("memory_forget", {"ids": ["$first"]}),
    ("memory_forget", {"filter": {"tags_any": ["ops"]}}),
]
INVALID: list[Call] = [
    ("memory_fetch", {"query": ""}),
    ("memory_fetch", {"query": "deploy", "limit": 0}),
    ("memory_fetch", {"query": "deploy", "namespace": "team:other"}),
    ("memory_store", {"learning": {}}),
    ("memory_fly", {"to": "mars"}),
    ("memory_explore", {"facet": "colour"}),
    ("memory_get", {"ids": []}),
    ("memory_forget", {}),
    ("memory_list", {"limit": 51}),
]
VOCABULARY = VALID + INVALID
# Two valid calls for one invalid one.
calls = st.one_of(st.sampled_from(VALID), st.sampled_from(VALID), st.sampled_from(INVALID))
scripts = st.lists(calls, min_size=1, max_size=12)


def _resolve(value: Any, first: str | None) -> Any:
    """``$first`` -> the first stored id (or a literal id nobody has, before any store)."""
    if value == "$first":
        return first or "no-store-yet"
    if isinstance(value, dict):
        return {k: _resolve(v, first) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, first) for v in value]
    return value


async def _play(
    run: memseal.Run, script: list[Call], outcomes: list[Outcome] | None = None
) -> list[Outcome]:
    """Run the script; each step's outcome is appended to ``outcomes`` as it completes."""
    first: str | None = None
    outcomes = [] if outcomes is None else outcomes
    for name, arguments in script:
        resolved = _resolve(arguments, first)
        try:
            result = await run.call(name, resolved)
        except RECORDED_ERRORS as exc:
            outcomes.append(("error", [type(exc).__name__, str(exc)]))
            continue
        outcomes.append(("ok", ENCODER.encode(result)))
        if name == "memory_store" and first is None:
            first = result["id"]
    return outcomes


def _ids(value: Any) -> set[str]:
    """Every memory id a rendered result cites (under an ``id`` key)."""
    if isinstance(value, dict):
        found = {value["id"]} if isinstance(value.get("id"), str) else set()
        return found.union(*(_ids(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_ids(v) for v in value))
    return set()


def _marked(recorded: Any, replayed: Any, seqs: set[int]) -> bool:
    """Whether ``replayed`` is ``recorded`` with some strings replaced by forgotten markers."""
    if recorded == replayed:
        return True
    if (
        isinstance(recorded, str)
        and isinstance(replayed, dict)
        and set(replayed) == {"forgotten_at"}
    ):
        seqs.add(replayed["forgotten_at"])
        return True
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        return set(recorded) == set(replayed) and all(
            _marked(recorded[k], replayed[k], seqs) for k in recorded
        )
    if isinstance(recorded, list) and isinstance(replayed, list):
        return len(recorded) == len(replayed) and all(
            _marked(a, b, seqs) for a, b in zip(recorded, replayed, strict=True)
        )
    return False


def _check_replayed(recorded: list[Outcome], replayed: list[Outcome]) -> None:
    """Identical outcomes, but for texts a later step's forget erased (markers instead).

    ``replayed`` may be a prefix of the script: forgets recorded after it still count.
    """
    assert len(replayed) <= len(recorded)
    forgotten_after: list[set[str]] = [set() for _ in recorded]
    for step, (status, value) in enumerate(recorded):
        if status == "ok" and "forgotten" in (result := msgspec.json.decode(value)):
            for earlier in range(step):
                forgotten_after[earlier] |= set(result["forgotten"])
    for step, (old, new) in enumerate(zip(recorded, replayed, strict=False)):
        if old == new:
            continue
        assert old[0] == new[0] == "ok", f"step {step}: {old} replayed as {new}"
        before, after = msgspec.json.decode(old[1]), msgspec.json.decode(new[1])
        # A result citing a forgotten item is erased; so is an explore showing a value
        # (a tag, say) that a forgotten item had, whatever ids it cites (docs/replay.md).
        cause = _ids(before) & forgotten_after[step] or (
            "buckets" in before and forgotten_after[step]
        )
        assert cause, f"step {step} changed: {old} -> {new}"
        seqs: set[int] = set()
        assert _marked(before, after, seqs) and len(seqs) == 1, f"step {step}: {old} -> {new}"
        event("a step replayed with forgotten markers")
    if any(status == "error" for status, _ in replayed):
        event("an error replayed")


def _vary(value: Any) -> Any:
    """The same shape with one value changed (the first key's, recursively)."""
    if isinstance(value, str):
        return value + " again"
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, list):
        return [*value, "another"]
    assert isinstance(value, dict)
    if not value:
        return {"limit": 3}
    key = sorted(value)[0]
    return {**value, key: _vary(value[key])}


async def _size(folder: Path) -> int:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        return (await memory.ledger.head()).size


async def _record(folder: Path, script: list[Call]) -> list[Outcome]:
    async with (
        memseal.open(folder, embedder=None, checkpoint_interval=None) as memory,
        memory.run(RUN_ID, SCOPE, mode="record") as run,
    ):
        return await _play(run, script)


async def _replay_checks(folder: Path, script: list[Call]) -> None:
    recorded = await _record(folder, script)
    size = await _size(folder)
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        async with memory.run(RUN_ID, SCOPE, mode="strict") as run:
            replayed = await _play(run, script)
        _check_replayed(recorded, replayed)

        # One step short: the unreplayed step is reported when the run closes.
        with pytest.raises(memseal.ReplayDivergence) as closed:
            async with memory.run(RUN_ID, SCOPE, mode="strict") as run:
                assert await _play(run, script[:-1]) == replayed[:-1]
        assert closed.value.step == len(script) - 1 and closed.value.run_id == RUN_ID

        # One call past the end: refused at that call, not run.
        async with memory.run(RUN_ID, SCOPE, mode="strict") as run:
            await _play(run, script)
            with pytest.raises(memseal.ReplayDivergence) as past:
                await run.call("memory_list", {})
        assert past.value.step == len(script)
        assert past.value.diff
        assert (await memory.ledger.head()).size == size, "a strict run wrote something"


# Forgets erasing what earlier reads returned: markers on replay, whatever hypothesis draws.
FORGET_AFTER_READS: list[Call] = [
    ("memory_store", {"learning": {"text": TEXTS[1]}, "tags": ["ops"]}),
    ("memory_store", {"learning": {"text": TEXTS[0]}}),
    ("memory_fetch", {"query": "dark mode"}),
    ("memory_list", {}),
    ("memory_recall", {"question": "dark mode"}),
    ("memory_fetch", {"query": ""}),
    ("memory_forget", {"filter": {"tags_any": ["ops"]}}),
    ("memory_get", {"ids": ["$first", "no-such-id"]}),
    ("memory_list", {}),
    ("memory_forget", {"ids": ["$first"]}),
]


@EXAMPLES
@example(script=FORGET_AFTER_READS)
@given(script=scripts)
def test_strict_replay_repeats_every_step(script: list[Call]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_replay_checks(Path(tmp) / "data", script))


async def _mutation_checks(folder: Path, script: list[Call], mutated: list[Call], at: int) -> None:
    recorded = await _record(folder, script)
    size = await _size(folder)
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        for mode in ("strict", "resume"):
            outcomes: list[Outcome] = []
            with pytest.raises(memseal.ReplayDivergence) as diverged:
                async with memory.run(RUN_ID, SCOPE, mode=mode) as run:
                    await _play(run, mutated, outcomes)
            # Every step before the changed one replayed as recorded.
            assert len(outcomes) == at
            _check_replayed(recorded, outcomes)
            error = diverged.value
            assert error.step == at, (mode, error)
            assert error.run_id == RUN_ID
            assert error.diff and all(isinstance(line, str) and line for line in error.diff)
            # What was attempted at that step is what the mutated script sent there.
            assert isinstance(error.attempted, dict)
            assert error.attempted["tool"] == mutated[at][0]
        assert (await memory.ledger.head()).size == size, "a diverged run wrote something"


@st.composite
def mutations(draw: st.DrawFn) -> tuple[list[Call], list[Call], int]:
    script = draw(st.lists(calls, min_size=1, max_size=10))
    at = draw(st.integers(0, len(script) - 1))
    kind = draw(st.sampled_from(["tool", "argument", "swap"]))
    mutated = list(script)
    others = [j for j in range(at + 1, len(script)) if script[j] != script[at]]
    if kind == "swap" and others:
        j = draw(st.sampled_from(others))
        mutated[at], mutated[j] = script[j], script[at]
    elif kind == "argument":
        name, arguments = script[at]
        mutated[at] = (name, _vary(arguments))
    else:  # another tool (also when a swap has no different step to swap with)
        name = script[at][0]
        mutated[at] = draw(st.sampled_from([call for call in VOCABULARY if call[0] != name]))
    return script, mutated, at


@EXAMPLES
@example(case=(FORGET_AFTER_READS, [*FORGET_AFTER_READS[:9], ("memory_list", {})], 9))
@example(case=(FORGET_AFTER_READS, [*FORGET_AFTER_READS[:1], ("memory_list", {})], 1))
@given(case=mutations())
def test_any_changed_step_diverges_at_that_step(
    case: tuple[list[Call], list[Call], int],
) -> None:
    script, mutated, at = case
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_mutation_checks(Path(tmp) / "data", script, mutated, at))


# -- known gaps, pinned ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "attempted"),
    [
        (("bad name!", {}), ("worse name?", {})),
        (("memory_fetch", "not json"), ("memory_fetch", "{also not json")),
        (("memory_fetch", [1]), ("memory_fetch", [2])),
    ],
    ids=["tool-name", "json-text", "non-object"],
)
async def test_changed_junk_at_a_recorded_step_diverges(
    tmp_path: Path, recorded: tuple[Any, Any], attempted: tuple[Any, Any]
) -> None:
    async with memseal.open(tmp_path / "data", embedder=None, checkpoint_interval=None) as m:
        async with m.run(RUN_ID, SCOPE, mode="record") as run:
            with pytest.raises(memseal.InvalidRequest):
                await run.call(*recorded)
        with pytest.raises(memseal.ReplayDivergence) as diverged:
            async with m.run(RUN_ID, SCOPE, mode="strict") as run:
                await run.call(*attempted)
        assert diverged.value.step == 0


async def test_a_call_past_the_end_does_not_blame_a_forget(tmp_path: Path) -> None:
    async with memseal.open(tmp_path / "data", embedder=None, checkpoint_interval=None) as m:
        async with m.run(RUN_ID, SCOPE, mode="record") as run:
            await run.call("memory_list", {})
        with pytest.raises(memseal.ReplayDivergence) as past:
            async with m.run(RUN_ID, SCOPE, mode="strict") as run:
                await run.call("memory_list", {})
                await run.call("memory_list", {})
    assert past.value.step == 1 and past.value.diff
    assert "past the recorded end" in str(past.value)
    assert "erased" not in str(past.value) and not any("forget" in d for d in past.value.diff)


async def test_a_forgotten_memorys_tag_is_gone_from_replayed_explores(tmp_path: Path) -> None:
    tag = "diagnosis-zeta-private"
    stored: Call = ("memory_store", {"learning": {"text": "plain words"}, "tags": [tag]})
    script: list[Call] = [stored, ("memory_explore", {"facet": "tag"})]
    folder = tmp_path / "data"
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as m:
        async with m.run(RUN_ID, SCOPE, mode="record") as run:
            first = await _play(run, script)
            await run.call("memory_forget", {"ids": [msgspec.json.decode(first[0][1])["id"]]})
        async with m.run(RUN_ID, SCOPE, mode="resume") as run:
            replayed = await _play(run, script)
    assert tag.encode() not in replayed[1][1]
    assert not [p for p in folder.rglob("*") if p.is_file() and tag.encode() in p.read_bytes()]
