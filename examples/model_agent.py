"""A model-driven agent: ``run.toolset()`` handed to a real model API, every call recorded.

    python examples/model_agent.py --data agent-data

Uses Anthropic when ``ANTHROPIC_API_KEY`` is set and the ``anthropic``
package is installed, else OpenAI when ``OPENAI_API_KEY`` is set and the
``openai`` package is installed (models: ``MEMSEAL_MODEL`` or a default).
With neither, it says so and exits 0: it is an example, not a test of
anyone's account. The run can then be exported like any other:
``memseal export --data agent-data --run model-agent -o model.bundle``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import memseal

RUN_ID = "model-agent"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TASK = (
    "Remember that the nightly report goes out at 6am, then look up when the report goes "
    "out and answer in one sentence."
)
MAX_TURNS = 8


def _provider() -> str | None:
    if os.environ.get("ANTHROPIC_API_KEY") and importlib.util.find_spec("anthropic"):
        return "anthropic"
    if os.environ.get("OPENAI_API_KEY") and importlib.util.find_spec("openai"):
        return "openai"
    return None


async def with_anthropic(run: Any) -> str:
    import anthropic

    client = anthropic.AsyncAnthropic()
    tools = run.toolset()
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for _ in range(MAX_TURNS):
        reply = await client.messages.create(
            model=os.environ.get("MEMSEAL_MODEL", "claude-sonnet-4-5"),
            max_tokens=1024,
            tools=tools.to_anthropic(),
            messages=messages,
        )
        messages.append({"role": "assistant", "content": reply.content})
        uses = [block for block in reply.content if block.type == "tool_use"]
        if not uses:
            return "".join(block.text for block in reply.content if block.type == "text")
        results = []
        for use in uses:
            outcome = await tools.outcome(use.name, use.input)
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": use.id,
                    "content": outcome.text,
                    "is_error": outcome.is_error,
                }
            )
        messages.append({"role": "user", "content": results})
    return "(no answer within the turn limit)"


async def with_openai(run: Any) -> str:
    import openai

    client = openai.AsyncOpenAI()
    tools = run.toolset()
    messages: list[Any] = [{"role": "user", "content": TASK}]
    for _ in range(MAX_TURNS):
        reply = await client.chat.completions.create(
            model=os.environ.get("MEMSEAL_MODEL", "gpt-4o-mini"),
            tools=tools.to_openai(),
            messages=messages,
        )
        message = reply.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            text = await tools.call(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return "(no answer within the turn limit)"


async def main(data: Path, provider: str) -> None:
    async with memseal.open(data) as memory, memory.run(RUN_ID, SCOPE) as run:
        answer = await (with_anthropic(run) if provider == "anthropic" else with_openai(run))
        print(f"{provider}: {answer}")
        print(f"{run.steps_issued} memory call(s) recorded in run {RUN_ID!r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="agent-data", type=Path)
    args = parser.parse_args()
    chosen = _provider()
    if chosen is None:
        print(
            "skipped: set ANTHROPIC_API_KEY (with `pip install anthropic`) or OPENAI_API_KEY "
            "(with `pip install openai`) to run this example against a real model"
        )
        sys.exit(0)
    asyncio.run(main(args.data, chosen))
