"""EvidenceSource: each kind (a data folder, a bundle, a bundle against its folder) answers
each question a replay or an update asks, and each refusal names its reason."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from pathlib import Path

import msgspec
import pytest

import memseal
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.folder import DataFolder
from memseal.ledger.keys import key_history
from memseal.replay.evidence.bundle import (
    VerifiedBundle,
    decode_bundle,
    encode_bundle,
    export_bundle,
    verify_bundle,
)
from memseal.replay.evidence.source import EvidenceSource, default_trust

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:reader")
ALONE = "from the bundle alone the run's items get new ids"
UNKEPT = "its arguments were erased by a forget"


class Recorded(msgspec.Struct, frozen=True, kw_only=True):
    """A data folder with three runs, and their bundles verified with its key."""

    folder: Path
    other: Path  # another folder, with a log of its own
    run: VerifiedBundle  # stores two items, fetches, explores, then a call fails
    later: VerifiedBundle  # stores a text the memory held from before the run
    gone: VerifiedBundle  # stores an item a forget erased after the run


async def _bundle(memory: memseal.Memory, run_id: str) -> VerifiedBundle:
    exported = await export_bundle(memory.ledger, await memory.key_history(), run_id)
    return verify_bundle(encode_bundle(exported), memory.vkey)


async def _record(root: Path) -> Recorded:
    async with memseal.open(root / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("before", SCOPE) as run:
            for text in ("an older note", "another older note"):
                await run.call("memory_store", {"learning": {"text": text}})
        async with m.run("r", SCOPE) as run:
            for text in ("the ledger store", "the ledger proof"):
                await run.call("memory_store", {"learning": {"text": text}})
            await run.call("memory_fetch", {"query": "ledger"})
            await run.call("memory_explore", {"facet": "kind"})
            with contextlib.suppress(InvalidRequest):
                await run.call("memory_get", {"ids": "not a list"})
        async with m.run("later", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "an older note"}})
        async with m.run("gone", SCOPE) as run:
            made = await run.call("memory_store", {"learning": {"text": "a note to forget"}})
        await m.engine.forget(ids=[made["id"]])
        bundles = [await _bundle(m, name) for name in ("r", "later", "gone")]
    other = memseal.open(root / "other", embedder=None, checkpoint_interval=None)
    async with other as m, m.run("elsewhere", SCOPE) as run:
        for n in range(30):  # a log longer than the bundles' checkpoint
            await run.call("memory_store", {"learning": {"text": f"note {n}"}})
    return Recorded(
        folder=root / "d", other=root / "other", run=bundles[0], later=bundles[1], gone=bundles[2]
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return asyncio.run(_record(tmp_path_factory.mktemp("evidence")))


def test_each_kind_says_what_it_holds(recorded: Recorded) -> None:
    folder = EvidenceSource.of(None, recorded.folder)
    bundle = EvidenceSource.of(recorded.run)
    against = EvidenceSource.of(recorded.run, recorded.folder)
    answers = {
        s.kind: (s.holds_run, s.has_payloads, s.keeps_ids, s.mode, len(s.calls))
        for s in (folder, bundle, against)
    }
    assert answers == {
        "folder": (False, True, True, "exact", 0),
        "bundle": (True, False, False, "bundle", 5),
        "bundle_against_folder": (True, True, True, "exact", 5),
    }
    with pytest.raises(InvalidRequest, match="evidence needs a bundle"):
        EvidenceSource.of(None)


def test_a_bundle_alone_holds_only_the_run_s_entries(recorded: Recorded) -> None:
    bundle = EvidenceSource.of(recorded.run)
    started = bundle.run_started  # after "before"'s two stores and run_started
    assert started == min(bundle.carried_seqs) and started > 0
    assert bundle.whole_below(0)
    assert not bundle.whole_below(started)  # the other run's entries are not carried
    own = [c.result["id"] for c in recorded.run.calls[:2]]
    assert bundle.carries_any(own) and bundle.carries_any(["unknown", own[0]])
    assert not bundle.carries_any(["unknown"])
    for whole in (
        EvidenceSource.of(None, recorded.folder),
        EvidenceSource.of(recorded.run, recorded.folder),
    ):
        assert whole.whole_below(started) and whole.whole_below(10**6)
        assert whole.carries_any(["unknown"])
    assert EvidenceSource.of(recorded.run, recorded.folder).run_started == started


def test_a_folder_alone_holds_no_run_to_update(recorded: Recorded) -> None:
    folder = EvidenceSource.of(None, recorded.folder)
    assert not folder.can_update
    assert "a data folder alone holds no recorded run" in str(folder.why_not_update())
    with pytest.raises(InvalidRequest, match="holds no recorded run"):
        _ = folder.run_started


def test_a_failed_call_refuses_the_update_from_either_source(recorded: Recorded) -> None:
    for source in (
        EvidenceSource.of(recorded.run),
        EvidenceSource.of(recorded.run, recorded.folder),
    ):
        assert not source.can_update
        assert source.why_not_update() == (
            "step 4 cannot be re-run: a failed call keeps no arguments"
        )
    for source in (
        EvidenceSource.of(recorded.gone),
        EvidenceSource.of(recorded.gone, recorded.folder),
    ):
        assert source.why_not_update() == f"step 0 cannot be re-run: {UNKEPT}"


def test_a_store_of_older_memory_refuses_only_the_bundle_alone(recorded: Recorded) -> None:
    item = recorded.later.calls[0].result["id"]
    assert recorded.later.calls[0].result["replayed"] is True
    bundle = EvidenceSource.of(recorded.later)
    why = bundle.why_not_update()
    assert why is not None and not bundle.can_update
    assert why.startswith(f"step 0 stored text the memory held from before the run (item {item})")
    assert ALONE in why and "--against DIR" in why
    assert EvidenceSource.of(recorded.later, recorded.folder).can_update


def test_each_skipped_step_names_its_reason(recorded: Recorded) -> None:
    calls = recorded.run.calls
    bundle = EvidenceSource.of(recorded.run)
    against = EvidenceSource.of(recorded.run, recorded.folder)
    write = "a write: its recorded entries are applied; --against re-executes it"
    explore = "an explore counts all the memory in reach, and the bundle holds only what the"
    assert [bundle.why_not_rerun(c) for c in calls[:3]] == [write, write, None]
    assert str(bundle.why_not_rerun(calls[3])).startswith(explore)
    assert [against.why_not_rerun(c) for c in calls[:4]] == [None] * 4
    for source in (bundle, against):
        assert UNKEPT in str(source.why_not_rerun(calls[4]))


def test_a_call_citing_forgotten_memory_is_not_re_run(recorded: Recorded) -> None:
    # The forget erased the store's arguments too; a call whose arguments stayed but which
    # cites the erased item (a read of it) is not re-run either.
    store = recorded.gone.calls[0]
    read = msgspec.structs.replace(store, arguments={"query": "forget"})
    for source in (
        EvidenceSource.of(recorded.gone),
        EvidenceSource.of(recorded.gone, recorded.folder),
    ):
        assert source.erased_items == frozenset(store.call.cites)
        assert source.why_not_rerun(read) == (
            "it cites memory forgotten since; that text is erased everywhere"
        )
    assert EvidenceSource.of(recorded.run).erased_items == frozenset()


def test_another_instance_secret_is_named(recorded: Recorded) -> None:
    secret = DataFolder(root=recorded.folder).instance_secret.read_bytes()
    against = EvidenceSource.of(recorded.run, recorded.folder)
    assert against.why_not_secret(secret) is None
    why = str(against.why_not_secret(os.urandom(32)))
    first = recorded.run.calls[0].result["id"]
    assert why.startswith("the --against folder's instance secret is not the one the bundle")
    assert f"does not make item {first}" in why
    assert EvidenceSource.of(recorded.run).why_not_secret(None) is None


async def test_a_bundle_alone_reads_its_entries_and_gaps(recorded: Recorded) -> None:
    bundle = EvidenceSource.of(recorded.run)
    async with bundle.open() as entries:
        assert entries.secret is None
        read = await entries.read(0, max(bundle.carried_seqs) + 1)
    gaps = [s for s in read if isinstance(s, int)]
    assert gaps == list(range(bundle.run_started))
    assert [s.seq for s in read if not isinstance(s, int)] == list(bundle.carried_seqs)


async def test_a_folder_reads_its_whole_log_and_secret(recorded: Recorded) -> None:
    secret = DataFolder(root=recorded.folder).instance_secret.read_bytes()
    for source in (
        EvidenceSource.of(None, recorded.folder),
        EvidenceSource.of(recorded.run, recorded.folder),
    ):
        async with source.open() as entries:
            assert entries.secret == secret
            read = await entries.read(0, recorded.run.size)
        assert [s if isinstance(s, int) else s.seq for s in read] == list(range(recorded.run.size))
        assert not any(isinstance(s, int) for s in read)


async def test_a_folder_the_bundle_did_not_come_from_fails_when_opened(
    recorded: Recorded, tmp_path: Path
) -> None:
    with pytest.raises(VerificationError, match="entry differs from the bundle's") as failed:
        async with EvidenceSource.of(recorded.run, recorded.other).open():
            pass
    assert failed.value.step == "against"
    keyless = tmp_path / "keyless"
    shutil.copytree(recorded.folder, keyless)
    DataFolder(root=keyless).instance_secret.unlink()
    with pytest.raises(InvalidRequest, match=f"--against {keyless}: cannot read"):
        async with EvidenceSource.of(recorded.run, keyless).open():
            pass


def test_the_default_trust_is_the_folder_s_first_key_else_the_bundle_s(
    recorded: Recorded,
) -> None:
    bundle = decode_bundle(encode_bundle(recorded.run.bundle))
    alone = default_trust(bundle)
    assert alone.vkey == bundle.keys[0]
    assert alone.whose == "the bundle's own first key (integrity only: pass --trust for identity)"
    against = default_trust(bundle, recorded.other)
    assert against.vkey == key_history(recorded.other)[0].text != bundle.keys[0]
    assert against.whose == f"the first key of {recorded.other}"
