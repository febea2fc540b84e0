"""Helpers for the run attack tests (no tests here): the service in a thread, bundles, faults."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

# The service tests' helpers (a real uvicorn server in a thread) live beside them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from test_service_support import ServerThread, assert_error

from memseal.ledger.errors import StorageError
from memseal.ledger.keys import key_history
from memseal.memory import Memory
from memseal.replay.evidence.bundle import VerifiedBundle, export_bundle, verify_bundle

__all__ = ["FailOnce", "ServerThread", "assert_error", "exported"]


async def exported(memory: Memory, run_id: str) -> VerifiedBundle:
    """The run exported as a bundle and verified offline against the ledger's first key."""
    bundle = await export_bundle(memory.ledger, key_history(memory.folder), run_id)
    return verify_bundle(bundle, memory.trust_root)


class FailOnce:
    """Makes the store refuse its next write command, as a full disk or a dropped
    connection would: the command's transaction never commits."""

    def __init__(self, memory: Memory) -> None:
        self.store: Any = memory.ledger.store
        self.real: Callable[..., Awaitable[Any]] = self.store.run
        self.armed = False
        self.fired = 0

    def __enter__(self) -> FailOnce:
        async def run(command: Callable[..., Any]) -> Any:
            if self.armed:
                self.armed = False
                self.fired += 1

                def failing(txn: Any) -> Any:
                    command(txn)
                    raise StorageError("injected: the store refused the write")

                return await self.real(failing)
            return await self.real(command)

        self.store.run = run
        return self

    def __exit__(self, *exc: object) -> None:
        del self.store.run
