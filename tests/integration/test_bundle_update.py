"""``memseal replay --update``: a changed ranking re-recorded as a new bundle under a local key,
which verifies with that key's vkey and replays clean with the code that made it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from bundle_support import (
    REVERSE_RANKING,
    ROOT,
    memseal_cli,
    record_session,
    run_bundle,
    updated_bundle,
)
from close_texts import READS, SCOPE, STORES, record_close

import memseal
from memseal.engine import HashingEmbedder
from memseal.ledger.folder import DataFolder
from memseal.replay.evidence.bundle import VerifiedBundle, verify_bundle
from memseal.replay.regress._update import UpdateRefused, local_key, update
from memseal.replay.regress.regress import regress


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripted agent's session (killed, resumed, exported), as test_bundle_cli records it."""
    work = tmp_path_factory.mktemp("durable-update")
    record_session(work)
    return work


def _changed_code(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(REVERSE_RANKING)
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def _results(path: Path, vkey: str) -> dict[int, Any]:
    verified = verify_bundle(path.read_bytes(), vkey)
    return {c.call.step: c.result for c in verified.calls}


@pytest.mark.parametrize("against", [False, True], ids=["bundle-only", "against"])
def test_update_writes_a_bundle_that_verifies_and_replays(
    session: Path, tmp_path: Path, against: bool
) -> None:
    env = _changed_code(tmp_path)
    old = session / "session.bundle"
    new = tmp_path / "nightly.bundle"
    extra = ["--against", str(session / "agent-data")] if against else []
    done = memseal_cli(
        "replay", str(old), *extra, "--update", "-o", str(new), cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "step 3 memory_fetch: changed" in out  # the diff is printed as by a plain replay
    assert f"to {new}" in out
    key_folder = tmp_path / "memseal-replay-key"
    vkey = (key_folder / "keys/ledger.vkey").read_text().strip()
    assert "LOCAL replay key in memseal-replay-key (made on first use)" in out
    assert vkey in out
    assert f"memseal verify {new} --trust '{vkey}'" in out
    assert ("items they made have new ids" in out) is not against

    # The new bundle: verifies with the local vkey only (not the recording's), replays clean.
    done = memseal_cli("verify", str(new), "--trust", vkey, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "7 call(s)" in done.stdout
    recording = (session / "agent-data/trust.vkey").read_text().strip()
    done = memseal_cli("verify", str(new), "--trust", recording, cwd=tmp_path)
    assert done.returncode == 1 and "unknown key" in done.stderr
    done = memseal_cli("replay", str(new), "--trust", vkey, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "re-executed step(s) match" in done.stdout
    # With the code the old bundle was recorded with, the new one now differs.
    done = memseal_cli("replay", str(new), "--trust", vkey, cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr

    before, after = _results(old, recording), _results(new, vkey)
    assert sorted(before) == sorted(after) == list(range(7))
    old_ids = [h["id"] for h in before[3]["hits"]]
    new_ids = [h["id"] for h in after[3]["hits"]]
    assert len(old_ids) == len(new_ids) == 3
    assert before[3] != after[3]
    if against:
        # Exact: same item ids and seqs, so only the ranked steps differ, and only in order.
        assert sorted(new_ids) == sorted(old_ids) and new_ids != old_ids
        assert [s for s in range(7) if before[s] != after[s]] == [3, 4, 6]
        assert {h["ledger_ref"] for h in before[3]["hits"]} == {
            h["ledger_ref"] for h in after[3]["hits"]
        }


def test_update_keeps_the_local_key_and_the_input(session: Path, tmp_path: Path) -> None:
    old = tmp_path / "session.bundle"
    old.write_bytes((session / "session.bundle").read_bytes())
    original = old.read_bytes()
    keys = tmp_path / "ci-key"
    done = memseal_cli("replay", str(old), "--update", "--key", str(keys), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    default = tmp_path / "session.updated.bundle"
    assert default.is_file() and old.read_bytes() == original  # never FILE unless named
    vkey = (keys / "keys/ledger.vkey").read_text().strip()
    assert "(made on first use)" in done.stdout
    done = memseal_cli("replay", str(old), "--update", "--key", str(keys), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(kept)" in done.stdout and vkey in done.stdout
    assert verify_bundle(default.read_bytes(), vkey).run_id == "nightly-report"


def test_update_exit_codes(tmp_path: Path) -> None:
    vectors = ROOT / "tests/vectors/bundles"
    done = memseal_cli("replay", str(vectors / "tampered.bundle"), "--update", cwd=tmp_path)
    assert done.returncode == 1 and "payload hash" in done.stderr
    assert not (tmp_path / "memseal-replay-key").exists()
    assert not list(tmp_path.glob("*.bundle"))
    done = memseal_cli("replay", str(tmp_path / "missing.bundle"), "--update", cwd=tmp_path)
    assert done.returncode == 2
    done = memseal_cli("replay", str(vectors / "tampered.bundle"), "-o", "x.bundle", cwd=tmp_path)
    assert done.returncode == 2 and "go with --update" in done.stderr


async def _second_run_bundle(folder: Path) -> tuple[VerifiedBundle, int]:
    """Two runs storing the same texts; the second's bundle: each of its stores is a
    replay of an item the first run made (and the size the second run ended at)."""
    async with memseal.open(folder, embedder=HashingEmbedder(), checkpoint_interval=None) as m:
        for name in ("one", "two"):
            async with m.run(name, SCOPE) as run:
                await record_close(run)
        return await run_bundle(m, "two"), (await m.ledger.store.head()).size


async def test_update_of_a_later_run_keeps_one_copy_of_the_memory(tmp_path: Path) -> None:
    verified, size = await _second_run_bundle(tmp_path / "d")
    assert all(c.result["replayed"] for c in verified.calls if c.call.tool == "memory_store")
    keys = tmp_path / "replay-key"
    local_key(keys)

    # From the bundle alone the stores would make a second copy under new ids (every fetch
    # then saw each text twice, recorded as a change): refused, naming the step and the cure.
    with pytest.raises(UpdateRefused, match=r"step 0 stored text .* --against DIR"):
        await update(verified, key_folder=keys, embedder=HashingEmbedder())

    updated = await update(
        verified, key_folder=keys, against=tmp_path / "d", embedder=HashingEmbedder()
    )
    assert updated.notes == []  # every step ran at the size it observed
    again = updated_bundle(updated)
    assert [c.result for c in again.calls] == [c.result for c in verified.calls]
    assert [c.call.observed_size for c in again.calls] == [
        c.call.observed_size for c in verified.calls
    ]
    assert again.calls[-1].call.observed_size == size - 1
    assert len(again.calls) == STORES + READS
    assert not (await regress(again, embedder=HashingEmbedder())).changed


async def test_update_from_the_bundle_alone_keeps_a_store_repeated_within_the_run(
    tmp_path: Path,
) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("again", SCOPE) as run:
            for _ in range(2):
                await run.call("memory_store", {"learning": {"text": "the ledger store"}})
            await run.call("memory_fetch", {"query": "ledger", "mode": "exact"})
        verified = await run_bundle(m, "again")
    assert [c.result.get("replayed") for c in verified.calls[:2]] == [False, True]
    local_key(tmp_path / "k")
    updated = await update(verified, key_folder=tmp_path / "k")
    assert len(updated.notes) == 1 and "new ids" in updated.notes[0]  # no step ran elsewhere
    again = updated_bundle(updated)
    new_id = again.calls[0].result["id"]
    assert again.calls[1].result == {"id": new_id, "replayed": True}
    assert [h["id"] for h in again.calls[2].result["hits"]] == [new_id]


async def _alone(folder: Path, case: str) -> VerifiedBundle:
    """A run beside another run's items (one rejected), doing ``case``: its bundle."""
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as m:
        async with m.run("before", SCOPE) as run:
            older = []
            for text in ("an older note", "another older note", "a third older note"):
                older.append((await run.call("memory_store", {"learning": {"text": text}}))["id"])
        await m.engine.reject(older[0], actor="admin", reason="wrong")
        async with m.run("r", SCOPE) as run:
            made = []
            for text in ("the ledger store", "the ledger proof", "the ledger key"):
                made.append((await run.call("memory_store", {"learning": {"text": text}}))["id"])
            if case == "own id":
                await run.call("memory_get", {"ids": [made[0]]})
            elif case == "cursor":  # every page's memory is the run's own
                page = await run.call("memory_fetch", {"query": "ledger", "limit": 1})
                while page.get("next_cursor") is not None:
                    page = await run.call(
                        "memory_fetch", {"query": "ledger", "cursor": page["next_cursor"]}
                    )
            elif case == "page past the bundle":  # the second older note is not cited
                assert (await run.call("memory_fetch", {"query": "older", "limit": 1}))[
                    "next_cursor"
                ]
            elif case == "explore":
                await run.call("memory_explore", {"facet": "kind"})
            elif case == "filtered":
                got = await run.call("memory_get", {"ids": [older[0]]})
                assert got["filtered"] == [older[0]]
            else:  # an admin's trust change to the run's item, while it ran
                await m.engine.reject(made[1], actor="admin", reason="wrong")
                await run.call("memory_fetch", {"query": "ledger"})
        return await run_bundle(m, "r")


async def _exactly_against(verified: VerifiedBundle, folder: Path) -> None:
    """With the folder the ids are the recorded ones: the run re-records exactly."""
    updated = await update(verified, key_folder=folder.parent / "k", against=folder)
    again = updated_bundle(updated)
    assert [c.result for c in again.calls] == [c.result for c in verified.calls]
    assert updated.notes == []


@pytest.mark.parametrize(
    ("case", "named"),
    [
        ("own id", "step 3 names an item the run made"),
        ("page past the bundle", "step 3 returned a page whose next_cursor told of memory"),
        ("explore", "step 3 explores counts"),
        ("filtered", "step 3 read items the bundle does not carry"),
        ("trust change", "(trust_changed, made outside the run) names item"),
    ],
)
async def test_update_from_the_bundle_alone_refuses_what_new_ids_would_change(
    tmp_path: Path, case: str, named: str
) -> None:
    verified = await _alone(tmp_path / "d", case)
    local_key(tmp_path / "k")
    with pytest.raises(UpdateRefused, match="--against DIR") as refused:
        await update(verified, key_folder=tmp_path / "k")
    assert named in str(refused.value)
    await _exactly_against(verified, tmp_path / "d")


async def test_update_from_the_bundle_alone_re_makes_the_cursors(tmp_path: Path) -> None:
    verified = await _alone(tmp_path / "d", "cursor")
    local_key(tmp_path / "k")
    updated = await update(verified, key_folder=tmp_path / "k")
    again = updated_bundle(updated)
    pages = [c.result for c in again.calls if c.call.tool == "memory_fetch"]
    recorded = [c.result for c in verified.calls if c.call.tool == "memory_fetch"]
    assert [len(p["hits"]) for p in pages] == [len(p["hits"]) for p in recorded] == [1, 2]
    assert [p.get("next_cursor") is None for p in pages] == [False, True]  # none refused
    assert len({h["id"] for p in pages for h in p["hits"]}) == 3
    assert not (await regress(again)).changed
    await _exactly_against(verified, tmp_path / "d")


async def test_update_against_a_folder_with_another_secret_is_refused(tmp_path: Path) -> None:
    # Any bundle holding a stored item tells: a run that only pages through the memory
    # makes no store to compare (its cursors alone would have failed, recorded as errors).
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("w", SCOPE) as run:
            for text in ("the ledger store", "the ledger proof"):
                await run.call("memory_store", {"learning": {"text": text}})
        async with m.run("reader", SCOPE) as run:
            page = await run.call("memory_list", {"limit": 1})
            await run.call("memory_list", {"limit": 1, "cursor": page["next_cursor"]})
        reader = await run_bundle(m, "reader")
    later, _ = await _second_run_bundle(tmp_path / "d2")
    local_key(tmp_path / "k")
    for verified, folder in ((reader, tmp_path / "d"), (later, tmp_path / "d2")):
        other = tmp_path / f"copy-{folder.name}"
        shutil.copytree(folder, other)
        DataFolder(root=other).instance_secret.write_bytes(os.urandom(32))
        with pytest.raises(UpdateRefused, match="instance secret is not the one the bundle"):
            await update(verified, key_folder=tmp_path / "k", against=other)
        await update(verified, key_folder=tmp_path / "k", against=folder)  # its own: fine


async def test_update_keeps_its_log_in_its_own_folder_whatever_the_environment_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verified, _ = await _second_run_bundle(tmp_path / "d")
    local_key(tmp_path / "k")
    # A server's setting (scaling.md): the update wrote its log there, or failed to reach it.
    monkeypatch.setenv("MEMSEAL_STORE", "postgresql://memseal@127.0.0.1:1/nowhere")
    updated = await update(
        verified, key_folder=tmp_path / "k", against=tmp_path / "d", embedder=HashingEmbedder()
    )
    again = updated_bundle(updated)
    assert [c.result for c in again.calls] == [c.result for c in verified.calls]
