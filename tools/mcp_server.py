"""The tools as an MCP server (the ``mcp`` package's low-level ``Server``).

:func:`mcp_server` serves an :class:`AsyncToolset`: ``tools/list`` returns
its MCP definitions (with annotations), ``tools/call`` runs the named tool
and returns its text, with ``isError`` set for what a model can act on
(anything else is raised, and the MCP library reports it as a protocol
error). Scope comes from the toolset, fixed by the host; never from the
client. A ``tools/call`` whose ``_meta`` holds ``"memseal/key"`` is keyed by
it when the toolset is a run's (see docs/replay.md, "Keyed calls"). Run it
over stdio, streamable HTTP or an in-memory transport::

    server = mcp_server(tools.toolset())
    async with mcp.Client(server) as client:
        listed = await client.list_tools()

The ``mcp`` package is imported only when a server is built.
"""

from __future__ import annotations

from typing import Any

from .toolset import AsyncToolset

__all__ = ["mcp_server"]


def mcp_server(
    toolset: AsyncToolset,
    *,
    name: str = "memseal",
    version: str = "",
    instructions: str | None = None,
) -> Any:
    """An ``mcp.server.Server`` serving ``toolset`` (see the module docstring)."""
    import mcp.types as types
    from mcp.server import Server

    definitions = [types.Tool.model_validate(d) for d in toolset.mcp_tools()]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(definitions))

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = {} if params.arguments is None else params.arguments
        key = None if params.meta is None else params.meta.get("memseal/key")
        outcome = await toolset.outcome(params.name, arguments, key)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text)],
            is_error=outcome.is_error,
        )

    return Server(
        name,
        version=version,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
