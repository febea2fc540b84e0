"""Recorded results that survive a forget: a signed skeleton plus erasable texts.

A tool result is split before it is recorded. Every string a person could
have typed (memory text, titles, tags, paths, urls, answers, error
messages) is replaced by ``{"$t": h}`` where ``h`` is blake3 over a fresh
16-byte salt and the text; what stays is the *skeleton*: ids, kinds,
scores, trust, cursors and those references. The skeleton goes into the
signed entry's body and the result hash covers it; the texts (with their
salts) go into the entry's payload, which a forget erases.

Replaying puts the texts back. A forget erases only the texts of what it
forgot (and texts no item owns); the payload keeps the others as a residue.
Each erased reference becomes ``{"forgotten_at": seq}``, the seq of the
signed entry that erased it, and every other text comes back byte for byte:
a resumed run stays on its recorded path and never sees forgotten text.

Structural keys are listed, not text keys: a string under a key not listed
here is treated as text, so a new field added to a result is protected by
default. The ``id`` of an item's ``meta.source`` is the host's name for where
the memory came from (a message, a person), not a memory id: it is text too,
owned by the item, so forgetting the item erases it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import blake3
import msgspec

__all__ = [
    "STRUCTURAL_KEYS",
    "TEXT_REF",
    "Split",
    "payload_salt",
    "restore",
    "result_hash",
    "split",
    "text_salts",
]

TEXT_REF = "$t"

# Values under these keys are structure: ids, enums, cursors and times a model
# cannot have written (all lists of ids under them are structure too).
STRUCTURAL_KEYS = frozenset(
    {
        "id",
        "ids",
        "kind",
        "trust",
        "previous",
        "mode",
        "min_trust",
        "facet",
        "ledger_ref",
        "next_cursor",
        "missing",
        "filtered",
        "skipped",
        "forgotten",
        "role",
        "code",
        "type",
        "observed_at",
        "run_id",
        "superseded_by",
    }
)

#: Objects whose ``id`` is not a memory id but the host's own name for something
#: (``meta.source.id``): there ``id`` is text, like any string not listed above.
_TEXT_ID_OBJECTS = frozenset({"source"})

_encoder = msgspec.json.Encoder(order="deterministic")
# Exactly these types are kept as they are by the walk below (issue 17: a fetch's scores
# and seqs were a recursive call and three failed type checks each). bool is listed
# apart: it is not matched by an exact ``int`` check.
_SCALARS = frozenset({int, float, bool, type(None)})


class Split(msgspec.Struct, frozen=True, kw_only=True):
    """A result as recorded: ``skeleton`` (signed, kept) and ``texts`` (payload, erasable)."""

    skeleton: Any
    texts: dict[str, list[str]]  # ref -> [salt hex, text]


#: The context of a call's text salts: the keyed blake3 output stream they are cut from.
_SALT_CONTEXT = b"memseal/text-salts/v1"
#: The context of the salt of the call's payload itself (another stream of the same seed).
_PAYLOAD_SALT_CONTEXT = b"memseal/payload-salt/v1"
_SALT_SIZE = 16


def payload_salt(seed: bytes) -> bytes:
    """The 16-byte salt of a call's payload, from the call's seed (see :func:`text_salts`)."""
    return blake3.blake3(_PAYLOAD_SALT_CONTEXT, key=seed).digest(length=_SALT_SIZE)


def text_salts(seed: bytes, count: int) -> list[bytes]:
    """``count`` 16-byte salts from one call's random ``seed``: text i's salt is bytes
    16i to 16i+16 of blake3 keyed with the seed over a fixed context (its output stream).

    One ``os.urandom`` per call instead of one per text (issue 17: getrandom was 40% of a
    recorded fetch on a loaded host). Each salt is as unpredictable as the 32-byte seed,
    which is never stored, and no two texts of a call share one (distinct offsets of one
    stream; two calls' seeds collide with probability 2^-256). Verification never
    re-derives a salt: each is stored beside its text, so this is a producer's choice only.
    """
    stream = blake3.blake3(_SALT_CONTEXT, key=seed).digest(length=_SALT_SIZE * count)
    return [stream[i : i + _SALT_SIZE] for i in range(0, len(stream), _SALT_SIZE)]


def split(result: Any, seed: bytes | None = None) -> Split:
    """Split a result into its signed skeleton and its erasable, salted texts.

    ``seed`` is the call's 32 random bytes the salts derive from (default: fresh ones).
    """
    # Each text's reference object, filled once every text is known: the salts of a call
    # come from one seed in one blake3 call (text_salts), in walk order.
    found: list[tuple[dict[str, str], str]] = []

    def text(value: str) -> dict[str, str]:
        ref: dict[str, str] = {}
        found.append((ref, value))
        return ref

    def walk(value: Any, structural: bool) -> Any:
        # Results are plain JSON here (decoded or normalised): exact type checks first,
        # the abstract ones only for anything else (a Mapping ABC check costs more).
        kind = type(value)
        if kind in _SCALARS:
            return value
        if kind is str or isinstance(value, str):
            return value if structural else text(value)
        if kind is dict or isinstance(value, Mapping):
            out = {}
            for key, member in value.items():
                kind = type(member)
                if kind is str:  # the common case, without a call
                    out[key] = member if key in STRUCTURAL_KEYS else text(member)
                elif kind in _SCALARS:  # scores, seqs, flags: kept as they are, no call
                    out[key] = member
                elif key in _TEXT_ID_OBJECTS and isinstance(member, Mapping):
                    # A source's id names a message, a person, a file in the host's world:
                    # it is text, erasable with the item whose meta it is (its owner, see
                    # text_owners).
                    out[key] = {
                        k: walk(v, k in STRUCTURAL_KEYS and k != "id") for k, v in member.items()
                    }
                else:
                    out[key] = walk(member, key in STRUCTURAL_KEYS)
            return out
        if kind is list or isinstance(value, list | tuple):
            return [walk(v, structural) for v in value]
        return value

    skeleton = walk(result, False)
    texts: dict[str, list[str]] = {}
    if found:
        salts = text_salts(os.urandom(32) if seed is None else seed, len(found))
        for (ref, value), salt in zip(found, salts, strict=True):
            digest = blake3.blake3(salt + value.encode("utf-8")).hexdigest()
            ref[TEXT_REF] = digest
            texts[digest] = [salt.hex(), value]
    return Split(skeleton=skeleton, texts=texts)


def result_hash(skeleton: Any) -> str:
    """blake3 of the skeleton's canonical JSON: what the signed entry commits to."""
    return blake3.blake3(_encoder.encode(skeleton)).hexdigest()


def restore(
    skeleton: Any,
    texts: Mapping[str, Any] | None,
    forgotten_at: int | None,
    marks: Mapping[str, int] | None = None,
) -> Any:
    """Put the texts back; with ``texts`` None (erased), mark each one forgotten.

    With ``texts`` and ``forgotten_at`` both given (a residue a forget left),
    a reference the texts lack was erased: it is marked forgotten. Its mark is
    ``marks[ref]`` where given (a later forget erased it), else ``forgotten_at``
    (the first forget that cut the payload).

    Raises ``ValueError`` when a present text does not match its reference:
    the payload was tampered with (the caller turns that into a provenance error).
    """

    def walk(value: Any) -> Any:
        if isinstance(value, Mapping):
            if set(value) == {TEXT_REF} and isinstance(value[TEXT_REF], str):
                ref = value[TEXT_REF]
                by = forgotten_at if marks is None else marks.get(ref, forgotten_at)
                if texts is None:
                    return {"forgotten_at": by}
                found = texts.get(ref)
                if found is None and forgotten_at is not None:
                    return {"forgotten_at": by}
                if (
                    not isinstance(found, list)
                    or len(found) != 2
                    or not all(isinstance(x, str) for x in found)
                ):
                    raise ValueError(f"text {ref[:12]} is missing from the payload")
                salt, text = found
                if blake3.blake3(bytes.fromhex(salt) + text.encode("utf-8")).hexdigest() != ref:
                    raise ValueError(f"text {ref[:12]} does not match its reference")
                return text
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(skeleton)
