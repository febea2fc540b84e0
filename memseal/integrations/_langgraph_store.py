"""LangGraph's long-term memory on a signed log: :class:`MemsealStore`.

``MemsealStore(memory, scope)`` is a ``langgraph.store.base.BaseStore``. Every
operation goes through the memory's recorded tools (``memory.tools(scope)``),
so every put and delete is a signed ``memory_tool_call`` entry, and so is every
read; nothing touches the unrecorded engine. All LangGraph items are written at
the host's ``scope.place`` and read with the reach narrowed to exactly that node,
so a LangGraph namespace is a label inside the host's scope, never a place of
its own: a model's namespace tuple cannot reach a sibling or an ancestor.

How a ``(namespace, key)`` maps to memseal:

* one ``document`` item per live key; its text is a JSON envelope
  ``{"namespace": [...], "key": ..., "value": {...}, "created_at": ..., "updated_at": ...}``
  written ASCII-only (so the engine's NFC normalisation and stripping leave it
  byte-identical) and the value is read back exactly as it was put;
* its tags are :data:`STORE_TAG` and ``lgk:<blake2b of [namespace, key]>``, the
  deterministic handle a get, put or delete looks the key up by;
* a put of an existing key stores the new item first, then forgets the old one,
  so a crash between the two leaves both (the newest ``updated_at`` wins on read)
  and never neither; a delete forgets every item of the key.

Values are JSON objects of at most :data:`MAX_ENVELOPE_CHARS` characters once
enveloped (the tools never clip a text that fits). ``PutOp.index`` is accepted and
ignored (memseal indexes the text itself); TTLs are not supported.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memseal._sync_memory import SyncMemory
from memseal.engine import Reach
from memseal.ledger.errors import InvalidRequest
from memseal.tools import ToolScope

if TYPE_CHECKING:
    from memseal._recorded_tools import RecordedTools
    from memseal.memory import Memory

__all__ = ["MAX_ENVELOPE_CHARS", "STORE_TAG", "MemsealStore"]

#: The tag every item of a MemsealStore carries (its reads list only these).
STORE_TAG = "langgraph-store"
#: The tools render at most this many characters of a text unclipped.
MAX_ENVELOPE_CHARS = 16_000
# 20 texts of 16,000 ASCII characters stay under the tools' 512 KiB result budget,
# so a page is never clipped.
_PAGE = 20


def _check_namespace(namespace: object, field: str) -> tuple[str, ...]:
    if not isinstance(namespace, tuple):
        raise InvalidRequest(f"`{field}` must be a tuple of text labels")
    for i, label in enumerate(namespace):
        if not isinstance(label, str):
            raise InvalidRequest(f"`{field}[{i}]` must be text, not {type(label).__name__}")
        if not label:
            raise InvalidRequest(f"`{field}[{i}]` must not be empty")
        if "." in label or "\x00" in label:
            raise InvalidRequest(f"`{field}[{i}]` must not contain a period or a NUL")
    return namespace


def _key_tag(namespace: tuple[str, ...], key: str) -> str:
    handle = json.dumps([list(namespace), key], ensure_ascii=True, separators=(",", ":"))
    return "lgk:" + hashlib.blake2b(handle.encode("ascii"), digest_size=24).hexdigest()


def _envelope(op: PutOp, value: Mapping[str, Any], created: str, updated: str) -> str:
    body = {
        "namespace": list(op.namespace),
        "key": op.key,
        "value": value,
        "created_at": created,
        "updated_at": updated,
    }
    try:
        text = json.dumps(body, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"`value` of key {op.key!r} is not JSON ({exc})") from exc
    if len(text) > MAX_ENVELOPE_CHARS:
        raise InvalidRequest(
            f"`value` of key {op.key!r} is {len(text)} characters as stored;"
            f" the limit is {MAX_ENVELOPE_CHARS}"
        )
    return text


class _Stored:
    """One live item read back: its memseal id and its LangGraph item."""

    __slots__ = ("id", "item", "seq")

    def __init__(self, entry: Mapping[str, Any]) -> None:
        if entry.get("truncated"):
            # Never hand back a clipped value as the stored one.
            raise InvalidRequest(f"memory {entry['id']} was clipped by the tools")
        try:
            body = json.loads(entry["text"])
            self.item = Item(
                value=body["value"],
                key=body["key"],
                namespace=tuple(body["namespace"]),
                created_at=datetime.fromisoformat(body["created_at"]),
                updated_at=datetime.fromisoformat(body["updated_at"]),
            )
            _check_namespace(self.item.namespace, "namespace")
            if not isinstance(self.item.value, dict) or not isinstance(self.item.key, str):
                raise TypeError("value or key of the wrong type")
            if self.item.created_at.tzinfo is None or self.item.updated_at.tzinfo is None:
                raise ValueError("a timestamp without its offset")
        except (ValueError, KeyError, TypeError, InvalidRequest) as exc:
            # A memory tagged as a store item that is not one (written by other
            # means at this place): fail loudly rather than skip it.
            raise InvalidRequest(
                f"memory {entry['id']} carries the {STORE_TAG} tag but is not a"
                f" MemsealStore item ({exc})"
            ) from exc
        self.id: str = entry["id"]
        self.seq: int = entry["ledger_ref"]


def _matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """InMemoryStore's filter rule: every filter field matches the value's (`_compare`)."""
    return not filter or all(_compare(value.get(name), want) for name, want in filter.items())


def _compare(actual: Any, want: Any) -> bool:
    # As InMemoryStore: a nested mapping matches field by field, a list element by
    # element, a mapping of `$` operators compares; anything else is equality.
    if isinstance(want, dict):
        if any(name.startswith("$") for name in want):
            return all(_operator(actual, op, operand) for op, operand in want.items())
        return isinstance(actual, dict) and all(
            _compare(actual.get(name), inner) for name, inner in want.items()
        )
    if isinstance(want, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(want)
            and all(_compare(a, w) for a, w in zip(actual, want, strict=True))
        )
    return bool(actual == want)


def _operator(actual: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$ne":
        return bool(actual != operand)
    if operator not in ("$gt", "$gte", "$lt", "$lte"):
        raise InvalidRequest(f"`filter`: unknown operator {operator!r}")
    try:
        left, right = float(actual), float(operand)
    except (TypeError, ValueError):
        return False
    match operator:
        case "$gt":
            return left > right
        case "$gte":
            return left >= right
        case "$lt":
            return left < right
    return left <= right


class MemsealStore(BaseStore):
    """LangGraph's ``BaseStore`` on memseal: every put and delete a signed entry (module docstring).

    ``memory`` is a :class:`~memseal.Memory` (use the async methods from its loop;
    the sync ones from any other thread) or a :class:`~memseal.SyncMemory` (the
    sync methods from anywhere but its loop thread). ``scope`` is the host's:
    items land at ``scope.place``, and ``scope.writes`` / ``frozen`` apply.
    """

    supports_ttl = False

    def __init__(self, memory: Memory | SyncMemory, scope: ToolScope) -> None:
        if not isinstance(scope, ToolScope):
            raise InvalidRequest("`scope` must be a ToolScope")
        inner, self._loop = _on_loop(memory)
        # Reads see exactly the host's node: neither its ancestors nor a sibling.
        self.scope = scope.replace(reach=Reach.exact(scope.place))
        self._tools: RecordedTools = inner.tools(self.scope)
        self._lock: asyncio.Lock | None = None

    # -- the two entry points LangGraph derives every method from ------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The ops in order, run on the memory's event loop (blocking)."""
        loop = self._loop
        if loop is None:
            raise InvalidRequest(
                "this MemsealStore has not seen its memory's event loop yet:"
                " build it inside that loop, or use a SyncMemory"
            )
        if loop.is_running() and _in_loop_thread(loop):
            raise InvalidRequest(
                "a sync MemsealStore method was called on its memory's event loop:"
                " use the async form (aget, aput, asearch...)"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The ops in order; every op is checked before the first one runs."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        listed = list(ops)
        for op in listed:
            _check_op(op)
        if self._lock is None:
            self._lock = asyncio.Lock()
        # As InMemoryStore does: the reads see the store as it was before the batch,
        # then its puts run, the last put of a key winning.
        async with self._lock:  # a put's look-up, store and forget are one step
            results: list[Result] = []
            puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
            for op in listed:
                if isinstance(op, PutOp):
                    puts[(op.namespace, op.key)] = op
                    results.append(None)
                else:
                    results.append(await self._read(op))
            for put in puts.values():
                await self._put(put)
            return results

    async def _read(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            found = await self._live(op.namespace, op.key)
            return found[0].item if found else None
        if isinstance(op, SearchOp):
            return await self._search(op)
        assert isinstance(op, ListNamespacesOp)
        return await self._namespaces(op)

    # -- the recorded calls ----------------------------------------------------------------

    async def _pages(self, filter: dict[str, Any]) -> list[_Stored]:
        found: list[_Stored] = []
        args: dict[str, Any] = {"filter": filter, "limit": _PAGE}
        while True:
            page = await self._tools.call("memory_list", args)
            found.extend(_Stored(entry) for entry in page["items"])
            cursor = page.get("next_cursor")
            if cursor is None:
                return found
            args = {**args, "cursor": cursor}

    async def _live(self, namespace: tuple[str, ...], key: str) -> list[_Stored]:
        """The key's live items, newest first (more than one only after a crashed put)."""
        found = await self._pages({"tags_any": [_key_tag(namespace, key)]})
        mine = [s for s in found if s.item.namespace == namespace and s.item.key == key]
        return sorted(mine, key=lambda s: (s.item.updated_at, s.seq), reverse=True)

    async def _put(self, op: PutOp) -> None:
        old = await self._live(op.namespace, op.key)
        if op.value is None:
            if old:
                await self._tools.call("memory_forget", {"ids": [s.id for s in old]})
            return
        now = datetime.now(UTC).isoformat()
        created = old[0].item.created_at.isoformat() if old else now
        text = _envelope(op, op.value, created, now)
        stored = await self._tools.call(
            "memory_store",
            {
                "document": {"title": "langgraph store item", "text": text},
                "tags": [STORE_TAG, _key_tag(op.namespace, op.key)],
            },
        )
        stale = [s.id for s in old if s.id != stored["id"]]
        if stale:
            await self._tools.call("memory_forget", {"ids": stale})

    async def _all(self) -> list[Item]:
        """Every live item, one per key, oldest put first."""
        newest: dict[tuple[tuple[str, ...], str], _Stored] = {}
        for s in await self._pages({"tags_any": [STORE_TAG]}):
            handle = (s.item.namespace, s.item.key)
            kept = newest.get(handle)
            if kept is None or (s.item.updated_at, s.seq) > (kept.item.updated_at, kept.seq):
                newest[handle] = s
        return [s.item for s in sorted(newest.values(), key=lambda s: s.seq)]

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        if op.query:
            scored = await self._fetch(op.query)
            ranked = [(item, score) for item, score in scored]
        else:
            ranked = [(item, None) for item in await self._all()]
        kept = [
            SearchItem(
                namespace=item.namespace,
                key=item.key,
                value=item.value,
                created_at=item.created_at,
                updated_at=item.updated_at,
                score=score,
            )
            for item, score in ranked
            if item.namespace[: len(prefix)] == prefix and _matches(item.value, op.filter)
        ]
        return kept[op.offset : op.offset + op.limit]

    async def _fetch(self, query: str) -> list[tuple[Item, float | None]]:
        """Every live item memseal's fetch finds for ``query``, best first."""
        live = {(i.namespace, i.key): i for i in await self._all()}
        out: list[tuple[Item, float | None]] = []
        seen: set[tuple[tuple[str, ...], str]] = set()
        args: dict[str, Any] = {
            "query": query,
            "filter": {"tags_any": [STORE_TAG]},
            "limit": _PAGE,
        }
        while True:
            page = await self._tools.call("memory_fetch", args)
            for hit in page["hits"]:
                s = _Stored(hit)
                handle = (s.item.namespace, s.item.key)
                # A stale half of a crashed put is not the key's value.
                if handle in seen or live.get(handle) != s.item:
                    continue
                seen.add(handle)
                out.append((s.item, hit.get("score")))
            cursor = page.get("next_cursor")
            if cursor is None:
                return out
            args = {**args, "cursor": cursor}

    async def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        names = {item.namespace for item in await self._all()}
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            names = {n for n in names if _match_path(n, path, condition.match_type)}
        if op.max_depth is not None:
            names = {n[: op.max_depth] for n in names}
        listed = sorted(names)
        return listed[op.offset : op.offset + op.limit]


def _match_path(namespace: tuple[str, ...], path: tuple[str, ...], kind: str) -> bool:
    if len(path) > len(namespace):
        return False
    window = namespace[: len(path)] if kind == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, window, strict=True))


