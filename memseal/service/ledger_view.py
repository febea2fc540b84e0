"""Ledger entries as the service shows them: every header, payloads only within reach.

An auditor needs every entry's signed bytes (the chain and the tree are
over all of them), but the payloads (what people and models typed) only of
the memory it audits. A payload is shown when the entry is about memory
inside the caller's reach:

* ``memory_stored``: the item's namespace (in the signed body);
* ``trust_changed``: the item's namespace (from the projection);
* ``memory_tool_call``: the namespace of the scope that started the run,
  and of every item the result cites;
* anything else (notes, key rotations): only for a reach over everything.

A payload that is not shown is replaced by ``null`` with
``"payload_withheld": true``; one erased by a forget is ``null`` with
``"redacted": true`` and ``"redacted_by"``, the seq of the signed entry that erased it.

:func:`projection_report` is ``verify --deep`` for auditors over HTTP: the
projections rebuilt from the log into a scratch store and compared. A
caller whose reach is everything (a root auditor or admin) sees the state
hashes, the counts and the first differing item; any other caller sees
whether they match and, only when the first difference is an item inside
its reach, that item. Never any text, on either side.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from memseal.engine import Engine, Reach
from memseal.ledger.store import Record, SqlStore

__all__ = ["MAX_ENTRIES", "EntryView", "projection_report"]

MAX_ENTRIES: Final = 200


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _everything(reach: Reach | None) -> bool:
    return reach is None or (reach.mode == "subtree" and reach.node == "")


class EntryView:
    """Renders records for one caller's reach (see the module docstring)."""

    def __init__(self, store: SqlStore, reach: Reach | None) -> None:
        self._store = store
        self._reach = reach
        self._places: dict[str, str | None] = {}

    def _admits(self, namespace: object) -> bool:
        if _everything(self._reach):
            return True
        if not isinstance(namespace, str):
            return False
        assert self._reach is not None
        try:
            return self._reach.admits(namespace)
        except Exception:
            return False

    async def _item_namespaces(self, ids: Iterable[str]) -> dict[str, str]:
        wanted = sorted({i for i in ids if isinstance(i, str)})
        found: dict[str, str] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = await self._store.rows(
                f"SELECT id, namespace FROM engine_items WHERE id IN ({marks})", chunk
            )
            found.update({str(r[0]): str(r[1]) for r in rows})
        return found

    async def _run_place(self, run_id: str) -> str | None:
        if run_id not in self._places:
            place: str | None = None
            rows = await self._store.rows(
                "SELECT started_seq FROM runs WHERE run_id = ?", (run_id,)
            )
            if rows:
                body = msgspec.json.decode(bytes((await self._store.read(rows[0][0])).entry().body))
                if isinstance(body, dict) and isinstance(body.get("place"), str):
                    place = body["place"]
            self._places[run_id] = place
        return self._places[run_id]

    async def _visible(self, kind: str, body: Any) -> bool:
        if _everything(self._reach):
            return True
        if not isinstance(body, dict):
            return False
        if kind == "memory_stored":
            return self._admits(body.get("namespace"))
        if kind == "trust_changed":
            item = body.get("item")
            spaces = await self._item_namespaces([item] if isinstance(item, str) else [])
            return isinstance(item, str) and item in spaces and self._admits(spaces[item])
        if kind == "memory_tool_call":
            run_id = body.get("run_id")
            if not isinstance(run_id, str) or not self._admits(await self._run_place(run_id)):
                return False
            cites = body.get("cites") or []
            spaces = await self._item_namespaces(cites if isinstance(cites, list) else [])
            return all(self._admits(ns) for ns in spaces.values())
        return False

    async def _erased_by(self, seqs: Sequence[int]) -> dict[int, int]:
        found: dict[int, int] = {}
        for start in range(0, len(seqs), 500):
            chunk = list(seqs[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = await self._store.rows(
                f"SELECT seq, by_seq FROM redactions WHERE seq IN ({marks})", chunk
            )
            found.update({int(r[0]): int(r[1]) for r in rows})
        return found

    async def render(self, records: Sequence[Record]) -> list[dict[str, Any]]:
        """The records as the caller may see them: every header, payloads within reach."""
        out = []
        erased = await self._erased_by([r.seq for r in records if r.payload is None])
        for record in records:
            entry = record.entry()
            body = msgspec.json.decode(bytes(entry.body))
            shown: dict[str, Any] = {
                "seq": record.seq,
                "kind": entry.kind,
                "at": entry.at,
                "entry": _b64(record.leaf),
                "leaf_hash": record.leaf_hash.hex(),
                "signature": _b64(record.signature),
                "header": {
                    "v": entry.v,
                    "seq": entry.seq,
                    "at": entry.at,
                    "kind": entry.kind,
                    "prev": entry.prev,
                    "key": entry.key,
                    "redacts": list(entry.redacts),
                    "payload_hash": entry.payload_hash,
                    "body": body,
                },
                "payload": None,
                "salt": None,
            }
            if entry.payload_hash is None:
                pass
            elif record.payload is None:
                shown["redacted"] = True
                # The signed entry whose `redacts` erased it ("erased by the forget at seq N").
                shown["redacted_by"] = erased.get(record.seq)
            elif await self._visible(entry.kind, body):
                shown["payload"] = _b64(record.payload)
                shown["salt"] = None if record.salt is None else record.salt.hex()
            else:
                shown["payload_withheld"] = True
            out.append(shown)
        return out


async def projection_report(engine: Engine, reach: Reach | None) -> dict[str, Any]:
    """The deep check as one caller may see it (see the module docstring)."""
    check = await engine.check_projections()
    shown: dict[str, Any] = {"matches": check.matches}
    if _everything(reach):
        shown.update(
            expected=check.expected,
            found=check.found,
            incremental=check.incremental,
            entries=check.entries,
            items=check.items,
            seconds=check.seconds,
        )
    if check.matches:
        return shown
    ours = _everything(reach) or (
        check.namespace is not None and reach is not None and reach.admits(check.namespace)
    )
    if ours:
        shown["first_difference"] = {"table": check.table, "seq": check.seq, "item": check.item}
    else:
        # Another tenant's item, or a difference that names no item (the running hash):
        # that something differs is all this caller may learn.
        shown["first_difference"] = None
    return shown
