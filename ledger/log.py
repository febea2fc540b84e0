"""The ledger facade: append, read, prove and verify over a log store and its keys."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .checkpoint import parse_checkpoint
from .cosignature import parse_cosigner_vkey, require_cosignatures
from .entry import check_mention, make_draft
from .errors import InvalidRequest, NotFound, VerificationError
from .merkle import consistency_proof, inclusion_proof, stored_hash_count, tree_hash
from .note import NoteSigner, VerifierKey, parse_vkey, split_note
from .store import Appended, Command, Head, Record, SqlStore, StoredCheckpoint, WriteTxn
from .transparency import (
    CheckpointPolicy,
    ConsistencyProof,
    InclusionProof,
    cut_checkpoint,
    tlog_proof,
)
from .verify import LedgerVerifier, Observe, VerifySummary

__all__ = ["KEY_ROTATED", "Ledger", "Progress", "TrustArg", "trusted_keys"]

T = TypeVar("T")

KEY_ROTATED = "key_rotated"

Progress = Callable[[int, int], None]
"""Called as verification goes with (entries done, entries in all)."""

TrustArg = str | VerifierKey | Sequence[str | VerifierKey] | None

#: Times the stray-row check follows a log that grows while it looks.
_STRAY_TRIES = 8
_CHUNK = 4096


def trusted_keys(trust: TrustArg, default: VerifierKey | None) -> list[VerifierKey]:
    """Turn what a caller passes as ``trust`` into keys; None trusts ``default``."""
    if trust is None:
        if default is None:
            raise InvalidRequest("`trust` is required: pass the ledger's vkey")
        return [default]
    if isinstance(trust, str | VerifierKey):
        items: Sequence[object] = [trust]
    elif isinstance(trust, list | tuple):
        items = trust
    else:
        raise InvalidRequest(
            f"`trust` must be vkey text or a list of them, not {type(trust).__name__}"
        )
    keys: list[VerifierKey] = []
    for item in items:
        if isinstance(item, VerifierKey):
            keys.append(item)
        elif isinstance(item, str):
            try:
                keys.append(parse_vkey(item.strip()))
            except InvalidRequest as exc:
                raise InvalidRequest(f"`trust`: {exc}") from exc
        else:
            raise InvalidRequest(f"`trust` must be vkey text, not {type(item).__name__}")
    if not keys:
        raise InvalidRequest("`trust` names no key")
    return keys


class Ledger:
    """The signed, append-only log of one memseal instance."""

    def __init__(
        self,
        store: SqlStore,
        trust_root: VerifierKey | None,
        policy: CheckpointPolicy | None = None,
    ) -> None:
        """``trust_root`` is the ledger's first key, what ``verify()`` trusts by default;
        None (with no policy): an auditor's read-only ledger, verified against a given key."""
        self.store = store
        self._trust_root = trust_root
        self.policy = policy
        self._timer: asyncio.Task[None] | None = None
        if policy is not None and policy.every is not None:
            store.add_commit_hook(self._checkpoint_every)

    @property
    def signer(self) -> NoteSigner:
        """The key the store signs new entries with."""
        return self.store.signer

    @property
    def trust_root(self) -> VerifierKey:
        """The key whose history reads are checked against; a read-only ledger has none."""
        if self._trust_root is None:
            raise InvalidRequest("this read-only ledger has no trust root; pass `trust`")
        return self._trust_root

    def start(self) -> None:
        """Start cutting checkpoints every ``policy.interval`` seconds (once opened)."""
        if self.policy is not None and self.policy.interval is not None and self._timer is None:
            self._timer = asyncio.create_task(self._checkpoint_timer(self.policy.interval))

    async def close(self) -> None:
        """Stop the checkpoint timer, then close the store (queued commits finish first)."""
        if self._timer is not None:
            self._timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timer
        await self.store.close()

    # -- appending ------------------------------------------------------------

    async def append(
        self,
        kind: str,
        body: Mapping[str, Any],
        payload: Any = None,
        *,
        mentions: Sequence[str] = (),
        redacts: Sequence[int] = (),
    ) -> Appended:
        """Append one signed entry; returns once it is durable.

        ``body`` is structure (ids, kinds, hashes); ``payload`` anything a
        person typed, committed by a salted hash and erasable later by an
        entry that lists its seq in ``redacts``. ``mentions`` indexes the
        ids the payload mentions, so a later forget can find it.
        """
        draft = make_draft(kind, body, payload, mentions=mentions, redacts=redacts)

        def command(txn: WriteTxn) -> Appended:
            return txn.append(draft)

        return await self.store.run(command)

    async def run(self, command: Command[T]) -> T:
        """Run a unit of work in the writer (the layers above add their rows here)."""
        return await self.store.run(command)

    # -- reading --------------------------------------------------------------

    async def head(self) -> Head:
        """The log's size and last leaf hash, as of the last commit."""
        return await self.store.head()

    async def size(self) -> int:
        """How many entries the log holds, as of the last commit."""
        return (await self.store.head()).size

    async def read(self, seq: int) -> Record:
        """The entry at ``seq`` with its payload and signature; NotFound past the end."""
        return await self.store.read(seq)

    def scan(self, start: int = 0, stop: int | None = None) -> AsyncIterator[Record]:
        """The entries from ``start`` up to ``stop`` (the end when None), in order."""
        return self.store.scan(start, stop)

    async def mentioning(self, ref: str) -> list[int]:
        """Seqs whose payload mentions ``ref`` (an id, or a keyed facet ref)."""
        check_mention(ref)  # the same rule as at append: the same answer on every store
        return await self.store.mentioning(ref)

    # -- checkpoints and proofs -------------------------------------------------

    def _origin(self) -> str:
        if self.policy is None:
            raise InvalidRequest("this ledger is open read-only; it signs no checkpoints")
        return self.policy.origin

    @property
    def origin(self) -> str:
        """The log's name in its checkpoints."""
        return self._origin()

    def _checkpoint_every(self, txn: WriteTxn) -> None:
        assert self.policy is not None and self.policy.every is not None
        latest = txn.latest_checkpoint()
        if txn.size - (0 if latest is None else latest.size) >= self.policy.every:
            cut_checkpoint(txn, self.policy.origin, [txn.signer])

    async def _checkpoint_timer(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            latest = await self.latest_checkpoint()
            if (await self.size()) > (0 if latest is None else latest.size):
                await self.checkpoint()

    async def checkpoint(self) -> str:
        """Cut (or return, if the log has not grown) a signed checkpoint: C2SP note text."""
        origin = self._origin()

        def command(txn: WriteTxn) -> StoredCheckpoint:
            return cut_checkpoint(txn, origin, [txn.signer])

        return (await self.store.run(command)).note

    async def latest_checkpoint(self) -> StoredCheckpoint | None:
        """The newest signed checkpoint, or None before the first one."""
        stored = await self.store.checkpoints()
        return stored[-1] if stored else None

    async def checkpoints(self) -> list[StoredCheckpoint]:
        """Every signed checkpoint, oldest first."""
        return await self.store.checkpoints()

    async def root(self, size: int | None = None) -> bytes:
        """The Merkle root of the first ``size`` entries (the whole log when None)."""
        n = await self._size_arg(size, "size")
        return await self.store.tree_read(lambda read: tree_hash(n, read))

    async def _size_arg(self, size: int | None, field: str) -> int:
        current = await self.size()
        if size is None:
            return current
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= current:
            raise InvalidRequest(f"`{field}` must be a tree size from 0 to {current}, not {size!r}")
        return size

    async def inclusion_proof(self, seq: int, size: int | None = None) -> InclusionProof:
        """Proof that entry ``seq`` is in the tree of ``size`` entries (default: all)."""
        n = await self._size_arg(size, "size")
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < n:
            raise InvalidRequest(f"`seq` must be an entry of the tree of size {n}, not {seq!r}")

        def work(read: Callable[[Sequence[int]], list[bytes]]) -> InclusionProof:
            return InclusionProof(
                seq=seq,
                size=n,
                leaf_hash=read([_leaf_index(seq)])[0],
                root=tree_hash(n, read),
                hashes=tuple(inclusion_proof(seq, n, read)),
            )

        return await self.store.tree_read(work)

    async def consistency_proof(self, old: int, new: int | None = None) -> ConsistencyProof:
        """Proof that the tree of ``old`` entries is a prefix of the tree of ``new``."""
        n = await self._size_arg(new, "to")
        if isinstance(old, bool) or not isinstance(old, int) or not 1 <= old <= n:
            raise InvalidRequest(f"`from` must be a tree size from 1 to {n}, not {old!r}")

        def work(read: Callable[[Sequence[int]], list[bytes]]) -> ConsistencyProof:
            return ConsistencyProof(
                old_size=old,
                new_size=n,
                old_root=tree_hash(old, read),
                new_root=tree_hash(n, read),
                hashes=tuple(consistency_proof(old, n, read)),
            )

        return await self.store.tree_read(work)

    async def tlog_proof(self, seq: int, size: int | None = None) -> str:
        """The C2SP tlog-proof of entry ``seq`` against a signed checkpoint.

        Without ``size``, against the newest checkpoint covering ``seq`` (cut
        now if none does); with ``size``, against the stored checkpoint of
        exactly that size.
        """
        stored = await self.store.checkpoints()
        if size is None:
            covering = [c for c in stored if c.size > seq]
            if covering:
                checkpoint = covering[-1]
            else:
                await self.checkpoint()
                checkpoint = (await self.store.checkpoints())[-1]
        else:
            exact = [c for c in stored if c.size == size]
            if not exact:
                sizes = ", ".join(str(c.size) for c in stored[-5:]) or "none yet"
                raise NotFound(f"no checkpoint of size {size} was signed (newest: {sizes})")
            checkpoint = exact[0]
        proof = await self.inclusion_proof(seq, checkpoint.size)
        return tlog_proof(proof, checkpoint.note)

    # -- key rotation -----------------------------------------------------------

    async def rotate_key(self, new: NoteSigner) -> Appended:
        """Hand the log over to ``new``: a ``key_rotated`` entry signed by the old key,
        then a checkpoint signed by both, in one transaction; later entries use ``new``."""
        origin = self._origin()
        draft = make_draft(KEY_ROTATED, {"vkey": new.verifier.text})

        def command(txn: WriteTxn) -> Appended:
            old = txn.signer
            if old.verifier == new.verifier:
                raise InvalidRequest("the new key is the key in use")
            appended = txn.append(draft)
            txn.use_signer(new)
            # Other processes on this log read it before each group (``adopt_current_key``).
            txn.execute(
                "INSERT INTO meta (key, value) VALUES ('signing_key', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (new.key_id.hex(),),
            )
            cut_checkpoint(txn, origin, [old, new])
            return appended

        return await self.store.run(command)

    # -- verification -----------------------------------------------------------

    async def verify(
        self,
        trust: TrustArg = None,
        *,
        checkpoints: Sequence[str] = (),
        witnesses: Sequence[str] = (),
        quorum: int | None = None,
        progress: Progress | None = None,
        workers: int | None = None,
        observe: Observe | None = None,
    ) -> VerifySummary:
        """Walk the whole ledger; return a summary or raise :class:`VerificationError`.

        ``trust`` is the auditor's vkey (text or parsed); None trusts this
        instance's own key, which proves integrity, not identity. Stored
        checkpoints are checked, and so are ``checkpoints`` an auditor kept
        (signed note texts): a log shorter than any of them was truncated.
        With ``witnesses`` (cosignature/v1 vkeys), each kept checkpoint must
        also carry at least ``quorum`` (default 1) valid witness cosignatures,
        and at least one must be given: a checkpoint the witnesses saw is what
        rules out a log shown differently to others. ``observe`` sees each entry
        that passed, in order (``Memory.verify`` checks the
        derived tables on this one scan).
        """
        keys = trusted_keys(trust, self._trust_root)
        if witnesses or quorum is not None:
            _check_witnessed(checkpoints, witnesses, quorum)
        count = workers if workers is not None else min(2, os.cpu_count() or 1)
        total = (await self.store.head()).size
        notes = [(c.size, c.note) for c in await self.store.checkpoints()]
        notes += [(_note_size(text), text) for text in checkpoints]
        with ThreadPoolExecutor(max(1, count), thread_name_prefix="memseal-verify") as pool:
            verifier = LedgerVerifier(
                keys, executor=pool if count > 1 else None, workers=count, observe=observe
            )
            verifier.expect_checkpoints(notes)

            await self._feed_all(verifier, total, progress)
            if verifier.size != total:
                raise VerificationError(
                    f"the log has {total} entries but only {verifier.size} could be read",
                    seq=verifier.size,
                    step="chain",
                )
            summary = verifier.finish()
        if progress is not None:
            progress(total, total)
        await self._check_rows_outside(verifier, total)
        return summary

    async def _feed_all(
        self, verifier: LedgerVerifier, total: int, progress: Progress | None
    ) -> None:
        """Read the log in chunks and feed each to ``verifier`` in order, then flush it."""
        loop = asyncio.get_running_loop()

        async def feed(records: list[Record]) -> None:
            first, last = records[0].seq, records[-1].seq
            tree = await self.store.tree_range(
                stored_hash_count(first), stored_hash_count(last + 1)
            )
            await loop.run_in_executor(None, verifier.feed, records, tree)
            if progress is not None:
                progress(verifier.size, total)

        # One chunk is checked (its per-record checks on the pool, the chunk before in
        # order on the executor) while the next is read: reading no longer waits for
        # checking, nor checking for reading. Chunks are still fed one at a time, in order.
        checking: asyncio.Task[None] | None = None
        try:
            async for chunk in self.store.scan_chunks(0, total, _CHUNK):
                if checking is not None:
                    await checking
                checking = asyncio.ensure_future(feed(chunk))
            if checking is not None:
                await checking
                checking = None
            await loop.run_in_executor(None, verifier.flush)
        finally:
            if checking is not None and not checking.done():
                checking.cancel()
                with contextlib.suppress(BaseException):
                    await checking

    async def _check_rows_outside(self, verifier: LedgerVerifier, total: int) -> None:
        """No stored row past the log's end, and no payload a signed entry redacted."""
        stray, size = await self._stray_rows(total)
        if stray:
            what, where = stray[0]
            raise VerificationError(
                f"a {what} row at {where} lies outside the log of {size} entries",
                seq=size,
                step="format",
            )
        # A residue is the part of a payload its forget kept, checked text by text above.
        still = await self.store.payloads_present(sorted(verifier.redacted - verifier.residues))
        if still:
            raise VerificationError(
                "payload is still stored although a signed entry redacted it",
                seq=still[0],
                step="redaction",
            )

    async def _stray_rows(self, size: int) -> tuple[list[tuple[str, int]], int]:
        """Rows outside the log, and the log size they lie outside of.

        The rows of entries appended while verify ran lie past the size it verified but
        belong to the log (a live ledger keeps growing): only rows past the log's size now
        are stray. Rows planted in that grown span before its appends are left to the next
        verify, as any row inside the log is: a tree or payload row there would have failed
        its append, a payload at an entry committing to none fails "payload hash".
        """
        for _ in range(_STRAY_TRIES):
            stray = await self.store.stray_rows(size)
            grown = (await self.store.head()).size if stray else size
            if grown == size:
                return stray, size
            size = grown
        # A log that grew at every look: one last one, against the size last read.
        return await self.store.stray_rows(size), size


def _leaf_index(seq: int) -> int:
    # The leaf hash of record seq is the first stored hash it wrote.
    return stored_hash_count(seq)


def _check_witnessed(
    checkpoints: Sequence[str], witnesses: Sequence[str], quorum: int | None
) -> None:
    if not witnesses:
        raise InvalidRequest("`quorum` needs `witnesses`: the witness vkeys you trust")
    if not checkpoints:
        raise InvalidRequest(
            "`witnesses` needs `checkpoints`: the cosigned checkpoints to hold the log to"
        )
    keys = [parse_cosigner_vkey(w) if isinstance(w, str) else w for w in witnesses]
    for note in checkpoints:
        _note_size(note)
        require_cosignatures(note, keys, 1 if quorum is None else quorum)


def _note_size(note: object) -> int:
    if not isinstance(note, str):
        raise InvalidRequest(f"`checkpoints` holds signed note text, not {type(note).__name__}")
    try:
        text, _ = split_note(note)
        return parse_checkpoint(text).size
    except InvalidRequest as exc:
        raise InvalidRequest(f"`checkpoints`: not a signed checkpoint: {exc}") from exc
