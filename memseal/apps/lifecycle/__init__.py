"""memseal.apps.lifecycle: the agent memory lifecycle over the tools and runs.

* :class:`MemoryLayout` (``layout``): a tenant's standard tree and the scope
  of each role in it;
* :func:`holistic_recall` and :class:`ContextPack` (``pack``): one budgeted
  read across a host-fixed set of reaches, with presets;
* :func:`briefing` (``briefing``): the system-prompt text for a scope;
* :class:`AgentMemory` (``agent_memory``): session start, pre-turn context,
  post-turn logging and compaction, each a recorded call;
* :class:`Brain` (``brain``, ``_chunking``): documents ingested into a brain
  node: structure-aware chunks, ids from source and content, re-ingest that
  writes exactly what changed, removal;
* :class:`JobQueue` (``jobs``, ``_extract``): the background belief builds:
  jobs queued as signed entries, each run as its own recorded run, idempotent
  across crashes, beliefs citing their source turns; a failing job's attempts
  recorded as signed markers, retried with backoff up to a cap (``_retry``);
  a model extractor plugs in (``_model_extract``), its outputs recorded in the
  job's run and replayed from it.

It sits above the memory facade: it composes tools and recall over the replay
layer's ``Run``, the as-of views (:mod:`memseal.apps.as_of`) and the memory it
works on, ``memseal.Memory`` and its ``RecordedTools``, all of which it imports
by name (the facade never imports the lifecycle). See docs/lifecycle.md.
"""

from ._chunking import DEFAULT_BUDGET, Chunk, chunk_id, chunk_text, kind_of
from ._extract import Belief, Extractor, RuleExtractor, SourceTurn, parse_turns
from ._model_extract import BeliefModel, ModelExtractor
from ._retry import DEFAULT_MAX_ATTEMPTS
from .agent_memory import (
    AgentMemory,
    BuildRequest,
    Compacted,
    ExtractiveSummariser,
    FoldedTurn,
    PastReader,
    Summariser,
    refers_to_of,
)
from .brain import BRAIN_TAG, Brain, IngestReport, doc_tag
from .briefing import BriefingSource, briefing
from .jobs import (
    JOB_KINDS,
    JobInfo,
    JobOutcome,
    JobQueue,
    QueueStatus,
    Requeued,
    Retraction,
    RetryPolicy,
)
from .layout import MemoryLayout
from .pack import (
    LEARNINGS,
    PRE_TURN,
    PRESETS,
    SESSION_START,
    ContextPack,
    PackItem,
    PackPreset,
    PackSection,
    Recorder,
    SectionSpec,
    count_tokens,
    fit,
    holistic_recall,
)

__all__ = [
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
]
