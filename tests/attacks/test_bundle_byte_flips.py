"""Byte flips across a real bundle: every changed byte fails ``memseal verify`` (exit 1 or 2,
one line), never exit 0 and never a traceback; ``memseal replay`` likewise on a handful.

The bundle comes from a real recorded run made here: stores, reads, a forget and a key
rotation (so the checkpoint carries two signatures and the key chain has a hand-over), exported
by the CLI, once plain and once ``--with-read-proofs``. The flips are a seeded sample (the
same in every CI run): one per stretch of the file, so every field is hit in proportion to
its size, plus extra ones in the small fields (format, keys, checkpoint, manifest,
embedders) and masks chosen to reach the corners (the low bit: base64 padding bits; 0x80:
invalid UTF-8). ``MEMSEAL_BYTE_FLIPS=all`` flips every byte with every one of those masks
instead (minutes; for a local sweep).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import memseal
from memseal.cli import main
from memseal.engine import HashingEmbedder

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
SEED = 1313
SAMPLED = 400
SMALL_FIELDS = ("format", "run_id", "origin", "keys", "checkpoint", "manifest", "embedders")
MASKS = (0x01, 0x02, 0x20, 0x80, 0xFF)


class Recorded:
    def __init__(self, folder: Path, path: Path, data: bytes, trust: str) -> None:
        self.folder, self.path, self.data, self.trust = folder, path, data, trust


async def _record(folder: Path) -> str:
    async with memseal.open(folder, embedder=HashingEmbedder(), checkpoint_interval=None) as m:
        async with m.run("flips", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "the report goes out at 6am"}})
            gone = await run.call("memory_store", {"learning": {"text": "a note to forget"}})
            await run.call("memory_fetch", {"query": "report"})
            await m.rotate_key()
            await run.call("memory_forget", {"ids": [gone["id"]]})
            await run.call("memory_recall", {"question": "when does the report go out?"})
            await run.call("memory_list", {})
        return str(m.trust_root)


@pytest.fixture(scope="module", params=[False, True], ids=["plain", "with-read-proofs"])
def recorded(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Recorded:
    work = tmp_path_factory.mktemp("flips")
    folder = work / "data"
    trust = asyncio.run(_record(folder))
    path = work / "run.bundle"
    # With read proofs the bundle adds its reads section (prefix entries, checkpoints).
    extra = ["--with-read-proofs"] if request.param else []
    export = ["export", "--data", str(folder), "--run", "flips", *extra, "-o", str(path)]
    assert main(export) == 0
    data = path.read_bytes()
    assert main(["verify", str(path), "--trust", trust]) == 0
    return Recorded(folder, path, data, trust)


def _field_spans(data: bytes) -> dict[str, tuple[int, int]]:
    """Where each small top-level field's value lies (they all precede ``entries``)."""
    spans: dict[str, tuple[int, int]] = {}
    names = [*SMALL_FIELDS, "entries"]
    for name, after in itertools.pairwise(names):
        start = data.index(f'"{name}":'.encode()) + len(name) + 3
        spans[name] = (start, data.index(f',"{after}":'.encode(), start))
    return spans


def _flips(data: bytes) -> Iterator[tuple[int, int]]:
    if os.environ.get("MEMSEAL_BYTE_FLIPS") == "all":
        for position in range(len(data)):
            for mask in MASKS:
                yield position, mask
        return
    rng = random.Random(SEED)
    stretch = len(data) / SAMPLED
    for i in range(SAMPLED):
        yield (
            int(i * stretch + rng.random() * stretch),
            rng.choice((*MASKS, rng.randrange(1, 256))),
        )
    for start, stop in _field_spans(data).values():
        for _ in range(12):
            yield rng.randrange(start, stop), rng.choice(MASKS)
    yield len(data) - 1, 0x01  # the final newline


def _flip(data: bytes, position: int, mask: int) -> bytes:
    return data[:position] + bytes([data[position] ^ mask]) + data[position + 1 :]


def _one_line(text: str) -> bool:
    return text.count("\n") == 1 and "Traceback" not in text


def test_flipping_any_byte_of_a_bundle_never_verifies(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "flipped.bundle"
    flips = list(_flips(recorded.data))
    assert len(flips) >= 400
    for position, mask in flips:
        path.write_bytes(_flip(recorded.data, position, mask))
        code = main(["verify", str(path), "--trust", recorded.trust])
        out, err = capsys.readouterr()
        where = f"byte {position} ^ 0x{mask:02x} ({recorded.data[position - 20 : position + 20]!r})"
        assert code in (1, 2), f"{where}: exit {code}: {out}"
        assert out == "" and _one_line(err), f"{where}: {out!r} {err!r}"


def test_a_flipped_bundle_fails_replay_with_one_line(
    recorded: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = _field_spans(recorded.data)
    rng = random.Random(SEED + 1)
    positions = [
        spans["embedders"][0] + 2,  # what steers --embedder auto
        spans["keys"][0] + 10,  # the key replay trusts when given none
        spans["manifest"][0] + 40,
        *(rng.randrange(spans["embedders"][1], len(recorded.data)) for _ in range(3)),
    ]
    path = tmp_path / "flipped.bundle"
    for position in positions:
        path.write_bytes(_flip(recorded.data, position, 0x01))
        for trust in ([], ["--trust", recorded.trust]):
            code = main(["replay", str(path), *trust])
            out, err = capsys.readouterr()
            assert code in (1, 2), f"byte {position}: replay exit {code}: {out}"
            assert out == "" and _one_line(err), f"byte {position}: {out!r} {err!r}"


@pytest.mark.parametrize("verb", ["verify", "replay"])
def test_a_flipped_bundle_fails_the_real_cli_with_one_line(
    recorded: Recorded, tmp_path: Path, verb: str
) -> None:
    rng = random.Random(SEED + 2)
    path = tmp_path / "flipped.bundle"
    for _ in range(2 if verb == "verify" else 1):  # a subprocess costs seconds of imports
        path.write_bytes(_flip(recorded.data, rng.randrange(len(recorded.data)), 0x80))
        done = subprocess.run(
            [sys.executable, "-m", "memseal.cli", verb, str(path), "--trust", recorded.trust],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode in (1, 2), done.stdout + done.stderr
        assert done.stdout == "" and _one_line(done.stderr), done.stderr
