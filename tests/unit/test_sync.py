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
