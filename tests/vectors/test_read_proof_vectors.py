"""Golden read-proof vectors: the good ones still verify, each attack still fails where it must.

The files in ``read_proofs/`` (made by ``make_read_proof_vectors.py``, named
after what they hold) are checked with nothing but their bytes and
``trust.vkey``, through the Python verifier and the ``memseal verify-read``
command. A good vector that stops verifying means the read no longer re-derives
as recorded (the ranking, the proof format or a check changed): regenerate the
vectors only when that change is deliberate.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from memseal.ledger.errors import VerificationError
from memseal.replay.evidence.read_proof import verify_read

VECTORS = Path(__file__).resolve().parent / "read_proofs"
EXPECTED: dict[str, dict[str, object] | None] = json.loads(
    (VECTORS / "expected.json").read_text(encoding="utf-8")
)
TRUST = (VECTORS / "trust.vkey").read_text(encoding="utf-8").strip()
MEMSEAL = Path(sys.executable).with_name("memseal")


def test_every_vector_is_listed_and_an_attack_is_among_them() -> None:
    assert sorted(p.name for p in VECTORS.glob("read_proof_*.json")) == sorted(EXPECTED)
    assert EXPECTED["read_proof_good.json"] is None
    assert EXPECTED["read_proof_omitted_write.json"] is not None


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vector(name: str) -> None:
    data = (VECTORS / name).read_bytes()
    want = EXPECTED[name]
    if want is None:
        verified = asyncio.run(verify_read(data, TRUST))
        assert verified.result == verified.derived or verified.how == "within tolerance"
        return
    with pytest.raises(VerificationError) as failed:
        asyncio.run(verify_read(data, TRUST))
    assert failed.value.step == want["step"], failed.value
    assert failed.value.seq == want["seq"], failed.value
    assert str(want["says"]) in str(failed.value)


@pytest.mark.parametrize("name", ["read_proof_good.json", "read_proof_omitted_write.json"])
def test_the_cli_exit_codes(name: str) -> None:
    done = subprocess.run(
        [str(MEMSEAL), "verify-read", str(VECTORS / name), "--trust", TRUST],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if EXPECTED[name] is None:
        assert done.returncode == 0 and done.stdout.startswith("ok: "), done.stderr
    else:
        assert done.returncode == 1 and done.stderr.startswith("FAILED: "), done
        assert "completeness" in done.stderr
