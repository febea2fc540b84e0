"""The read-proof format (``memseal/read-proof@v1``) and the rules its writer and verifier share.

See :mod:`memseal.replay.evidence.read_proof` for what a proof holds and why. This
module is the format alone: the structs, the canonical encoding and its
strict decoder, and the two decisions both sides must make identically:
which scope the run recorded, and which entries of the prefix lie in the
call's reach (their payloads travel with the proof; the others' do not).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Final

import msgspec

from memseal.engine import Reach
from memseal.engine.events import MemoryForgotten, MemoryStored, TrustChanged, decode_event
from memseal.ledger.entry import RESIDUE_SALT, Entry
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.replay.runs.calls import decode_tool_call_payload, scope_of

__all__ = [
    "FORMAT",
    "MAX_PROOF_BYTES",
    "REDERIVED_KINDS",
    "ProofEntry",
    "ReadProof",
    "ReadProofError",
    "check_hints",
    "check_provable",
    "decode_read_proof",
    "encode_read_proof",
    "fail",
    "in_reach",
    "ranks_text",
    "scope_of",
    "searches_vectors",
]

FORMAT: Final = "memseal/read-proof@v1"
#: A proof larger than this is refused before it is parsed (it holds every entry header of
#: the prefix, a few hundred bytes each: 10^6 entries fit).
MAX_PROOF_BYTES: Final = 1024 * 1024 * 1024
#: The kinds whose payloads a read's re-derivation uses: an item's text, a verdict's actor
#: and reason. A ``memory_forgotten`` entry in reach travels without its payload (the admin's
#: actor and reason, never an agent's to see): what it erases is in its signed body (the
#: items) and header (``redacts``), which the chain and the leaf hash already bind.
REDERIVED_KINDS: Final = frozenset({"memory_stored", "trust_changed"})


class ProofEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ledger entry as the log stored it: its bytes and signature; its payload (with
    its salt) only where the proof discloses it; its inclusion proof where one is owed."""

    seq: int
    leaf: bytes
    sig: bytes
    salt: bytes | None
    payload: bytes | None
    proof: tuple[bytes, ...] | None  # None: no inclusion proof carried for this entry


