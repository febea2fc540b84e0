"""Helpers for the witness tests (no tests here): a real witness over HTTP in a thread,
real ledgers to feed it, and the ``memseal`` command."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import uvicorn

import memseal
from memseal.ledger.cosignature import Cosigner
from memseal.witness.app import create_witness_app, open_witness
from memseal.witness.protocol import Witness, format_add_checkpoint
from memseal.witness.state import WitnessStore, create_witness_key

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memseal_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "memseal"), *args], capture_output=True, text=True, timeout=timeout
    )


def new_witness(folder: Path, name: str = "witness.test/w1") -> Cosigner:
    """A witness folder (key and state), as ``memseal witness init`` makes it."""
    signer = create_witness_key(folder, name)
    WitnessStore(folder, create=True).close()
    return Cosigner(signer)


def follow(folder: Path, vkey: str) -> None:
    store = WitnessStore(folder)
    try:
        store.follow(vkey)
    finally:
        store.close()


class WitnessThread:
    """``memseal witness serve`` in-process: uvicorn on 127.0.0.1 in a thread of its own."""

    def __init__(self, folder: Path) -> None:
        self.witness: Witness = open_witness(folder)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_witness_app(self.witness),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="off",
            access_log=False,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def vkey(self) -> str:
        return self.witness.cosigner.vkey

    def __enter__(self) -> WitnessThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the witness did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.witness.store.close()

    def add(self, old: int, proof: list[bytes], note: str) -> httpx.Response:
        body = format_add_checkpoint(old, proof, note)
        return httpx.post(f"{self.url}/add-checkpoint", content=body.encode(), timeout=30)


async def grow(folder: Path, count: int, tag: str) -> tuple[str, int]:
    """Append ``count`` entries to the ledger of ``folder``; return (checkpoint note, size)."""
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        for n in range(count):
            await memory.ledger.append("note", {"tag": tag, "n": n})
        return await memory.ledger.checkpoint(), await memory.ledger.size()


async def proof(folder: Path, old: int, new: int) -> list[bytes]:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        return list((await memory.ledger.consistency_proof(old, new)).hashes)


async def vkey_of(folder: Path) -> str:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        return memory.trust_root


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]
