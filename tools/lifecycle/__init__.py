"""memseal.tools.lifecycle: the agent memory lifecycle over the recorded tools.

* :class:`Brain` ingests documents into a brain node: structure-aware
  chunks, ids from source and content, re-ingest that writes exactly what
  changed, removal (:mod:`.brain`, :mod:`._chunking`);
* :class:`JobQueue` carries the background belief builds: jobs queued as
  signed entries, each run as its own recorded run, idempotent across
  crashes, beliefs citing their source turns (:mod:`.jobs`, :mod:`._extract`).

Every read and write goes through a recorder port (:class:`RecordingMemory`,
which ``memseal.Memory`` satisfies), so this layer still imports only the
layers below it. See docs/lifecycle.md.
"""

from ._chunking import DEFAULT_BUDGET, Chunk, chunk_id, chunk_text, kind_of
from ._extract import Belief, Extractor, RuleExtractor, SourceTurn, parse_turns
from .brain import BRAIN_TAG, Brain, IngestReport, RecordedCalls, RecordingMemory, doc_tag
from .jobs import JOB_KINDS, JobInfo, JobOutcome, JobQueue, QueueStatus, Retraction

__all__ = [
    "BRAIN_TAG",
    "DEFAULT_BUDGET",
    "JOB_KINDS",
    "Belief",
    "Brain",
    "Chunk",
    "Extractor",
    "IngestReport",
    "JobInfo",
    "JobOutcome",
    "JobQueue",
    "QueueStatus",
    "RecordedCalls",
    "RecordingMemory",
    "Retraction",
    "RuleExtractor",
    "SourceTurn",
    "chunk_id",
    "chunk_text",
    "doc_tag",
    "kind_of",
    "parse_turns",
]
