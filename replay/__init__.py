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
from .regress import RegressReport, regress
from .replayer import Replayer, ReplayRun
from .results import split as split_result
from .run import MODES, Change, Mode, Prepared, Preparer, Run, new_run_id

__all__ = [
    "BUNDLE_FORMAT",
    "MODES",
    "RUN_FORKED",
    "RUN_STARTED",
    "TOOL_CALL",
    "Bundle",
    "Change",
    "Mode",
    "Prepared",
    "Preparer",
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
    "check_memo",
    "decode_bundle",
    "encode_bundle",
    "export_bundle",
    "fingerprint",
    "input_hash",
    "memo_key",
    "new_run_id",
    "regress",
    "split_result",
    "verify_bundle",
]
