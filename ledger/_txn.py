"""The driver-independent half of a store's write transaction (see :class:`WriteTxn`).

Both adapters hand each command a transaction object that keeps the log's
running state in memory: the size, the previous leaf hash, the signer and
the Merkle tree's right edge. :meth:`LogTxn.mark` captures that state and
:meth:`LogTxn.reset` restores it when a savepoint rolls back, so a command
(or a nested unit) that raises leaves neither rows nor log state behind.

An append computes the seq, the chain link, the leaf and its signature here,
and holds its rows (:meth:`LogTxn._write_entry`); the adapter erases what it
redacts (:meth:`LogTxn._erase`) and runs the statements in its dialect.
The Merkle tree grows in the same transaction: never a stored entry without
its hashes. The right edge (one complete subtree per set bit of the size) is
read once per group; each append then merges its leaf into it, giving the
stored hashes it writes in order (:meth:`LogTxn._grow_edge`).

A group runs first as one unit (:meth:`LogTxn.run_grouped`): no savepoint per
command, and the rows of its inserts (:meth:`LogTxn.defer`) held back and
written as one multi-row INSERT per table at the end of the group. Per call a
savepoint and one statement per table were most of SQLite's share of a
recorded store, and a statement each most of PostgreSQL's (issue 41). A
statement that names a table with rows held back writes them first, so every
command reads what the ones before it wrote. If
anything in the group raises, the adapter rolls the transaction back and runs
the group again call by call (:meth:`LogTxn.run_command`, a savepoint each,
the held rows written at each command's end): one bad call still fails alone.
An adapter whose every read waits a round trip may take a group's dedupe
lookups as absent (:meth:`LogTxn.lookup`) and read them all in one statement
before their table is written; one found fails the group the same way.
"""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from .entry import (
    GENESIS_PREV,
    RESIDUE_SALT,
    Draft,
    check_entry_size,
    encode_entry,
    format_time,
    leaf_hash,
    signing_message,
)
from .errors import InvalidRequest, StorageError
from .merkle import node_hash, stored_hash_count, stored_hash_index
from .note import NoteSigner
from .store import Appended, Command, StoredCheckpoint

__all__ = ["ROWS_PER_INSERT", "GroupRetry", "KeySource", "LogTxn", "Mark"]

Mark = tuple[int, bytes | None, NoteSigner, list[tuple[int, bytes]] | None]
#: Rows a multi-row INSERT carries: SQLite binds at most 32,766 parameters a statement.
ROWS_PER_INSERT = 500
_WORD = re.compile(r"\w+")
#: The words of each statement text seen (the texts are the code's own: a few dozen).
_words: dict[str, frozenset[str]] = {}


def _words_of(sql: str) -> frozenset[str]:
    found = _words.get(sql)
    if found is None:
        found = _words[sql] = frozenset(_WORD.findall(sql))
    return found


class GroupRetry(BaseException):
    """A nested unit failed while the group ran as one unit: nothing of it can be
    rolled back alone, so the whole group goes again call by call.

    A BaseException, so that a command's own ``except Exception`` does not keep it."""


KeySource = Callable[[str], NoteSigner | None]
"""Finds the signer of a key id (hex) this process has not loaded yet, or None."""


class _Executes(Protocol):
    def execute(self, statement: Any, /) -> Any: ...


ConnT = TypeVar("ConnT", bound=_Executes)


def in_order(indexes: Sequence[int], found: dict[int, bytes]) -> list[bytes]:
    """Stored tree hashes in the order asked, or a StorageError naming the first missing."""
    missing = [i for i in indexes if i not in found]
    if missing:
        raise StorageError(f"the Merkle tree lacks stored hash {missing[0]}")
    return [found[i] for i in indexes]


