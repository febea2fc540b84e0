"""The log as static tiles: C2SP ``tlog-tiles`` paths, hash tiles and entry bundles.

A tiled log is a handful of plain files any static host can serve (see
https://c2sp.org/tlog-tiles and docs/formats.md):

* ``checkpoint``: the newest signed checkpoint note;
* ``tile/<L>/<N>[.p/<W>]``: hash tiles of height 8. Tile ``(L, N)`` holds the
  256 hashes ``MTH(D[(N*256 + i) * 256**L : (N*256 + i + 1) * 256**L])``, which are
  exactly memseal's stored hashes at Merkle level ``8L`` (see :mod:`.merkle`), so
  a tile is one read of 256 stored rows and never a recomputation;
* ``tile/entries/<N>[.p/<W>]``: entry bundles, each entry's bytes (what memseal
  hashes as the leaf) behind a big-endian uint16 length;
* ``signatures/<N>[.p/<W>]``: memseal's own addition, outside the spec's ``tile/``
  names: the 64-byte Ed25519 signature of each entry of the bundle of the same
  name, concatenated. The spec frames the leaf bytes alone, and memseal's entry
  signatures are kept beside the leaf, not in it.

``N`` is written in 3-digit groups, every group but the last prefixed by ``x``
(1234067 is ``x001/x234/067``), so a folder never holds a file and a directory
of one name. A partial tile (``.p/<W>``, 1 <= W <= 255) is the first W hashes of
its full tile: it covers the tree at a checkpoint's size and its bytes never
change either; only the full tile replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

import msgspec

from .errors import InvalidRequest, NotFound
from .merkle import HASH_SIZE, node_hash, stored_hash_index

__all__ = [
    "MAX_BUNDLE_ENTRY",
    "MAX_CHECKPOINT_BYTES",
    "SIGNATURE_SIZE",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "TileRef",
    "decode_bundle",
    "decode_signatures",
    "encode_bundle",
    "encode_index",
    "encode_signatures",
    "hash_tile_indexes",
    "max_file_size",
    "new_tiles",
    "parse_tile_path",
    "subtree_root",
    "tile_path",
    "tiles_at",
]

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
#: The largest entry a bundle frames: its length is a big-endian uint16.
MAX_BUNDLE_ENTRY = 0xFFFF
SIGNATURE_SIZE = 64
#: The most a tiled log's ``checkpoint`` file may hold: a note with its witnesses'
#: cosignatures is a few hundred bytes; this is the witness protocol's body limit.
MAX_CHECKPOINT_BYTES = 64 * 1024
#: Go's tlog and SQLite count leaves in a signed 64-bit integer: at most 8 tile levels.
_MAX_LEVEL = 63
_MAX_INDEX = 2**63 - 1
_GROUP = re.compile(r"x[0-9]{3}")
_LAST = re.compile(r"[0-9]{3}")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")

ENTRIES = "entries"
SIGNATURES = "signatures"
HASHES = "hashes"


class TileRef(msgspec.Struct, frozen=True, kw_only=True):
    """One tile: ``kind`` is ``"hashes"`` (at ``level``), ``"entries"`` or ``"signatures"``;
    ``width`` is 256 for a full tile, 1 to 255 for a partial one."""

    kind: str
    index: int
    width: int = TILE_WIDTH
    level: int = 0

    @property
    def full(self) -> bool:
        """Whether this is a full tile (its bytes are final once the tree covers it)."""
        return self.width == TILE_WIDTH

    @property
    def end(self) -> int:
        """The tree size this tile needs: the leaves its hashes (or entries) span."""
        return (self.index * TILE_WIDTH + self.width) << (TILE_HEIGHT * self.level)

    def covered_by(self, size: int) -> bool:
        """Whether a tree of ``size`` leaves has every hash (or entry) of this tile."""
        return self.end <= size


def encode_index(n: int) -> str:
    """The spec's path form of a tile index: 3-digit groups, all but the last ``x``-prefixed."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _MAX_INDEX:
        raise InvalidRequest(f"tile index must be an integer from 0 to 2^63-1, got {n!r}")
    digits = str(n)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*(f"x{g}" for g in groups[:-1]), groups[-1]])


