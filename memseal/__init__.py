"""memseal: agent memory in which every memory tool call is an Ed25519-signed ledger entry.

The layers are ``memseal.ledger`` (the signed log), ``memseal.engine`` (the
memory model), ``memseal.tools`` (model-facing tools) and ``memseal.replay``
(durable runs); imports go one way, in that order.
"""

from memseal._sync_memory import SyncMemory, open_sync
from memseal.engine import Namespace, Reach
from memseal.errors import (
    Conflict,
    InvalidRequest,
    KeyFileError,
    MemsealError,
    NotFound,
    ProvenanceError,
    ReplayDivergence,
    StorageError,
    Unsupported,
    VerificationError,
)
from memseal.memory import Memory, RecordedCall, RecordedTools, open
from memseal.replay import Run
from memseal.tools import ToolScope

__all__ = [
    "Conflict",
    "InvalidRequest",
    "KeyFileError",
    "Memory",
    "MemsealError",
    "Namespace",
    "NotFound",
    "ProvenanceError",
    "Reach",
    "RecordedCall",
    "RecordedTools",
    "ReplayDivergence",
    "Run",
    "StorageError",
    "SyncMemory",
    "ToolScope",
    "Unsupported",
    "VerificationError",
    "open",
    "open_sync",
]

__version__ = "0.1.0"
