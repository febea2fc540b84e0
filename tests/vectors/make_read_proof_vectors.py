"""Generate the read-proof vectors in ``tests/vectors/read_proofs/``.

Run by hand from the repository root when the read-proof format changes on
purpose (never from CI; the files are committed)::

    .venv/bin/python tests/vectors/make_read_proof_vectors.py

Keys and salts are random, so a rerun rewrites every file. Each file is named
after what it holds (``expected.json`` maps it to the failure it must report,
null for one that verifies; ``trust.vkey`` is the trusted key):

``read_proof_good.json``            the exact fetch of tests/read_proof_support.py,
                                    every text disclosed: verifies byte for byte
``read_proof_reach_only.json``      the run's list, texts in its reach only: verifies
``read_proof_omitted_write.json``   the good proof with the write the fetch saw left
                                    out of the prefix (everything else intact)
``read_proof_withheld_write.json``  the good proof with that write's entry kept but
                                    its text taken out
``read_proof_forged_checkpoint.json`` the good proof with the checkpoint at the
                                    observed size re-signed by a stranger's key
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from read_proof_support import FETCH, LIST, edit, prove, record, without  # noqa: E402

from memseal.ledger.errors import VerificationError  # noqa: E402
from memseal.ledger.note import NoteSigner, sign_note, split_note  # noqa: E402
from memseal.replay.evidence.read_proof import decode_read_proof, verify_read  # noqa: E402

OUT = Path(__file__).resolve().parent / "read_proofs"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        recorded = await record(Path(tmp) / "data")
        good = await prove(recorded.folder, FETCH, disclose="all")
        reach = await prove(recorded.folder, LIST)
    proof = decode_read_proof(good)
    seen = recorded.seen_write
    prefix = list(proof.prefix)
    prefix[seen] = msgspec.structs.replace(prefix[seen], payload=None, salt=None)
    text, _ = split_note(proof.checkpoint)
    forged = sign_note(text, [NoteSigner.generate(proof.origin.split("/")[0] or "x")])
    files = {
        "read_proof_good.json": good,
        "read_proof_reach_only.json": reach,
        "read_proof_omitted_write.json": without(good, seen),
        "read_proof_withheld_write.json": edit(good, prefix=tuple(prefix)),
        "read_proof_forged_checkpoint.json": edit(good, checkpoint=forged),
    }
    says = {
        "read_proof_omitted_write.json": f"entry {seen} is missing",
        "read_proof_withheld_write.json": "in the read's reach but its payload is missing",
        "read_proof_forged_checkpoint.json": "no valid signature by a known key",
    }
    expected: dict[str, Any] = {}
    OUT.mkdir(exist_ok=True)
    for name, data in files.items():
        (OUT / name).write_bytes(data)
        try:
            await verify_read(data, recorded.vkey)
            expected[name] = None
        except VerificationError as exc:
            expected[name] = {"step": exc.step, "seq": exc.seq, "says": says[name]}
            assert says[name] in str(exc), (name, str(exc))
    (OUT / "expected.json").write_text(json.dumps(expected, indent=2, sort_keys=True) + "\n")
    (OUT / "trust.vkey").write_text(recorded.vkey + "\n")
    print(json.dumps(expected, indent=2, sort_keys=True))


if __name__ == "__main__":
    asyncio.run(main())
