"""memseal for LangGraph (extra ``memseal[langgraph]``).

* :func:`tool_node` / :class:`MemsealToolNode`: a ``ToolNode`` over the memory tools
  whose every call is a step of the thread's durable run (run id = ``thread_id``),
  keyed by the model's tool-call id, so a resumed or re-executed graph gets each
  call once (see :mod:`memseal.integrations._langgraph_tools`).
* :class:`MemsealStore`: LangGraph's ``BaseStore`` whose every put and delete is a
  signed ledger entry, its items at its own node (:data:`STORE_NODE`) below the
  host's place, where a model's tools on the same scope can neither write nor forge
  them (see :mod:`memseal.integrations._langgraph_store`).
"""

from __future__ import annotations

from ._langgraph_store import MAX_ENVELOPE_CHARS, STORE_NODE, STORE_TAG, MemsealStore
from ._langgraph_tools import NS_SEP, MemsealToolNode, run_id_for, tool_node

__all__ = [
    "MAX_ENVELOPE_CHARS",
    "NS_SEP",
    "STORE_NODE",
    "STORE_TAG",
    "MemsealStore",
    "MemsealToolNode",
    "run_id_for",
    "tool_node",
]
