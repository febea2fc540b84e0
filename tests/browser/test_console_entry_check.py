"""The console's port of the entry check (crypto.js ``verifyEntry``) on the vectors the
ledger's ``check_entry`` is tested with (tests/entry_vectors.py): each entry the Python
check refuses, the console refuses at the same step, and each it passes, the console passes.

The console is served entries without a stored hash (it recomputes the leaf hash from the
bytes), so the Python side is asked the same way: ``stored_hash`` not given.
"""

from __future__ import annotations

import base64
from typing import Any

from browser.console_support import Server
from entry_vectors import ALPHA, BETA, Vector, attacks, log, trusted

from memseal.ledger import KeyChain, VerificationError, check_entry
from memseal.ledger.note import format_vkey


def _python_step(vector: Vector) -> str | None:
    chain = KeyChain(trusted())
    for good in log()[: vector.seq]:
        chain.hand_over(check_entry(good.leaf, good.signature, chain, seq=good.seq))
    try:
        check_entry(vector.leaf, vector.signature, chain, seq=vector.seq)
    except VerificationError as exc:
        return exc.step
    return None


def _vkey(signer: Any) -> str:
    return format_vkey(signer.name, bytes(signer.signing_key.verify_key))


def test_the_consoles_entry_check_refuses_what_the_ledgers_refuses(
    server: Server, page: Any
) -> None:
    vectors = [*log(), *attacks()]
    expected = {f"{v.name}@{v.seq}": _python_step(v) for v in vectors}
    assert expected["signature-byte-flipped@2"] == "signature"  # the vectors do attack
    page.goto(f"{server.url}/console/")
    got = page.evaluate(
        """async ({vectors, alpha, beta}) => {
          const m = await import("./crypto.js");
          // The keys in force at each seq: alpha until its key_rotated (seq 1), then beta.
          const at = async (seq) => {
            const k = await m.parseVkey(seq < 2 ? alpha : beta);
            return new Map([[k.id, k]]);
          };
          const out = {};
          for (const v of vectors) {
            try {
              await m.verifyEntry(v.seq, v.leaf, v.sig, v.prev, await at(v.seq));
              out[`${v.name}@${v.seq}`] = null;
            } catch (err) {
              out[`${v.name}@${v.seq}`] = err.check ?? String(err);
            }
          }
          return out;
        }""",
        {
            "vectors": [
                {
                    "name": v.name,
                    "seq": v.seq,
                    "leaf": base64.b64encode(v.leaf).decode(),
                    "sig": base64.b64encode(v.signature).decode(),
                    "prev": v.prev,
                }
                for v in vectors
            ],
            "alpha": _vkey(ALPHA),
            "beta": _vkey(BETA),
        },
    )
    assert got == expected
