"""The blocking facade for hosts without an event loop."""

from __future__ import annotations

from pathlib import Path

import pytest

import memseal


def test_open_sync_appends_reads_and_verifies(tmp_path: Path) -> None:
    with memseal.open_sync(tmp_path / "d", checkpoint_interval=None, embedder=None) as memory:
        done = memory.ledger.append("note", {"a": 1}, {"text": "sync"})
        assert memory.ledger.read(done.seq).payload == b'{"text":"sync"}'
        assert memory.ledger.verify(memory.trust_root).size == 1
        note = memory.ledger.checkpoint()
        assert note.startswith(memory.ledger.origin + "\n1\n")
    with memseal.open_sync(tmp_path / "d", embedder=None) as again:
        assert again.ledger.size() == 1


def test_open_sync_reports_errors_as_the_async_api_does(tmp_path: Path) -> None:
    with memseal.open_sync(tmp_path / "d", embedder=None) as memory:
        with pytest.raises(memseal.InvalidRequest, match="`kind`"):
            memory.ledger.append("Bad Kind", {})
        assert memory.ledger.size() == 0
    (tmp_path / "file").write_text("x")
    with pytest.raises(memseal.InvalidRequest, match="not a folder"):
        memseal.open_sync(tmp_path / "file", embedder=None)


def test_the_sync_facade_hands_out_tools_and_recorded_calls(tmp_path: Path) -> None:
    scope = memseal.ToolScope.placed_at("team:acme/agent:writer")
    with memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        toolset = memory.toolset(scope)
        assert "memory_store" in [tool.name for tool in toolset]
        text = toolset.call("memory_store", {"learning": {"text": "sync hosts work too"}})
        assert "replayed" in text
        found = toolset.call("memory_fetch", '{"query": "sync hosts"}')
        assert "sync hosts work too" in found
        assert toolset.call("memory_list", {"limit": 500}).startswith("error:")
        run_id, result = memory.call("memory_list", {}, scope=scope)
        assert run_id.startswith("run-") and len(result["items"]) == 1
        recorded = memory.toolset(scope, run_id="sync-run")
        first = recorded.call("memory_fetch", {"query": "sync hosts"})
    with memseal.open_sync(tmp_path / "d", embedder=None, checkpoint_interval=None) as memory:
        replayed = memory.toolset(scope, run_id="sync-run", mode="strict")
        assert replayed.call("memory_fetch", {"query": "sync hosts"}) == first
