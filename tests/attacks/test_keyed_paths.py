"""Keys over the service: a tool-call id never opens another scope's memo; a bad one writes nothing.

The key (``X-Memseal-Key`` over HTTP) names a call inside a run; the run still
belongs to the scope that started it. A caller elsewhere that reuses a run id
and a key it saw gets 404, one at the same place with another scope 409, and
neither sees the recorded result. A hostile key is a 400 before anything is
read or written. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _runs_support import ServerThread, assert_error

FETCH = {"query": "launch code", "mode": "exact"}


@pytest.fixture
def server(tmp_path: Path, store_url: str | None) -> Iterator[ServerThread]:
    with ServerThread(tmp_path / "svc", store=store_url) as running:
        yield running


def _size(server: ServerThread) -> int:
    with server.client(server.admin) as admin:
        return int(admin.get("/v1/ledger").json()["size"])


def test_a_recorded_key_replayed_from_another_scope_gets_no_memo(server: ServerThread) -> None:
    owner = server.token("agent", "team:a/agent:x")
    elsewhere = server.token("agent", "team:b/agent:y")
    same_place_read_only = server.token("agent", "team:a/agent:x", read_only=True)
    headers = {"X-Memseal-Run": "secret-run", "X-Memseal-Key": "call_1"}
    with server.client(owner) as c:
        c.post("/v1/tools/memory_store", json={"learning": {"text": "launch code 42"}})
        recorded = c.post("/v1/tools/memory_fetch", json=FETCH, headers=headers)
        assert recorded.status_code == 200 and "42" in recorded.text
    size = _size(server)
    with server.client(elsewhere) as c:
        r = c.post("/v1/tools/memory_fetch", json=FETCH, headers=headers)
        assert_error(r, 404, "not_found")
        assert "42" not in r.text
    with server.client(same_place_read_only) as c:
        r = c.post("/v1/runs/secret-run/tools/memory_fetch", json=FETCH, headers=headers)
        assert_error(r, 409, "conflict")
        assert "42" not in r.text
    assert _size(server) == size


@pytest.mark.parametrize(
    "key",
    ["", "k" * 201, "a\tb", "\x7f", b"\xc3\x28", "  ".join(["x"] * 150)],
    ids=["empty", "too-long", "tab", "del", "bad-utf8", "long-spaces"],
)
def test_a_hostile_key_header_is_a_400_naming_key_and_writes_nothing(
    server: ServerThread, key: str | bytes
) -> None:
    with server.client(server.token("agent", "team:h/agent:x")) as c:
        size = _size(server)
        raw = key.encode() if isinstance(key, str) else key
        r = c.post(
            "/v1/tools/memory_store",
            json={"learning": {"text": "never stored"}},
            headers=[("X-Memseal-Run", "hostile"), ("X-Memseal-Key", raw)],
        )
        body = assert_error(r, 400, "invalid_request")
        assert "`key`" in body["error"]["message"]
        assert _size(server) == size
        assert c.get("/v1/runs/hostile").status_code == 404  # the run was never started
