"""memseal.tools.lifecycle: the agent memory lifecycle over the tools and runs.

* :class:`MemoryLayout` (``layout``): a tenant's standard tree and the scope
  of each role in it;
* :func:`holistic_recall` and :class:`ContextPack` (``pack``): one budgeted
  read across a host-fixed set of reaches, with presets;
* :func:`briefing` (``briefing``): the system-prompt text for a scope;
* :class:`AgentMemory` (``agent_memory``): session start, pre-turn context,
  post-turn logging and compaction, each a recorded call.

It composes tools and recall and reaches runs through small protocols
(:class:`Recorder`, :class:`RunOpener`) that the replay layer's ``Run`` and
``memseal.open``'s memory satisfy, so imports still go one way. See
docs/lifecycle.md.
"""

from .agent_memory import (
    AgentMemory,
    BuildRequest,
    Compacted,
    ExtractiveSummariser,
    FoldedTurn,
    RunOpener,
    SessionRun,
    Summariser,
    refers_to_of,
)
from .briefing import BriefingSource, briefing
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
    "LEARNINGS",
    "PRESETS",
    "PRE_TURN",
    "SESSION_START",
    "AgentMemory",
    "BriefingSource",
    "BuildRequest",
    "Compacted",
    "ContextPack",
    "ExtractiveSummariser",
    "FoldedTurn",
    "MemoryLayout",
    "PackItem",
    "PackPreset",
    "PackSection",
    "Recorder",
    "RunOpener",
    "SectionSpec",
    "SessionRun",
    "Summariser",
    "briefing",
    "count_tokens",
    "fit",
    "holistic_recall",
    "refers_to_of",
]
