"""Following a tiled log with nothing but its files: proofs from tiles, and the full check.

:class:`TileHashReader` answers stored-hash reads from fetched hash tiles (as Go's
``tlog.TileHashReader`` does), so the proofs of :mod:`.merkle` come out of any
static mirror. :func:`verify_tiles` reads a whole tiled log (checkpoint, entry
bundles, signature bundles, hash tiles) and checks it with the very
:class:`~.verify.LedgerVerifier` ``memseal verify`` runs on a database: every
entry's format, chain, signature along the key history and the checkpoint's
signature and root; then that each hash tile holds what the entries make, and,
given a checkpoint kept from before, a consistency proof built from the tiles.

``fetch(path)`` returns a file's bytes (``path`` below the log's prefix, e.g.
``tile/0/000``) and raises :class:`NotFound` when the file is absent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor

import msgspec

from .checkpoint import Checkpoint, parse_checkpoint
from .entry import leaf_hash
from .errors import InvalidRequest, NotFound, VerificationError
from .merkle import consistency_proof, split_stored_hash_index, verify_consistency
from .note import VerifierKey, open_note, split_note
from .store import Record
from .tiles import (
    ENTRIES,
    HASHES,
    SIGNATURES,
    TILE_HEIGHT,
    TILE_WIDTH,
    TileRef,
    decode_bundle,
    decode_hash_tile,
    decode_signatures,
    max_file_size,
    subtree_root,
    tile_path,
)
from .transparency import ConsistencyProof
from .verify import LedgerVerifier, VerifySummary

__all__ = ["Fetch", "TileHashReader", "TilesSummary", "fetch_checkpoint", "verify_tiles"]

Fetch = Callable[[str], bytes]
"""Reads one file of a tiled log by its path below the prefix; NotFound when absent."""

_STEP = "tiles"


class TilesSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`verify_tiles` checked: the ledger's summary, the checkpoint it verified
    and, with a kept checkpoint, the consistency proof from it (built from the tiles)."""

    summary: VerifySummary
    checkpoint: str
    tiles: int
    consistency: ConsistencyProof | None = None

    def line(self) -> str:
        """The one line ``memseal verify --tiles`` prints on success."""
        grew = ""
        if self.consistency is not None:
            grew = f"; consistent with the kept checkpoint of size {self.consistency.old_size}"
        return f"{self.summary.line()}; {self.tiles} tiles checked{grew}"


def _bad(message: str, seq: int | None = None) -> VerificationError:
    return VerificationError(message, seq=seq, step=_STEP)


def _fetch(fetch: Fetch, ref: TileRef) -> bytes:
    path = tile_path(ref)
    try:
        data = fetch(path)
    except NotFound as exc:
        raise _bad(f"{path} is missing: {exc}") from exc
    _check_size(path, data)
    return data


def _check_size(path: str, data: bytes) -> None:
    # The fetchers memseal ships stop reading at this bound; this catches any other.
    if len(data) > max_file_size(path):
        raise _bad(f"{path} has {len(data):,} bytes, more than it can hold")


def fetch_checkpoint(fetch: Fetch) -> tuple[str, Checkpoint]:
    """The log's ``checkpoint`` file and its parsed body (its signature is NOT checked
    here: :func:`verify_tiles` checks it with the keys in force at its size)."""
    try:
        raw = fetch("checkpoint")
    except NotFound as exc:
        raise _bad(f"checkpoint is missing: {exc}") from exc
    _check_size("checkpoint", raw)
    try:
        note = raw.decode("utf-8")
        text, _ = split_note(note)
        return note, parse_checkpoint(text)
    except (UnicodeDecodeError, InvalidRequest) as exc:
        raise VerificationError(f"not a signed checkpoint: {exc}", step="checkpoint") from exc


