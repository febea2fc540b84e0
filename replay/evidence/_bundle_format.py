"""The session bundle format (``memseal/bundle@v3``): its fields, its one spelling, its manifest.

See :mod:`memseal.replay.evidence.bundle` for what a bundle holds and docs/formats.md
for every byte. This module is the format alone: the structs, the canonical
encoding and its strict decoder, and the manifest note's text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Final

import msgspec

from memseal.ledger.entry import RESIDUE_SALT, Entry
from memseal.ledger.errors import Conflict, InvalidRequest, VerificationError
from memseal.ledger.note import split_note
from memseal.replay.runs.calls import (
    RUN_FORKED,
    RUN_STARTED,
    TOOL_CALL,
    RunStarted,
    ToolCall,
    scope_of,
)
from memseal.tools import ToolScope

if TYPE_CHECKING:
    from memseal.ledger.log import Ledger

__all__ = [
    "FORMAT",
    "MANIFEST_HEADER",
    "MAX_BUNDLE_BYTES",
    "MEMORY_KINDS",
    "READABLE_FORMATS",
    "RETIRED_FORMATS",
    "RUN_KINDS",
    "Bundle",
    "BundleCall",
    "BundleEntry",
    "BundleReads",
    "ExportRaced",
    "Listed",
    "Manifest",
    "PrefixEntry",
    "ReadCheckpoint",
    "ReadsStated",
    "VerifiedBundle",
    "body_of",
    "cut",
    "decode_bundle",
    "encode_bundle",
    "eraser_of",
    "fail",
    "items_of",
    "manifest_of",
    "manifest_text",
    "run_scope",
]

FORMAT: Final = "memseal/bundle@v3"
#: Formats this memseal reads: v3 adds the optional ``reads`` section (what read proofs
#: need); a v2 bundle is a v3 bundle without it, byte for byte but for the format name.
READABLE_FORMATS: Final = frozenset({"memseal/bundle@v2", FORMAT})
#: Formats this memseal knows but refuses: they carry no signed statement of their extent.
RETIRED_FORMATS: Final = frozenset({"memseal/bundle@v1"})
#: The first line of a manifest note's text (never a valid checkpoint's: its second line is
#: JSON, not a tree size, so neither signature can pass as the other).
MANIFEST_HEADER: Final = "memseal/bundle-manifest/v1"
RUN_KINDS: Final = frozenset({RUN_STARTED, TOOL_CALL, RUN_FORKED})
MEMORY_KINDS: Final = frozenset({"memory_stored", "trust_changed", "memory_forgotten"})
#: A bundle larger than this is refused before it is parsed.
MAX_BUNDLE_BYTES: Final = 256 * 1024 * 1024
_FORMAT_PREFIX = re.compile(rb'\{"format":"([^"]{1,64})"')


class BundleEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One ledger entry as the log stored it, with its inclusion proof."""

    seq: int
    leaf: bytes
    sig: bytes
    salt: bytes | None
    payload: bytes | None
    proof: tuple[bytes, ...]


class PrefixEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An entry of the log before the run's last read that ``entries`` lacks: its stored
    bytes and signature, its payload only when it lies in the run's reach. No audit path:
    every leaf of the prefix is here, so the verifier recomputes the roots from them."""

    seq: int
    leaf: bytes
    sig: bytes
    salt: bytes | None
    payload: bytes | None


class ReadCheckpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A checkpoint signed at exactly a size one of the run's reads observed, and the
    RFC 6962 consistency proof from it to the bundle's checkpoint."""

    note: str
    consistency: tuple[bytes, ...]


