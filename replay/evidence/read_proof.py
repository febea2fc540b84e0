"""Read proofs (format ``memseal/read-proof@v1``): what one recorded read returned, proven.

A read proof lets anyone holding the ledger's public key check, offline and
with no data folder, that a recorded read (``memory_fetch``, ``recall``,
``list``, ``get`` or ``explore``) returned exactly its recorded result. It
holds:

- the signed call entry, with its payload (arguments and result texts);
- a checkpoint signed at exactly the call's ``observed_size`` N, a checkpoint
  at a later size M, and the consistency proof from N to M;
- the signed bytes of *every* entry seq < N (headers and bodies: bodies carry
  structure and hashes, never texts), so the verifier recomputes the root at
  N from all leaves: an entry left out, or one changed, changes that root;
- the payloads of the entries in the call's reach (the run's recorded scope),
  each with its inclusion proof against the checkpoint at N: the texts the
  read could see, and no other;
- the later entries the key chain needs (every ``key_rotated`` entry between
  N and M), the run's ``run_started`` entry when it is not in the prefix,
  each with an inclusion proof against the checkpoint at M.

Completeness is why the whole prefix travels: a proof holding only the
entries a read cited could leave out a write the read saw (one that would
have changed the ranking), and no check of the cited ones could notice.

:func:`prove_read` writes a proof from a ledger (:mod:`._read_proof_make`),
:func:`prove_read_from_bundle` the same proof from a bundle exported with
``with_read_proofs`` (:mod:`._bundle_reads`);
:func:`verify_read` checks one and re-derives the read
(:mod:`._read_proof_verify`, whose docstring numbers its steps; step 7, the
comparison, is :mod:`._read_proof_compare`); the format is in
:mod:`._read_proof_format`. docs/auditing.md ("Prove what an agent
read") shows the whole round from the command line.
"""

from __future__ import annotations

from ._bundle_reads import prove_read_from_bundle
from ._read_proof_format import (
    FORMAT,
    MAX_PROOF_BYTES,
    ProofEntry,
    ReadProof,
    ReadProofError,
    decode_read_proof,
    encode_read_proof,
)
from ._read_proof_make import prove_read
from ._read_proof_verify import (
    EmbedderChoice,
    VerifiedRead,
    choose_embedder,
    verify_read,
)

__all__ = [
    "FORMAT",
    "MAX_PROOF_BYTES",
    "EmbedderChoice",
    "ProofEntry",
    "ReadProof",
    "ReadProofError",
    "VerifiedRead",
    "choose_embedder",
    "decode_read_proof",
    "encode_read_proof",
    "prove_read",
    "prove_read_from_bundle",
    "verify_read",
]
