"""Load with faults: clients write and read while `memseal serve` is killed and restarted.

Afterwards every acknowledged write is present and ``memseal verify`` passes.
Bounded in time: three faults (SIGKILL, SIGTERM, SIGKILL) about a second apart.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from test_service_support import free_port

BIN = Path(sys.executable).parent
CLIENTS = 8


class Serve:
    """``memseal serve`` as a subprocess, restartable on the same port."""

    def __init__(self, folder: Path, log: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    str(BIN / "memseal"),
                    "serve",
                    "--data",
                    str(self.folder),
                    "--port",
                    str(self.port),
                    "--embedder",
                    "none",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert self.proc.poll() is None, self.log.read_text()
            time.sleep(0.05)
        raise AssertionError("memseal serve did not come up")

    def stop(self, sig: int) -> int:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)
        return self.proc.wait(timeout=40)

    def admin(self) -> str:
        for line in self.log.read_text().splitlines():
            if line.startswith("admin token"):
                return line.rsplit(" ", 1)[1]
        raise AssertionError("no admin token printed")


async def _client(n: int, url: str, token: str, stop: asyncio.Event, acked: dict[str, str]) -> int:
    errors = 0
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as c:
        i = 0
        while not stop.is_set():
            text = f"client {n} write {i}"
            i += 1
            try:
                r = await c.post("/v1/tools/memory_store", json={"learning": {"text": text}})
                if r.status_code == 200:
                    acked[text] = r.json()["result"]["id"]
                else:
                    assert r.status_code in (503,), r.text  # never a 5xx for input
                r = await c.post("/v1/tools/memory_list", json={"limit": 5})
                assert r.status_code in (200, 503), r.text
            except httpx.TransportError:
                errors += 1
                await asyncio.sleep(0.05)
    return errors


def test_acknowledged_writes_survive_kills_and_restarts(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    serve = Serve(folder, tmp_path / "serve.log")
    serve.start()
    admin = serve.admin()
    made = subprocess.run(
        [str(BIN / "memseal"), "tokens", "add", "--data", str(folder), "--place", "team:load"],
        capture_output=True,
        text=True,
        check=True,
    )
    token = made.stdout.strip()
    acked: dict[str, str] = {}
    started = time.monotonic()

    async def load() -> list[int]:
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(_client(n, serve.url, token, stop, acked)) for n in range(CLIENTS)
        ]
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGKILL):
            await asyncio.sleep(1.0)
            code = await asyncio.to_thread(serve.stop, sig)
            if sig == signal.SIGTERM:
                assert code == 0, serve.log.read_text()[-2000:]  # drained and closed cleanly
            await asyncio.to_thread(serve.start)
        await asyncio.sleep(0.5)
        stop.set()
        return list(await asyncio.gather(*tasks))

    errors = asyncio.run(load())
    assert time.monotonic() - started < 90
    assert len(acked) > 20, (len(acked), errors)
    assert sum(errors) > 0  # the faults did cut connections
    with httpx.Client(
        base_url=serve.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as c:
        ids = sorted(set(acked.values()))
        for start in range(0, len(ids), 200):
            chunk = ids[start : start + 200]
            got = c.post("/v1/tools/memory_get", json={"ids": chunk}).json()["result"]
            assert sorted(i["id"] for i in got["items"]) == chunk, got["missing"]
    with httpx.Client(
        base_url=serve.url, headers={"Authorization": f"Bearer {admin}"}, timeout=30
    ) as c:
        root = c.get("/v1/ledger").json()["trust_root"]
    assert serve.stop(signal.SIGTERM) == 0
    done = subprocess.run(
        [str(BIN / "memseal"), "verify", str(folder), "--trust", root],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
