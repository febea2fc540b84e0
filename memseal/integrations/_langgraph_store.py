"""LangGraph's long-term memory on a signed log: :class:`MemsealStore`.

``MemsealStore(memory, scope)`` is a ``langgraph.store.base.BaseStore``. Every
operation goes through the memory's recorded tools (``memory.tools(scope)``),
so every put and delete is a signed ``memory_tool_call`` entry, and so is every
read; nothing touches the unrecorded engine. All LangGraph items are written at
the store's own node, :data:`STORE_NODE` below the host's ``scope.place``
(``team:acme/agent:writer/langgraph:store``), and read with the reach narrowed to
exactly that node, so a LangGraph namespace is a label inside the host's scope,
never a place of its own: a namespace tuple cannot reach a sibling or an ancestor.

The items are the host's alone, even beside a model's tools on the same scope
(``tool_node(memory, scope)``): the model's writes land at ``scope.place``, never
at the store's node, and its ``memory_store`` refuses the store's tags anywhere
but a ``langgraph:store`` node (:mod:`memseal.tools._reserved`), so it can neither
replace a value nor plant a key. Neither a host scope nor ``tool_node``'s may be
placed at a ``langgraph:store`` node (``InvalidRequest`` naming ``scope``), so this
holds whatever place the host picks. Of a key's items the one the log wrote last
(its ``ledger_ref``) is the value, never the one whose envelope claims the latest
``updated_at``. An item carrying the store's tag that is not an envelope is
skipped and reported (a logged warning, :attr:`MemsealStore.skipped`), never
fatal to a read, however deep its text nests; a filter comparison a value cannot
make (``{"n": {"$gt": 1}}`` against ``10**400``) is no match.

Items of the earlier layout, at ``scope.place`` itself, are still read (a ledger
written before this version keeps its values), and a put or delete of their key
forgets them: whether the place holds any is asked once per store, by one
recorded list. Those were written when any model at the place could forge them;
at a place that ends in a ``langgraph:`` node they are never read, since a model's
tools there took the store's tags until this version.

How a ``(namespace, key)`` maps to memseal:

* one ``document`` item per live key; its text is a JSON envelope
  ``{"namespace": [...], "key": ..., "value": {...}, "created_at": ..., "updated_at": ...}``
  written ASCII-only (so the engine's NFC normalisation and stripping leave it
  byte-identical) and the value is read back exactly as it was put;
* its tags are :data:`STORE_TAG` and ``lgk:<blake2b of [namespace, key]>``, the
  deterministic handle a get, put or delete looks the key up by;
* a put of an existing key stores the new item first, then forgets the old one,
  so a crash between the two leaves both (the one stored last wins on read)
  and never neither; a delete forgets every item of the key.

Values are JSON objects of at most :data:`MAX_ENVELOPE_CHARS` characters once
enveloped (the tools never clip a text that fits). ``PutOp.index`` is accepted and
ignored (memseal indexes the text itself); TTLs are not supported.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
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
from memseal.engine import Namespace, Reach
from memseal.ledger.errors import InvalidRequest
from memseal.tools import ToolScope
from memseal.tools._reserved import owner_node_at

if TYPE_CHECKING:
    from memseal._recorded_tools import RecordedTools
    from memseal.memory import Memory

__all__ = ["MAX_ENVELOPE_CHARS", "STORE_NODE", "STORE_TAG", "MemsealStore", "refuse_store_node"]

#: The tag every item of a MemsealStore carries (its reads list only these); reserved.
STORE_TAG = "langgraph-store"
#: The segment below the host's place the store keeps its items at (``type:name``).
STORE_NODE = "langgraph:store"
#: The tools render at most this many characters of a text unclipped.
MAX_ENVELOPE_CHARS = 16_000
# 20 texts of 16,000 ASCII characters stay under the tools' 512 KiB result budget,
# so a page is never clipped.
_PAGE = 20
# Where a skipped item is reported: a logged warning, never a Python warning.
_log = logging.getLogger("memseal.integrations.langgraph")


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
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidRequest(f"`value` of key {op.key!r} is not JSON ({exc})") from exc
    if len(text) > MAX_ENVELOPE_CHARS:
        raise InvalidRequest(
            f"`value` of key {op.key!r} is {len(text)} characters as stored;"
            f" the limit is {MAX_ENVELOPE_CHARS}"
        )
    return text


class _NotAnItem(ValueError):
    """A memory carrying the store's tag that is not one of its items."""


