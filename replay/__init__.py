"""memseal.replay: durable runs, whose every tool call is a signed entry with a memo.

See docs/replay.md. Public names are re-exported here; modules whose names
start with ``_`` are internal.
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
from .calls import RUN_FORKED, RUN_STARTED, TOOL_CALL, RunForked, RunStarted, ToolCall
from .identity import ScopeIdentity, fingerprint, input_hash, memo_key
from .provenance import Verified, check_memo
from .read_proof import FORMAT as READ_PROOF_FORMAT
from .read_proof import (
    ReadProof,
    ReadProofError,
    VerifiedRead,
    prove_read,
    prove_read_from_bundle,
    verify_read,
)
from .regress import RegressReport, regress
from .replayer import Replayer, ReplayRun
from .results import split as split_result
from .run import MODES, Change, Mode, Prepared, Preparer, Run, new_run_id

__all__ = [
    "BUNDLE_FORMAT",
    "MODES",
    "READ_PROOF_FORMAT",
    "RUN_FORKED",
    "RUN_STARTED",
    "TOOL_CALL",
    "Bundle",
    "Change",
    "Mode",
    "Prepared",
    "Preparer",
    "ReadProof",
    "ReadProofError",
    "RegressReport",
    "ReplayRun",
    "Replayer",
    "Run",
    "RunForked",
    "RunStarted",
    "ScopeIdentity",
    "ToolCall",
    "Verified",
    "VerifiedBundle",
    "VerifiedRead",
    "check_memo",
    "decode_bundle",
    "encode_bundle",
    "export_bundle",
    "fingerprint",
    "input_hash",
    "memo_key",
    "new_run_id",
    "prove_read",
    "prove_read_from_bundle",
    "regress",
    "split_result",
    "verify_bundle",
    "verify_read",
]
