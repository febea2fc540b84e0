"""Checking a memo against its signed entry before anything in it is used.

:func:`check_memo` returns the verified call or raises
:class:`ProvenanceError` (always the message ``memory memo missing
matching signed provenance``; ``detail`` names the failed check). In order:

1. the memo row sits at the position it claims: its memo key is the key of
   (run, step);
2. the entry it points at exists;
3. it passes the ledger's one entry check (:func:`~memseal.ledger.entry_check.check_entry`:
   strict format, the stored leaf hash recomputed from its bytes, one of the
   instance's keys, the signature) and is a ``memory_tool_call``;
4. the body decodes and names the same memo key, run and step;
5. the result hash is the hash of the body's result skeleton;
6. a present payload matches its salted hash in the entry and its
   arguments match the input hash (a failed call keeps none); a missing payload was erased by a
   signed entry (a forget), whose seq marks the forgotten texts; a residue (what
   a forget left) holds only texts the signed body references;
7. every text put back matches its reference in the skeleton.

Only then is the result decoded.

The memo table is a projection of the signed ``memory_tool_call`` entries,
and two functions hold it to them. :func:`verify_derived` (run by ``memseal
verify`` and ``Memory.verify``) checks the whole table against the log, with
the runs' starts and the redactions;
:func:`reconcile_memos` (run when a run resumes) puts back the memo of a
step whose signed entry is in the log but whose row is gone, so a resume
never runs live a step that was recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET
from nacl.signing import VerifyKey

from memseal.ledger.entry import (
    RESIDUE_SALT,
    Entry,
    decode_residue,
    text_owners,
)
from memseal.ledger.entry_check import check_entry
from memseal.ledger.errors import (
    NotFound,
    ProvenanceError,
    StorageError,
    VerificationError,
)
from memseal.ledger.store import Record, SqlStore, WriteTxn
from memseal.ledger.verify import check_payload

from ._mentions import MentionsWanted
from .calls import (
    RUN_STARTED,
    TOOL_CALL,
    ToolCall,
    decode_tool_call,
    decode_tool_call_payload,
    marked_forget,
)
from .identity import input_hash, memo_key
from .memo import MemoRow, check_holder, put_memo
from .results import restore, result_hash

__all__ = [
    "DerivedCheck",
    "Reconciled",
    "Verified",
    "check_memo",
    "reconcile_memos",
    "verify_derived",
]


class Verified(msgspec.Struct, frozen=True, kw_only=True):
    """A memo whose entry was checked: its seq, its tool call and its arguments."""

    seq: int
    call: ToolCall
    arguments: Any  # None when erased by a forget
    result: Any  # with forgotten texts marked


async def check_memo(
    store: SqlStore,
    keys: Mapping[str, VerifyKey],
    secret: bytes,
    row: MemoRow,
    run_id: str,
    step: int,
) -> Verified:
    """Check a memo's entry (key, position, signature, hashes) before replaying it."""
    expected = memo_key(run_id, step)
    # 1. position
    if row.memo_key != expected or row.run_id != run_id or row.step != step:
        raise ProvenanceError("the memo row's key is not the key of its run and step")
    # 2. the entry
    try:
        record = await store.read(row.seq)
    except NotFound:
        raise ProvenanceError(
            f"the memo points at seq {row.seq}, which is not in the log"
        ) from None
    call, entry = _signed_call(record, keys)
    # 4. body
    if call.memo_key != expected or call.run_id != run_id or call.step != step:
        raise ProvenanceError("the signed entry belongs to another run or step", seq=row.seq)
    # 5. result hash
    if result_hash(call.result) != call.result_hash:
        raise ProvenanceError("the result does not match the signed result hash", seq=row.seq)
    # 6. payload
    arguments: Any = None
    texts: dict[str, list[str]] | None = None
    forgotten_at: int | None = None
    try:
        # The ledger's own payload check (ledger/verify.py), as its audit makes it.
        erased = check_payload(entry, record.payload, record.salt)
    except VerificationError:
        raise ProvenanceError("the payload does not match its signed hash", seq=row.seq) from None
    if record.payload is not None and record.salt == RESIDUE_SALT:
        # What a forget left of the payload (checked text by text above): the texts it
        # did not forget; no arguments stay.
        forgotten_at = await store.redacted_by(row.seq)
        if forgotten_at is None:
            raise ProvenanceError("the payload was cut and no signed entry erased it", seq=row.seq)
        texts = decode_residue(record.payload)
    elif record.payload is not None:
        try:
            payload = decode_tool_call_payload(record.payload)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            raise ProvenanceError("the payload is malformed", seq=row.seq) from None
        withheld = payload.arguments is None and call.error and call.input_size is not UNSET
        # A failed call keeps no arguments, a forget by filter no naming filter value
        # (calls.py): its input hash, over the arguments as sent, stands alone.
        withheld = withheld or marked_forget(call.tool, call.error, payload.arguments)
        if not withheld and input_hash(secret, payload.arguments) != call.input_hash:
            raise ProvenanceError("the arguments do not match the input hash", seq=row.seq)
        arguments, texts = payload.arguments, payload.texts
    elif erased:
        forgotten_at = await store.redacted_by(row.seq)
        if forgotten_at is None:
            raise ProvenanceError("the payload is gone and no signed entry erased it", seq=row.seq)
    # 7. texts, each erased one marked with the forget that erased it
    marks: dict[str, int] = {}
    if forgotten_at is not None:
        marks = await _erased_by(store, keys, row.seq, forgotten_at, call.result, texts)
    try:
        result = restore(call.result, texts, forgotten_at, marks)
    except ValueError as exc:
        raise ProvenanceError(str(exc), seq=row.seq) from None
    return Verified(seq=row.seq, call=call, arguments=arguments, result=result)


