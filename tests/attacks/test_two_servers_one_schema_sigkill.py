"""Two ``memseal serve`` processes on one PostgreSQL schema under load, one killed with SIGKILL.

Both processes share one data folder (keys, tokens) and one schema; they are
started at the same moment on a fresh folder and a fresh schema, so the
start-up (keys, admin token, tables) is contended too. The store reaches them
as ``MEMSEAL_STORE`` in their environment, the default of ``serve --store``
(the ``Serve`` helper of the fault test builds its own command line); ``memseal
mcp --store URL`` joins the same schema at the end.

Eight clients, four on each process, write with ``memory_store`` (a one-shot
recorded run: a ``memory_stored`` and a ``memory_tool_call`` entry in one
commit) and read with ``memory_list``, as in ``test_service_faults``. Process
A is killed with SIGKILL while its clients write; B must go on acknowledging
writes while A is down; A restarts on its port and serves again. Afterwards
the ledger verifies against the folder's trust root, its seqs are gapless,
every acknowledged write is in it exactly once (and readable through either
process), and the two processes' commits interleave in one chain.

Needs ``MEMSEAL_TEST_POSTGRES`` (``eval "$(.ci/postgres.sh)"`` sets it).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
from _scale import SCALE
from mcp import Client
from stores import POSTGRES, drop_schemas, fresh_url

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
from test_mcp_service import _stdio, _text
from test_service_faults import Serve, _client
from test_service_support import free_port

from memseal.ledger.keys import key_history
from memseal.memory import open_audit

pytestmark = pytest.mark.slow

needs_postgres = pytest.mark.skipif(
    not POSTGRES,
    reason='needs PostgreSQL: MEMSEAL_TEST_POSTGRES is unset (eval "$(.ci/postgres.sh)")',
)

BIN = Path(sys.executable).parent
PER_PROCESS = 4  # clients on each of the two processes
WAIT_S = 30.0  # for a condition that takes well under a second on an idle machine


def _process_of(text: str) -> str:
    """Which process a write went to: clients 0..3 write to A, 4..7 to B."""
    return "A" if int(text.split()[1]) < PER_PROCESS else "B"


async def _until(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def _start_together(*serves: Serve) -> None:
    failed: list[BaseException] = []

    def start(serve: Serve) -> None:
        try:
            serve.start()
        except BaseException as exc:  # re-raised below, in the test's thread
            failed.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in serves]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]


@needs_postgres
async def test_two_servers_one_schema_survive_a_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, schema = fresh_url("serve")
    monkeypatch.setenv("MEMSEAL_STORE", store)
    folder = tmp_path / "data"
    a = Serve(folder, tmp_path / "a.log")
    b = Serve(folder, tmp_path / "b.log")
    serves = (a, b)
    try:
        await asyncio.to_thread(_start_together, a, b)
        await _load_kill_and_check(folder, store, a, b)
    finally:
        for serve in serves:
            if serve.proc is not None and serve.proc.poll() is None:
                serve.proc.kill()
                serve.proc.wait()
        await drop_schemas([schema])


async def _load_kill_and_check(folder: Path, store: str, a: Serve, b: Serve) -> None:
    # Started together on a fresh folder: exactly one of them made (and printed) the admin.
    logs = a.log.read_text() + b.log.read_text()
    assert logs.count("admin token (shown once") == 1, logs
    # The start-up line names the store, never its password.
    password = urlsplit(store).password
    assert password and password not in logs
    assert f"schema={store.rsplit('schema=', 1)[1]}" in logs and ":***@" in logs

    made = await asyncio.to_thread(
        subprocess.run,
        [str(BIN / "memseal"), "tokens", "add", "--data", str(folder), "--place", "team:load"],
        capture_output=True,
        text=True,
        check=True,
    )
    token = made.stdout.strip()
    acked: dict[str, str] = {}

    def count(process: str) -> int:
        return sum(1 for text in list(acked) if _process_of(text) == process)

    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(_client(n, a.url if n < PER_PROCESS else b.url, token, stop, acked))
        for n in range(2 * PER_PROCESS)
    ]
    try:
        await _until(
            "writes acknowledged by both",
            lambda: count("A") >= 20 * SCALE and count("B") >= 20 * SCALE,
        )
        # A's four clients have requests in flight: the kill lands mid-write.
        code = await asyncio.to_thread(a.stop, signal.SIGKILL)
        assert code == -signal.SIGKILL
        while_down = count("B")
        await _until(
            "B acknowledging while A is down", lambda: count("B") >= while_down + 20 * SCALE
        )
        after_kill = count("A")
        await asyncio.to_thread(a.start)
        await _until("A serving again", lambda: count("A") >= after_kill + 20 * SCALE)
    finally:
        stop.set()
        errors = await asyncio.gather(*tasks)
    assert sum(errors[:PER_PROCESS]) > 0  # the kill cut A's clients off
    assert sum(errors[PER_PROCESS:]) == 0  # and never B's

    # The same schema through MCP over stdio, the store given as --store.
    params = _stdio(folder, "--store", store, "--place", "team:load")
    async with Client(params) as client:
        stored = await client.call_tool("memory_store", {"learning": {"text": "client 9 via mcp"}})
        assert not stored.is_error, _text(stored)
        acked["client 9 via mcp"] = json.loads(_text(stored))["id"]

    # Every acknowledged memory is readable through either process (shared projections).
    ids = sorted(set(acked.values()))
    for serve in (a, b):
        async with httpx.AsyncClient(
            base_url=serve.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        ) as c:
            for start in range(0, len(ids), 200):
                chunk = ids[start : start + 200]
                answer = await c.post("/v1/tools/memory_get", json={"ids": chunk})
                got = answer.json()["result"]
                assert sorted(i["id"] for i in got["items"]) == chunk, got["missing"]
    for serve in (a, b):
        code = await asyncio.to_thread(serve.stop, signal.SIGTERM)
        assert code == 0, serve.log.read_text()[-2000:]

    trust = key_history(folder)[0].text
    async with open_audit(store) as ledger:
        summary = await ledger.verify(trust=trust)
        seqs: list[int] = []
        stored_texts: list[str] = []
        async for record in ledger.scan():
            seqs.append(record.seq)
            if record.entry().kind == "memory_stored":
                assert record.payload is not None
                stored_texts.append(msgspec.json.decode(record.payload)["text"])
    assert seqs == list(range(summary.size))
    times = Counter(stored_texts)
    # Each text was sent once, so no text may be stored twice, acknowledged or not.
    assert max(times.values()) == 1
    missing = [text for text in acked if times[text] != 1]
    assert not missing, f"acknowledged writes not in the ledger: {missing[:5]}"
    # One chain, appended by both in turn: the commits interleave rather than one process
    # writing a private run of the log (a fork would also fail verify above).
    order = [_process_of(t) for t in stored_texts if not t.endswith("via mcp")]
    switches = sum(1 for x, y in itertools.pairwise(order) if x != y)
    assert switches >= 10, f"{switches} switches between A and B in {len(order)} writes"


def test_a_bad_store_is_refused_in_one_line_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "data"
    bad = "postgresql://memseal:s3cret@127.0.0.1:1/db?schema=not-a-name"
    monkeypatch.setenv("MEMSEAL_STORE", bad)
    for verb, flag in [("serve", []), ("serve", ["--store", bad + "x"]), ("mcp", [])]:
        extra = ["--place", "team:x"] if verb == "mcp" else ["--port", str(free_port())]
        done = subprocess.run(
            [str(BIN / "memseal"), verb, "--data", str(folder), *flag, *extra],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        # The option that gave the URL is named (--store wins over the environment).
        assert ("`--store`" if flag else "`MEMSEAL_STORE`") in done.stderr, done.stderr
        assert "memseal:***@" in done.stderr and "s3cret" not in done.stdout + done.stderr
    assert not folder.exists()  # refused before anything was made
    # A URL naming no server, and one the driver refuses quoting its password: the start-up
    # fails in one line, not a traceback, and the password is not in it.
    for password in ("s3cret", "s3cret%zz"):
        nobody = f"postgresql://memseal:{password}@127.0.0.1:1/db?schema=nobody"
        port = str(free_port())
        for verb, extra in [("serve", ["--port", port]), ("mcp", ["--place", "team:x"])]:
            options = ["--data", str(folder), "--store", nobody, "--embedder", "none", *extra]
            done = subprocess.run(
                [str(BIN / "memseal"), verb, *options],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 2, done.stderr
            assert f"memseal {verb}: cannot reach the store postgresql://memseal:***@" in (
                done.stderr
            )
            assert "Traceback" not in done.stderr, done.stderr
            assert "s3cret" not in done.stdout + done.stderr, done.stderr
            if verb == "serve" and "admin token" in done.stdout:
                # The first start made an admin token, then failed: it is withdrawn.
                assert "admin token above is withdrawn" in done.stderr, done.stderr
    # No live admin token came of the failed starts: the first good start makes one.
    tokens = subprocess.run(
        [str(BIN / "memseal"), "tokens", "list", "--data", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tokens.returncode == 0, tokens.stderr
    admins = [line for line in tokens.stdout.splitlines() if "\tadmin\t" in line]
    assert admins and all("revoked" in line for line in admins), tokens.stdout
