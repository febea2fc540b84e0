"""A LangChain agent (``langchain.agents.create_agent``) on memseal's recorded tools, offline.

    python examples/langchain_agent.py --data agent-data

The model is scripted: a ``GenericFakeChatModel`` that takes tools, whose
replies stand in for what a real chat model would decide (store a learning,
fetch it back, answer from what the fetch returned). Everything else is real:
LangChain's agent loop calls the tools of ``memory.tools(scope,
run_id=...).toolset().to_langchain()``, so each call is the next step of one
durable run, a signed ``memory_tool_call`` entry with its memo. Swap in any
tool-calling chat model (``ChatOpenAI``, ``ChatAnthropic``...) and nothing
else changes. Without ``--data`` the memory lives in a fresh temporary folder;
either way the example verifies the ledger and prints the ``memseal verify``
line an auditor would run. Run it again on the same folder and the run
resumes: both steps are answered from their memos, and the log does not grow.
Needs ``pip install memseal[langchain]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

import memseal

RUN_ID = "langchain-agent"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TASK = "Remember that the nightly report goes out at 6am, then tell me when it goes out."

#: What the model decides, turn by turn: the tool calls a real model would make for TASK.
SCRIPT = [
    AIMessage(
        content="",
        tool_calls=[
            {
                "name": "memory_store",
                "args": {"learning": {"text": "the nightly report goes out at 6am"}},
                "id": "call_store",
            }
        ],
    ),
    AIMessage(
        content="",
        tool_calls=[
            {"name": "memory_fetch", "args": {"query": "nightly report"}, "id": "call_fetch"}
        ],
    ),
]


class ScriptedToolModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts tools (an agent binds them), then plays ``messages``.

    Once the script is played it answers from the last tool result, as a model
    reading the fetched memory would.
    """

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:
        # The scripted calls must name tools the agent actually handed over.
        offered = {convert_to_openai_tool(tool)["function"]["name"] for tool in tools}
        missing = {call["name"] for reply in SCRIPT for call in reply.tool_calls} - offered
        if missing:
            raise ValueError(f"the script calls tools the agent was not given: {sorted(missing)}")
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = next(self.messages, None)
        if reply is None:
            reply = AIMessage(content=_answer(messages))
        elif isinstance(reply, str):
            reply = AIMessage(content=reply)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _answer(messages: list[BaseMessage]) -> str:
    last = messages[-1]
    if not isinstance(last, ToolMessage) or last.status != "success":
        return f"I could not look it up: {last.content}"
    hits = json.loads(str(last.content))["hits"]
    return f"From memory: {hits[0]['text']}." if hits else "I have nothing stored about that."


async def main(data: Path) -> None:
    async with (
        memseal.open(data) as memory,
        memory.tools(SCOPE, run_id=RUN_ID) as tools,
    ):
        scripted: Iterator[AIMessage | str] = iter(SCRIPT)
        agent = create_agent(
            ScriptedToolModel(messages=scripted),
            tools=tools.toolset().to_langchain(),
            system_prompt="You have a memory; store what you are told and look it up.",
        )
        state = await agent.ainvoke({"messages": [{"role": "user", "content": TASK}]})
        for message in state["messages"]:
            if isinstance(message, ToolMessage):
                print(f"tool {message.name} ({message.status}): {message.content}")
        print(f"answer: {state['messages'][-1].content}")
        last = tools.last_call
        assert last is not None
        print(f"run {last.run_id!r}: {last.step + 1} step(s), each a signed entry with its memo")
        summary = await memory.ledger.verify(trust=memory.trust_root)
        print(summary.line())
        print(f"audit it: memseal verify {data} --trust '{memory.trust_root}'")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="the data folder (default: a fresh temp folder)")
    args = parser.parse_args()
    folder = args.data or Path(tempfile.mkdtemp(prefix="memseal-langchain-"))
    asyncio.run(main(folder))
    sys.exit(0)
