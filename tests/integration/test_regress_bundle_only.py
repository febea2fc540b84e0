"""A bundle-only replay: a paging run replays clean, a changed page still shows, and
reads of memory the bundle does not carry are skipped, saying why.

A cursor holds a ref keyed by the instance secret, which a bundle does not carry,
so a bundle-only replay made other cursor texts for the very same pages: it
reported every paged read as changed, and the call continuing a recorded cursor
was refused ("belongs to another request"). The replay now takes a cursor as
what it continues: a later call is sent the re-made cursor, and its page is
compared. A bundle carries the memory the run's results cite, so where the log
held more (another run's items), an explore and a get of filtered items were
reported changed with no change; they are skipped, saying why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from bundle_support import REVERSE_RANKING, memseal_cli, run_bundle
from close_texts import SCOPE

import memseal
from memseal.engine._item_rows import got_from_rows
from memseal.engine._ranking import exact
from memseal.engine.results import Got
from memseal.replay.evidence.bundle import (
    VerifiedBundle,
    encode_bundle,
    export_bundle,
    verify_bundle,
)
from memseal.replay.regress.regress import RegressReport, regress

TEXTS = ["the ledger store", "a ledger proof", "ledger keys ledger", "the memory ledger"]


async def _paged(folder: Path) -> tuple[bytes, str]:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as m:
        async with m.run("pages", SCOPE) as run:
            for text in TEXTS:
                await run.call("memory_store", {"learning": {"text": text}})
            for tool, first in (
                ("memory_fetch", {"query": "ledger", "mode": "exact", "limit": 1}),
                ("memory_list", {"limit": 1}),
            ):
                page = await run.call(tool, first)
                while page.get("next_cursor") is not None:
                    page = await run.call(tool, {**first, "cursor": page["next_cursor"]})
        exported = await export_bundle(m.ledger, await m.key_history(), "pages")
        return encode_bundle(exported), m.vkey


async def test_a_paging_run_replays_clean_from_its_bundle(tmp_path: Path) -> None:
    bundle, vkey = await _paged(tmp_path / "d")
    verified = verify_bundle(bundle, vkey)
    continued = [c for c in verified.calls if (c.arguments or {}).get("cursor")]
    assert len(continued) == 2 * (len(TEXTS) - 1)
    report = await regress(verified)
    assert report.mode == "bundle"
    assert not report.changed, report.text()
    assert [s.status for s in report.steps].count("same") == len(verified.calls) - len(TEXTS)
    # The continued pages were really run: each returned the item the recording did.
    for call in continued:
        assert report.results[call.call.step]["items" if "items" in call.result else "hits"]


async def test_a_changed_ranking_still_shows_in_the_continued_pages(tmp_path: Path) -> None:
    bundle, vkey = await _paged(tmp_path / "d")
    path = tmp_path / "pages.bundle"
    path.write_bytes(bundle)
    done = memseal_cli("replay", str(path), "--trust", vkey, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "sitecustomize.py").write_text(REVERSE_RANKING)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = memseal_cli("replay", str(path), "--trust", vkey, cwd=tmp_path, env=env)
    assert done.returncode == 3, done.stdout + done.stderr
    changed = [line for line in done.stdout.splitlines() if line.endswith("memory_fetch: changed")]
    assert len(changed) >= 2, done.stdout  # the first page and pages continued from it


@pytest.fixture(autouse=True)
def _no_store_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSEAL_STORE", raising=False)


async def _explores(folder: Path, *, before: bool) -> RegressReport:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as m:
        if before:
            async with m.run("earlier", SCOPE) as run:
                held = await run.call("memory_store", {"learning": {"text": "an older note"}})
            await m.engine.reject(held["id"], actor="admin", reason="wrong")
        async with m.run("r", SCOPE) as run:
            own = await run.call("memory_store", {"learning": {"text": "the ledger store"}})
            await run.call("memory_explore", {"facet": "kind"})
            if before:
                got = await run.call("memory_get", {"ids": [held["id"], own["id"]]})
                assert got["filtered"] == [held["id"]] and len(got["items"]) == 1
        return await regress(await run_bundle(m, "r"))


async def test_reads_of_memory_the_bundle_lacks_are_not_reported(tmp_path: Path) -> None:
    # Another run's item is in reach but not cited: the explore would differ with no
    # change, so it is skipped, saying why; the get's filtered item reads as missing,
    # so its items are compared and its filtered and missing ids as one, saying so.
    report = await _explores(tmp_path / "a", before=True)
    assert not report.changed, report.text()
    assert [s.status for s in report.steps] == ["skipped", "skipped", "same"]
    assert "explore counts all the memory in reach" in report.steps[1].note
    assert any(n.startswith("step 2: its filtered items are not carried") for n in report.notes)
    # A run holding the whole log is compared as before.
    report = await _explores(tmp_path / "b", before=False)
    assert [s.status for s in report.steps] == ["skipped", "same"]


async def test_a_page_going_on_into_memory_the_bundle_lacks_is_not_reported(
    tmp_path: Path,
) -> None:
    async with memseal.open(tmp_path / "d", embedder=None, checkpoint_interval=None) as m:
        async with m.run("earlier", SCOPE) as run:
            for text in ("an older note", "another older note", "a third older note"):
                await run.call("memory_store", {"learning": {"text": text}})
        async with m.run("r", SCOPE) as run:
            asked = {"query": "older", "mode": "exact", "limit": 1}
            page = await run.call("memory_fetch", asked)
            page = await run.call("memory_fetch", {**asked, "cursor": page["next_cursor"]})
            assert page["next_cursor"] is not None  # the third note: cited by no result
        report = await regress(await run_bundle(m, "r"))
    # The first page goes on into the second's cited item: its re-made cursor is sent on.
    # The second, re-made, has no next page: compared without its cursor, saying why.
    assert not report.changed, report.text()
    assert [s.status for s in report.steps] == ["same", "same"]
    said = [n for n in report.notes if "next_cursor tells of memory past the page" in n]
    assert [n.split(":")[0] for n in said] == ["step 1"]


async def _beside_another_run(folder: Path, record: Any) -> VerifiedBundle:
    """Run ``record`` as run "r" after another run's unrelated store: its bundle, which
    lacks that run's entries (so the replay cannot know what the log held besides)."""
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as m:
        async with m.run("earlier", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "unrelated thing"}})
        async with m.run("r", SCOPE) as run:
            await record(m, run)
        return await run_bundle(m, "r")


