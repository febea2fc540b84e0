"""Golden attack vectors: tampered ledgers, each failing at one exact seq and step.

Each file in ``ledger/`` (made by ``make_ledger_vectors.py``, named after the
attack it holds) carries every row of every table of a small ledger
(entries, payloads, mentions, meta, and the Merkle hashes and checkpoints),
the vkey an auditor trusts and the failure the verifier must report: an
entry byte, signature, payload or salt flipped; a key id or stored hash
changed; rows deleted or swapped; a payload removed without a signed
redaction or a redacted one restored; the tail replaced or extended by
forged entries; non-canonical encodings signed by the real key; a Merkle
hash flipped; a truncation under a stored checkpoint; and the untampered
controls, which must verify.

The rows are loaded into a real SQLite data folder and checked through the
auditor's path (``open_audit`` without the private key), and through the
``memseal verify`` command for its exit codes.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.ledger.note import NoteSigner
from memseal.ledger.sqlite import SqliteLogStore
from memseal.memory import open_audit

VECTORS = Path(__file__).resolve().parent / "ledger"
FILES = sorted(VECTORS.glob("*.json"))
CONTROL = VECTORS / "valid-ledger.json"

STEPS = {
    "format",
    "stored hash",
    "chain",
    "unknown key",
    "signature",
    "payload hash",
    "redaction",
    "tree",
    "checkpoint",
}
# The attacks the ledger's threat model names; losing a file must fail loudly.
REQUIRED = {
    "valid-ledger",
    "entry-byte-flipped",
    "signature-byte-flipped",
    "payload-byte-flipped",
    "salt-byte-flipped",
    "key-id-changed",
    "stored-hash-changed",
    "row-deleted",
    "rows-swapped",
    "payload-removed-without-redaction",
    "tail-replaced-with-forged-entry",
    "tail-replaced-with-foreign-key-entry",
    "redacted-payload-restored",
    "non-canonical-entry",
    "entry-invalid-utf8",
}


def _load(path: Path) -> dict[str, Any]:
    vector: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return vector


def _value(cell: Any) -> Any:
    """A stored value: bytes travel as ``{"base64": ...}``, the rest as JSON."""
    if isinstance(cell, dict):
        assert set(cell) == {"base64"}, cell
        return base64.b64decode(cell["base64"], validate=True)
    return cell


async def _materialise(vector: dict[str, Any], folder: Path) -> None:
    """A real data folder holding exactly the vector's rows."""
    # Opening the log store once creates the ledger's schema exactly as the library does
    # (the layers above keep their own tables; the vectors are about the ledger alone).
    folder.mkdir(parents=True, exist_ok=True)
    store = SqliteLogStore(folder / "ledger.db", NoteSigner.generate("vector-loader"))
    await store.open()
    await store.close()
    with closing(sqlite3.connect(folder / "ledger.db")) as conn, conn:
        schema = {
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        unknown = set(vector["tables"]) - schema
        assert not unknown, (
            f"the vector has tables {sorted(unknown)} the schema lacks: the stored format "
            "changed; rerun tests/vectors/make_ledger_vectors.py"
        )
        for table, rows in vector["tables"].items():
            conn.execute(f"DELETE FROM {table}")
            for row in rows:
                marks = ", ".join("?" * len(row))
                conn.execute(
                    f"INSERT INTO {table} ({', '.join(row)}) VALUES ({marks})",
                    [_value(cell) for cell in row.values()],
                )
        # Tables the vectors predate must hold nothing the library wrote at open.
        for table in sorted(schema - set(vector["tables"])):
            (count,) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert count == 0, f"{table} is not in the vector; rerun make_ledger_vectors.py"


def test_every_named_attack_has_a_vector() -> None:
    missing = REQUIRED - {path.stem for path in FILES}
    assert not missing, f"no golden file for: {sorted(missing)}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_vector_is_well_formed(path: Path) -> None:
    vector = _load(path)
    assert set(vector) == {"description", "vkey", "tables", "expected"}
    assert vector["description"].strip()
    assert {"entries", "payloads", "mentions", "meta"} <= set(vector["tables"])
    # Every vector is trusted under the one key the control ledger was signed with.
    control = _load(CONTROL)
    assert vector["vkey"] == control["vkey"]
    expected = vector["expected"]
    if path.stem.startswith("valid-"):
        assert expected is None
    else:
        assert set(expected) == {"seq", "step"}
        assert isinstance(expected["seq"], int) and expected["step"] in STEPS
        assert vector["tables"] != control["tables"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
async def test_vector_verifies_as_declared(path: Path, tmp_path: Path) -> None:
    vector = _load(path)
    folder = tmp_path / "data"
    await _materialise(vector, folder)
    async with open_audit(folder) as ledger:
        if vector["expected"] is None:
            summary = await ledger.verify(trust=vector["vkey"])
            assert summary.size == len(vector["tables"]["entries"])
            assert summary.redacted == 1
            return
        with pytest.raises(memseal.VerificationError) as caught:
            await ledger.verify(trust=vector["vkey"])
    error = caught.value
    assert (error.seq, error.step) == (vector["expected"]["seq"], vector["expected"]["step"])
    assert f"seq {error.seq}: {error.step}:" in str(error)


async def _cli(*args: str) -> tuple[int, str, str]:
    # The installed console script when there is one beside this interpreter, else the module.
    script = Path(sys.executable).with_name("memseal")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "memseal.cli"]
    proc = await asyncio.create_subprocess_exec(
        *command,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_cli_verify_exit_codes(tmp_path: Path) -> None:
    valid = _load(VECTORS / "valid-ledger.json")
    await _materialise(valid, tmp_path / "valid")
    code, out, err = await _cli("verify", str(tmp_path / "valid"), "--trust", valid["vkey"])
    assert (code, err) == (0, "")
    assert out.startswith(f"ok: {len(valid['tables']['entries'])} entries verified")

    bad = _load(VECTORS / "signature-byte-flipped.json")
    await _materialise(bad, tmp_path / "bad")
    code, out, err = await _cli("verify", str(tmp_path / "bad"), "--trust", bad["vkey"])
    assert code == 1
    assert out == ""
    assert f"seq {bad['expected']['seq']}: {bad['expected']['step']}" in err

    # --trust also takes a file holding the vkey.
    vkey_file = tmp_path / "trusted.vkey"
    vkey_file.write_text(bad["vkey"] + "\n", encoding="utf-8")
    code, _, err = await _cli("verify", str(tmp_path / "bad"), "--trust", str(vkey_file))
    assert code == 1
    assert f"seq {bad['expected']['seq']}:" in err

    # A malformed vkey is a usage error, not a verification failure.
    code, _, err = await _cli("verify", str(tmp_path / "valid"), "--trust", "not-a-vkey")
    assert code == 2
    assert "trust" in err
