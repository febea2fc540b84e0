"""A Pydantic AI agent on memseal's tools, killed after its third tool call, then resumed.

    python examples/durable_pydantic_ai.py --data agent-data    # dies by SIGKILL
    python examples/durable_pydantic_ai.py --data agent-data    # resumes, prints, verifies

The model is scripted (Pydantic AI's ``FunctionModel``: no network, no LLM) and
names its tool calls ``call_0``, ``call_1``..., as a provider's ids are stable in
a saved history. The tools are ``run.toolset().to_pydantic_ai()``: each call is
recorded in the run under its ``tool_call_id``. The first run kills itself right
after its third tool call returns, before it saves its history; the second
resumes, in one of three ways (``--via``):

* ``history`` (default): from the ``message_history`` it saved after each step
  (``ModelMessagesTypeAdapter``), which re-issues the third call: its memo answers;
* ``rerun``: from the start; the three recorded calls answer from their memos;
* ``dbos``: DBOS recovers the workflow (its system database is a SQLite file in
  ``--data``): the model's replies come from DBOS, the tools run again and the
  recorded ones answer from their memos (needs ``pip install pydantic-ai-slim[dbos]``).

Either way, each logical call is recorded once; the fourth call has the first
one's arguments and runs live, so it finds what the run stored since.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import Hooks
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

import memseal

RUN_ID = "pydantic-ai-nightly"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
PROMPT = "When does the nightly report go out?"
KILL_AFTER = 3
HISTORY = "pydantic-ai-history.json"

FETCH = {"query": "nightly report", "mode": "exact"}
#: What the scripted model calls, in order; call 3 has call 0's arguments.
PLAN: list[tuple[str, dict[str, Any]]] = [
    ("memory_fetch", FETCH),
    ("memory_store", {"learning": {"text": "the nightly report goes out at 6am"}}),
    ("memory_store", {"learning": {"text": "deploys wait for the nightly report on Tuesdays"}}),
    ("memory_fetch", FETCH),
    ("memory_list", {}),
]


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The model: the next planned call (its id is its place in the plan), then an answer."""
    made = sum(
        isinstance(part, ToolCallPart)
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
    )
    if made < len(PLAN):
        name, args = PLAN[made]
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{made}")])
    return ModelResponse(parts=[TextPart(f"{len(PLAN)} tool calls made")])


def agent(*capabilities: Any) -> Agent[None, str]:
    return Agent(FunctionModel(script), name="nightly", capabilities=list(capabilities))


def returns(messages: list[ModelMessage]) -> dict[str, str]:
    """Each tool call's id -> the text its tool returned, from a message history."""
    return {
        part.tool_call_id: str(part.content)
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }


def kill_after(count: int) -> Hooks[Any]:
    """A capability that SIGKILLs this process right after the count-th tool call returns."""
    returned = 0

    async def after(ctx: RunContext[Any], *, call: ToolCallPart, result: Any, **_: Any) -> Any:
        nonlocal returned
        returned += 1
        print(f"returned {call.tool_call_id}: {result}", flush=True)
        if returned >= count:
            print("killing myself", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    return Hooks(after_tool_execute=after)


def save(path: Path, messages: list[ModelMessage]) -> None:
    scratch = path.with_suffix(".tmp")
    scratch.write_bytes(ModelMessagesTypeAdapter.dump_json(messages))
    scratch.replace(path)  # a kill never leaves half a history


async def via_history(memory: memseal.Memory, data: Path, first: bool) -> list[ModelMessage]:
    """Run, saving the history after each step; resume from the saved history."""
    path = data / HISTORY
    history = None if first else ModelMessagesTypeAdapter.validate_json(path.read_bytes())
    async with memory.run(RUN_ID, SCOPE) as run:
        toolset = FunctionToolset(run.toolset().to_pydantic_ai())
        capabilities = [kill_after(KILL_AFTER)] if first else []
        prompt = PROMPT if first else None
        async with agent(*capabilities).iter(
            prompt, message_history=history, toolsets=[toolset]
        ) as steps:
            async for _ in steps:
                save(path, steps.all_messages())
            return steps.all_messages()


async def via_rerun(memory: memseal.Memory, data: Path, first: bool) -> list[ModelMessage]:
    """Run from the start, both times."""
    async with memory.run(RUN_ID, SCOPE) as run:
        toolset = FunctionToolset(run.toolset().to_pydantic_ai())
        capabilities = [kill_after(KILL_AFTER)] if first else []
        result = await agent(*capabilities).run(PROMPT, toolsets=[toolset])
        return result.all_messages()


async def via_dbos(memory: memseal.Memory, data: Path, first: bool) -> list[ModelMessage]:
    """Run as a DBOS workflow (id RUN_ID); the second process lets DBOS recover it.

    ``main`` stops DBOS (``DBOS.destroy()``) after memseal closes: DBOS's executor
    serves this event loop until then.
    """
    from dbos import DBOS, SetWorkflowID
    from pydantic_ai.durable_exec.dbos import DBOSDurability

    DBOS(
        config={
            "name": "memseal-pydantic-ai",
            "system_database_url": f"sqlite:///{data / 'dbos.sqlite'}",
            "log_level": "WARNING",
        }
    )
    durable = agent(DBOSDurability(), *([kill_after(KILL_AFTER)] if first else []))

    @DBOS.workflow(name="nightly_report")
    async def nightly(prompt: str) -> str:
        async with memory.run(RUN_ID, SCOPE) as run:
            toolset = FunctionToolset(run.toolset().to_pydantic_ai())
            result = await durable.run(prompt, toolsets=[toolset])
            save(data / HISTORY, result.all_messages())
            return result.output

    DBOS.launch()  # in the second process, this recovers the pending workflow
    if first:
        with SetWorkflowID(RUN_ID):
            await nightly(PROMPT)
    else:
        handle: Any = await DBOS.retrieve_workflow_async(RUN_ID)
        await handle.get_result()
    return ModelMessagesTypeAdapter.validate_json((data / HISTORY).read_bytes())


VIA = {"history": via_history, "rerun": via_rerun, "dbos": via_dbos}


async def main(data: Path, via: str) -> int:
    data.mkdir(parents=True, exist_ok=True)
    marker = data / "pydantic-ai-started"
    first = not marker.exists()
    marker.touch()
    try:
        async with memseal.open(data, embedder=None) as memory:
            await report(memory, data, await VIA[via](memory, data, first))
    finally:
        if via == "dbos":
            from dbos import DBOS

            DBOS.destroy()
    return 0


async def report(memory: memseal.Memory, data: Path, messages: list[ModelMessage]) -> None:
    """Print what each call returned, and check the ledger."""
    save(data / HISTORY, messages)
    returned = returns(messages)
    for call_id, text in returned.items():
        print(f"tool {call_id}: {text}")
    before, after = (len(json.loads(returned[i])["hits"]) for i in ("call_0", "call_3"))
    print(f"call_0 found {before} hit(s); call_3, the same fetch, found {after}")
    await memory.ledger.verify(trust=memory.vkey)
    print("ledger verified")
    print(f"audit it: memseal verify {data} --trust '{memory.vkey}'")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="agent-data", type=Path)
    parser.add_argument("--via", choices=sorted(VIA), default="history")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.data, args.via)))
