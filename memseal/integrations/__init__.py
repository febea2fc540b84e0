"""Adapters from memseal to agent runtimes, each behind its own extra.

``memseal.integrations.langgraph`` (extra ``memseal[langgraph]``): :class:`MemsealStore`,
LangGraph's ``BaseStore`` whose every put and delete is a signed ledger entry.
"""