class LogTxn(ABC, Generic[ConnT]):
    """Log state, savepoints and the append sequence of one open write transaction
    on a ``ConnT`` connection."""

    # The adapter's savepoint statements ({} is the savepoint's name).
    _SAVEPOINT: ClassVar[str] = "SAVEPOINT {}"
    _ROLLBACK_TO: ClassVar[str]
    _RELEASE: ClassVar[str]
    #: The SQL the adapter's ``execute`` takes (see :class:`~.store.WriteTxn`).
    dialect: ClassVar[str]

    def __init__(
        self,
        conn: ConnT,
        signer: NoteSigner,
        clock: Callable[[], datetime],
        hooks: Sequence[Callable[[Any, int, bytes], None]],
    ) -> None:
        """Begin on ``conn``, inside its write transaction (the head is read through it)."""
        self.conn = conn
        self._signer = signer
        self._key = signer.key_id.hex()
        self._clock = clock
        self._hooks = hooks
        #: Rows held back, by table: (the INSERT's target with its columns, rows).
        self._held: dict[str, tuple[str, str, list[tuple[Any, ...]]]] = {}
        #: Statements held back by table (:meth:`hold_last`), and values kept for the
        #: group (:meth:`keep`) with the tables whose writes make them stale.
        self._last: dict[str, tuple[str, tuple[Any, ...]]] = {}
        self._known: dict[str, tuple[frozenset[str], Any]] = {}
        #: Values :meth:`lookup` answered None for without reading, by (table, column).
        self._assumed: dict[tuple[str, str], list[Any]] = {}
        self._grouped = False
        #: Whether :meth:`lookup` may answer None unread while the group runs as one
        #: unit (an adapter whose every read waits a round trip sets it).
        self.assumes = False
        #: Whether the group failed because a value :meth:`lookup` took as absent was found.
        self.missed = False
        # Read inside the write transaction, after the writer lock: never a cached head.
        head = self.execute("SELECT seq, hash FROM entries ORDER BY seq DESC LIMIT 1")
        self._size: int = 0 if not head else head[0][0] + 1
        self._prev: bytes | None = None if not head else bytes(head[0][1])
        self._edge: list[tuple[int, bytes]] | None = None
        self._depth = 0

    # -- the adapter's side ---------------------------------------------------

    def _sql(self, statement: str) -> None:
        """Run one parameterless statement (savepoints) on the transaction's connection."""
        self.conn.execute(statement)

    def _settle(self) -> None:
        """Wait for every statement sent so far; raise the first one's error, if any.

        An adapter that sends statements ahead without waiting (PostgreSQL's
        pipeline) settles at the end of each savepoint's unit, so an error is
        raised inside the unit that caused it and rolls back only that unit.
        SQLite runs each statement at once: nothing is ever pending.
        """

    def defer(self, into: str, row: tuple[Any, ...], tail: str = "") -> None:
        """Insert ``row`` into ``into`` (``table (col, ...)``, then ``tail``: an ``ON
        CONFLICT`` clause), at the latest when the command ends or a statement names the
        table (see the module docstring)."""
        table = into.split(" ", 1)[0]
        held = self._held.get(table)
        if held is not None and held[0] == into and held[1] == tail:
            held[2].append(row)
            return
        if held is not None:  # another statement: what is held goes first, in order
            self._flush_tables((table,))
        self._held[table] = (into, tail, [row])

    def hold_last(self, table: str, sql: str, params: tuple[Any, ...]) -> None:
        """Run ``sql`` on ``table`` before the command ends or a statement names the table;
        a later call for the same table replaces it (a statement a later one overwrites
        whole: an upsert of fixed keys, such as the projection's saved state)."""
        self._last[table] = (sql, params)

    def known(self, key: str) -> Any:
        """What a command of this group kept under ``key`` (:meth:`keep`), or None."""
        found = self._known.get(key)
        return None if found is None else found[1]

    def keep(self, key: str, value: Any, tables: Sequence[str]) -> None:
        """Keep ``value`` for the later commands of the group, until a statement that
        writes one of ``tables`` runs or a unit rolls back (a lease read, the
        projection's state: once a group rather than once a call)."""
        self._known[key] = (frozenset(tables), value)

    def lookup(self, table: str, column: str, value: Any, want: str) -> Any:
        """``want`` of the row of ``table`` whose ``column`` (a unique key) is ``value``, or
        None, past the rows held for ``table`` (see :class:`~.store.WriteTxn`)."""
        if self._grouped and self.assumes:
            self._assumed.setdefault((table, column), []).append(value)
            return None
        rows = self.read_past(f"SELECT {want} FROM {table} WHERE {column} = ?", (value,), table)
        return rows[0][0] if rows else None

    def _check_assumed(self, table: str) -> None:
        """Before ``table`` is written or read: GroupRetry if a value :meth:`lookup` took
        as absent from it is there (one read for all of them)."""
        for key in [key for key in self._assumed if key[0] == table]:
            values = self._assumed.pop(key)
            for start in range(0, len(values), ROWS_PER_INSERT):
                part = values[start : start + ROWS_PER_INSERT]
                marks = ", ".join("?" * len(part))
                sql = f"SELECT 1 FROM {table} WHERE {key[1]} IN ({marks}) LIMIT 1"
                if self.read_past(sql, part, table):
                    self.missed = True
                    raise GroupRetry(f"{table} holds a {key[1]} taken as absent")

    def read_past(self, sql: str, params: Sequence[Any], table: str) -> list[tuple[Any, ...]]:
        """The rows of a read whose answer the rows held for ``table`` cannot change (its
        caller keeps track of them): they stay held, for the group's one INSERT."""
        held = self._held.pop(table, None)
        try:
            return self.execute(sql, params)
        finally:
            if held is not None:
                self._held[table] = held

    def flush(self) -> None:
        """Write every row held back (one multi-row INSERT per table and 500 rows)."""
        self._flush_tables(tuple({*self._held, *self._last, *(t for t, _ in self._assumed)}))

    def _touch(self, sql: str) -> None:
        """Before ``sql`` runs: write the held rows of the tables it names, and forget
        what was kept about the tables it may write."""
        if not (self._held or self._last or self._known or self._assumed):
            return
        words = _words_of(sql)
        named = words.intersection(self._held) | words.intersection(self._last)
        if self._assumed:
            named |= words.intersection(t for t, _ in self._assumed)
        if named:
            self._flush_tables(tuple(named))
        if self._known and not sql.startswith("SELECT"):
            stale = [key for key, (tables, _) in self._known.items() if tables & words]
            for key in stale:
                del self._known[key]

    def _flush_tables(self, tables: Sequence[str]) -> None:
        for table in tables:
            if self._assumed:
                self._check_assumed(table)
            into, tail, rows = self._held.pop(table, ("", "", []))
            for start in range(0, len(rows), ROWS_PER_INSERT):
                self._insert_rows(into, tail, rows[start : start + ROWS_PER_INSERT])
            last = self._last.pop(table, None)
            if last is not None:
                self._raw(*last)

    def _insert_rows(self, into: str, tail: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert ``rows`` (at most :data:`ROWS_PER_INSERT`) as one statement."""
        one = "(" + ", ".join("?" * len(rows[0])) + ")"
        self._raw(
            f"INSERT INTO {into} VALUES {', '.join([one] * len(rows))}{tail}",
            [v for row in rows for v in row],
        )

    @abstractmethod
    def _raw(self, sql: str, params: Sequence[Any]) -> None:
        """Run one statement as is: no held rows written before it (the flush's own)."""

    def _roll_back(self, name: str, mark: Mark) -> Exception | None:
        """Roll the unit of savepoint ``name`` back, rows and log state; the error of a
        statement sent ahead inside it, if one failed.

        That statement ran before whatever raised in Python after it, so its error is
        the unit's failure (as it was when every statement waited for its answer). A
        rollback that fails fails the command, not a later unit; the log state is reset
        either way."""
        first: Exception | None = None
        try:
            try:
                self._settle()
            except Exception as exc:
                first = exc
            self._sql(self._ROLLBACK_TO.format(name))
            self._sql(self._RELEASE.format(name))
            self._settle()
        finally:
            # Held rows were all written inside the unit (it flushed as it began).
            self._held.clear()
            self._last.clear()
            self._known.clear()
            self._assumed.clear()
            self.reset(mark)
        return first

    def _write_entry(
        self, draft: Draft, seq: int, leaf: bytes, digest: bytes, signature: bytes
    ) -> None:
        """Hold the entry's rows, its tree hashes (:meth:`_grow_edge`), payload and
        mentions for the group's INSERTs; erase what it redacts."""
        self.defer("entries (seq, leaf, hash, sig)", (seq, leaf, digest, signature))
        base = stored_hash_count(seq)
        for i, h in enumerate(self._grow_edge(seq, digest)):
            self.defer("tree (idx, hash)", (base + i, h))
        if draft.payload is not None:
            self.defer("payloads (seq, salt, data)", (seq, draft.salt, draft.payload))
            for ref in draft.mentions:
                self.defer("mentions (ref, seq)", (ref, seq))
        if draft.redacts:
            self._erase(draft.redacts, seq)
        for earlier, residue, mentions in draft.kept:
            # What the forget left of this payload: the texts it did not forget (entry.py).
            self.defer("payloads (seq, salt, data)", (earlier, RESIDUE_SALT, residue))
            for ref in mentions:
                self.defer("mentions (ref, seq)", (ref, earlier))

    @abstractmethod
    def _erase(self, earlier: Sequence[int], seq: int) -> None:
        """Delete the payloads and mentions of the ``earlier`` seqs entry ``seq`` redacts,
        and record it as their eraser in ``redactions`` (replay marks forgotten texts with
        that seq), through :meth:`execute`: the held rows of those tables go first."""

    @abstractmethod
    def tree_hashes(self, indexes: Sequence[int]) -> list[bytes]:
        """Stored Merkle hashes by index, as of this transaction; StorageError if one is missing."""

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one statement inside the transaction (``?`` placeholders accepted)."""

    # -- shared, on :meth:`execute` (whose ``?`` placeholders every adapter accepts) --

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        """The newest stored checkpoint as this transaction sees it, or None."""
        rows = self.execute(
            "SELECT size, root, note, at FROM checkpoints ORDER BY size DESC LIMIT 1"
        )
        if not rows:
            return None
        size, root, note, at = rows[0]
        return StoredCheckpoint(size=size, root=bytes(root), note=note, at=at)

    def store_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        """Keep a signed checkpoint; it commits with the transaction."""
        self.execute(
            "INSERT INTO checkpoints (size, root, note, at) VALUES (?, ?, ?, ?)",
            (checkpoint.size, checkpoint.root, checkpoint.note, checkpoint.at),
        )

    # -- shared ---------------------------------------------------------------

    @property
    def size(self) -> int:
        """The number of entries including those appended so far in this transaction."""
        return self._size

    @property
    def signer(self) -> NoteSigner:
        """The key signing this transaction's entries; StorageError on a read-only store."""
        if self._signer is None:
            raise StorageError("this ledger store is open read-only")
        return self._signer

    def use_signer(self, signer: NoteSigner) -> None:
        """Sign the entries that follow with ``signer`` (key rotation)."""
        self._signer = signer
        self._key = signer.key_id.hex()

    def adopt_current_key(self, source: KeySource | None) -> None:
        """Sign with the key the log names as current, or refuse to sign at all.

        A key rotation commits the new key's id in ``meta`` with its
        ``key_rotated`` entry. Another process appending to the same log
        still holds the retired key: each group first reads that row, and a
        process whose key is not the current one takes the new key from
        ``source`` (the data folder it shares) or fails the group, rather
        than sign an entry no verifier would accept.

        A log that ``memseal migrate`` is moving (or has moved) to another
        store carries ``moved_to``: a process still writing here would make
        the same key sign two logs, so every group fails, naming the store.
        """
        said: dict[str, str] = dict(
            self.execute("SELECT key, value FROM meta WHERE key IN ('signing_key', 'moved_to')")
        )
        if "moved_to" in said:
            raise StorageError(
                f"this ledger moved to {said['moved_to']} (memseal migrate); nothing more is "
                "written here: restart this process with that store (--store or MEMSEAL_STORE)"
            )
        if said.get("signing_key", self._key) == self._key:
            return
        wanted = str(said["signing_key"])
        found = None if source is None else source(wanted)
        if found is None or found.key_id.hex() != wanted:
            raise StorageError(
                f"the ledger's signing key was handed over to key {wanted} by a key rotation "
                f"in another process; this process holds the retired key {self._key} and "
                "signs nothing more: restart it with the data folder's current keys"
            )
        self.use_signer(found)

    def mark(self) -> Mark:
        """The log state as of now (size, previous leaf, signer, right edge), for :meth:`reset`."""
        edge = None if self._edge is None else list(self._edge)
        return (self._size, self._prev, self._signer, edge)

    def reset(self, mark: Mark) -> None:
        """Restore the log state of :meth:`mark` after its savepoint rolled back."""
        self._size, self._prev, signer, self._edge = mark
        self.use_signer(signer)

    def now(self) -> str:
        """The store clock's time, formatted as entries carry it."""
        return format_time(self._clock())

    def append(self, draft: Draft) -> Appended:
        """Sign and append one entry at the next seq, with its tree hashes.

        InvalidRequest, before anything is written, when ``redacts`` names a
        seq not before this one, a residue belongs to a seq it does not name, or the
        entry is over :data:`~.entry.MAX_ENTRY_BYTES` (a draft not made by ``make_draft``).
        """
        seq = self._size
        for earlier in draft.redacts:
            if earlier >= seq:
                raise InvalidRequest(f"`redacts` names seq {earlier}; only earlier seqs (< {seq})")
        for earlier, _, _ in draft.kept:
            if earlier not in draft.redacts:
                raise InvalidRequest(f"a residue for seq {earlier}, which `redacts` does not name")
        at = format_time(self._clock())
        prev = GENESIS_PREV if self._prev is None else self._prev.hex()
        leaf = encode_entry(draft, seq=seq, at=at, prev=prev, key=self._key)
        check_entry_size(draft, len(leaf))
        digest = leaf_hash(leaf)
        signature = self._signer.sign(signing_message(digest))
        self._write_entry(draft, seq, leaf, digest, signature)
        self._size = seq + 1
        self._prev = digest
        for hook in self._hooks:
            hook(self, seq, digest)
        return Appended(seq=seq, leaf_hash=digest, at=at)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested unit inside a command: rolled back alone (rows and log state) if it raises."""
        if self._grouped:
            # No savepoint while the group runs as one unit: a unit that fails sends the
            # group back to run call by call, where it has one.
            try:
                yield
            except BaseException as exc:
                raise GroupRetry from exc
            return
        self.flush()  # held rows from before the unit are not the unit's to roll back
        # What was sent ahead before the unit settles outside it: an earlier statement's
        # error fails the unit it belongs to, under its own name, not this one.
        self._settle()
        name = f"nested{self._depth}"
        self._depth += 1
        mark = self.mark()
        self._sql(self._SAVEPOINT.format(name))
        try:
            yield
            self._settle()
        except BaseException as exc:
            first = self._roll_back(name, mark)
            # Only in place of an error: an interrupt or a cancellation stays what it is.
            if first is not None and first is not exc and isinstance(exc, Exception):
                raise first from exc
            raise
        else:
            self._sql(self._RELEASE.format(name))
        finally:
            self._depth -= 1

    def run_command(
        self, command: Command[Any], translate: Callable[[BaseException], BaseException]
    ) -> tuple[bool, Any]:
        """Run one command of a group in its own savepoint; its outcome (ok, value or error).

        A command that raises is rolled back alone, rows and log state, and the
        rest of the group goes on.
        """
        self._sql(self._SAVEPOINT.format("command"))
        mark = self.mark()
        try:
            value = command(self)
            self.flush()
            self._settle()
        except BaseException as exc:
            first = self._roll_back("command", mark)
            failure = first if first is not None and isinstance(exc, Exception) else exc
            return (False, translate(failure))
        self._sql(self._RELEASE.format("command"))
        return (True, value)

    def run_grouped(self, commands: Sequence[Command[Any]]) -> list[tuple[bool, Any]] | None:
        """Run ``commands`` as one unit, no savepoints, held rows written at the end;
        their outcomes, or None when anything raised: the adapter then rolls the whole
        transaction back and runs the group again call by call (:meth:`run_command`)."""
        self._grouped = True
        try:
            values = [command(self) for command in commands]
            self.flush()
            self._settle()
        except BaseException:  # every failure is retried call by call
            return None
        finally:
            self._grouped = False
        return [(True, value) for value in values]

    def _grow_edge(self, seq: int, digest: bytes) -> list[bytes]:
        """Merge leaf ``seq`` into the right edge; the stored hashes it adds, in order."""
        if self._edge is None:
            levels = [b for b in reversed(range(seq.bit_length())) if seq >> b & 1]
            hashes = self.tree_hashes([stored_hash_index(b, (seq >> b) - 1) for b in levels])
            self._edge = list(zip(levels, hashes, strict=True))
        edge = self._edge
        new = [digest]
        level, h = 0, digest
        while edge and edge[-1][0] == level:
            h = node_hash(edge.pop()[1], h)
            level += 1
            new.append(h)
        edge.append((level, h))
        return new
