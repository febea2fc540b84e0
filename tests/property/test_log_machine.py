"""The SQLite log store against a plain list, step by step (hypothesis stateful).

The model is a list of (kind, body, payload) triples. After every step the
store's contents equal the model and the whole chain verifies.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memseal.ledger.entry import make_draft
from memseal.ledger.log import Ledger
from memseal.ledger.note import NoteSigner
from memseal.ledger.sqlite import SqliteLogStore
from memseal.ledger.store import Appended, WriteTxn

SIGNER = NoteSigner.from_seed("machine", bytes(32))

texts = st.text(max_size=20)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
bodies = st.dictionaries(texts, json_values, max_size=4)
payloads = st.none() | st.dictionaries(texts, json_values, max_size=3)
kinds = st.sampled_from(["note", "memory_stored", "memory_tool_call"])


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="memseal-machine-"))
        self.model: list[tuple[str, bytes, bytes | None]] = []
        self.store = self._open()

    def _open(self) -> SqliteLogStore:
        store = SqliteLogStore(self.dir / "ledger.db", SIGNER)
        self.loop.run_until_complete(store.open())
        return store

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @staticmethod
    def _encode(value: Any) -> bytes:
        return msgspec.json.encode(value, order="deterministic")

    @rule(kind=kinds, body=bodies, payload=payloads)
    def append(self, kind: str, body: dict[str, Any], payload: Any) -> None:
        draft = make_draft(kind, body, payload)
        appended = self._run(self.store.run(lambda txn: txn.append(draft)))
        assert appended.seq == len(self.model)
        self.model.append((kind, draft.body, draft.payload))

    @rule(batch=st.lists(st.tuples(kinds, bodies, payloads, st.booleans()), min_size=1, max_size=6))
    def batch_with_failures(self, batch: list[tuple[str, dict[str, Any], Any, bool]]) -> None:
        """Commands in one group commit; the failing ones roll back alone."""

        def command(kind: str, body: dict[str, Any], payload: Any, fail: bool) -> Any:
            draft = make_draft(kind, body, payload)

            def run(txn: WriteTxn) -> Appended:
                done = txn.append(draft)
                if fail:
                    raise RuntimeError("this command fails after appending")
                return done

            return run, draft

        commands = [command(*item) for item in batch]

        async def submit() -> list[Any]:
            return await asyncio.gather(
                *(self.store.run(run) for run, _ in commands), return_exceptions=True
            )

        results = self._run(submit())
        for (_, draft), item, result in zip(commands, batch, results, strict=True):
            if item[3]:
                assert isinstance(result, RuntimeError)
            else:
                assert isinstance(result, Appended)
                assert result.seq == len(self.model)
                self.model.append((draft.kind, draft.body, draft.payload))

    @rule()
    def reopen(self) -> None:
        self._run(self.store.close())
        self.store = self._open()

    @precondition(lambda self: len(self.model) > 0)
    @rule(data=st.data())
    def read_range(self, data: st.DataObject) -> None:
        start = data.draw(st.integers(0, len(self.model)))
        stop = data.draw(st.integers(start, len(self.model) + 2))

        async def read() -> list[Any]:
            return [r async for r in self.store.scan(start, stop)]

        records = self._run(read())
        assert [r.seq for r in records] == list(range(start, min(stop, len(self.model))))
        for record in records:
            kind, body, payload = self.model[record.seq]
            entry = record.entry()
            assert (entry.kind, bytes(entry.body), record.payload) == (kind, body, payload)

    @invariant()
    def matches_the_model_and_verifies(self) -> None:
        head = self._run(self.store.head())
        assert head.size == len(self.model)
        summary = self._run(Ledger(self.store, None).verify(SIGNER.verifier, workers=1))
        assert summary.size == len(self.model)

    def teardown(self) -> None:
        self._run(self.store.close())
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(stateful_step_count=20)
