"""The one error tree of memseal.

Every error memseal raises on purpose derives from :class:`MemsealError`::

    MemsealError
    ├── InvalidRequest        bad input: names the field; nothing was written
    ├── Unsupported           the operation is not offered here
    ├── NotFound              no such entry, item, run or key
    ├── VerificationError     a signed fact does not check out (names seq and step)
    │   ├── ProvenanceError   a memo with no matching signed entry
    │   └── ReadProofError    a read proof fails; also names the field
    │                         (memseal.replay.evidence.read_proof, the layer that reads them)
    ├── ReplayDivergence      a replayed call differs from the recorded one
    ├── Conflict              someone else holds what this call needs (a run lease)
    ├── StorageError          the store failed; driver errors are chained as __cause__
    │   └── KeyFileError      a key or secret file is missing, unreadable or malformed
    └── ApiError              an HTTP refusal with its own status and code
                              (memseal.service.errors: the service's, above the layers)

The tree lives in the lowest layer so that every layer can raise from it;
``memseal.errors`` re-exports it (all but ``ApiError``, which is the service's).
"""

from __future__ import annotations

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


class MemsealError(Exception):
    """The root of every error memseal raises on purpose."""


class InvalidRequest(MemsealError):
    """The input is malformed; the message names the field. Nothing was written."""


class Unsupported(MemsealError):
    """The operation is not offered by this store, engine or scope."""


class NotFound(MemsealError):
    """The thing asked for does not exist."""


class VerificationError(MemsealError):
    """A signed fact does not check out.

    ``seq`` is the first bad entry (None when the failure is not about one
    entry, e.g. a checkpoint), ``step`` the check that failed: ``format``,
    ``chain``, ``signature``, ``unknown key``, ``payload hash``,
    ``redaction``, ``tree root``, ``checkpoint``, ``memo``.
    """

    def __init__(self, message: str, *, seq: int | None = None, step: str = "format") -> None:
        self.seq = seq
        self.step = step
        where = f"seq {seq}: " if seq is not None else ""
        super().__init__(f"{where}{step}: {message}")


class ProvenanceError(VerificationError):
    """A memo has no matching signed provenance.

    The message is always exactly :attr:`MESSAGE`, so hosts can match it;
    ``detail`` says which check failed and ``seq`` which entry it was.
    """

    MESSAGE = "memory memo missing matching signed provenance"

    def __init__(self, detail: str = "", *, seq: int | None = None) -> None:
        self.detail = detail
        self.seq = seq
        self.step = "memo"
        Exception.__init__(self, self.MESSAGE)


class ReplayDivergence(MemsealError):
    """A replayed call does not match what was recorded at that step.

    ``recorded`` and ``attempted`` are ``{"tool", "arguments"}`` (``recorded``
    is None when a forget erased the recorded arguments); ``diff`` lists the
    differing fields as ``path: recorded -> attempted``.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        step: int | None = None,
        recorded: object = None,
        attempted: object = None,
        diff: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.step = step
        self.recorded = recorded
        self.attempted = attempted
        self.diff = diff


class Conflict(MemsealError):
    """Someone else holds what this call needs."""


class StorageError(MemsealError):
    """The store failed; the driver's error is chained as ``__cause__``."""


class KeyFileError(StorageError):
    """A key or secret file is missing, unreadable or malformed."""
