"""memseal.ledger: the signed, append-only log every other layer records into.

Entries are canonical JSON payloads signed with Ed25519 and chained by hash;
their leaf hashes form an RFC 6962 Merkle tree whose checkpoints are signed
notes (C2SP signed-note / tlog-checkpoint). A log store (SQLite or
PostgreSQL) keeps the entries; :class:`Ledger` appends to it and
:class:`LedgerVerifier` checks it end to end. See docs/ledger.md. This layer
imports nothing else of memseal.

The public names are re-exported here; modules whose names start with ``_``
are internal.
"""

from .canonical import MAX_PAYLOAD_BYTES, canonical_json
from .checkpoint import (
    Checkpoint,
    TlogProof,
    format_checkpoint,
    format_tlog_proof,
    parse_checkpoint,
    parse_tlog_proof,
)
from .entry import (
    GENESIS_PREV,
    Draft,
    Entry,
    decode_entry,
    encode_entry,
    format_time,
    make_draft,
    payload_hash,
    signing_message,
)
from .entry_check import KeyChain, check_entry, check_format, signature_verifies
from .errors import (
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
from .folder import DataFolder
from .keys import Keys, create_keys, key_files_exist, key_history, load_keys, secure_folder
from .location import DatabaseUrl, hide_password, is_database_url, parse_database_url
from .log import KEY_ROTATED, Ledger
from .merkle import EMPTY_ROOT, leaf_hash, verify_consistency, verify_inclusion
from .note import Note, NoteSigner, VerifierKey, open_note, parse_vkey, sign_note, split_note
from .opening import (
    Location,
    LogLocation,
    OpenedLog,
    check_keys,
    choose_location,
    genesis,
    log_store,
    open_log,
    read_location,
    record_location,
    write_location,
)
from .postgres import PostgresLogStore
from .sqlite import SqliteLogStore
from .store import Appended, Execute, Head, LogStore, Record, Snapshots, SqlStore, WriteTxn
from .transparency import (
    CheckpointPolicy,
    ConsistencyProof,
    InclusionProof,
    LogClient,
    open_checkpoint,
)
from .verify import LedgerVerifier, VerifySummary, check_payload

__all__ = [
    "EMPTY_ROOT",
    "GENESIS_PREV",
    "KEY_ROTATED",
    "MAX_PAYLOAD_BYTES",
    "Appended",
    "Checkpoint",
    "CheckpointPolicy",
    "Conflict",
    "ConsistencyProof",
    "DataFolder",
    "DatabaseUrl",
    "Draft",
    "Entry",
    "Execute",
    "Head",
    "InclusionProof",
    "InvalidRequest",
    "KeyChain",
    "KeyFileError",
    "Keys",
    "Ledger",
    "LedgerVerifier",
    "Location",
    "LogClient",
    "LogLocation",
    "LogStore",
    "MemsealError",
    "NotFound",
    "Note",
    "NoteSigner",
    "OpenedLog",
    "PostgresLogStore",
    "ProvenanceError",
    "Record",
    "ReplayDivergence",
    "Snapshots",
    "SqlStore",
    "SqliteLogStore",
    "StorageError",
    "TlogProof",
    "Unsupported",
    "VerificationError",
    "VerifierKey",
    "VerifySummary",
    "WriteTxn",
    "canonical_json",
    "check_entry",
    "check_format",
    "check_keys",
    "check_payload",
    "choose_location",
    "create_keys",
    "decode_entry",
    "encode_entry",
    "format_checkpoint",
    "format_time",
    "format_tlog_proof",
    "genesis",
    "hide_password",
    "is_database_url",
    "key_files_exist",
    "key_history",
    "leaf_hash",
    "load_keys",
    "log_store",
    "make_draft",
    "open_checkpoint",
    "open_log",
    "open_note",
    "parse_checkpoint",
    "parse_database_url",
    "parse_tlog_proof",
    "parse_vkey",
    "payload_hash",
    "read_location",
    "record_location",
    "secure_folder",
    "sign_note",
    "signature_verifies",
    "signing_message",
    "split_note",
    "verify_consistency",
    "verify_inclusion",
    "write_location",
]
