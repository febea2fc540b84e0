"""A LangGraph agent that is killed mid-thread and resumes it, each memory call recorded once.

    python examples/durable_langgraph.py --data agent-data    # 1st run: killed after 3 tool calls
    python examples/durable_langgraph.py --data agent-data    # 2nd run: resumes the thread

The graph is LangGraph's own: a ``StateGraph`` whose tool node is
``memseal.integrations.langgraph.tool_node(memory, scope)``, checkpointed by an
``AsyncSqliteSaver`` on a file beside the data folder. The model is scripted (a
``GenericFakeChatModel`` that binds tools and answers by the turn it is at, as a
deterministic model would), so no LLM and no network are involved. The tool node
records every call in the run named by the thread (run id = ``thread_id``), keyed by
the model's tool-call id.

On the first run the process SIGKILLs itself right after its third tool call
returns: LangGraph's checkpoint of that step was never written. The second run
resumes the thread from its last checkpoint; LangGraph re-executes the tool node,
and the calls already recorded are answered from their signed memos (nothing is
written twice), the rest run live. A later call whose arguments equal the first
one's gets its own, live result. The example then prints the thread's signed calls
(each key once), verifies the ledger and prints the ``memseal verify`` line.

``--approve`` gates each ``memory_store`` behind an ``interrupt()`` approval: a run
stops at the question, and the next run answers it "yes" and goes on (LangGraph
re-executes the node; the calls it had made are answered from their memos).
``--kill-after N`` kills after N calls (0: never; default 3 on a thread's first
run), ``--durability`` is LangGraph's (``sync``, ``async`` or ``exit``).
Needs ``pip install memseal[langgraph]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition
from langgraph.types import Command, interrupt

import memseal
from memseal.integrations.langgraph import tool_node
from memseal.replay.runs.calls import TOOL_CALL, decode_tool_call

THREAD = "nightly-report"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TASK = "Check what we know about the nightly report, remember when it goes out, then tell me."
QUERY = {"query": "nightly report", "mode": "exact"}
REPORT = "the nightly report goes out at 6am"


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


#: The model's replies, turn by turn: what a real model would decide for TASK.
SCRIPT = [
    [_call("memory_fetch", QUERY, "call_1")],
    [  # two calls at once: LangGraph runs them in parallel
        _call("memory_store", {"learning": {"text": REPORT}}, "call_2"),
        _call("memory_list", {}, "call_3"),
    ],
    [_call("memory_store", {"learning": {"text": "deploys happen on Tuesdays"}}, "call_4")],
    [_call("memory_fetch", QUERY, "call_5")],  # the first call's arguments, a new call
]


class ScriptedModel(GenericFakeChatModel):
    """A chat model that binds tools and replies by turn (the number of its replies so far),
    so the model node re-executed on a resumed thread answers as it did."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = sum(isinstance(m, AIMessage) for m in messages)
        if turn < len(SCRIPT):
            reply = AIMessage(content="", tool_calls=SCRIPT[turn])
        else:
            reply = AIMessage(content=_answer(messages))
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _answer(messages: list[BaseMessage]) -> str:
    last = messages[-1]
    if not isinstance(last, ToolMessage) or last.status != "success":
        return f"I could not look it up: {last.content}"
    hits = json.loads(str(last.content))["hits"]
    return f"From memory: {hits[0]['text']}." if hits else "I have nothing stored about that."


Execute = Callable[[Any], Awaitable[Any]]


def build(memory: memseal.Memory, checkpointer: Any, *, kill_after: int, approve: bool) -> Any:
    """The agent graph: a scripted model node and memseal's tool node, in a loop."""
    model = ScriptedModel(messages=iter(()))
    returned = [0]

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    async def watch(request: Any, execute: Execute) -> Any:
        # ToolNode's own awrap_tool_call, passed through tool_node: an approval gate and
        # a printout of each result (and, on a first run, the crash).
        call = request.tool_call
        if approve and call["name"] == "memory_store":
            answer = interrupt({"approve": call["name"], "args": call["args"], "id": call["id"]})
            if answer != "yes":
                return ToolMessage("error: not approved", tool_call_id=call["id"], status="error")
        message = await execute(request)
        print(f"tool {call['id']} {call['name']}: {message.content}", flush=True)
        returned[0] += 1
        if returned[0] == kill_after:
            print(f"killed right after tool call {kill_after} returned", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return message

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tool_node(memory, SCOPE, awrap_tool_call=watch))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


async def signed_calls(memory: memseal.Memory, run_id: str) -> collections.Counter[str]:
    """How many signed memory_tool_call entries each key has in run ``run_id``."""
    counts: collections.Counter[str] = collections.Counter()
    async for record in memory.ledger.scan(0, await memory.ledger.size()):
        entry = record.entry()
        if entry.kind == TOOL_CALL:
            call = decode_tool_call(bytes(entry.body))
            if call.run_id == run_id:
                counts[str(call.key)] += 1
    return counts


async def main(args: argparse.Namespace) -> int:
    data: Path = args.data
    config: Any = {"configurable": {"thread_id": args.thread}}
    async with (
        memseal.open(data, embedder=None) as memory,
        AsyncSqliteSaver.from_conn_string(str(args.checkpoints)) as checkpointer,
    ):
        state = await build(memory, checkpointer, kill_after=0, approve=False).aget_state(config)
        first = not state.values
        kill_after = args.kill_after if args.kill_after is not None else (3 if first else 0)
        graph = build(memory, checkpointer, kill_after=kill_after, approve=args.approve)
        given: Any
        if first:
            print(f"thread {args.thread!r}: a new thread")
            given = {"messages": [HumanMessage(TASK)]}
        elif state.interrupts:
            print(f"thread {args.thread!r}: approving {len(state.interrupts)} pending call(s)")
            given = Command(resume={i.id: "yes" for i in state.interrupts})
        elif state.next:
            print(f"thread {args.thread!r}: resuming from its last checkpoint")
            given = None
        else:
            print(f"thread {args.thread!r}: finished already; nothing runs")
            given = None
        before = await memory.ledger.size()
        final = await graph.ainvoke(given, config, durability=args.durability)
        pending = (await graph.aget_state(config)).interrupts
        for waiting in pending:
            print(f"waiting for approval: {json.dumps(waiting.value)}")
        if not pending:
            for message in final["messages"]:
                if isinstance(message, ToolMessage):
                    print(f"result {message.tool_call_id} {message.name}: {message.content}")
            print(f"answer: {final['messages'][-1].content}")
        print(f"the log grew from {before} to {await memory.ledger.size()} entries")
        counts = await signed_calls(memory, args.thread)
        shown = ", ".join(f"{key} x{n}" for key, n in sorted(counts.items()))
        print(f"signed calls in run {args.thread!r}: {shown}")
        summary = await memory.ledger.verify(trust=memory.trust_root)
        await memory.verify()
        print(summary.line())
        print(f"audit it: memseal verify {data} --trust '{memory.trust_root}'")
        if any(n != 1 for n in counts.values()):
            print("a call was recorded twice", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("agent-data"))
    parser.add_argument("--checkpoints", type=Path, help="default: <data>.checkpoints.sqlite")
    parser.add_argument("--thread", default=THREAD)
    parser.add_argument("--kill-after", type=int)
    parser.add_argument("--durability", choices=["sync", "async", "exit"], default="sync")
    parser.add_argument("--approve", action="store_true")
    args = parser.parse_args()
    if args.checkpoints is None:
        args.checkpoints = args.data.with_name(args.data.name + ".checkpoints.sqlite")
    sys.exit(asyncio.run(main(args)))
