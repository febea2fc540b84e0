"""A stream of bad ~1 MB requests costs the server bounded memory and the ledger bounded disk.

A real ``memseal serve`` process takes a few hundred bad requests of about
1 MB each: bodies that are not JSON, not UTF-8, nested too deep, over the
tool route's limit (with a Content-Length and chunked), and refused before
any tool runs (no token, a role without the route, a method the route does
not have), and calls that reach their run but are refused there: arguments
that fail the tool's schema, and a store from a read-only token. The test
prints how much the server's resident memory, the ledger's files and its
signed bytes grew, and holds them to generous bounds: an over-long body is
refused before it is read whole, a request that never becomes a call leaves
nothing in the ledger, and a refused call is recorded as its hash, size and
error, a few hundred bytes whatever its size (it kept its whole 1 MB before).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

BIN = Path(sys.executable).parent
MIB = 1024 * 1024
ROUNDS = 30  # each round sends one request of every kind below: 300 requests in all

#: Generous bounds: before the fix the same stream grew the server by hundreds of MiB.
MAX_RSS_GROWTH = 64 * MIB
MAX_DB_GROWTH = 8 * MIB  # the WAL holds page images until its checkpoint
MAX_LOGGED_PER_REFUSED_CALL = 4096


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _db_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("ledger.db*") if p.is_file())


def _logged(folder: Path) -> tuple[int, int]:
    """(entries, bytes of signed entries and payloads) in the ledger now."""
    import sqlite3

    db = sqlite3.connect(f"file:{folder / 'ledger.db'}?mode=ro", uri=True)
    try:
        count, leaves = db.execute(
            "SELECT count(*), coalesce(sum(length(leaf)), 0) FROM entries"
        ).fetchone()
        (payloads,) = db.execute("SELECT coalesce(sum(length(data)), 0) FROM payloads").fetchone()
    finally:
        db.close()
    return int(count), int(leaves) + int(payloads)


def _chunks(size: int, piece: int = 64 * 1024) -> Iterator[bytes]:
    yield b'{"learning": {"text": "'
    sent = 0
    while sent < size:
        yield b"a" * piece
        sent += piece
    yield b'"}}'


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
def test_stream_of_bad_megabyte_requests_grows_neither_memory_nor_ledger(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(BIN / "memseal"),
                "serve",
                "--data",
                str(folder),
                "--port",
                str(port),
                "--embedder",
                "none",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "memseal serve did not come up"
            time.sleep(0.05)
        agent = _token(folder, "agent", "team:stream")
        auditor = _token(folder, "auditor", "team:stream")
        reader = _token(folder, "agent", "team:stream/agent:reader", "--read-only")
        as_agent = {"Authorization": f"Bearer {agent}"}
        run = {**as_agent, "X-Memseal-Run": "stream-run"}
        as_reader = {"Authorization": f"Bearer {reader}"}

        text = b"a" * (MIB - 64)
        store = b'{"learning": {"text": "' + text + b'"}}'
        tool = "/v1/tools/memory_store"
        as_auditor = {"Authorization": f"Bearer {auditor}"}
        kinds: list[tuple[str, str, str, dict[str, str], bytes, set[int | str]]] = [
            ("not json", "POST", tool, run, store[:-3], {400}),
            ("not utf-8", "POST", tool, run, store.replace(b'"a', b'"\xff', 1), {400}),
            ("nested", "POST", tool, run, b"[" * (MIB - 64), {400}),
            ("over the limit", "POST", tool, run, store + b" " * MIB, {413}),
            ("no token", "POST", tool, {}, store, {401}),
            ("wrong role", "POST", tool, as_auditor, store, {403}),
            ("bad arguments", "POST", tool, run, store[:-1] + b', "bogus": 1}', {400}),
            ("read-only store", "POST", tool, as_reader, store, {403}),
            ("wrong method", "PUT", tool, as_agent, store, {413}),
            ("unknown route", "POST", "/v1/nothing", as_agent, store, {413}),
            (
                "token route",
                "POST",
                "/v1/admin/tokens",
                as_agent,
                b'{"role": "' + text + b'"}',
                {413},
            ),
        ]
        with httpx.Client(base_url=url, timeout=60) as client:
            # Warm up: the first requests load code and fill caches that stay.
            for _ in range(3):
                for _name, method, path, headers, body, _ in kinds:
                    _send(client, method, path, headers, body)
            rss_before, db_before = _rss(proc.pid), _db_bytes(folder)
            entries_before, logged_before = _logged(folder)
            answers: dict[str, set[int | str]] = {}
            for _ in range(ROUNDS):
                for name, method, path, headers, body, _ in kinds:
                    answers.setdefault(name, set()).add(_send(client, method, path, headers, body))
                # A chunked body (no Content-Length) of 1.5 MiB, streamed.
                status = _send(client, "POST", "/v1/tools/memory_store", run, _chunks(3 * MIB // 2))
                answers.setdefault("chunked over the limit", set()).add(status)
            rss_after, db_after = _rss(proc.pid), _db_bytes(folder)
            entries_after, logged_after = _logged(folder)
        sent = ROUNDS * (len(kinds) + 1)
        print(
            f"\n{sent} bad requests of about 1 MB: server RSS {rss_before / MIB:.1f} -> "
            f"{rss_after / MIB:.1f} MiB (grew {(rss_after - rss_before) / MIB:+.1f} MiB); "
            f"ledger.db* {db_before / MIB:.2f} -> {db_after / MIB:.2f} MiB "
            f"(grew {(db_after - db_before) / MIB:+.2f} MiB); "
            f"signed log +{logged_after - logged_before} "
            f"bytes in {entries_after - entries_before} entries; answers {answers}"
        )
        wanted = {name: statuses for name, *_, statuses in kinds}
        wanted["chunked over the limit"] = {413}
        assert answers == wanted
        assert rss_after - rss_before < MAX_RSS_GROWTH
        assert db_after - db_before < MAX_DB_GROWTH
        # Only the two kinds refused inside a run are recorded, once per round (their runs'
        # starts aside), each as its hash, size and error.
        recorded = entries_after - entries_before
        assert 2 * ROUNDS <= recorded <= 3 * ROUNDS + 2, recorded
        assert logged_after - logged_before <= recorded * MAX_LOGGED_PER_REFUSED_CALL
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def _send(
    client: httpx.Client,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | Iterator[bytes] | None,
) -> int | str:
    """The answer's status, or "reset" when the server hung up before the client read one."""
    try:
        return client.request(method, path, headers=headers, content=body).status_code
    except httpx.TransportError:
        return "reset"


def _token(folder: Path, role: str, place: str, *extra: str) -> str:
    made = subprocess.run(
        [str(BIN / "memseal"), "tokens", "add", "--data", str(folder), "--role", role,
         "--place", place, *extra],
        capture_output=True,
        text=True,
        check=True,
    )  # fmt: skip
    return made.stdout.strip()
