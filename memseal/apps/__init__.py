"""memseal.apps: the applications built on durable runs, above memseal.replay.

Imports go one way (docs/design.md): ``ledger <- engine <- tools <- replay.runs
<- replay.evidence <- replay.regress <- memseal.apps.as_of <- the facade
(memseal.memory: Memory, RecordedTools, open's options) <- memseal.apps.lifecycle
<- memseal`` (the service, the CLI, the integrations). The as-of views sit below
the facade, which hands them out; the lifecycle sits above it and names
``Memory`` and ``RecordedTools`` directly. This package's own ``__init__`` imports
neither app: the facade imports the views through it.

* :mod:`.lifecycle`: the agent memory lifecycle (``MemoryLayout``,
  ``AgentMemory``, ``Brain``, ``JobQueue``, context packs, the brief);
* :mod:`.as_of`: the memory as of a past point, a read-only view (built by
  :mod:`._as_of_build`).
"""

__all__: list[str] = []