def _on_loop(memory: Memory | SyncMemory) -> tuple[Memory, asyncio.AbstractEventLoop | None]:
    """The async memory, and the loop its calls run on (None: not known yet).

    A SyncMemory says both; a Memory runs on the loop that is running now, if any
    (the adapter learns it at its first async call otherwise).
    """
    if isinstance(memory, SyncMemory):
        return memory.memory, memory.loop
    try:
        return memory, asyncio.get_running_loop()
    except RuntimeError:
        return memory, None


def _in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _check_op(op: object) -> None:
    """Raise InvalidRequest naming the field when an op is malformed; nothing has run."""
    if isinstance(op, GetOp):
        _check_namespace(op.namespace, "namespace")
        _check_key(op.key)
    elif isinstance(op, PutOp):
        _check_namespace(op.namespace, "namespace")
        if not op.namespace:
            raise InvalidRequest("`namespace` must not be empty")
        if op.namespace[0] == "langgraph":
            raise InvalidRequest("`namespace[0]` must not be `langgraph` (LangGraph's own)")
        _check_key(op.key)
        if op.value is not None:
            if not isinstance(op.value, dict):
                raise InvalidRequest(f"`value` must be a dict, not {type(op.value).__name__}")
            if any(not isinstance(name, str) for name in op.value):
                raise InvalidRequest("`value` must have text keys only")
            _envelope(op, op.value, "", "")
        if op.ttl is not None:
            raise InvalidRequest("`ttl`: MemsealStore does not expire items")
    elif isinstance(op, SearchOp):
        _check_namespace(op.namespace_prefix, "namespace_prefix")
        _check_window(op.limit, op.offset)
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise InvalidRequest("`filter` must be a dict")
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidRequest("`query` must be text")
    elif isinstance(op, ListNamespacesOp):
        _check_window(op.limit, op.offset)
        if op.max_depth is not None and (
            not isinstance(op.max_depth, int) or isinstance(op.max_depth, bool) or op.max_depth < 1
        ):
            raise InvalidRequest("`max_depth` must be a whole number of at least 1")
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise InvalidRequest("`match_type` must be `prefix` or `suffix`")
            _check_path(condition.path)
    else:
        raise InvalidRequest(f"not a store operation: {type(op).__name__}")


def _check_path(path: object) -> None:
    if not isinstance(path, tuple) or not all(isinstance(p, str) for p in path):
        raise InvalidRequest("`path` must be a tuple of text labels")


def _check_key(key: object) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidRequest("`key` must be non-empty text")


def _check_window(limit: object, offset: object) -> None:
    for name, value in (("limit", limit), ("offset", offset)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidRequest(f"`{name}` must be a whole number of at least 0")
