"""C2SP checkpoint bodies (c2sp.org/tlog-checkpoint) and tlog proofs (c2sp.org/tlog-proof@v1).

A checkpoint is the text of a signed note: at least three non-empty lines, the
log's origin, the tree size in decimal without leading zeros, and the base64
RFC 6962 root hash, then optional non-empty extension lines::

    example.com/behind-the-sofa
    20852163
    CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

A tlog proof is an offline inclusion proof: a fixed first line, an optional
``extra <base64>`` line (opaque, unauthenticated), ``index <decimal>``, one
base64 SHA-256 hash per line from the leaf's sibling up to the root's child,
an empty line, then the signed checkpoint note verbatim::

    c2sp.org/tlog-proof@v1
    index 73894
    gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=

    example.com/fancylog
    ...

Parsing here is syntax only: nothing is trusted until the checkpoint note has
been opened against known keys and the inclusion proof checked against it.
"""

from __future__ import annotations

import re

import msgspec

from memseal.ledger._base64 import b64decode, b64encode
from memseal.ledger.errors import InvalidRequest
from memseal.ledger.note import split_note

__all__ = [
    "MAX_PROOF_HASHES",
    "MAX_TREE_SIZE",
    "TLOG_PROOF_HEADER",
    "Checkpoint",
    "TlogProof",
    "format_checkpoint",
    "format_tlog_proof",
    "parse_checkpoint",
    "parse_tlog_proof",
]

TLOG_PROOF_HEADER = "c2sp.org/tlog-proof@v1"

# Go's tlog and SQLite both count leaves in a signed 64-bit integer.
MAX_TREE_SIZE = 2**63 - 1

# No tree of at most MAX_TREE_SIZE leaves is deeper than 63 levels, so no
# honest inclusion proof is longer; the cap bounds work on hostile input.
MAX_PROOF_HASHES = 63

_HASH_SIZE = 32
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


def _parse_decimal(text: str, what: str) -> int:
    # int() would also take '+1', '1_000', ' 1' and non-ASCII digits.
    if not _DECIMAL.fullmatch(text):
        raise InvalidRequest(f"{what} must be a decimal number without leading zeros")
    value = int(text)
    if value > MAX_TREE_SIZE:
        raise InvalidRequest(f"{what} is larger than 2^63-1")
    return value


def _check_count(value: int, what: str) -> None:
    if isinstance(value, bool) or not 0 <= value <= MAX_TREE_SIZE:
        raise InvalidRequest(f"{what} must be an integer from 0 to 2^63-1")


def _check_line(line: str, what: str) -> None:
    """A checkpoint line: non-empty, signable, and unable to break the layout."""
    if not line:
        raise InvalidRequest(f"{what} is empty")
    for ch in line:
        if ch < " " or "\ud800" <= ch <= "\udfff":
            raise InvalidRequest(f"{what} contains U+{ord(ch):04X}")


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A log's tree head: origin, size and RFC 6962 root hash."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_line(self.origin, "checkpoint origin")
        _check_count(self.size, "checkpoint size")
        if len(self.root) != _HASH_SIZE:
            raise InvalidRequest(f"checkpoint root must be 32 bytes, got {len(self.root)}")
        for extension in self.extensions:
            _check_line(extension, "checkpoint extension line")


def format_checkpoint(cp: Checkpoint) -> str:
    """The checkpoint note text, ending in a newline."""
    lines = [cp.origin, str(cp.size), b64encode(cp.root), *cp.extensions]
    return "".join(f"{line}\n" for line in lines)


