"""Session bundles (format ``memseal/bundle@v3``): one run, exported and verified offline.

A bundle is one JSON document (see docs/formats.md for every byte): the
run's own entries (``run_started``, ``memory_tool_call``, ``run_forked``),
the memory entries its results cite and its writes made (``memory_stored``,
``trust_changed``, ``memory_forgotten``), every ``key_rotated`` entry, each
with its stored bytes, signature, payload (unless a signed forget erased it)
and an RFC 6962 inclusion proof against the signed checkpoint it carries;
and a signed *manifest*, a note made at export by the key that signed the
checkpoint, stating the bundle's extent (every entry's seq, leaf hash and
whether its payload is present; the run's last step and call count) and
every other field a verifier or a replay reads (run id, origin, keys,
embedders), bound to the checkpoint's size and root.

A bundle exported with ``with_read_proofs`` also carries a ``reads`` section
(:mod:`memseal.replay.evidence._bundle_reads`): every entry before the run's last
read, the texts of those in the run's reach, and a checkpoint signed at each
size a read observed with its consistency proof, so ``memseal prove-read
BUNDLE`` proves any of the run's reads with no data folder. It grows with
the log before the run, so it is asked for. A ``memseal/bundle@v2`` bundle
(the same document without ``reads``) still verifies and replays.

:func:`export_bundle` cuts a checkpoint and collects all of that from a
ledger; :func:`verify_bundle` checks a bundle against one trusted vkey with
the rigour of a full ledger audit, then decodes the run's calls. A bundle
is read only in its canonical bytes, so each bundle has one spelling and a
changed byte is always a changed value.

The format lives in :mod:`memseal.replay.evidence._bundle_format`, writing in
:mod:`memseal.replay.evidence._bundle_export`, verification in
:mod:`memseal.replay.evidence._bundle_verify`; this module is their public face.
"""

from __future__ import annotations

from ._bundle_export import export_bundle
from ._bundle_format import (
    FORMAT,
    MANIFEST_HEADER,
    MAX_BUNDLE_BYTES,
    MEMORY_KINDS,
    READABLE_FORMATS,
    RETIRED_FORMATS,
    RUN_KINDS,
    Bundle,
    BundleCall,
    BundleEntry,
    BundleReads,
    Listed,
    Manifest,
    PrefixEntry,
    ReadCheckpoint,
    ReadsStated,
    VerifiedBundle,
    decode_bundle,
    encode_bundle,
    manifest_text,
)
from ._bundle_verify import verify_bundle

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
    "Listed",
    "Manifest",
    "PrefixEntry",
    "ReadCheckpoint",
    "ReadsStated",
    "VerifiedBundle",
    "decode_bundle",
    "encode_bundle",
    "export_bundle",
    "manifest_text",
    "verify_bundle",
]
