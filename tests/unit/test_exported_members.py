"""The public surface of memseal, its four layers and its apps, pinned.

Each layer package, ``memseal.apps``, and each package inside one
(``memseal.apps.lifecycle``, the agent memory lifecycle; the replay floors
``runs``, ``evidence`` and ``regress``), re-exports its public names from ``__init__.py``
and lists them in ``__all__``. This pins those lists, so adding, dropping or renaming a
public name is a deliberate edit here and not a side effect of a refactor
(the same check httpx keeps in ``tests/test_exported_members.py``).
"""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

PINNED: dict[str, list[str]] = {
    "memseal": [
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
    ],
    "memseal.ledger": [
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
    ],
    "memseal.engine": [
        "ANN_MIN",
        "ENGINE_KINDS",
        "FACETS",
        "ITEM_KINDS",
        "LEARNING_KINDS",
        "RANK_CAP",
        "SQLITE_RANKED_BELOW",
        "TRUST_LEVELS",
        "Answerer",
        "Bucket",
        "Citation",
        "Clock",
        "Content",
        "Conversation",
        "DateRange",
        "Document",
        "Embedder",
        "Engine",
        "Exploration",
        "ExtractiveAnswerer",
        "Fetched",
        "Filter",
        "Forgotten",
        "Got",
        "HashingEmbedder",
        "Hit",
        "Item",
        "ItemKind",
        "Keyring",
        "Learning",
        "MemoryForgotten",
        "MemoryStored",
        "Meta",
        "Mode",
        "Namespace",
        "NewItem",
        "Page",
        "Progress",
        "ProjectionCheck",
        "Reach",
        "RebuildReport",
        "Recollection",
        "Source",
        "Stored",
        "StoredPayload",
        "Trust",
        "TrustChange",
        "TrustChanged",
        "TrustPayload",
        "Turn",
        "Verdict",
        "check_projections",
        "default_embedder",
        "ranked_at",
        "ranked_by",
        "sqlite_ranked_below",
        "state_hash",
    ],
    "memseal.tools": [
        "DEFAULT_BRIEFS",
        "FORBIDDEN_KEYS",
        "MAX_ARGUMENT_BYTES",
        "MODEL_ERRORS",
        "READ_TOOLS",
        "TOOL_NAMES",
        "TRAITS",
        "WRITE_TOOLS",
        "AsyncTool",
        "AsyncToolset",
        "Brief",
        "ContextSpec",
        "MemoryTools",
        "Outcome",
        "PreparedCall",
        "Refusal",
        "Runner",
        "Tool",
        "ToolName",
        "ToolScope",
        "ToolSource",
        "ToolSpec",
        "Toolset",
        "Traits",
        "arguments_type",
        "as_plain",
        "cited_ids",
        "has_side_effects",
        "mcp_server",
        "parameters_for",
        "refusal_before_approval",
        "runner_for",
        "spec_for",
        "to_text",
    ],
    "memseal.apps": [],
    "memseal.apps.lifecycle": [
        "BRAIN_TAG",
        "DEFAULT_BUDGET",
        "DEFAULT_MAX_ATTEMPTS",
        "JOB_KINDS",
        "LEARNINGS",
        "PRESETS",
        "PRE_TURN",
        "SESSION_START",
        "AgentMemory",
        "Belief",
        "BeliefModel",
        "Brain",
        "BriefingSource",
        "BuildRequest",
        "Chunk",
        "Compacted",
        "ContextPack",
        "ExtractiveSummariser",
        "Extractor",
        "FoldedTurn",
        "IngestReport",
        "JobInfo",
        "JobOutcome",
        "JobQueue",
        "MemoryLayout",
        "ModelExtractor",
        "PackItem",
        "PackPreset",
        "PackSection",
        "PastReader",
        "QueueStatus",
        "Recorder",
        "Requeued",
        "Retraction",
        "RetryPolicy",
        "RuleExtractor",
        "SectionSpec",
        "SourceTurn",
        "Summariser",
        "briefing",
        "chunk_id",
        "chunk_text",
        "count_tokens",
        "doc_tag",
        "fit",
        "holistic_recall",
        "kind_of",
        "parse_turns",
        "refers_to_of",
    ],
    "memseal.replay": [
        "BUNDLE_FORMAT",
        "MODES",
        "READ_PROOF_FORMAT",
        "RUN_FORKED",
        "RUN_STARTED",
        "TOOL_CALL",
        "Bundle",
        "Change",
        "Mode",
        "Prepared",
        "Preparer",
        "ReadProof",
        "ReadProofError",
        "RegressReport",
        "ReplayRun",
        "Replayer",
        "Run",
        "RunForked",
        "RunStarted",
        "ScopeIdentity",
        "ToolCall",
        "Verified",
        "VerifiedBundle",
        "VerifiedRead",
        "check_memo",
        "decode_bundle",
        "encode_bundle",
        "export_bundle",
        "fingerprint",
        "input_hash",
        "memo_key",
        "new_run_id",
        "prove_read",
        "prove_read_from_bundle",
        "regress",
        "split_result",
        "verify_bundle",
        "verify_read",
    ],
    "memseal.replay.evidence": [
        "BUNDLE_FORMAT",
        "READ_PROOF_FORMAT",
        "Bundle",
        "ReadProof",
        "ReadProofError",
        "VerifiedBundle",
        "VerifiedRead",
        "decode_bundle",
        "encode_bundle",
        "export_bundle",
        "prove_read",
        "prove_read_from_bundle",
        "verify_bundle",
        "verify_read",
    ],
    "memseal.replay.regress": ["RegressReport", "ReplayRun", "Replayer", "regress"],
    "memseal.replay.runs": [
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
    ],
}


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_all_matches_the_pinned_list(name: str) -> None:
    module = importlib.import_module(name)
    assert list(module.__all__) == PINNED[name]


@pytest.mark.parametrize("name", sorted(PINNED))
def test_all_is_sorted(name: str) -> None:
    exported = list(importlib.import_module(name).__all__)
    assert exported == sorted(exported, key=_isort_key)
    assert len(set(exported)) == len(exported)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_name_in_all_exists(name: str) -> None:
    module = importlib.import_module(name)
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == []


@pytest.mark.parametrize("name", sorted(PINNED))
def test_every_public_name_in_the_package_is_in_all(name: str) -> None:
    # A name imported into __init__.py without joining __all__ is a public name
    # nobody pinned; submodules and dunders are not part of the surface.
    module = importlib.import_module(name)
    public = {
        n
        for n, value in vars(module).items()
        if not n.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert sorted(public - set(module.__all__)) == []


LAYERS = ("memseal.ledger", "memseal.engine", "memseal.tools", "memseal.replay", "memseal.apps")


def test_every_package_of_a_layer_is_pinned() -> None:
    # A package inside a layer (the lifecycle inside the apps) is public surface too:
    # one added without a pinned list here would change its names unnoticed.
    found = set(LAYERS)
    for layer in LAYERS:
        package = importlib.import_module(layer)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{layer}."):
            if info.ispkg and not info.name.rsplit(".", 1)[-1].startswith("_"):
                found.add(info.name)
    assert sorted(found - set(PINNED)) == []


def test_the_lifecycle_names_are_the_ones_its_docs_and_readme_use() -> None:
    # The names a host writes (README's agent loop, docs/lifecycle.md) are among the pins.
    for name in ("MemoryLayout", "Brain", "AgentMemory", "ContextPack", "JobQueue", "briefing"):
        assert name in PINNED["memseal.apps.lifecycle"]