def tile_path(ref: TileRef) -> str:
    """The tile's path below the log's prefix, e.g. ``tile/0/x001/234.p/17``."""
    suffix = "" if ref.full else f".p/{ref.width}"
    if ref.kind == HASHES:
        head = f"tile/{ref.level}"
    elif ref.kind == ENTRIES:
        head = "tile/entries"
    elif ref.kind == SIGNATURES:
        head = "signatures"
    else:
        raise InvalidRequest(f"tile kind must be hashes, entries or signatures, not {ref.kind!r}")
    return f"{head}/{encode_index(ref.index)}{suffix}"


def parse_tile_path(path: str) -> TileRef:
    """A tile path (without the prefix) as a :class:`TileRef`; InvalidRequest naming ``path``.

    Strict: exactly the spec's form, so one tile has one path (no leading zeros, no
    empty or extra segments, no ``.p/256``).
    """
    parts = path.split("/")
    if parts[:2] == ["tile", ENTRIES]:
        kind, level, rest = ENTRIES, 0, parts[2:]
    elif parts[:1] == ["tile"] and len(parts) > 1:
        if not _DECIMAL.fullmatch(parts[1]) or int(parts[1]) > _MAX_LEVEL:
            raise InvalidRequest(f"`path` {path!r}: the tile level must be 0 to 63")
        kind, level, rest = HASHES, int(parts[1]), parts[2:]
    elif parts[:1] == [SIGNATURES]:
        kind, level, rest = SIGNATURES, 0, parts[1:]
    else:
        raise InvalidRequest(
            f"`path` {path!r} is not tile/<L>/<N>, tile/entries/<N> or signatures/<N>"
        )
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        if not _DECIMAL.fullmatch(rest[-1]) or not 1 <= int(rest[-1]) < TILE_WIDTH:
            raise InvalidRequest(f"`path` {path!r}: a partial tile's width must be 1 to 255")
        width = int(rest[-1])
        rest = [*rest[:-2], rest[-2][:-2]]
    if not rest or not all(_GROUP.fullmatch(g) for g in rest[:-1]) or not _LAST.fullmatch(rest[-1]):
        raise InvalidRequest(
            f"`path` {path!r}: the tile index must be 3-digit groups, all but the last x-prefixed"
        )
    digits = "".join(g.removeprefix("x") for g in rest)
    if len(rest) > 1 and rest[0] == "x000":
        raise InvalidRequest(f"`path` {path!r}: the tile index has a leading zero group")
    index = int(digits)
    if index > _MAX_INDEX:
        raise InvalidRequest(f"`path` {path!r}: the tile index is larger than 2^63-1")
    return TileRef(kind=kind, index=index, width=width, level=level)


def tiles_at(size: int) -> Iterator[TileRef]:
    """Every tile (hash tiles of each level, entry bundles, signatures) of a tree of ``size``."""
    yield from new_tiles(0, size)


def new_tiles(old: int, size: int) -> Iterator[TileRef]:
    """The tiles a tree of ``size`` has and one of ``old`` leaves did not: the full tiles
    completed since, and the partial tiles at ``size`` (hash tiles level by level, then the
    entry bundles and their signatures)."""
    if not 0 <= old <= size:
        raise InvalidRequest(f"tile sizes must satisfy 0 <= old <= size, got {old}, {size}")
    level = 0
    while size >> (TILE_HEIGHT * level):
        yield from _level_tiles(HASHES, level, old, size)
        level += 1
    for kind in (ENTRIES, SIGNATURES):
        yield from _level_tiles(kind, 0, old, size)


def _level_tiles(kind: str, level: int, old: int, size: int) -> Iterator[TileRef]:
    shift = TILE_HEIGHT * (level + 1)
    for n in range(old >> shift, size >> shift):
        yield TileRef(kind=kind, index=n, level=level)
    width = (size >> (TILE_HEIGHT * level)) % TILE_WIDTH
    if width:
        yield TileRef(kind=kind, index=size >> shift, width=width, level=level)


