"""Generate the session-bundle vectors in ``tests/vectors/bundles/``.

Run by hand from the repository root when the bundle format changes on
purpose (never from CI; the files are committed)::

    .venv/bin/python tests/vectors/make_bundle_vectors.py

Keys and salts are random, so a rerun rewrites every file; the clock is
fixed so times are stable. What is made (``expected.json`` maps each file
to the error it must fail with; ``trust.vkey`` is the trusted key):

``good.bundle``         the scripted agent's session (examples/durable_agent.py),
                        recorded with the hashing embedder: verifies, replays same
``divergent.bundle``    the same agent with step 3 asking another question (another
                        run, same data folder and key): it verifies, but the scripted
                        agent diverges from it at step 3
``tampered.bundle``     good.bundle with one memory text changed in a payload
``unknown-key.bundle``  the session recorded in another data folder, whose key
                        the trusted key never handed over to
``truncated.bundle``    good.bundle cut in half

Attacks on the bundle's extent and unsigned fields, each good.bundle changed and
re-encoded canonically (``expected.json`` also holds a phrase its message must say):

``cut-tail.bundle``           the last three entries dropped
``dropped-run-started.bundle`` the run's ``run_started`` entry dropped
``reordered.bundle``          two adjacent entries swapped
``duplicated.bundle``         one entry listed twice
``edited-keys.bundle``        ``keys`` naming the other folder's key
``edited-embedders.bundle``   ``embedders`` naming another embedder (it steers
                              ``replay --embedder auto``)
``v1.bundle``                 a bundle of the retired format ``memseal/bundle@v1``
                              (kept from before the manifest): refused, re-export

Not made here, kept as they were: ``v2.bundle`` (good.bundle as this script made it
before the v3 format) and ``v2.vkey``, its trusted key; a v2 bundle must still verify
and replay (tests/integration/test_bundle_read_proofs.py).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import memseal
from memseal.engine import HashingEmbedder
from memseal.ledger.errors import VerificationError
from memseal.ledger.keys import key_history
from memseal.replay.evidence.bundle import (
    Bundle,
    encode_bundle,
    export_bundle,
    verify_bundle,
)

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent / "bundles"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "durable_agent", ROOT / "examples/durable_agent.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


async def record(
    folder: Path, script: list[tuple[str, dict[str, Any]]], run_id: str = "nightly-report"
) -> Bundle:
    example = _example()
    example.SCRIPT[:] = script
    example.RUN_ID = run_id
    async with memseal.open(
        folder, embedder=HashingEmbedder(), clock=_Clock(), checkpoint_interval=None
    ) as memory:
        await example.agent(memory)
        rows = await memory.ledger.store.rows("SELECT DISTINCT embedder FROM engine_vectors")
        return await export_bundle(
            memory.ledger,
            key_history(folder),
            example.RUN_ID,
            embedders=[str(r[0]) for r in rows],
        )


def _tamper(bundle: Bundle) -> Bundle:
    entries = list(bundle.entries)
    for i, entry in enumerate(entries):
        if entry.payload is not None and b"nightly report" in entry.payload:
            payload = entry.payload.replace(b"nightly report", b"weekly report")
            entries[i] = type(entry)(**{**_fields(entry), "payload": payload})
            break
    return type(bundle)(**{**_fields(bundle), "entries": tuple(entries)})


def _fields(struct: Any) -> dict[str, Any]:
    return {f: getattr(struct, f) for f in struct.__struct_fields__}


def _with(bundle: Bundle, **changes: Any) -> bytes:
    return encode_bundle(type(bundle)(**{**_fields(bundle), **changes}))


def _attacks(good: Bundle, other: Bundle) -> dict[str, bytes]:
    entries = list(good.entries)
    started = next(i for i, e in enumerate(entries) if b'"kind":"run_started"' in e.leaf)
    swapped = list(entries)
    swapped[1], swapped[2] = swapped[2], swapped[1]
    return {
        "cut-tail.bundle": _with(good, entries=tuple(entries[:-3])),
        "dropped-run-started.bundle": _with(
            good, entries=tuple(entries[:started] + entries[started + 1 :])
        ),
        "reordered.bundle": _with(good, entries=tuple(swapped)),
        "duplicated.bundle": _with(good, entries=tuple(entries[:3] + entries[2:])),
        "edited-keys.bundle": _with(good, keys=other.keys),
        "edited-embedders.bundle": _with(good, embedders=("hashing-v1/blake3/w1-c3/dim64",)),
    }


#: The phrase each attack vector's error must carry (its reason, in the verifier's words).
SAYS = {
    "cut-tail.bundle": "the bundle lacks it",
    "dropped-run-started.bundle": "the bundle lacks it",
    "reordered.bundle": "out of order",
    "duplicated.bundle": "appears twice",
    "edited-keys.bundle": "`keys` is not what the signed manifest states",
    "edited-embedders.bundle": "`embedders` is not what the signed manifest states",
    "v1.bundle": "re-export",
}


async def main() -> None:
    example = _example()
    script = list(example.SCRIPT)
    divergent = list(script)
    divergent[3] = ("memory_fetch", {"query": "deploys"})
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        good = await record(Path(tmp) / "a", script)
        other = await record(Path(tmp) / "b", script)
        trust = key_history(Path(tmp) / "a")[0].text
        # Same data folder (so the same trusted key), another run.
        diverged = await record(Path(tmp) / "a", divergent, "nightly-report-v2")
    files = {
        "good.bundle": encode_bundle(good),
        "divergent.bundle": encode_bundle(diverged),
        "tampered.bundle": encode_bundle(_tamper(good)),
        "unknown-key.bundle": encode_bundle(other),
    }
    files["truncated.bundle"] = files["good.bundle"][: len(files["good.bundle"]) // 2]
    files.update(_attacks(good, other))
    # The retired format cannot be made any more: the last v1 good.bundle is kept as it was.
    files["v1.bundle"] = (OUT / "v1.bundle").read_bytes()
    expected: dict[str, Any] = {}
    for name, data in files.items():
        try:
            verify_bundle(data, trust)
            expected[name] = None
        except VerificationError as exc:
            expected[name] = {"step": exc.step, "seq": exc.seq}
            if name in SAYS:
                assert SAYS[name] in str(exc), (name, str(exc))
                expected[name]["says"] = SAYS[name]
        (OUT / name).write_bytes(data)
    (OUT / "trust.vkey").write_text(trust + "\n")
    (OUT / "expected.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    print(json.dumps(expected, indent=2, sort_keys=True))


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
