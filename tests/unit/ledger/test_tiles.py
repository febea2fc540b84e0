"""C2SP tlog-tiles: the paths, the tiles a tree has, proofs from tiles, export and verify."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import memseal
from memseal.ledger.errors import InvalidRequest, NotFound, VerificationError
from memseal.ledger.merkle import MemoryHashStore, consistency_proof, inclusion_proof, tree_hash
from memseal.ledger.note import NoteSigner, parse_vkey
from memseal.ledger.tiles import (
    TileRef,
    decode_bundle,
    encode_bundle,
    encode_index,
    new_tiles,
    parse_tile_path,
    read_hash_tile,
    tile_path,
    tiles_at,
)
from memseal.ledger.tiles_store import export_tiles, read_tile
from memseal.ledger.tiles_verify import Fetch, TileHashReader, verify_tiles
from memseal.memory import Memory


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "000"),
        (7, "007"),
        (999, "999"),
        (1000, "x001/000"),
        (1234067, "x001/x234/067"),
        (999_999, "x999/999"),
        (1_000_000, "x001/x000/000"),
    ],
)
def test_index_path_encoding_at_the_boundaries(n: int, text: str) -> None:
    assert encode_index(n) == text
    for kind, head in (("hashes", "tile/3"), ("entries", "tile/entries")):
        ref = TileRef(kind=kind, index=n, level=3 if kind == "hashes" else 0)
        assert tile_path(ref) == f"{head}/{text}"
        assert parse_tile_path(f"{head}/{text}") == ref


@pytest.mark.parametrize("width", [1, 2, 254, 255])
def test_partial_tile_paths_name_widths_1_to_255(width: int) -> None:
    ref = TileRef(kind="hashes", index=1000, width=width, level=0)
    assert tile_path(ref) == f"tile/0/x001/000.p/{width}"
    assert parse_tile_path(tile_path(ref)) == ref
    sig = TileRef(kind="signatures", index=5, width=width)
    assert parse_tile_path(f"signatures/005.p/{width}") == sig


@pytest.mark.parametrize(
    "path",
    [
        "tile/0/1000",
        "tile/0/99",
        "tile/0/x000/999",
        "tile/0/x1/000",
        "tile/0/000/",
        "tile/0/000.p/256",
        "tile/0/000.p/0",
        "tile/0/000.p/01",
        "tile/0/000.p",
        "tile/01/000",
        "tile/64/000",
        "tile/-1/000",
        "tile/0",
        "tile/entries",
        "tile/entries/x001",
        "tile/data/000",
        "checkpoint/000",
        "../000",
        "tile/0/x009/x223/x372/x036/x854/x775/808",
    ],
)
def test_a_malformed_tile_path_is_refused_naming_the_path(path: str) -> None:
    with pytest.raises(InvalidRequest, match="`path`"):
        parse_tile_path(path)


def test_the_tiles_of_a_tree_are_those_the_spec_lists() -> None:
    # The spec's own examples: 70,000 entries, and 256.
    hashes = [t for t in tiles_at(70_000) if t.kind == "hashes"]
    assert sum(1 for t in hashes if t.level == 0 and t.full) == 273
    assert [t for t in hashes if not t.full] == [
        TileRef(kind="hashes", index=273, width=112, level=0),
        TileRef(kind="hashes", index=1, width=17, level=1),
        TileRef(kind="hashes", index=0, width=1, level=2),
    ]
    assert sum(1 for t in hashes if t.level == 1 and t.full) == 1
    assert [(t.level, t.width) for t in tiles_at(256) if t.kind == "hashes"] == [(0, 256), (1, 1)]
    assert list(tiles_at(0)) == []
    bundles = [t for t in tiles_at(70_000) if t.kind == "entries"]
    assert len(bundles) == 274 and bundles[-1].width == 112


def test_a_bundle_frames_each_entry_with_a_big_endian_uint16_length() -> None:
    leaves = [b"", b"a", b"x" * 300, b"y" * 0xFFFF]
    data = encode_bundle(leaves)
    assert data[:2] == b"\x00\x00" and data[2:5] == b"\x00\x01a"
    assert data[5:7] == (300).to_bytes(2, "big")
    assert decode_bundle(data, 4) == leaves
    with pytest.raises(InvalidRequest, match="entries, want 5"):
        decode_bundle(data, 5)
    with pytest.raises(InvalidRequest, match="past its end"):
        decode_bundle(data[:-1], 4)
    with pytest.raises(NotFound, match="entry 7 has 65,536 bytes"):
        encode_bundle([b"z" * 0x10000], first=7)


def test_proofs_from_tiles_are_the_stored_trees_proofs() -> None:
    # Past 65,536 leaves: level-2 tiles, and stored hashes 1 to 7 levels above a tile's.
    tree = MemoryHashStore()
    for i in range(66_000):
        tree.append_leaf_hash(i.to_bytes(32, "big"))
    fetched: list[str] = []

    def fetch(path: str) -> bytes:
        # A static host of every tile the tree has ever had (each width of the partial ones).
        fetched.append(path)
        ref = parse_tile_path(path)
        if not ref.covered_by(tree.size):
            raise NotFound(path)
        return read_hash_tile(ref, tree.read)

    rng = random.Random(8)
    for size in [1, 255, 256, 257, 65_535, 65_536, 65_537, 66_000]:
        reader = TileHashReader(size, fetch)
        assert tree_hash(size, reader) == tree.root(size)
        for seq in {0, size - 1, rng.randrange(size)}:
            assert inclusion_proof(seq, size, reader) == inclusion_proof(seq, size, tree.read)
        old = rng.randrange(1, size + 1)
        assert consistency_proof(old, size, reader) == consistency_proof(old, size, tree.read)
        # Each tile is fetched once, at the width the tree of `size` has.
        assert reader.fetched == len(set(fetched)) == len(fetched)
        fetched.clear()


# -- from a real ledger, on each store ---------------------------------------------------------

SECRET = "the door code is 4471"


@pytest.fixture
async def memory(tmp_path: Path, store_url: str | None) -> AsyncIterator[Memory]:
    async with memseal.open(
        tmp_path / "d", store=store_url, embedder=None, checkpoint_interval=None
    ) as opened:
        yield opened


async def _grow(memory: Memory, count: int) -> None:
    for start in range(0, count, 100):
        stop = min(count, start + 100)
        for i in range(start, stop):
            await memory.ledger.append("note", {"i": i}, {"text": f"tiles entry {i}"})


def _folder_fetch(folder: Path) -> tuple[dict[str, int], Fetch]:
    reads: dict[str, int] = {}

    def fetch(path: str) -> bytes:
        reads[path] = reads.get(path, 0) + 1
        try:
            return (folder / path).read_bytes()
        except FileNotFoundError as exc:
            raise NotFound(path) from exc

    return reads, fetch


async def test_exported_tiles_verify_and_full_tiles_never_change(
    memory: Memory, tmp_path: Path
) -> None:
    gone = await memory.engine.store({"learning": {"text": SECRET}}, namespace="team:a")
    await _grow(memory, 300)
    await memory.tools(memseal.ToolScope.placed_at("team:a")).call(
        "memory_forget", {"ids": [gone.id]}
    )
    out = tmp_path / "tiles"
    old_note = await memory.ledger.checkpoint()
    await export_tiles(memory.ledger.store, old_note, out)
    full = (out / "tile/0/000").read_bytes()
    first_bundle = (out / "tile/entries/000").read_bytes()
    assert len(full) == 8192
    old_size = await memory.ledger.size()
    assert (out / f"tile/0/001.p/{old_size - 256}").is_file()

    await _grow(memory, 300)
    note = await memory.ledger.checkpoint()
    written = await export_tiles(memory.ledger.store, note, out)
    size = await memory.ledger.size()
    # Incremental: the full tiles completed since, the partial ones at the new size.
    assert written == len(list(new_tiles(old_size, size))) + 1
    assert all(t.index >= 1 for t in new_tiles(old_size, size) if t.level == 0)
    assert (out / "tile/0/000").read_bytes() == full
    assert (out / "tile/entries/000").read_bytes() == first_bundle
    assert (out / "tile/0/001").stat().st_size == 8192
    assert not (out / "tile/0/001.p").exists()
    assert (out / "checkpoint").read_text() == note
    # The served tile is the exported one, byte for byte.
    assert await read_tile(memory.ledger.store, parse_tile_path("tile/0/000"), size) == full
    with pytest.raises(NotFound):
        await read_tile(memory.ledger.store, parse_tile_path("tile/0/009"), size)

    every = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert SECRET.encode() not in every and b"tiles entry 5" not in every

    _, fetch = _folder_fetch(out)
    done = verify_tiles(fetch, [parse_vkey(memory.trust_root)], since=old_note)
    assert done.summary.size == size
    assert done.consistency is not None and done.consistency.old_size == old_size
    assert done.tiles == len([t for t in tiles_at(size) if t.kind == "hashes"])


async def test_verify_tiles_refuses_edited_tiles(memory: Memory, tmp_path: Path) -> None:
    await _grow(memory, 260)
    out = tmp_path / "tiles"
    note = await memory.ledger.checkpoint()
    await export_tiles(memory.ledger.store, note, out)
    trusted = [parse_vkey(memory.trust_root)]
    _, fetch = _folder_fetch(out)

    def flipped(name: str, at: int) -> None:
        path = out / name
        data = bytearray(path.read_bytes())
        data[at] ^= 1
        path.write_bytes(bytes(data))

    cases = [
        ("signatures/000", 70, "signature"),
        ("tile/entries/000", 2, "format"),
        ("tile/entries/000", 40, "signature"),
        ("tile/entries/001.p/4", 0, "tiles"),
        ("tile/0/000", 32 * 9, "tiles"),
        ("tile/1/000.p/1", 3, "tiles"),
    ]
    for name, at, step in cases:
        flipped(name, at)
        with pytest.raises(VerificationError, match=step):
            verify_tiles(fetch, trusted)
        flipped(name, at)
    verify_tiles(fetch, trusted)
    # Another log's key, a kept checkpoint from a longer log: refused.
    with pytest.raises(VerificationError, match="unknown key"):
        other = NoteSigner.generate("other")
        verify_tiles(fetch, [other.verifier])
    await _grow(memory, 5)
    later = await memory.ledger.checkpoint()
    with pytest.raises(VerificationError, match="truncated"):
        verify_tiles(fetch, trusted, since=later)
    (out / "signatures/001.p/4").unlink()
    with pytest.raises(VerificationError, match=r"signatures/001\.p/4 is missing"):
        verify_tiles(fetch, trusted)
