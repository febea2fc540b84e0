"""The memo table and run leases: rows written in the same transaction as signed entries.

``memos`` maps a run's step to the seq of the signed ``memory_tool_call``
entry holding its result. Nothing in a memo row is trusted: replay reads
the entry it points at and checks it (see :mod:`memseal.replay.runs.provenance`).

``runs`` holds each run's lease: one process at a time records a run. A
lease lapses when its time runs out or, on the same machine, as soon as its
holder's process is gone, so a restarted process resumes at once.

``memo_hits`` counts, per signed call, how many times a resume answered a
step from it (a memo hit). A hit writes no entry: the count is an unsigned
operations figure, not a proof (nothing checks it, verify ignores it), kept
so that a console in any process sees the hits of every process. A run adds
its hits in the transaction of its next lease renewal and of its close
(:func:`add_hits`), never in the hit's own path.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

import msgspec

from memseal.ledger.errors import Conflict
from memseal.ledger.store import SqlStore, WriteTxn

__all__ = [
    "DDL",
    "HOST",
    "POSTGRES_DDL",
    "Lease",
    "MemoRow",
    "acquire",
    "add_hits",
    "check_holder",
    "ddl_for",
    "held_here",
    "hits_of",
    "let_go_here",
    "put_memo",
    "release",
    "renew",
]

DDL = """
CREATE TABLE IF NOT EXISTS memos (
    run_id   TEXT NOT NULL,
    step     INTEGER NOT NULL,
    memo_key TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    PRIMARY KEY (run_id, step)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    holder      TEXT,
    pid         INTEGER,
    host        TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    started_seq INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_seq);
CREATE TABLE IF NOT EXISTS memo_hits (
    run_id  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    step    INTEGER NOT NULL,
    hits    INTEGER NOT NULL,
    last_at REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
"""

#: The same tables on PostgreSQL: 64-bit seqs, a double-precision lease time (a ``real``
#: would round a Unix time to minutes), bytewise-ordered text.
POSTGRES_DDL = """
CREATE TABLE IF NOT EXISTS memos (
    run_id   TEXT COLLATE "C" NOT NULL,
    step     BIGINT NOT NULL,
    memo_key TEXT COLLATE "C" NOT NULL,
    seq      BIGINT NOT NULL,
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT COLLATE "C" PRIMARY KEY,
    holder      TEXT,
    pid         BIGINT,
    host        TEXT,
    lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
    started_seq BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_seq);
CREATE TABLE IF NOT EXISTS memo_hits (
    run_id  TEXT COLLATE "C" NOT NULL,
    seq     BIGINT NOT NULL,
    step    BIGINT NOT NULL,
    hits    BIGINT NOT NULL,
    last_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, seq)
);
"""


def ddl_for(dialect: str) -> str:
    """The memo tables in a store's dialect."""
    if dialect == "postgresql":
        return POSTGRES_DDL
    if dialect == "sqlite":
        return DDL
    raise ValueError(f"no memo tables for the {dialect!r} dialect")


HOST = socket.gethostname()


class MemoRow(msgspec.Struct, frozen=True, kw_only=True):
    """A row of the memo table: which entry recorded a run's step."""

    run_id: str
    step: int
    memo_key: str
    seq: int


class Lease(msgspec.Struct, frozen=True, kw_only=True):
    """Who holds a run's lease, and since which entry."""

    holder: str
    started_seq: int | None  # None: the run existed before this lease
    new: bool


def _alive(pid: int | None, host: str | None) -> bool:
    if pid is None or host != HOST:
        return True  # another machine's process: only its lease time can tell
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: The leases this process's open runs hold: holder -> the owner that opened the run
#: (a memory's token), so a lease held here is never blamed on "another process".
_HELD_HERE: dict[str, str] = {}


def held_here(holder: str, owner: str) -> None:
    """Note that an open run of this process holds ``holder``'s lease."""
    _HELD_HERE[holder] = owner


def let_go_here(holder: str) -> None:
    """Forget that an open run of this process holds ``holder``'s lease (it closed)."""
    _HELD_HERE.pop(holder, None)