class TileHashReader:
    """A :data:`~.merkle.HashReader` over the hash tiles of the tree of ``size`` leaves.

    A stored hash at Merkle level ``8T + r`` is the root of ``2**r`` consecutive hashes
    of a level-T tile; the tiles a tree of ``size`` has (full, or partial at ``size``)
    are fetched once each and kept.
    """

    def __init__(self, size: int, fetch: Fetch) -> None:
        self._size = size
        self._fetch = fetch
        self._tiles: dict[tuple[int, int], list[bytes]] = {}
        self.fetched = 0

    def tile(self, level: int, index: int) -> list[bytes]:
        """The hashes of hash tile ``(level, index)`` as the tree of ``size`` has it."""
        key = (level, index)
        if key not in self._tiles:
            full = TileRef(kind=HASHES, index=index, level=level)
            width = (
                TILE_WIDTH
                if full.covered_by(self._size)
                else (self._size >> (TILE_HEIGHT * level)) - index * TILE_WIDTH
            )
            if not 0 < width <= TILE_WIDTH:
                raise NotFound(f"the tree of {self._size} has no hash tile {level}/{index}")
            ref = TileRef(kind=HASHES, index=index, width=width, level=level)
            try:
                self._tiles[key] = decode_hash_tile(_fetch(self._fetch, ref), width)
            except InvalidRequest as exc:
                raise _bad(f"{tile_path(ref)}: {exc}") from exc
            self.fetched += 1
        return self._tiles[key]

    def __call__(self, indexes: Sequence[int]) -> list[bytes]:
        out = []
        for stored in indexes:
            level, n = split_stored_hash_index(stored)
            tier, rise = divmod(level, TILE_HEIGHT)
            first = n << rise
            hashes = self.tile(tier, first // TILE_WIDTH)
            span = hashes[first % TILE_WIDTH : first % TILE_WIDTH + (1 << rise)]
            if len(span) != 1 << rise:
                raise NotFound(f"stored hash {stored} lies outside the tree of {self._size}")
            out.append(subtree_root(span))
        return out


class _TileCheck:
    """Rolls the leaf hashes up level by level and compares each hash tile with them."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._pending: list[list[bytes]] = []
        self._done: list[int] = []  # full tiles compared, per level
        self.checked = 0

    def push(self, level: int, digest: bytes) -> None:
        if level == len(self._pending):
            self._pending.append([])
            self._done.append(0)
        self._pending[level].append(digest)
        if len(self._pending[level]) == TILE_WIDTH:
            hashes, self._pending[level] = self._pending[level], []
            self._compare(TileRef(kind=HASHES, index=self._done[level], level=level), hashes)
            self._done[level] += 1
            self.push(level + 1, subtree_root(hashes))

    def finish(self) -> None:
        for level, hashes in enumerate(self._pending):
            if hashes:
                ref = TileRef(kind=HASHES, index=self._done[level], width=len(hashes), level=level)
                self._compare(ref, hashes)

    def _compare(self, ref: TileRef, hashes: list[bytes]) -> None:
        if _fetch(self._fetch, ref) != b"".join(hashes):
            first = ref.index * TILE_WIDTH << (TILE_HEIGHT * ref.level)
            raise _bad(f"{tile_path(ref)} differs from the hashes the entries make", seq=first)
        self.checked += 1


def _records(fetch: Fetch, ref: TileRef) -> list[Record]:
    first = ref.index * TILE_WIDTH
    try:
        leaves = decode_bundle(_fetch(fetch, ref), ref.width)
        signed = TileRef(kind=SIGNATURES, index=ref.index, width=ref.width)
        signatures = decode_signatures(_fetch(fetch, signed), ref.width)
    except InvalidRequest as exc:
        raise _bad(f"{tile_path(ref)}: {exc}", seq=first) from exc
    return [
        Record(
            seq=first + i,
            leaf=leaf,
            leaf_hash=leaf_hash(leaf),
            signature=signature,
            salt=None,
            payload=None,
        )
        for i, (leaf, signature) in enumerate(zip(leaves, signatures, strict=True))
    ]


def _check_signed(note: str, trusted: Sequence[VerifierKey]) -> None:
    """Refuse a checkpoint a trusted key signed badly before anything is sized by it.

    One signed only by keys the auditor does not trust yet (a key handed over by a
    ``key_rotated`` entry) waits for the walk, which checks it with the keys in force at
    its size: the walk fetches one bundle at a time, so a forged size costs no more than
    the bundles the mirror really holds, plus one.
    """
    ids = {(key.name, key.key_id) for key in trusted}
    if not any((sig.name, sig.key_id) in ids for sig in split_note(note)[1]):
        return
    try:
        open_note(note, trusted)
    except VerificationError as exc:
        raise VerificationError(f"checkpoint does not verify: {exc}", step="checkpoint") from exc


def _bundles(size: int) -> Iterator[TileRef]:
    """The entry bundles of a tree of ``size`` leaves, lazily, in order."""
    for index in range((size + TILE_WIDTH - 1) // TILE_WIDTH):
        yield TileRef(kind=ENTRIES, index=index, width=min(TILE_WIDTH, size - index * TILE_WIDTH))


def verify_tiles(
    fetch: Fetch,
    trusted: Sequence[VerifierKey],
    *,
    since: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    executor: Executor | None = None,
    workers: int = 1,
) -> TilesSummary:
    """Check a tiled log from its files alone; raise :class:`VerificationError` naming the
    first bad seq and step, or return what was checked.

    ``since`` is a signed checkpoint kept from before: it must be signed by a key in force
    at its size, name the root of the entries' first ``size``, and be consistent with the
    log's checkpoint by a proof built from the hash tiles.
    """
    note, checkpoint = fetch_checkpoint(fetch)
    _check_signed(note, trusted)
    kept: Checkpoint | None = None
    verifier = LedgerVerifier(trusted, executor=executor, workers=workers, payloads=False)
    expected = [(checkpoint.size, note)]
    if since is not None:
        try:
            kept = parse_checkpoint(split_note(since)[0])
        except InvalidRequest as exc:
            raise VerificationError(f"the kept checkpoint: {exc}", step="checkpoint") from exc
        if kept.origin != checkpoint.origin:
            raise VerificationError(
                f"the kept checkpoint is of log {kept.origin!r}, the tiles of "
                f"{checkpoint.origin!r}",
                step="checkpoint",
            )
        expected.append((kept.size, since))
    verifier.expect_checkpoints(expected)
    tiles = _TileCheck(fetch)
    for ref in _bundles(checkpoint.size):
        records = _records(fetch, ref)
        verifier.feed(records)
        for record in records:
            tiles.push(0, record.leaf_hash)
        if progress is not None:
            progress(ref.end, checkpoint.size)
    # Raises on a kept checkpoint larger than the tiles' tree: the log was truncated.
    summary = verifier.finish()
    tiles.finish()
    proof = None
    if kept is not None and kept.size > 0:
        reader = TileHashReader(checkpoint.size, fetch)
        hashes = consistency_proof(kept.size, checkpoint.size, reader)
        verify_consistency(kept.size, checkpoint.size, kept.root, checkpoint.root, hashes)
        proof = ConsistencyProof(
            old_size=kept.size,
            new_size=checkpoint.size,
            old_root=kept.root,
            new_root=checkpoint.root,
            hashes=tuple(hashes),
        )
    return TilesSummary(summary=summary, checkpoint=note, tiles=tiles.checked, consistency=proof)
