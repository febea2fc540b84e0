"""memseal.replay.evidence: what a run leaves to be checked offline.

Session bundles (``bundle.py``: export, format, verify, the reads section)
and read proofs (``read_proof.py``: make, verify, compare), and the temporary
log a recorded read is re-derived in (``_temp_log.py``). It stands on
:mod:`memseal.replay.runs` and never imports :mod:`memseal.replay.regress`;
the memory as of a past point moved up to :mod:`memseal.apps.as_of`.
"""

from .bundle import FORMAT as BUNDLE_FORMAT
from .bundle import (
    Bundle,
    VerifiedBundle,
    decode_bundle,
    encode_bundle,
    export_bundle,
    verify_bundle,
)
from .read_proof import FORMAT as READ_PROOF_FORMAT
from .read_proof import (
    ReadProof,
    ReadProofError,
    VerifiedRead,
    prove_read,
    prove_read_from_bundle,
    verify_read,
)

__all__ = [
    "BUNDLE_FORMAT",
    "READ_PROOF_FORMAT",
    "Bundle",
    "ReadProof",
    "ReadProofError",
    "VerifiedBundle",
    "VerifiedRead",
    "decode_bundle",
    "encode_bundle",
    "export_bundle",
    "prove_read",
    "prove_read_from_bundle",
    "verify_bundle",
    "verify_read",
]
