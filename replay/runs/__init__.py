"""memseal.replay.runs: durable runs, the floor the evidence and regress floors stand on.

A :class:`Run` records each tool call as a signed entry with a memo, under a
lease (``_lease.py``), through the live path (``_live.py``); ``calls.py``
holds the entries, ``identity.py`` memo keys and fingerprints, ``memo.py`` the
memo table, ``provenance.py`` the check of a memo against its entry. Nothing
here imports :mod:`memseal.replay.evidence` or :mod:`memseal.replay.regress`.
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
