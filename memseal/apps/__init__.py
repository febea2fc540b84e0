"""memseal.apps: the applications built on durable runs, the floor above memseal.replay.

Imports go one way (docs/design.md): ``ledger <- engine <- tools <- replay.runs
<- replay.evidence <- replay.regress <- memseal.apps <- memseal`` (the memory
face, the service, the CLI, the integrations). An app here may import every
layer and floor below and the other apps, never the top: it takes the memory
it works on from its host.

* :mod:`.lifecycle`: the agent memory lifecycle (``MemoryLayout``,
  ``AgentMemory``, ``Brain``, ``JobQueue``, context packs, the brief);
* :mod:`.as_of`: the memory as of a past point, a read-only view (built by
  :mod:`._as_of_build`).
"""

__all__: list[str] = []
