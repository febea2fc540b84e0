"""The error tree (drawn in :mod:`memseal.ledger.errors`), under its public name."""

from memseal.ledger.errors import (
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

__all__ = [
    "Conflict",
    "InvalidRequest",
    "KeyFileError",
    "MemsealError",
    "NotFound",
    "ProvenanceError",
    "ReplayDivergence",
    "StorageError",
    "Unsupported",
    "VerificationError",
]
