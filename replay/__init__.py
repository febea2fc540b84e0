"""memseal.replay: durable runs, whose every tool call is a signed entry with a memo.

See docs/replay.md. Public names are re-exported here; modules whose names
start with ``_`` are internal.
"""

from .calls import RUN_FORKED, RUN_STARTED, TOOL_CALL, RunForked, RunStarted, ToolCall
from .identity import ScopeIdentity, fingerprint, input_hash, memo_key
from .provenance import Verified, check_memo
from .results import split as split_result
from .run import MODES, Change, Mode, Prepared, Preparer, Run, new_run_id

__all__ = [
    "MODES",
    "RUN_FORKED",
    "RUN_STARTED",
    "TOOL_CALL",
    "Change",
    "Mode",
    "Prepared",
    "Preparer",
    "Run",
    "RunForked",
    "RunStarted",
    "ScopeIdentity",
    "ToolCall",
    "Verified",
    "check_memo",
    "fingerprint",
    "input_hash",
    "memo_key",
    "new_run_id",
    "split_result",
]