class BundleReads(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What ``memseal prove-read BUNDLE`` needs (``export --with-read-proofs``)."""

    ranked_by: str  # the store that ranked the reads: sqlite or postgresql
    checkpoints: tuple[ReadCheckpoint, ...]  # one per observed size, ascending
    prefix: tuple[PrefixEntry, ...]  # every seq below the largest size not in ``entries``


class Bundle(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """A session bundle, field order as encoded (``format`` first).

    ``reads`` is left out when absent, so a v2 bundle decodes and re-encodes to its own
    bytes (its canonical form is unchanged)."""

    format: str
    run_id: str
    origin: str
    keys: tuple[str, ...]
    checkpoint: str
    manifest: str
    embedders: tuple[str, ...]
    entries: tuple[BundleEntry, ...]
    reads: BundleReads | None = None


class Listed(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, array_like=True
):
    """One entry as the manifest lists it: ``[seq, leaf hash, payload present]``."""

    seq: int
    leaf_hash: bytes
    payload: bool


class ReadsStated(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The manifest's statement of a bundle's ``reads`` section."""

    ranked_by: str
    sizes: tuple[int, ...]  # the sizes its checkpoints are signed at, ascending
    prefix: int  # how many prefix entries it holds


class Manifest(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """The signed statement of a bundle's extent and fields (the JSON line of its note).

    ``reads`` is left out when the bundle has none: a v2 manifest is read unchanged."""

    run_id: str
    origin: str
    size: int  # the checkpoint's tree size ...
    root: bytes  # ... and root: the manifest is made for that checkpoint only
    keys: tuple[str, ...]
    embedders: tuple[str, ...]
    last_step: int | None  # the run's highest recorded step (None: no call recorded)
    calls: int  # its memory_tool_call entries, superseded ones included
    entries: tuple[Listed, ...]
    # The bundle's format, stated from v3 on (so renaming a v3 bundle v2 is an edit that
    # fails); a v2 manifest has no such field.
    format: str | None = None
    reads: ReadsStated | None = None
    # "postgresql" when PostgreSQL's ts_rank ranked the run's full-text reads, so replay
    # ranks as it did; absent for SQLite's BM25 (and in bundles made before the field).
    ranked_by: str | None = None


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Bundle)
_manifest_decoder = msgspec.json.Decoder(Manifest)


class BundleCall(msgspec.Struct, frozen=True, kw_only=True):
    """One verified recorded call of the run."""

    seq: int
    at: str
    call: ToolCall
    arguments: Any  # None when a forget erased them, or the call failed (see withheld)
    result: Any  # texts restored; {"forgotten": true} where erased
    withheld: list[str] | None = None  # a failed call's salted digest of its arguments


class VerifiedBundle(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`verify_bundle` returns: the bundle, its checked entries and calls."""

    bundle: Bundle
    size: int
    root: bytes
    entries: dict[int, Entry]
    calls: tuple[BundleCall, ...]  # the effective call of each step, by step
    superseded: tuple[int, ...]
    started: RunStarted | None
    keys: tuple[str, ...]  # signing keys seen
    manifest: Manifest
    # The reads section's entries (every entry before the last read that ``entries``
    # lacks), checked like ``entries``; empty without one. Replay never reads them.
    prefix: dict[int, Entry] = msgspec.field(default_factory=dict)

    @property
    def run_id(self) -> str:
        """The id of the run the bundle holds."""
        return self.bundle.run_id

    def line(self) -> str:
        """The one line ``memseal verify`` prints for a verified bundle."""
        reads = self.bundle.reads
        proofs = (
            ""
            if reads is None
            else f", read proofs: {len(self.prefix)} prefix entries, "
            f"{len(reads.checkpoints)} read checkpoint(s)"
        )
        return (
            f"ok: bundle of run {self.run_id!r}: {len(self.entries)} entries verified against "
            f"checkpoint {self.size} (root {self.root.hex()[:16]}), {len(self.calls)} call(s), "
            f"{len(self.keys)} signing key(s){proofs}"
        )


def run_scope(verified: VerifiedBundle) -> ToolScope:
    """The scope the run's ``run_started`` entry recorded; VerificationError (step ``run``)
    when the bundle has none or it names an unknown reach or an invalid scope."""
    if verified.started is None:
        raise VerificationError(
            "the bundle has no run_started entry: its scope is unknown", step="run"
        )
    return scope_of(verified.started)


def encode_bundle(bundle: Bundle) -> bytes:
    """The bundle's bytes: compact JSON in field order, then one newline."""
    return _encoder.encode(bundle) + b"\n"


def decode_bundle(data: bytes) -> Bundle:
    """Parse a bundle (syntax only); raise VerificationError step ``format``.

    Only the canonical bytes (exactly what :func:`encode_bundle` makes of the
    decoded value) are accepted: a second spelling of the same values (other
    whitespace, escapes, base64 padding bits) would be an edit that verifies.
    """
    if len(data) > MAX_BUNDLE_BYTES:
        raise VerificationError(
            f"the bundle is larger than {MAX_BUNDLE_BYTES} bytes", step="format"
        )
    found = _FORMAT_PREFIX.match(data)
    if found is None:
        raise VerificationError(
            f'not a memseal bundle: it must start with {{"format":"{FORMAT}"', step="format"
        )
    name = found.group(1).decode(errors="replace")
    if name in RETIRED_FORMATS:
        raise VerificationError(
            f"bundle format {name!r} carries no signed statement of its extent, so a cut "
            f"copy would pass as whole: this memseal refuses it; re-export the run with "
            f"`memseal export` to get a {FORMAT} bundle",
            step="format",
        )
    if name not in READABLE_FORMATS:
        raise VerificationError(
            f"bundle format {name!r}; this memseal reads {FORMAT} (and memseal/bundle@v2)",
            step="format",
        )
    try:
        bundle = _decoder.decode(data)
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc).lower():
            raise VerificationError(
                f"the bundle is truncated ({len(data)} bytes): {exc}", step="truncated"
            ) from None
        raise VerificationError(
            f"the bundle is malformed: {_one_line(exc)}", step="format"
        ) from None
    except msgspec.ValidationError as exc:
        raise VerificationError(
            f"the bundle is malformed: {_one_line(exc)}", step="format"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        # msgspec raises these for invalid UTF-8 in a string, among others.
        raise VerificationError(
            f"the bundle is malformed: {_one_line(exc)}", step="format"
        ) from None
    if bundle.reads is not None and bundle.format != FORMAT:
        raise VerificationError(
            f"a {bundle.format} bundle has no `reads` section (it came with {FORMAT})",
            step="format",
        )
    if encode_bundle(bundle) != data:
        raise VerificationError(
            "the bundle is not in canonical form (compact JSON in field order, minimal "
            "escapes, canonical base64, one final newline): it was changed after export",
            step="format",
        )
    return bundle


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def body_of(entry: Entry) -> Any:
    """An entry's body as JSON, or None when it is not JSON."""
    try:
        return msgspec.json.decode(entry.body)
    except msgspec.DecodeError:
        return None


def items_of(kind: str, body: Any) -> list[str]:
    """The memory items a memory entry's body names."""
    if not isinstance(body, dict):
        return []
    if kind == "memory_forgotten":
        items = body.get("items")
        return [i for i in items if isinstance(i, str)] if isinstance(items, list) else []
    item = body.get("item")
    return [item] if isinstance(item, str) else []


def manifest_text(manifest: Manifest) -> str:
    """The text a manifest note signs: its header line, then the manifest as one JSON line."""
    return f"{MANIFEST_HEADER}\n{_encoder.encode(manifest).decode()}\n"


def manifest_of(note: str) -> Manifest:
    """The manifest a note states, unverified (its signature is checked after the key walk)."""
    try:
        text, _ = split_note(note)
    except InvalidRequest as exc:
        raise fail(f"the manifest note is malformed: {exc}", "manifest") from None
    header, _, rest = text.partition("\n")
    line, _, tail = rest.partition("\n")
    if header != MANIFEST_HEADER or tail:
        raise fail(
            f"the manifest note's text is not {MANIFEST_HEADER!r} and one JSON line", "manifest"
        )
    try:
        manifest = _manifest_decoder.decode(line.encode())
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise fail(f"the manifest is malformed: {_one_line(exc)}", "manifest") from None
    if manifest_text(manifest) != text:
        # One spelling per manifest, as for the bundle itself.
        raise fail("the manifest is not in canonical form", "manifest")
    return manifest


def fail(message: str, step: str, seq: int | None = None) -> VerificationError:
    """The verification failure of ``step`` (at ``seq``, when an entry is at fault)."""
    return VerificationError(message, seq=seq, step=step)


class ExportRaced(Conflict):
    """A forget committed after the export cut its checkpoint erased a payload the bundle
    was to hold: its eraser lies past the checkpoint, so no verifier could tell why the text
    is gone. The export starts again against a new checkpoint (once; then this is raised)."""

    def __init__(self, seq: int, by: int) -> None:
        super().__init__(
            f"entry {seq}'s payload was erased by a forget (seq {by}) while the bundle was "
            "exported; export it again"
        )
        self.seq, self.by = seq, by


def cut(payload: bytes | None, salt: bytes | None, entry: Entry) -> bool:
    """Whether ``entry`` commits to a payload that is stored absent or cut to a residue:
    either way a signed entry's ``redacts`` owes the reader an account of it."""
    return entry.payload_hash is not None and (payload is None or salt == RESIDUE_SALT)


async def eraser_of(ledger: Ledger, seq: int, size: int) -> int | None:
    """The seq of the forget that erased ``seq``'s payload; :class:`ExportRaced` when it
    committed after the checkpoint of ``size`` entries was cut (no verifier could see it)."""
    by = await ledger.store.redacted_by(seq)
    if by is not None and by >= size:
        raise ExportRaced(seq, by)
    return by
