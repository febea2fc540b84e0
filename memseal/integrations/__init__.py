"""Adapters from memseal to agent runtimes, each behind its own extra.

* ``memseal.integrations.langgraph`` (extra ``memseal[langgraph]``): ``tool_node`` (a
  ``ToolNode`` whose calls are keyed by LangGraph's tool-call ids, in the run named by the
  thread) and :class:`MemsealStore`, LangGraph's ``BaseStore`` whose every put and delete
  is a signed ledger entry;
* ``memseal.integrations.openai_agents`` (extra ``memseal[openai-agents]``): the tools as
  OpenAI Agents SDK ``FunctionTool`` objects, keyed by the SDK's call id, reached as
  ``toolset.to_openai_agents()``;
* ``memseal.integrations.pydantic_ai`` (extra ``memseal[pydantic-ai]``): the tools as
  ``pydantic_ai.Tool`` objects keyed by the ``tool_call_id``, reached as
  ``toolset.to_pydantic_ai()``.

The last two need nothing above the toolsets, so their code lives beside them in
``memseal.tools`` (as ``to_langchain``'s does) and the toolset methods import it when
called; the modules here only give it its public name. LangGraph's needs runs and the
store, so it lives here. Importing this package imports no runtime.
"""
