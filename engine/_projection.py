"""Applying events to the projection tables, and the projection's state hash.

The same code applies an event whether it was just appended (inside the
command that appends it) or read back from the log by ``rebuild``: that is
what makes the incremental projection and a rebuild agree.

The state hash is a multiset hash: every projection row hashes (blake3,
domain separated) to a 256-bit number and the state is their sum modulo
2^256, so an insert adds, a delete subtracts and an update does both,
without reading the rest of the table. The published hash binds that sum
to the projection's position (the seq of the last engine event applied).
Vectors are not rows of any hashed table: they differ in the last bits
across CPU types, and the hash must be the same on every machine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import blake3
import msgspec

from ._dates import extract_refs
from ._dialect import EngineSql, FtsWords
from ._schema import HASHED
from .events import (
    Keyring,
    MemoryForgotten,
    MemoryStored,
    StoredPayload,
    TrustChanged,
    TrustPayload,
)
from .items import Meta, Turn
from .trust import trust_rank

__all__ = [
    "FACETS",
    "Defer",
    "Derived",
    "Detail",
    "Execute",
    "Projection",
    "derive",
    "embed_text",
    "facet_values",
    "recompute_total",
    "row_digest",
    "state_hash",
]

Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
#: Inserts one row into ``table (col, ...)``, perhaps later (:meth:`WriteTxn.defer`).
Defer = Callable[[str, tuple[Any, ...]], None]

_MOD: Final = 1 << 256
_ROW: Final = b"memseal/engine/row/v1\x00"
_STATE: Final = b"memseal/engine/state/v1\x00"
_encoder = msgspec.json.Encoder(order="deterministic")
_ITEM_COLUMNS: Final = ", ".join(HASHED["engine_items"])

#: The explore facets, in the seed's order.
FACETS: Final = (
    "kind",
    "source",
    "source_id",
    "workspace",
    "folder",
    "file_path",
    "language",
    "repo",
    "url",
    "thread",
    "agent",
    "tool_call",
    "tag",
)
_FROM_META: Final = (
    ("workspace", "workspace"),
    ("folder", "folder"),
    ("file_path", "file_path"),
    ("language", "language"),
    ("repo", "repo"),
    ("url", "url"),
    ("thread", "thread_id"),
    ("agent", "agent_id"),
    ("tool_call", "tool_call"),
)


class Detail(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The parts of an item no query filters on, kept as one JSON column."""

    turns: tuple[Turn, ...] | None = None
    evidence: str | None = None
    sources: tuple[str, ...] = ()


def row_digest(table: str, row: Sequence[Any]) -> int:
    """A projection row's 256-bit term of the state sum (blake3, domain separated)."""
    data = _encoder.encode([table, *row])
    return int.from_bytes(blake3.blake3(_ROW + data).digest(), "big")


def state_hash(position: int, total: int) -> str:
    """The published state hash: the state sum bound to the projection's position."""
    return blake3.blake3(_STATE + _encoder.encode([position, f"{total:064x}"])).hexdigest()


def embed_text(title: str | None, text: str) -> str:
    """What an item's vector is made from (and its content hash is over)."""
    return f"{title}\n\n{text}" if title else text


def facet_values(kind: str, payload: StoredPayload) -> list[tuple[str, str]]:
    """The ``(facet, value)`` pairs an item is explored and filtered by, sorted."""
    meta: Meta = payload.meta
    values = [("kind", kind)]
    if meta.source is not None:
        values.append(("source", meta.source.kind))
        if meta.source.id is not None:
            values.append(("source_id", meta.source.id))
    for facet, field in _FROM_META:
        value = getattr(meta, field)
        if value is not None:
            values.append((facet, value))
    values.extend(("tag", tag) for tag in payload.tags)
    return sorted(set(values))


class Derived(msgspec.Struct, frozen=True, kw_only=True):
    """What the projection computes from a stored item's payload: pure, so the writer
    need not (the store path computes it before; a rebuild computes it inline)."""

    text: str
    tags: str
    meta: str
    detail: str
    content: str
    facets: tuple[tuple[str, str], ...]
    refs: tuple[str, ...]
    #: The dialect's index words (:attr:`EngineSql.fts_words`), when the store path
    #: computed them before the writer; None makes the writer compute them.
    words: FtsWords | None = None