class _Stored:
    """One live item read back: its memseal id, its LangGraph item, the seq that wrote it,
    and whether it is of the earlier layout (at the host's place itself)."""

    __slots__ = ("id", "item", "legacy", "seq")

    def __init__(self, entry: Mapping[str, Any], *, legacy: bool = False) -> None:
        if entry.get("truncated"):
            # Never hand back a clipped value as the stored one.
            raise _NotAnItem("clipped by the tools")
        seq = entry.get("ledger_ref")
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise _NotAnItem("no ledger_ref")
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
        except (ValueError, KeyError, TypeError, RecursionError, InvalidRequest) as exc:
            # RecursionError: a text nested deeper than the decoder recurses is no item
            # either, and must not end every read of the store.
            raise _NotAnItem(str(exc)) from exc
        self.id: str = entry["id"]
        self.seq: int = seq
        self.legacy = legacy


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
    except (TypeError, ValueError, OverflowError):
        # OverflowError: an int no float holds (10**400) is compared with nothing.
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
    items land at :data:`STORE_NODE` below ``scope.place`` (:attr:`scope` is the
    store's own), and ``scope.writes`` / ``frozen`` apply.
    """

    supports_ttl = False

    def __init__(self, memory: Memory | SyncMemory, scope: ToolScope) -> None:
        if not isinstance(scope, ToolScope):
            raise InvalidRequest("`scope` must be a ToolScope")
        refuse_store_node(scope, "MemsealStore's host")
        inner, self._loop = _on_loop(memory)
        kind, _, name = STORE_NODE.partition(":")
        node = Namespace.parse(scope.place, field="place").child(kind, name).text
        # Reads see exactly the store's node: neither its ancestors nor a sibling.
        self.scope = scope.replace(place=node, reach=Reach.exact(node))
        self._tools: RecordedTools = inner.tools(self.scope)
        # The earlier layout's items, at the host's place itself (module docstring).
        self._legacy_tools: RecordedTools = inner.tools(
            scope.replace(reach=Reach.exact(scope.place))
        )
        # Whether the place holds any: asked once. Never at a `langgraph:` node, where a
        # model's memory_store once took the store's tags (memseal.tools._reserved).
        at_graph = scope.place.rpartition("/")[2].startswith("langgraph:")
        self._legacy: bool | None = False if at_graph else None
        self._skipped: dict[str, str] = {}
        self._lock: asyncio.Lock | None = None

    @property
    def skipped(self) -> dict[str, str]:
        """The memories this store skipped on read (each id with why): each carries the
        store's tag but is not one of its items. Each is logged once, as a warning."""
        return dict(self._skipped)

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

    def _parsed(self, entry: Mapping[str, Any], *, legacy: bool) -> _Stored | None:
        """``entry`` as a store item; None (skipped, and reported once) when it is not one."""
        try:
            return _Stored(entry, legacy=legacy)
        except _NotAnItem as exc:
            ident = str(entry.get("id"))
            if ident not in self._skipped:
                self._skipped[ident] = str(exc)
                _log.warning(
                    "MemsealStore at %s skipped memory %s: it carries the %s tag but is"
                    " not a MemsealStore item (%s)",
                    self.scope.place,
                    ident,
                    STORE_TAG,
                    exc,
                )
            return None

    async def _has_legacy(self) -> bool:
        if self._legacy is None:
            page = await self._legacy_tools.call(
                "memory_list", {"filter": {"tags_any": [STORE_TAG]}, "limit": 1}
            )
            self._legacy = bool(page["items"])
        return self._legacy

    async def _pages(self, filter: dict[str, Any]) -> list[_Stored]:
        found: list[_Stored] = []
        sources = [(self._tools, False)]
        if await self._has_legacy():
            sources.append((self._legacy_tools, True))
        for tools, legacy in sources:
            args: dict[str, Any] = {"filter": filter, "limit": _PAGE}
            while True:
                page = await tools.call("memory_list", args)
                for entry in page["items"]:
                    stored = self._parsed(entry, legacy=legacy)
                    if stored is not None:
                        found.append(stored)
                cursor = page.get("next_cursor")
                if cursor is None:
                    break
                args = {**args, "cursor": cursor}
        return found

    async def _live(self, namespace: tuple[str, ...], key: str) -> list[_Stored]:
        """The key's live items, the one the log wrote last first (more than one only
        after a crashed put, or beside the earlier layout's)."""
        found = await self._pages({"tags_any": [_key_tag(namespace, key)]})
        mine = [s for s in found if s.item.namespace == namespace and s.item.key == key]
        # The log's order, never the envelope's self-declared updated_at.
        return sorted(mine, key=lambda s: s.seq, reverse=True)

    async def _put(self, op: PutOp) -> None:
        old = await self._live(op.namespace, op.key)
        if op.value is None:
            await self._forget(old)
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
        await self._forget([s for s in old if s.id != stored["id"]])

    async def _forget(self, items: list[_Stored]) -> None:
        for tools, legacy in ((self._tools, False), (self._legacy_tools, True)):
            ids = [s.id for s in items if s.legacy is legacy]
            if ids:
                await tools.call("memory_forget", {"ids": ids})

    async def _all(self) -> list[Item]:
        """Every live item, one per key (the one the log wrote last), oldest put first."""
        newest: dict[tuple[tuple[str, ...], str], _Stored] = {}
        for s in await self._pages({"tags_any": [STORE_TAG]}):
            handle = (s.item.namespace, s.item.key)
            kept = newest.get(handle)
            if kept is None or s.seq > kept.seq:
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
        hits = await self._hits(self._tools, query, legacy=False)
        if await self._has_legacy():
            hits += await self._hits(self._legacy_tools, query, legacy=True)
            hits.sort(key=lambda hit: -(hit[1] or 0.0))  # one ranking of both layouts
        out: list[tuple[Item, float | None]] = []
        seen: set[tuple[tuple[str, ...], str]] = set()
        for s, score in hits:
            handle = (s.item.namespace, s.item.key)
            # A stale half of a crashed put is not the key's value.
            if handle in seen or live.get(handle) != s.item:
                continue
            seen.add(handle)
            out.append((s.item, score))
        return out

    async def _hits(
        self, tools: RecordedTools, query: str, *, legacy: bool
    ) -> list[tuple[_Stored, float | None]]:
        found: list[tuple[_Stored, float | None]] = []
        args: dict[str, Any] = {
            "query": query,
            "filter": {"tags_any": [STORE_TAG]},
            "limit": _PAGE,
        }
        while True:
            page = await tools.call("memory_fetch", args)
            for hit in page["hits"]:
                s = self._parsed(hit, legacy=legacy)
                if s is not None:
                    found.append((s, hit.get("score")))
            cursor = page.get("next_cursor")
            if cursor is None:
                return found
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


def refuse_store_node(scope: ToolScope, whose: str) -> None:
    """InvalidRequest naming ``scope`` when it is placed at a store's own node: there a
    model's ``memory_store`` writes the store's reserved tags, so the node is the store's
    alone, never a host's place (its store would sit one node down, beside no guard) nor
    a model's."""
    owner = owner_node_at(scope.place)
    if owner is not None:
        raise InvalidRequest(
            f"`scope`: {scope.place!r} ends in `{owner.node}`, {owner.owner}'s own node, where"
            f" memory_store writes its reserved tags; place {whose} scope elsewhere"
        )


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
