"""A bundle whose signed entries carry a payload that does not decode where text is expected.

The payload's hash is signed, so it verifies as bytes; but its JSON is the run's arguments and
texts, and what the verifier reads of it must fail as a verification error naming the step
(``run``), never escape as the decoder's own error. A host holding the ledger can append such
an entry (the ledger signs any kind); here it is appended at the store, with a real salt and
hash, after a real recorded call, on SQLite and on PostgreSQL, then exported by the CLI.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

import memseal
from memseal.cli import main
from memseal.ledger.entry import Draft, payload_hash
from memseal.ledger.errors import VerificationError
from memseal.ledger.store import WriteTxn
from memseal.replay.evidence.bundle import verify_bundle
from memseal.replay.runs.calls import TOOL_CALL

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")

# Each is a memory_tool_call payload a decoder cannot read as the JSON of text.
PAYLOADS = {
    "invalid UTF-8 in a string": b'{"arguments":{"query":"\xc3\x28"},"texts":{}}',
    "a UTF-16 surrogate in UTF-8": b'{"arguments":{"query":"\xed\xa0\x80"},"texts":{}}',
    "a bare 0xff byte": b"\xff",
    "not JSON": b"{arguments",
}


async def _record_with_payload(folder: Path, store: str | None, payload: bytes) -> str:
    async with memseal.open(folder, store=store, embedder=None, checkpoint_interval=None) as m:
        async with m.run("audit", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "the report goes out at 6am"}})
        recorded = [r async for r in m.ledger.scan() if r.entry().kind == TOOL_CALL][-1]
        salt = os.urandom(16)
        # The recorded call's body again (same run and step: it supersedes), signed, with a
        # payload whose salted hash it commits to.
        draft = Draft(
            kind=TOOL_CALL,
            body=bytes(recorded.entry().body),
            payload=payload,
            salt=salt,
            payload_hash=payload_hash(salt, payload),
        )

        def command(txn: WriteTxn) -> None:
            txn.append(draft)

        await m.ledger.store.run(command)
        return str(m.trust_root)


@pytest.mark.parametrize("payload", list(PAYLOADS.values()), ids=list(PAYLOADS))
def test_a_signed_call_payload_that_does_not_decode_fails_bundle_verification_cleanly(
    tmp_path: Path, store_url: str | None, capsys: pytest.CaptureFixture[str], payload: bytes
) -> None:
    folder = tmp_path / "data"
    trust = asyncio.run(_record_with_payload(folder, store_url, payload))
    out = tmp_path / "run.bundle"
    where = ["--data", str(folder)] + ([] if store_url is None else ["--store", store_url])
    assert main(["export", *where, "--run", "audit", "-o", str(out)]) == 0
    with pytest.raises(VerificationError) as caught:
        verify_bundle(out.read_bytes(), trust)
    assert caught.value.step == "run" and "payload is malformed" in str(caught.value)
    capsys.readouterr()
    for verb in (["verify", str(out), "--trust", trust], ["replay", str(out)]):
        assert main(verb) == 1, verb
        printed, err = capsys.readouterr()
        assert printed == "" and err.count("\n") == 1 and "run:" in err, err
        assert "Traceback" not in err and "does not decode" not in err, err