def parse_checkpoint(text: str) -> Checkpoint:
    """Parse a checkpoint note text strictly."""
    if not text.endswith("\n"):
        raise InvalidRequest("checkpoint text must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise InvalidRequest("checkpoint needs origin, size and root hash lines")
    origin, size_text, root_text, *extensions = lines
    _check_line(origin, "checkpoint origin")
    size = _parse_decimal(size_text, "checkpoint size")
    root = b64decode(root_text)
    if root is None or len(root) != _HASH_SIZE:
        raise InvalidRequest("checkpoint root hash must be base64 of 32 bytes")
    return Checkpoint(origin=origin, size=size, root=root, extensions=tuple(extensions))


class TlogProof(msgspec.Struct, frozen=True, kw_only=True):
    """An offline inclusion proof of entry ``index`` in the tree of ``checkpoint``.

    ``checkpoint`` is the signed checkpoint note, verbatim; ``extra`` is
    opaque and unauthenticated.
    """

    index: int
    hashes: tuple[bytes, ...]
    checkpoint: str
    extra: bytes | None = None

    def __post_init__(self) -> None:
        _check_count(self.index, "tlog proof index")
        if len(self.hashes) > MAX_PROOF_HASHES:
            raise InvalidRequest(f"tlog proof has more than {MAX_PROOF_HASHES} hashes")
        for number, digest in enumerate(self.hashes, start=1):
            if len(digest) != _HASH_SIZE:
                raise InvalidRequest(f"tlog proof hash {number} must be 32 bytes")
        # The checkpoint is carried verbatim, so it must already be a
        # well-formed note whose text is a checkpoint; signatures are checked
        # by whoever trusts the log's keys.
        try:
            text, _ = split_note(self.checkpoint)
            parse_checkpoint(text)
        except InvalidRequest as exc:
            raise InvalidRequest(f"tlog proof checkpoint: {exc}") from None


def format_tlog_proof(p: TlogProof) -> str:
    """The c2sp.org/tlog-proof@v1 text."""
    lines = [TLOG_PROOF_HEADER]
    if p.extra is not None:
        lines.append(f"extra {b64encode(p.extra)}")
    lines.append(f"index {p.index}")
    lines.extend(b64encode(digest) for digest in p.hashes)
    return "\n".join(lines) + "\n\n" + p.checkpoint


def parse_tlog_proof(text: str) -> TlogProof:
    """Parse a c2sp.org/tlog-proof@v1 text strictly."""
    # Every proof line is non-empty, so the first empty line ends the proof;
    # the checkpoint after it has blank lines of its own.
    split = text.find("\n\n")
    if split < 0:
        raise InvalidRequest("tlog proof has no empty line before the checkpoint")
    lines, checkpoint = text[:split].split("\n"), text[split + 2 :]
    if checkpoint.endswith("\n\n"):
        # Refused, not trimmed: the checkpoint is carried verbatim and Go's note.Open
        # refuses the same bytes, so both verifiers keep agreeing on one text.
        raise InvalidRequest(
            "tlog proof ends with an empty line: a proof ends with its checkpoint's last "
            "signature line and exactly one newline (remove the extra trailing newline)"
        )
    if lines[0] != TLOG_PROOF_HEADER:
        raise InvalidRequest(f"tlog proof must start with {TLOG_PROOF_HEADER}")
    position = 1
    extra: bytes | None = None
    if position < len(lines) and lines[position].startswith("extra "):
        extra = b64decode(lines[position][len("extra ") :])
        if extra is None:
            raise InvalidRequest("tlog proof extra is not valid base64")
        position += 1
    if position >= len(lines) or not lines[position].startswith("index "):
        raise InvalidRequest("tlog proof has no index line")
    index = _parse_decimal(lines[position][len("index ") :], "tlog proof index")
    if len(lines) - position - 1 > MAX_PROOF_HASHES:
        raise InvalidRequest(f"tlog proof has more than {MAX_PROOF_HASHES} hashes")
    hashes: list[bytes] = []
    for number, line in enumerate(lines[position + 1 :], start=1):
        digest = b64decode(line)
        if digest is None or len(digest) != _HASH_SIZE:
            raise InvalidRequest(f"tlog proof hash {number} must be base64 of 32 bytes")
        hashes.append(digest)
    return TlogProof(index=index, hashes=tuple(hashes), checkpoint=checkpoint, extra=extra)
