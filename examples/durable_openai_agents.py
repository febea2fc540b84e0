"""An OpenAI Agents SDK agent on memseal's tools, killed mid-run and resumed exactly once.

    python examples/durable_openai_agents.py --data agent-data --resume session
    python examples/durable_openai_agents.py --data agent-data --resume session

The agent is the SDK's own ``Agent`` run by ``Runner``, with the tools from
``run.toolset().to_openai_agents()``; its model is the SDK's scripted test
model (``agents.testing.ScriptedModel``), so no network and no LLM. It reads
the conversation as a model would and asks for one tool call per turn, each
with a stable call id. The conversation has two user turns:

1. "what do you know about the report? then remember the nightly report time"
   (a ``memory_fetch`` that finds nothing yet, a ``memory_store``);
2. "also remember the weekly report, then tell me every report"
   (a ``memory_store``, then a ``memory_fetch`` equal to the first one).

The first time (no call recorded yet in the run) the process SIGKILLs itself
right after the third tool call returns, before the SDK saved it. Run again,
it resumes the SDK's way, chosen by ``--resume``:

* ``session``: from an ``SQLiteSession`` in the data folder;
* ``input-list``: from ``result.to_input_list()`` of the last finished turn,
  saved as JSON in the data folder;
* ``rerun``: from the start, saving nothing.

Each call the SDK re-issues carries the call id it had, so memseal answers
it from its verified memo and nothing is written twice; the fourth call,
whose arguments equal the first's, is a new id and runs live (it sees both
stores). Then it verifies the ledger and prints how to audit it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, RunHooks, Runner, SQLiteSession
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

import memseal

RUN_ID = "agents-sdk-nightly"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
KILL_AFTER = 3
FETCH = {"query": "report", "mode": "exact"}

#: The user's turns, each with the tool calls the scripted model makes in it.
TURNS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    (
        "What do you know about the report? Then remember: the nightly report goes out at 6am.",
        [
            ("memory_fetch", FETCH),
            ("memory_store", {"learning": {"text": "the nightly report goes out at 6am"}}),
        ],
    ),
    (
        "Also remember: the weekly report goes out on Mondays. Then tell me every report.",
        [
            ("memory_store", {"learning": {"text": "the weekly report goes out on Mondays"}}),
            ("memory_fetch", FETCH),
        ],
    ),
]


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def respond(call: ModelCall) -> Any:
    """The scripted model: reads the conversation, asks for the next call or answers.

    A call's id is its place in the conversation (``call_0``, ``call_1``...): the
    same conversation gets the same ids, as a resumed model's saved calls keep theirs.
    """
    items = call.input if isinstance(call.input, list) else [call.input]
    turn = sum(1 for item in items if _field(item, "role") == "user") - 1
    made = sum(1 for item in items if _field(item, "type") == "function_call")
    planned = sum(len(calls) for _, calls in TURNS[: turn + 1])
    if made < planned:
        name, arguments = TURNS[turn][1][made - planned + len(TURNS[turn][1])]
        return [function_call(name, arguments, call_id=f"call_{made}")]
    outputs = [item for item in items if _field(item, "type") == "function_call_output"]
    last = json.loads(_field(outputs[-1], "output"))
    if "hits" in last:
        texts = sorted(hit["text"] for hit in last["hits"])
        return [assistant_message("From memory: " + "; ".join(texts) + ".")]
    return [assistant_message("Noted.")]


def scripted_model() -> ScriptedModel:
    # One responder step per model call the whole conversation can make.
    calls = sum(len(calls) + 1 for _, calls in TURNS)
    return ScriptedModel([ModelStep.respond(respond) for _ in range(calls)])


class Progress(RunHooks[Any]):
    """Prints each tool call's result; on the first run, dies right after the third."""

    def __init__(self, kill: bool) -> None:
        self.kill = kill
        self.calls = 0

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: object) -> None:
        self.calls += 1
        print(f"tool {context.tool_call_id} {tool.name}: {result}", flush=True)
        if self.kill and self.calls == KILL_AFTER:
            print("killed after the third tool call", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


async def converse(agent: Agent[Any], data: Path, resume: str, hooks: Progress) -> str:
    """Both user turns, resumed from what ``resume`` kept; the last answer."""
    config = RunConfig(tracing_disabled=True)
    answer = ""
    if resume == "session":
        session = SQLiteSession(RUN_ID, str(data / "agents-session.db"))
        saved = await session.get_items()
        sent = sum(1 for item in saved if item.get("role") == "user")
        answered = sum(
            1 for item in saved if item.get("type") == "message" and item.get("role") == "assistant"
        )
        for index, (text, _) in enumerate(TURNS[answered:], start=answered):
            # A turn sent before the crash is continued, not sent again.
            new_input: Any = [] if index < sent else text
            result = await Runner.run(
                agent, new_input, session=session, hooks=hooks, run_config=config
            )
            answer = str(result.final_output)
        return answer
    state = data / "agents-input-list.json"
    items: list[Any] = []
    if resume == "input-list" and state.exists():
        items = json.loads(state.read_text())
    answered = sum(1 for item in items if item.get("role") == "assistant")
    for text, _ in TURNS[answered:]:
        result = await Runner.run(
            agent, [*items, {"role": "user", "content": text}], hooks=hooks, run_config=config
        )
        items = result.to_input_list()
        if resume == "input-list":
            state.write_text(json.dumps(items))
        answer = str(result.final_output)
    return answer


async def main(data: Path, resume: str) -> None:
    async with memseal.open(data, embedder=None) as memory, memory.run(RUN_ID, SCOPE) as run:
        first = not run.is_recorded(0)
        print("first run: it dies after the third tool call" if first else f"resuming ({resume})")
        agent = Agent(
            name="writer",
            instructions="Keep the team's facts in memory.",
            model=scripted_model(),
            tools=run.toolset().to_openai_agents(),
        )
        answer = await converse(agent, data, resume, Progress(kill=first))
        print(f"answer: {answer}")
        summary = await memory.ledger.verify(trust=memory.trust_root)
        print(summary.line())
        print(f"audit it: memseal verify {data} --trust '{memory.trust_root}'")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="the data folder (default: a fresh temp folder)")
    parser.add_argument("--resume", choices=("session", "input-list", "rerun"), default="session")
    args = parser.parse_args()
    folder = args.data or Path(tempfile.mkdtemp(prefix="memseal-agents-"))
    asyncio.run(main(folder, args.resume))
