"""Forgets reach the cached as-of views: at once in this process, before the next read in any.

A view is a temporary SQLite store holding the texts of its point. A forget in
the process that holds the view removes its folder as the forget commits (the
live store's commit hook), so the forgotten text is not on disk once the forget
has returned. A forget by another memory on the same data folder (another
process, or a second ``memseal.open`` of it) raises the forget watermark, which
every as-of read checks before it answers. The bytes on disk are read back.
"""

from __future__ import annotations

from pathlib import Path

import memseal

SECRET = b"door code is 4711-2231"


def _on_disk(folders: list[Path]) -> list[Path]:
    """The files under ``folders`` whose bytes hold the secret."""
    return [
        path
        for folder in folders
        if folder.exists()
        for path in folder.rglob("*")
        if path.is_file() and SECRET in path.read_bytes()
    ]


async def test_a_forget_here_removes_the_cached_views_text_from_disk_at_once(
    tmp_path: Path, store_url: str | None
) -> None:
    async with memseal.open(tmp_path / "data", store=store_url, embedder=None) as memory:
        tools = memory.tools()
        gone = (await tools.call("memory_store", {"learning": {"text": SECRET.decode()}}))["id"]
        await tools.call("memory_store", {"learning": {"text": "the lobby opens at 8"}})
        point = (await memory.ledger.store.head()).size
        view = (await memory.as_of(point)).tools()
        assert (await view.call("memory_get", {"ids": [gone]}))["items"][0]["text"] == (
            SECRET.decode()
        )
        folders = memory._views.folders()
        assert _on_disk(folders)  # the view holds the text (else this test shows nothing)

        await tools.call("memory_forget", {"ids": [gone]})
        # No as-of read since the forget: the commit hook alone took the text off the disk.
        assert _on_disk(folders) == []
        assert memory._views.sizes() == []
        got = await view.call("memory_get", {"ids": [gone]})
        assert set(got["items"][0]["text"]) == {"forgotten_at"}
        assert _on_disk(memory._views.folders()) == []


async def test_a_forget_by_another_memory_on_the_file_applies_before_the_view_answers(
    tmp_path: Path, store_url: str | None
) -> None:
    folder = tmp_path / "data"
    async with memseal.open(folder, store=store_url, embedder=None) as reader:
        tools = reader.tools()
        gone = (await tools.call("memory_store", {"learning": {"text": SECRET.decode()}}))["id"]
        point = (await reader.ledger.store.head()).size
        view = (await reader.as_of(point)).tools()
        fetched = await view.call("memory_fetch", {"query": "door code"})
        assert [h["id"] for h in fetched["hits"]] == [gone]
        folders = reader._views.folders()
        assert _on_disk(folders)

        async with memseal.open(folder, store=store_url, embedder=None) as other:
            forgot = (await other.engine.forget(ids=[gone])).seqs[0]
            assert (await other.as_of(point)).size == point

        # The reader's own commit hook never saw that forget: its next read finds it by the
        # watermark, drops the view (and its folder) and answers from a fresh one.
        got = await view.call("memory_get", {"ids": [gone]})
        assert got["items"][0]["text"] == {"forgotten_at": forgot}
        assert (await view.call("memory_fetch", {"query": "door code"}))["hits"] == []
        assert _on_disk(folders) == [] and not any(f.exists() for f in folders)
        assert _on_disk(reader._views.folders()) == []
        assert reader._views.cold_builds == 2