def _held_by(run_id: str, other: str, pid: int, host: str, owner: str) -> str:
    if pid == os.getpid() and host == HOST:
        opened_by = _HELD_HERE.get(other)
        if opened_by is not None and owner and opened_by == owner:
            return (
                f"run {run_id!r} is already open in this memory (another Run object of it "
                "holds its lease); close that run first"
            )
        if opened_by is not None:
            return (
                f"run {run_id!r} is held by another open memory in this process; "
                "close that memory (or its run) first"
            )
        return (
            f"run {run_id!r} is leased by this process (pid {pid}) for a run that is no "
            "longer open here (a memory dropped without closing?); its lease lapses when "
            "its time runs out"
        )
    return (
        f"run {run_id!r} is being recorded by another process "
        f"(pid {pid} on {host}); its lease lapses when that process stops"
    )


def acquire(txn: WriteTxn, run_id: str, holder: str, ttl: float, *, owner: str = "") -> bool:
    """Take the run's lease inside the write transaction; True when the run is new.

    Raises :class:`Conflict` while another live holder has it, naming it: another
    process, or another open memory (or run object) of this one. ``owner`` is who
    asks (a memory's token).
    """
    now = time.time()
    rows = txn.execute(
        "SELECT holder, pid, host, lease_until FROM runs WHERE run_id = ?", (run_id,)
    )
    if rows:
        other, pid, host, until = rows[0]
        if other not in (None, holder) and until > now and _alive(pid, host):
            raise Conflict(_held_by(run_id, other, pid, host, owner))
        txn.execute(
            "UPDATE runs SET holder = ?, pid = ?, host = ?, lease_until = ? WHERE run_id = ?",
            (holder, os.getpid(), HOST, now + ttl, run_id),
        )
        return False
    txn.execute(
        "INSERT INTO runs (run_id, holder, pid, host, lease_until, started_seq) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, holder, os.getpid(), HOST, now + ttl, txn.size),
    )
    return True


def check_holder(txn: WriteTxn, run_id: str, holder: str) -> None:
    """Refuse to record for a run whose lease another process took over."""
    rows = txn.execute("SELECT holder FROM runs WHERE run_id = ?", (run_id,))
    if not rows or rows[0][0] != holder:
        raise Conflict(f"run {run_id!r} lost its lease to another process; nothing was recorded")


def renew(txn: WriteTxn, run_id: str, holder: str, ttl: float) -> bool:
    """Extend ``holder``'s lease on the run by ``ttl`` seconds; False if it no longer holds it."""
    rows = txn.execute(
        "UPDATE runs SET lease_until = ? WHERE run_id = ? AND holder = ? RETURNING run_id",
        (time.time() + ttl, run_id, holder),
    )
    return bool(rows)


def release(txn: WriteTxn, run_id: str, holder: str) -> None:
    """Give up ``holder``'s lease on the run, so another process may resume it."""
    txn.execute(
        "UPDATE runs SET holder = NULL, lease_until = 0 WHERE run_id = ? AND holder = ?",
        (run_id, holder),
    )


def put_memo(txn: WriteTxn, row: MemoRow) -> None:
    """Record that a run's step is answered by the entry in ``row``."""
    # Held for the group's one INSERT of memo rows; a later row of the same step wins.
    txn.defer(
        "memos (run_id, step, memo_key, seq)",
        (row.run_id, row.step, row.memo_key, row.seq),
        " ON CONFLICT (run_id, step) DO UPDATE SET memo_key = excluded.memo_key,"
        " seq = excluded.seq",
    )


def add_hits(txn: WriteTxn, run_id: str, hits: Mapping[int, tuple[int, int]]) -> None:
    """Add a run's memo hits (signed call seq -> (step, hits)) to ``memo_hits``."""
    now = time.time()
    for seq, (step, count) in hits.items():
        txn.execute(
            "INSERT INTO memo_hits (run_id, seq, step, hits, last_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id, seq) DO UPDATE SET hits = memo_hits.hits + excluded.hits, "
            "last_at = excluded.last_at",
            (run_id, seq, step, count, now),
        )


async def hits_of(store: SqlStore, run_id: str) -> tuple[int, float | None]:
    """The memo hits every process added for ``run_id``, and when the last was added."""
    rows = await store.rows(
        "SELECT sum(hits), max(last_at) FROM memo_hits WHERE run_id = ?", (run_id,)
    )
    total, last = rows[0] if rows else (None, None)
    return (0 if total is None else int(total)), (None if last is None else float(last))