async def _erased_by(
    store: SqlStore,
    keys: Mapping[str, VerifyKey],
    seq: int,
    first: int,
    skeleton: Any,
    texts: Mapping[str, Any] | None,
) -> dict[str, int]:
    """For each text of ``seq`` erased after its first forget ``first``: the later forget
    that erased it. Read from the signed entries: a forget erases the texts of the items it
    lists (the rest, texts no item owns, went with the first), so a text owned by an item
    that a later signed forget redacting ``seq`` lists was erased by that forget."""
    owners = text_owners(skeleton)
    erased = {ref: o for ref, o in owners.items() if o is not None and not (texts and ref in texts)}
    if not erased:
        return {}
    wanted = set(erased.values())
    found: dict[str, int] = {}
    # Every forget that lists an item redacts that item's own entry for the first time,
    # so each later forget is a by_seq of the redactions table (checked by verify).
    rows = await store.rows(
        "SELECT DISTINCT by_seq FROM redactions WHERE by_seq > ? ORDER BY by_seq", (first,)
    )
    for (by,) in rows:
        try:
            record = await store.read(int(by))
            entry = record.entry()
        except (NotFound, msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            continue
        if entry.kind != "memory_forgotten" or seq not in entry.redacts:
            continue
        try:
            entry = _checked(record, keys)
        except ProvenanceError as exc:
            raise ProvenanceError(
                f"the forget at seq {by} does not check: {exc.detail}", seq=seq
            ) from None
        body = msgspec.json.decode(bytes(entry.body))
        items = body.get("items") if isinstance(body, dict) else None
        for item in wanted & set(items if isinstance(items, list) else ()):
            found.setdefault(item, int(by))
        if wanted <= set(found):
            break
    return {ref: found[o] for ref, o in erased.items() if o in found}


def _checked(record: Record, keys: Mapping[str, VerifyKey]) -> Entry:
    """The ledger's one entry check (format, stored hash recomputed, our key, signature)."""
    try:
        return check_entry(
            record.leaf, record.signature, keys, seq=record.seq, stored_hash=record.leaf_hash
        )
    except VerificationError as exc:
        raise ProvenanceError(str(exc), seq=record.seq) from None


def _signed_call(record: Record, keys: Mapping[str, VerifyKey]) -> tuple[ToolCall, Entry]:
    # 3. a memory_tool_call signed by one of our keys
    entry = _checked(record, keys)
    if entry.kind != TOOL_CALL:
        raise ProvenanceError(f"seq {record.seq} is not a memory_tool_call", seq=record.seq)
    try:
        return decode_tool_call(bytes(entry.body)), entry
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ProvenanceError("the body is not a tool call", seq=record.seq) from None


# -- the memo table against the log ---------------------------------------------------------


class _CallHead(msgspec.Struct, frozen=True):
    """The fields of a ``memory_tool_call`` body that place it (the rest is not decoded)."""

    run_id: str
    step: int
    memo_key: str
    supersedes: int | None
    key: str | None = None


_head = msgspec.json.Decoder(_CallHead)


def _as_head(body: Any) -> _CallHead:
    return msgspec.convert(body, _CallHead)


class _Steps:
    """The signed calls of a stretch of the log, by (run, step)."""

    def __init__(self) -> None:
        self.calls = 0
        self.by_step: dict[tuple[str, int], list[int]] = {}
        self.supersedes: dict[int, int] = {}  # superseding seq -> superseded seq
        self.keys: dict[int, str] = {}  # seq -> call key, for keyed calls
        self.first_error: VerificationError | None = None

    def add(
        self, record: Record, run_id: str | None, entry: Entry | None = None, body: Any = None
    ) -> None:
        try:
            entry = record.entry() if entry is None else entry
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            return  # the ledger's own verify names an entry that does not decode
        if entry.kind != TOOL_CALL:
            return
        try:
            # The decoded body, when given, is converted as strictly as the bytes decode.
            head = _head.decode(bytes(entry.body)) if body is None else _as_head(body)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            # Not the recorder's (a host may append any kind through the ledger): it places
            # itself at no run and step, and check_memo refuses it as a memo.
            return
        if run_id is not None and head.run_id != run_id:
            return
        self.calls += 1
        if head.memo_key != memo_key(head.run_id, head.step):
            self._fail("a signed call's memo key is not the key of its run and step", record.seq)
            return
        self.by_step.setdefault((head.run_id, head.step), []).append(record.seq)
        if head.supersedes is not None:
            self.supersedes[record.seq] = head.supersedes
        if head.key is not None:
            self.keys[record.seq] = head.key

    def _fail(self, message: str, seq: int) -> None:
        if self.first_error is None:
            self.first_error = VerificationError(message, seq=seq, step="memo")

    def current(self) -> dict[tuple[str, int], int]:
        """Each step's one unsuperseded entry; raises when the log holds two or none."""
        if self.first_error is not None:
            raise self.first_error
        step_of = {seq: key for key, seqs in self.by_step.items() for seq in seqs}
        for new, old in sorted(self.supersedes.items()):
            if step_of.get(old) != step_of[new] or old >= new:
                raise VerificationError(
                    f"the call at seq {new} supersedes seq {old}, "
                    "which is not an earlier call of its run and step",
                    seq=new,
                    step="memo",
                )
        gone = set(self.supersedes.values())
        found: dict[tuple[str, int], int] = {}
        for (run, step), seqs in sorted(self.by_step.items(), key=lambda kv: kv[1][0]):
            live = [s for s in seqs if s not in gone]
            if len(live) != 1:
                # Each replacement names what it replaces, so a chain leaves exactly one.
                raise VerificationError(
                    f"step {step} of run {run!r} has {len(live)} unsuperseded signed calls "
                    f"(seqs {', '.join(map(str, live))}): a step was run live again",
                    seq=live[-1] if live else seqs[-1],
                    step="memo",
                )
            found[(run, step)] = live[0]
        return found


async def _memo_rows(store: SqlStore, run_id: str | None) -> list[MemoRow] | None:
    where, params = ("WHERE run_id = ? ", (run_id,)) if run_id is not None else ("", ())
    try:
        rows = await store.rows(
            f"SELECT run_id, step, memo_key, seq FROM memos {where}ORDER BY run_id, step", params
        )
    except StorageError:
        return None  # a bare log, made without the replay tables
    return [MemoRow(run_id=r[0], step=int(r[1]), memo_key=r[2], seq=int(r[3])) for r in rows]


class _Derived:
    """What the other derived tables should hold, read off the signed entries."""

    def __init__(self) -> None:
        self.redactions: dict[int, int] = {}  # redacted seq -> the first entry redacting it
        self.starts: dict[str, int] = {}  # run id -> its first signed run_started entry

    def add(self, record: Record, entry: Entry, body: Any = None) -> None:
        for earlier in entry.redacts:
            self.redactions.setdefault(earlier, record.seq)
        if entry.kind == RUN_STARTED:
            try:
                body = msgspec.json.decode(bytes(entry.body)) if body is None else body
            except (msgspec.DecodeError, UnicodeDecodeError):
                return
            if isinstance(body, dict) and isinstance(body.get("run_id"), str):
                self.starts.setdefault(body["run_id"], record.seq)


class DerivedCheck:
    """The derived tables' check, fed entry by entry: :meth:`add` each signed entry in seq
    order (``Ledger.verify``'s ``observe``, so the audit scans and decodes the log once),
    then :meth:`check` the tables against what they said."""

    def __init__(self) -> None:
        self._steps = _Steps()
        self._derived = _Derived()
        self._mentions = MentionsWanted()

    def add(self, record: Record, entry: Entry) -> None:
        """Note one entry (decoded once for all three collectors)."""
        try:
            body = msgspec.json.decode(bytes(entry.body))
        except (msgspec.DecodeError, UnicodeDecodeError):
            return  # the ledger's own verify names a body that is not JSON
        self._steps.add(record, None, entry, body)
        self._derived.add(record, entry, body)
        self._mentions.add(record, entry, body)

    async def check(self, store: SqlStore) -> None:
        """Raise :class:`VerificationError` unless the tables hold what the entries say."""
        steps, derived = self._steps, self._derived
        # 2. a replacement supersedes an earlier call of its own step; 3. one current call
        # a step
        current = steps.current()
        # 3b. a call key names one step of its run: a key at two current calls is ambiguous
        _check_keys(steps, current)
        await _check_memo_rows(store, current)
        # 6. each run's row starts at the run's first signed run_started entry, and every
        # started run has its row (a resume reads the run's calls from there on)
        await _check_runs(store, derived.starts)
        # 7. the redactions table is exactly what the signed ``redacts`` headers say
        # (replay marks forgotten texts with it, export leaves those payloads out)
        found = dict(await store.rows("SELECT seq, by_seq FROM redactions ORDER BY seq"))
        for seq in sorted(set(found) | set(derived.redactions)):
            if found.get(seq) != derived.redactions.get(seq):
                raise VerificationError(
                    f"the redactions table says seq {seq} was erased by {found.get(seq)}, "
                    f"the signed entries say by {derived.redactions.get(seq)}",
                    seq=seq,
                    step="redaction",
                )
        # 8. the mentions index, through which a forget finds the payloads it erases
        await self._mentions.check(store)


async def verify_derived(store: SqlStore, size: int | None = None) -> None:
    """Check the tables derived from the first ``size`` signed entries against them:
    the memo table, the runs' starts and the redactions.

    Run after the ledger's own verify (which checked every signature), so the
    entries are trusted here and only what they say is compared. Returns None
    or raises :class:`VerificationError` (step ``memo``, ``runs`` or
    ``redaction``).
    """
    total = (await store.head()).size if size is None else size
    check = DerivedCheck()
    # 1. every signed call decodes and carries the memo key of its run and step. One scan
    # feeds every check (the mentions' too), each entry decoded once.
    async for record in store.scan(0, total):
        try:
            entry = record.entry()
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            continue  # the ledger's own verify names an entry that does not decode
        check.add(record, entry)
    await check.check(store)


def _check_keys(steps: _Steps, current: Mapping[tuple[str, int], int]) -> None:
    seen: dict[tuple[str, str], int] = {}
    for (run, step), seq in sorted(current.items()):
        key = steps.keys.get(seq)
        if key is None:
            continue
        if (run, key) in seen:
            raise VerificationError(
                f"call key {key!r:.80} of run {run!r} is recorded at steps "
                f"{seen[run, key]} and {step}",
                seq=seq,
                step="memo",
            )
        seen[run, key] = step


async def _check_runs(store: SqlStore, starts: dict[str, int]) -> None:
    try:
        rows = await store.rows("SELECT run_id, started_seq FROM runs ORDER BY run_id")
    except StorageError:
        rows = []  # a bare log, made without the replay tables
    found = {str(r[0]): int(r[1]) for r in rows}
    for run_id in sorted(set(found) | set(starts)):
        if found.get(run_id) != starts.get(run_id):
            raise VerificationError(
                f"run {run_id!r} starts at seq {found.get(run_id)} in the runs table, "
                f"at {starts.get(run_id)} in the signed entries",
                seq=starts.get(run_id, found.get(run_id)),
                step="runs",
            )


async def _check_memo_rows(store: SqlStore, current: dict[tuple[str, int], int]) -> None:
    rows = await _memo_rows(store, None)
    if rows is None:
        if current:
            raise VerificationError(
                "the log records tool calls but the store has no memo table", step="memo"
            )
        rows = []
    seen: set[tuple[str, int]] = set()
    for row in rows:
        where = f"the memo of run {row.run_id!r} step {row.step}"
        # 4. each row sits at its own key and points at its step's current signed call
        if row.memo_key != memo_key(row.run_id, row.step):
            raise VerificationError(
                f"{where} has another step's memo key", seq=row.seq, step="memo"
            )
        wanted = current.get((row.run_id, row.step))
        if wanted is None:
            raise VerificationError(
                f"{where} points at seq {row.seq}, but the log has no signed call for that step",
                seq=row.seq,
                step="memo",
            )
        if row.seq != wanted:
            raise VerificationError(
                f"{where} points at seq {row.seq}, not at the step's current call {wanted}",
                seq=row.seq,
                step="memo",
            )
        seen.add((row.run_id, row.step))
    # 5. no recorded step lacks its memo
    missing = sorted(set(current) - seen, key=lambda key: current[key])
    if missing:
        run, step = missing[0]
        raise VerificationError(
            f"step {step} of run {run!r} is recorded (seq {current[missing[0]]}) but has no "
            f"memo row ({len(missing)} such steps): a resume would run it live again",
            seq=current[missing[0]],
            step="memo",
        )


class Reconciled(msgspec.Struct, frozen=True, kw_only=True):
    """A resuming run's memo table, held to its signed calls."""

    recorded: frozenset[int]  # steps with a memo row now
    restored: tuple[int, ...]  # steps whose row was put back from the log
    current: dict[int, int]  # each recorded step's current signed call (its seq)
    keyed: dict[str, int] = msgspec.field(
        default_factory=dict
    )  # each call key's step, from the current signed calls


async def reconcile_memos(
    store: SqlStore,
    keys: Mapping[str, VerifyKey],
    run_id: str,
    holder: str,
    new: bool,
) -> Reconciled:
    """The steps of a resuming run that are recorded, and those whose memo was put back.

    The log is read from the run's signed ``run_started`` entry on. A step
    with a signed, current call but no memo row, or a row pointing at a call
    that a later signed call of the step superseded, gets its row again
    (pointing at the current call); everything else is left to
    :func:`check_memo`, which checks the entry in full before its result is
    used. Putting a row back is safe because a memo holds no information of
    its own: it only points at the signed entry, which is checked as if the
    row had never been lost. Two current calls for one step raise
    :class:`ProvenanceError`: the log itself is ambiguous.
    """
    rows = await _memo_rows(store, run_id) or []
    if new:
        return Reconciled(recorded=frozenset(row.step for row in rows), restored=(), current={})
    # 1. the run's start, signed: nothing of a run comes before its run_started entry
    start = await _run_start(store, keys, run_id)
    # 2. the run's signed calls from there, one current call a step
    steps = _Steps()
    async for record in store.scan(start, (await store.head()).size):
        steps.add(record, run_id)
    try:
        current = steps.current()
    except VerificationError as exc:
        raise ProvenanceError(str(exc), seq=exc.seq) from None
    by_step = {row.step: row for row in rows}
    step_of = {seq: step for (_, step), seqs in steps.by_step.items() for seq in seqs}
    restored: list[MemoRow] = []
    for (_, step), seq in sorted(current.items()):
        row = by_step.get(step)
        # 3. a row rolled back to a call its step's current one superseded: the signed
        # supersedes chain names the current call, which check_memo cannot tell apart.
        # Any other row that the log does not back is left to check_memo, which fails
        # it loudly when the step is replayed (and revalidate recovers from that).
        stale = row is not None and row.seq != seq and step_of.get(row.seq) == step
        # 4. a recorded step that lost its row gets it back
        if row is None or stale:
            call, _ = _signed_call(await store.read(seq), keys)
            restored.append(MemoRow(run_id=run_id, step=step, memo_key=call.memo_key, seq=seq))
    signed = {step: seq for (_, step), seq in current.items()}
    keyed = _keyed(steps, signed)
    if not restored:
        return Reconciled(recorded=frozenset(by_step), restored=(), current=signed, keyed=keyed)

    def command(txn: WriteTxn) -> None:
        check_holder(txn, run_id, holder)
        for row in restored:
            put_memo(txn, row)

    await store.run(command)
    return Reconciled(
        recorded=frozenset(by_step) | {row.step for row in restored},
        restored=tuple(row.step for row in restored),
        current=signed,
        keyed=keyed,
    )


def _keyed(steps: _Steps, signed: Mapping[int, int]) -> dict[str, int]:
    """Each call key's step; a key the current calls of two steps carry is ambiguous."""
    keyed: dict[str, int] = {}
    for step, seq in sorted(signed.items()):
        key = steps.keys.get(seq)
        if key is None:
            continue
        if key in keyed:
            raise ProvenanceError(
                f"call key {key!r:.80} is recorded at steps {keyed[key]} and {step}: "
                "a keyed call was run live twice",
                seq=seq,
            )
        keyed[key] = step
    return keyed


async def _run_start(store: SqlStore, keys: Mapping[str, VerifyKey], run_id: str) -> int:
    rows = await store.rows("SELECT started_seq FROM runs WHERE run_id = ?", (run_id,))
    if not rows:
        raise ProvenanceError(f"run {run_id!r} has no start in the runs table")
    seq = int(rows[0][0])
    try:
        record = await store.read(seq)
    except NotFound:
        raise ProvenanceError(f"the run's start seq {seq} is not in the log", seq=seq) from None
    try:
        entry = _checked(record, keys)
    except ProvenanceError as exc:
        raise ProvenanceError(f"the run's start does not check: {exc.detail}", seq=seq) from None
    body = msgspec.json.decode(bytes(entry.body))
    # A start moved later would hide the calls before it: it must be this run's own.
    if entry.kind != RUN_STARTED or not isinstance(body, dict) or body.get("run_id") != run_id:
        raise ProvenanceError(f"seq {seq} is not the signed start of run {run_id!r}", seq=seq)
    return seq