def max_file_size(path: str) -> int:
    """The most bytes the file at ``path`` (``checkpoint`` or a tile's path) can hold, so a
    reader never takes more from a hostile mirror; InvalidRequest naming a bad ``path``."""
    if path == "checkpoint":
        return MAX_CHECKPOINT_BYTES
    ref = parse_tile_path(path)
    if ref.kind == ENTRIES:
        return ref.width * (2 + MAX_BUNDLE_ENTRY)
    if ref.kind == SIGNATURES:
        return ref.width * SIGNATURE_SIZE
    return ref.width * HASH_SIZE


def hash_tile_indexes(ref: TileRef) -> list[int]:
    """The stored-hash indexes of a hash tile's hashes, ascending (one ``IN`` query)."""
    if ref.kind != HASHES:
        raise InvalidRequest(f"a {ref.kind} tile holds no stored hashes")
    first = ref.index * TILE_WIDTH
    return [stored_hash_index(TILE_HEIGHT * ref.level, first + i) for i in range(ref.width)]


def read_hash_tile(ref: TileRef, read: Callable[[Sequence[int]], Sequence[bytes]]) -> bytes:
    """A hash tile's bytes from the stored tree: one read of its ``width`` stored hashes."""
    return b"".join(read(hash_tile_indexes(ref)))


def encode_bundle(leaves: Sequence[bytes], first: int = 0) -> bytes:
    """An entry bundle: each entry's bytes behind its big-endian uint16 length.

    ``first`` is the seq of ``leaves[0]``, to name an entry too large to frame.
    """
    out = bytearray()
    for offset, leaf in enumerate(leaves):
        if len(leaf) > MAX_BUNDLE_ENTRY:
            raise NotFound(
                f"entry {first + offset} has {len(leaf):,} bytes, more than the "
                f"{MAX_BUNDLE_ENTRY:,} a tlog-tiles entry bundle can frame"
            )
        out += len(leaf).to_bytes(2, "big") + leaf
    return bytes(out)


def decode_bundle(data: bytes, width: int) -> list[bytes]:
    """The ``width`` entries of a bundle; InvalidRequest if it holds another count or a
    length runs past its end."""
    leaves: list[bytes] = []
    at = 0
    while at < len(data):
        if at + 2 > len(data):
            raise InvalidRequest("entry bundle ends inside a length prefix")
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise InvalidRequest(f"entry bundle's entry {len(leaves)} runs past its end")
        leaves.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    if len(leaves) != width:
        raise InvalidRequest(f"entry bundle holds {len(leaves)} entries, want {width}")
    return leaves


def encode_signatures(signatures: Sequence[bytes]) -> bytes:
    """A signature bundle: the 64-byte signatures, concatenated."""
    for number, signature in enumerate(signatures):
        if len(signature) != SIGNATURE_SIZE:
            raise InvalidRequest(f"signature {number} is {len(signature)} bytes, want 64")
    return b"".join(signatures)


def decode_signatures(data: bytes, width: int) -> list[bytes]:
    """The ``width`` signatures of a signature bundle; InvalidRequest on another length."""
    if len(data) != width * SIGNATURE_SIZE:
        raise InvalidRequest(
            f"signature bundle has {len(data)} bytes, want {width * SIGNATURE_SIZE}"
        )
    return [data[i : i + SIGNATURE_SIZE] for i in range(0, len(data), SIGNATURE_SIZE)]


def decode_hash_tile(data: bytes, width: int) -> list[bytes]:
    """The ``width`` hashes of a hash tile; InvalidRequest on another length."""
    if len(data) != width * HASH_SIZE:
        raise InvalidRequest(f"hash tile has {len(data)} bytes, want {width * HASH_SIZE}")
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


def subtree_root(hashes: Sequence[bytes]) -> bytes:
    """The root of a complete subtree over ``hashes`` (a power of two of them): what a full
    tile contributes to the level above."""
    level = list(hashes)
    if not level or len(level) & (len(level) - 1):
        raise InvalidRequest(f"a complete subtree needs a power of two of hashes, not {len(level)}")
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]