async def test_a_page_that_lost_the_memory_it_went_on_into_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def record(m: Any, run: Any) -> None:
        for text in ("an older note", "another older note"):
            await run.call("memory_store", {"learning": {"text": text}})
        asked = {"query": "older", "mode": "exact", "limit": 1}
        page = await run.call("memory_fetch", asked)
        await run.call("memory_fetch", {**asked, "cursor": page["next_cursor"]})

    verified = await _beside_another_run(tmp_path / "d", record)
    assert not (await regress(verified)).changed
    # Changed code that returns only the best hit: the first page looks the same but for
    # its cursor. The run went on into the carried second note, so that is no missing
    # memory to excuse: a change.
    monkeypatch.setattr("memseal.engine._fetch.exact", lambda *a, **k: exact(*a, **k)[:1])
    report = await regress(verified)
    assert [s.step for s in report.changed] == [2], report.text()


async def test_a_carried_item_moving_from_filtered_to_missing_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def record(m: Any, run: Any) -> None:
        own = await run.call("memory_store", {"learning": {"text": "the ledger store"}})
        await m.engine.reject(own["id"], actor="admin", reason="wrong")
        assert (await run.call("memory_get", {"ids": [own["id"]]}))["filtered"] == [own["id"]]

    verified = await _beside_another_run(tmp_path / "d", record)
    assert not (await regress(verified)).changed

    # Changed code that reports a filtered item as missing: the bundle carries the item,
    # so this is no memory it lacks.
    def broken(*args: Any, **kwargs: Any) -> Got:
        got = got_from_rows(*args, **kwargs)
        return Got(items=got.items, missing=got.missing + got.filtered, filtered=())

    monkeypatch.setattr("memseal.engine._read_verbs.got_from_rows", broken)
    report = await regress(verified)
    assert [s.step for s in report.changed] == [1], report.text()