class ReadProof(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A self-contained proof of what one recorded read returned, field order as encoded."""

    format: str
    run_id: str
    step: int
    origin: str
    embedders: tuple[str, ...]  # what the data folder embedded with (unsigned: a hint)
    ranked_by: str  # the store that ranked the read: sqlite or postgresql (unsigned: a hint)
    checkpoint: str  # a signed checkpoint at exactly the call's observed size N
    latest: str  # a signed checkpoint at a later size M, which holds the call
    consistency: tuple[bytes, ...]  # RFC 6962 consistency proof from N to M
    prefix: tuple[ProofEntry, ...]  # every entry seq < N, in order
    later: tuple[ProofEntry, ...]  # the entries seq >= N a verifier needs (module docstring)


class ReadProofError(VerificationError):
    """A read proof does not check out: ``step`` names the check, ``seq`` the entry at fault
    (None when no one entry is), ``field`` the part of the proof or the result that differs."""

    def __init__(
        self, message: str, *, step: str, seq: int | None = None, field: str | None = None
    ) -> None:
        super().__init__(message, seq=seq, step=step)
        self.field = field


def fail(
    message: str, step: str, seq: int | None = None, field: str | None = None
) -> ReadProofError:
    """The failure of ``step`` (at ``seq``, in ``field``), the field named in the text too."""
    where = f" [{field}]" if field else ""
    return ReadProofError(message + where, step=step, seq=seq, field=field)


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(ReadProof)


def encode_read_proof(proof: ReadProof) -> bytes:
    """The proof's bytes: compact JSON in field order, then one newline."""
    return _encoder.encode(proof) + b"\n"


def _fail(message: str) -> VerificationError:
    return VerificationError(message, step="format")


def decode_read_proof(data: bytes) -> ReadProof:
    """Parse a proof (syntax only); raise VerificationError step ``format`` naming the field.

    Only the canonical bytes are accepted (those :func:`encode_read_proof` makes of the
    decoded value): a second spelling of the same values would be an edit that verifies.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise _fail(f"a read proof is bytes, not {type(data).__name__}")
    data = bytes(data)
    if len(data) > MAX_PROOF_BYTES:
        raise _fail(f"the read proof is larger than {MAX_PROOF_BYTES} bytes")
    if not data.startswith(b'{"format":"' + FORMAT.encode() + b'"'):
        raise _fail(f'not a memseal read proof: it must start with {{"format":"{FORMAT}"')
    try:
        proof = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc).lower():
            raise VerificationError(
                f"the read proof is truncated ({len(data)} bytes)", step="truncated"
            ) from None
        raise _fail(f"the read proof is malformed: {_one_line(exc)}") from None
    except (msgspec.ValidationError, UnicodeDecodeError, ValueError) as exc:
        # msgspec's ValidationError names the field (`$.prefix[3].sig`); invalid UTF-8 in a
        # string is a UnicodeDecodeError.
        raise _fail(f"the read proof is malformed: {_one_line(exc)}") from None
    if encode_read_proof(proof) != data:
        raise _fail(
            "the read proof is not in canonical form (compact JSON in field order, canonical "
            "base64, one final newline): it was changed after it was written"
        )
    return proof


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def check_hints(proof: ReadProof) -> None:
    """Refuse an ``embedders`` hint a writer cannot have made (step ``format``).

    The hint is unsigned and steers re-derivation (``auto`` searches with the embedder it
    names), so it must name exactly what was searched with: the vector cache holds one
    embedder's vectors at a time, so a writer names one or none. A second id would be a
    claim no re-derivation checks.
    """
    if len(proof.embedders) > 1 or not all(proof.embedders):
        raise fail(
            f"the embedders hint {list(proof.embedders)!r} is not one a writer makes: a data "
            "folder's vectors are one embedder's, so a proof names one embedder or none",
            "format",
            field="embedders",
        )


def ranks_text(tool: str, arguments: Any) -> bool:
    """Whether the read ranked full text (BM25 or ts_rank): a fetch in any mode but
    semantic (cosine scores, no corpus statistics), and a recall. A list, a get and an
    explore rank nothing, so no ranking is re-derived or claimed for them."""
    if tool == "memory_recall":
        return True
    mode = arguments.get("mode") if isinstance(arguments, dict) else None
    return tool == "memory_fetch" and mode != "semantic"


def searches_vectors(tool: str, arguments: Any, embedders: Collection[str]) -> bool:
    """Whether the read searched an embedder's vectors: a fetch asking for semantic or
    hybrid, or leaving ``mode`` to the engine (hybrid when it had an embedder, which the
    ``embedders`` hint says), and a recall (hybrid likewise). Only these are re-derived
    with an embedder: for the others the hint steers nothing, so nothing it says is used."""
    if tool == "memory_recall":
        return bool(embedders)
    if tool != "memory_fetch":
        return False
    mode = arguments.get("mode") if isinstance(arguments, dict) else None
    return mode in ("semantic", "hybrid") or (mode is None and bool(embedders))


def check_provable(step: int, payload: bytes | None, salt: bytes | None) -> None:
    """Raise :class:`InvalidRequest` unless the read call of ``step``, whose payload (and
    salt) the log or bundle holds, can be re-derived: its payload whole, no ``cursor``.

    One check for both writers (from the ledger and from a bundle), so they refuse alike.
    """
    if payload is None or salt == RESIDUE_SALT:
        raise InvalidRequest(
            f"step {step}'s arguments or result texts were erased by a forget: the read "
            "cannot be re-derived"
        )
    arguments = decode_tool_call_payload(payload).arguments
    if isinstance(arguments, dict) and arguments.get("cursor") is not None:
        # A cursor names its request by a ref keyed with the instance secret, which a proof
        # must never carry: the page cannot be asked again anywhere else.
        raise InvalidRequest(
            f"step {step} continues from a `cursor`, which is keyed by the instance's secret: "
            "a later page cannot be re-derived offline; prove the step that made the first page"
        )


def in_reach(reach: Reach | None, entries: Iterable[Entry], also: Collection[int] = ()) -> set[int]:
    """The seqs of ``entries`` (a log prefix, in seq order) that make the memory a read
    within ``reach`` sees: each ``memory_stored`` entry whose namespace the reach admits
    (or whose seq is in ``also``: disclosed beyond the reach), and each ``trust_changed``
    or ``memory_forgotten`` entry naming one of their items.

    Bodies are decoded strictly; one that does not decode is a VerificationError (step
    ``format``) naming its seq, on the writer's side as on the verifier's.
    """
    seqs: set[int] = set()
    items: set[str] = set()
    for entry in entries:
        if entry.kind not in ("memory_stored", "trust_changed", "memory_forgotten"):
            continue
        try:
            event = decode_event(entry.kind, bytes(entry.body))
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
            raise VerificationError(
                f"the {entry.kind} body does not decode: {_one_line(exc)}",
                seq=entry.seq,
                step="format",
            ) from None
        if isinstance(event, MemoryStored):
            if reach is None or entry.seq in also or reach.admits(event.namespace):
                seqs.add(entry.seq)
                items.add(event.item)
        elif isinstance(event, TrustChanged):
            if event.item in items:
                seqs.add(entry.seq)
        elif isinstance(event, MemoryForgotten) and items.intersection(event.items):
            seqs.add(entry.seq)
    return seqs