def derive(event: MemoryStored, payload: StoredPayload, keyring: Keyring) -> Derived:
    """The projection columns of a stored item, computed before the writer."""
    text = payload.searchable_text()
    detail = Detail(turns=payload.turns, evidence=payload.evidence, sources=event.sources)
    return Derived(
        text=text,
        tags=_encoder.encode(list(payload.tags)).decode(),
        meta=_encoder.encode(payload.meta).decode(),
        detail=_encoder.encode(detail).decode(),
        content=keyring.content_hash(embed_text(payload.title, text)),
        facets=tuple(facet_values(event.kind, payload)),
        refs=tuple(extract_refs(f"{payload.title}\n{text}" if payload.title else text)),
    )


class Projection:
    """The projection as seen from one writer command: apply events, then :meth:`save`."""

    #: The saved position and state sum, for a caller reading them in a statement of
    #: its own (:meth:`__init__`'s ``saved``): on PostgreSQL each statement waits a
    #: round trip. One row, NULL for a value not saved yet.
    SAVED: Final = (
        "(SELECT value FROM engine_meta WHERE key = 'position'), "
        "(SELECT value FROM engine_meta WHERE key = 'state_sum')"
    )

    def __init__(
        self,
        execute: Execute,
        keyring: Keyring,
        sql: EngineSql,
        saved: tuple[str | None, str | None] | None = None,
        defer: Defer | None = None,
    ) -> None:
        """The projection as this transaction sees it; ``saved`` is the row of
        :attr:`SAVED` when the caller read it just now, in this transaction; ``defer``
        lets the writer put the rows of a group's commands in one INSERT a table."""
        self._x = execute
        self._defer = defer
        self._keyring = keyring
        self._sql = sql
        if saved is None:
            found: dict[str, str] = dict(
                execute(
                    "SELECT key, value FROM engine_meta WHERE key IN ('position', 'state_sum')",
                    (),
                )
            )
            saved = (found.get("position"), found.get("state_sum"))
        position, total = saved
        self.position: int = int("-1" if position is None else position)
        self.total: int = int("0" if total is None else total, 16)
        #: Items a forget removed, and the content hashes whose cached vectors went with
        #: them (for in-memory copies).
        self.removed_seqs: list[int] = []
        self.dropped_vectors: list[str] = []

    @property
    def hash(self) -> str:
        """The state hash of the projection as this command has left it so far."""
        return state_hash(self.position, self.total)

    def save(self) -> None:
        """Write the position and running state sum back (once, after the events)."""
        self._x(*self.save_statement())

    def save_statement(self) -> tuple[str, tuple[str, str]]:
        """The statement :meth:`save` runs, and its parameters."""
        return (
            "INSERT INTO engine_meta (key, value) VALUES ('position', ?), ('state_sum', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            self.saved(),
        )

    def saved(self) -> tuple[str, str]:
        """The position and state sum as :attr:`SAVED` reads them back once saved."""
        return (str(self.position), f"{self.total:064x}")

    # -- rows -------------------------------------------------------------------

    def _insert(self, table: str, row: tuple[Any, ...]) -> None:
        if self._defer is not None:
            self._defer(f"{table} ({', '.join(HASHED[table])})", row)
        else:
            marks = ", ".join("?" * len(row))
            self._x(f"INSERT INTO {table} ({', '.join(HASHED[table])}) VALUES ({marks})", row)
        self.total = (self.total + row_digest(table, row)) % _MOD

    def _insert_many(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        if self._defer is not None:
            for row in rows:
                self._insert(table, row)
            return
        # One statement for all the rows: on PostgreSQL each statement is a round trip.
        for start in range(0, len(rows), 100):
            part = rows[start : start + 100]
            marks = ", ".join("(" + ", ".join("?" * len(row)) + ")" for row in part)
            params = [value for row in part for value in row]
            self._x(f"INSERT INTO {table} ({', '.join(HASHED[table])}) VALUES {marks}", params)
            for row in part:
                self.total = (self.total + row_digest(table, row)) % _MOD

    def _delete(self, table: str, where: str, params: Sequence[Any]) -> None:
        columns = ", ".join(HASHED[table])
        for row in self._x(f"SELECT {columns} FROM {table} WHERE {where}", params):
            self.total = (self.total - row_digest(table, row)) % _MOD
        self._x(f"DELETE FROM {table} WHERE {where}", params)

    def item_row(self, item_id: str) -> tuple[Any, ...] | None:
        """The hashed columns of the live item ``item_id``, or None."""
        rows = self._x(f"SELECT {_ITEM_COLUMNS} FROM engine_items WHERE id = ?", (item_id,))
        return rows[0] if rows else None

    # -- events -----------------------------------------------------------------

    def stored(
        self,
        seq: int,
        at: str,
        event: MemoryStored,
        payload: StoredPayload | None,
        derived: Derived | None = None,
        *,
        absent: bool = False,
    ) -> bool:
        """Add the item; False when there is nothing to add.

        A missing payload was erased by a later ``memory_forgotten`` entry
        (the ledger's verify holds it to that), which removes the item
        again, so skipping it here ends in the same state. An id already
        present cannot come from this engine (it dedupes in the writer);
        the first one stands. ``derived`` is :func:`derive` of the same
        event and payload, computed before the writer by a caller that has it;
        ``absent`` says the caller has just found no item with this id (in this
        transaction), so it is not looked up again.
        """
        self.position = seq
        if payload is None or (not absent and self.item_row(event.item) is not None):
            return False
        d = derived if derived is not None else derive(event, payload, self._keyring)
        row = (
            seq,
            event.item,
            event.kind,
            event.namespace,
            event.trust,
            trust_rank(event.trust),
            event.confidence,
            event.observed_at,
            at,
            d.text,
            payload.title,
            d.tags,
            d.meta,
            d.detail,
            d.content,
        )
        self._insert("engine_items", row)
        if self._defer is not None and self._sql.fts_row is not None:
            # The index's row goes with the group's rows of its table.
            self._defer(*self._sql.fts_row(seq, d.text, payload.title, d.tags, d.words))
        else:
            self._sql.fts_add(self._x, seq, d.text, payload.title, d.tags, d.words)
        self._insert_many("engine_facets", [(seq, facet, value) for facet, value in d.facets])
        self._insert_many("engine_dates", [(seq, ref) for ref in d.refs])
        return True

    def trust(self, seq: int, at: str, event: TrustChanged, payload: TrustPayload | None) -> bool:
        """Set the item's trust and record the verdict; False if the item is not here.

        A missing payload means a later forget erased it, and that forget
        removes the item and its verdicts: recording blanks meanwhile ends
        in the same state.
        """
        self.position = seq
        row = self.item_row(event.item)
        if row is None:
            return False
        item_seq = row[0]
        self.total = (self.total - row_digest("engine_items", row)) % _MOD
        new = list(row)
        new[4], new[5] = event.trust, trust_rank(event.trust)
        self._x(
            "UPDATE engine_items SET trust = ?, trust_rank = ? WHERE seq = ?",
            (event.trust, trust_rank(event.trust), item_seq),
        )
        self.total = (self.total + row_digest("engine_items", new)) % _MOD
        actor = "" if payload is None else payload.actor
        reason = "" if payload is None else payload.reason
        self._insert(
            "engine_verdicts", (seq, item_seq, event.trust, event.previous, actor, reason, at)
        )
        return True

    def forgotten(self, seq: int, event: MemoryForgotten) -> list[str]:
        """Remove the items and every row about them; returns the ids that were here."""
        self.position = seq
        removed = []
        for item_id in event.items:
            row = self.item_row(item_id)
            if row is None:
                continue
            item_seq, text, title, tags, content = row[0], row[9], row[10], row[11], row[14]
            self._sql.fts_remove(self._x, item_seq, text, title, tags)
            self._delete("engine_facets", "seq = ?", (item_seq,))
            self._delete("engine_dates", "seq = ?", (item_seq,))
            self._delete("engine_verdicts", "item = ?", (item_seq,))
            self._delete("engine_items", "seq = ?", (item_seq,))
            self.removed_seqs.append(item_seq)
            # The vector goes with the last live item holding that content: it was made
            # from the forgotten text.
            if not self._x("SELECT 1 FROM engine_items WHERE content = ? LIMIT 1", (content,)):
                self._x("DELETE FROM engine_vectors WHERE content = ?", (content,))
                self.dropped_vectors.append(content)
            removed.append(item_id)
        return removed


def recompute_total(execute: Execute) -> int:
    """The state sum from every projection row, ignoring the running one (an audit)."""
    total = 0
    for table, columns in HASHED.items():
        last = -1
        while True:
            rows = execute(
                f"SELECT {', '.join(columns)} FROM {table} WHERE seq > ? AND seq <= ? ORDER BY seq",
                (last, last + 4096),
            )
            if not rows:
                more = execute(f"SELECT min(seq) FROM {table} WHERE seq > ?", (last,))
                if more[0][0] is None:
                    break
                last = more[0][0] - 1
                continue
            for row in rows:
                total = (total + row_digest(table, row)) % _MOD
            last += 4096
    return total
