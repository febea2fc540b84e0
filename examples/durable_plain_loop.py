"""A plain tool loop over the OpenAI or Anthropic SDK, killed mid-run and resumed exactly once.

    python examples/durable_plain_loop.py --data agent-data --sdk openai
    python examples/durable_plain_loop.py --data agent-data --sdk openai

The clients are the real ``openai.AsyncOpenAI`` (Chat Completions
``tool_calls``) and ``anthropic.AsyncAnthropic`` (``tool_use`` blocks); only
their transport is an ``httpx.MockTransport`` playing a scripted model, so no
network and no LLM. The loop is the one a host writes against either API: it
saves the conversation to a JSON file after each model reply and each tool
result, and hands each tool call, the SDK's own object, to
``toolset.call(tool_call)``, which keys the call in the run by the call's id.

The first time (no saved conversation) the process SIGKILLs itself right after
the third tool call returns, before its result is saved. Run again, it loads
the conversation and first runs the tool calls the last saved reply asked for
that have no result yet: the third call again, with its id, so memseal answers
it from its verified memo and nothing is written twice. Then the model goes on;
its fourth call equals the first but has a new id, so it runs live and sees
both stores. Then it verifies the ledger and prints how to audit it.
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

import anthropic
import httpx
import openai
from anthropic.types import ToolUseBlock
from openai.types.chat import ChatCompletionMessage

import memseal

SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TASK = "Check what you know about the report, remember the report times, then list them."
KILL_AFTER = 3
MAX_TURNS = 10
FETCH = {"query": "report", "mode": "exact"}

#: The tool calls the scripted model makes, one per reply, before it answers.
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("memory_fetch", FETCH),
    ("memory_store", {"learning": {"text": "the nightly report goes out at 6am"}}),
    ("memory_store", {"learning": {"text": "the weekly report goes out on Mondays"}}),
    ("memory_fetch", FETCH),
]


def _answer(last_result: str) -> str:
    texts = sorted(hit["text"] for hit in json.loads(last_result).get("hits", []))
    return "From memory: " + "; ".join(texts) + "."


# -- the scripted models behind the mock transport ------------------------------------------


def openai_model(body: dict[str, Any]) -> dict[str, Any]:
    """Chat Completions: the next scripted tool call (id ``call_N``), or the answer."""
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    made = sum(len(m.get("tool_calls") or []) for m in body["messages"])
    if made < len(SCRIPT):
        name, arguments = SCRIPT[made]
        call = {
            "id": f"call_{made}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": _answer(results[-1])}, "stop"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    reply = {"id": f"chatcmpl-{made}", "object": "chat.completion", "created": 0}
    return {**reply, "model": body["model"], "choices": [choice]}


def anthropic_model(body: dict[str, Any]) -> dict[str, Any]:
    """Messages: the next scripted ``tool_use`` block (id ``toolu_N``), or the answer."""
    blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    results = [b["content"] for b in blocks if b["type"] == "tool_result"]
    made = sum(1 for b in blocks if b["type"] == "tool_use")
    if made < len(SCRIPT):
        name, arguments = SCRIPT[made]
        use = {"type": "tool_use", "id": f"toolu_{made}", "name": name, "input": arguments}
        content, stop = [use], "tool_use"
    else:
        content, stop = [{"type": "text", "text": _answer(results[-1])}], "end_turn"
    reply = {"id": f"msg_{made}", "type": "message", "role": "assistant", "model": body["model"]}
    usage = {"input_tokens": 0, "output_tokens": 0}
    return {**reply, "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}


def scripted_client(sdk: str) -> Any:
    """An async HTTP client whose transport answers as the scripted model (no network).

    anthropic 2.x takes only its own ``httpx2`` client; openai takes httpx's (and httpx2's).
    """
    lib: Any = httpx
    if sdk == "anthropic":
        try:
            import httpx2

            lib = httpx2
        except ImportError:  # anthropic before 2.x: httpx
            pass
    model = openai_model if sdk == "openai" else anthropic_model

    def answer(request: Any) -> Any:
        return lib.Response(200, json=model(json.loads(request.content)))

    return lib.AsyncClient(transport=lib.MockTransport(answer))


# -- the host's loop ---------------------------------------------------------------------------


class Conversation:
    """The messages so far, saved to ``path`` after every change (the host's only state)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.resumed = path.exists()
        self.messages: list[Any] = (
            json.loads(path.read_text()) if self.resumed else [{"role": "user", "content": TASK}]
        )
        self.calls = 0

    def add(self, message: Any) -> None:
        self.messages.append(message)
        self.path.write_text(json.dumps(self.messages))

    async def run_tool(self, toolset: Any, tool_call: Any) -> str:
        """One tool call through memseal (keyed by its id); the first run dies after the third."""
        text: str = await toolset.call(tool_call)
        self.calls += 1
        print(f"tool {tool_call.id} {_name(tool_call)}: {text}", flush=True)
        if not self.resumed and self.calls == KILL_AFTER:
            print("killed after the third tool call", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return text


def _name(tool_call: Any) -> str:
    function = getattr(tool_call, "function", None)
    return str(function.name if function is not None else tool_call.name)


async def openai_loop(toolset: Any, chat: Conversation, http: Any) -> str:
    client = openai.AsyncOpenAI(
        api_key="offline", base_url="https://scripted.invalid/v1", http_client=http
    )
    for _ in range(MAX_TURNS):
        last = chat.messages[-1]
        if last["role"] == "assistant" and not last.get("tool_calls"):
            return str(last["content"])
        # Every saved call without a result yet runs first: after a crash, the ones it lost.
        answered = {m["tool_call_id"] for m in chat.messages if m["role"] == "tool"}
        asked = [m for m in chat.messages if m["role"] == "assistant"]
        pending = [
            call
            for m in asked
            for call in ChatCompletionMessage.model_validate(m).tool_calls or []
            if call.id not in answered
        ]
        for call in pending:
            text = await chat.run_tool(toolset, call)
            chat.add({"role": "tool", "tool_call_id": call.id, "content": text})
        if pending:
            continue
        reply = await client.chat.completions.create(
            model="gpt-4o-mini", tools=toolset.to_openai(), messages=chat.messages
        )
        chat.add(reply.choices[0].message.model_dump(exclude_none=True))
    return "(no answer within the turn limit)"


async def anthropic_loop(toolset: Any, chat: Conversation, http: Any) -> str:
    client = anthropic.AsyncAnthropic(
        api_key="offline", base_url="https://scripted.invalid", http_client=http
    )
    for _ in range(MAX_TURNS):
        last = chat.messages[-1]
        uses = (
            [b for b in last["content"] if b["type"] == "tool_use"]
            if last["role"] == "assistant"
            else []
        )
        if last["role"] == "assistant" and not uses:
            return str(last["content"][0]["text"])
        if uses:
            # The reply's tool_use blocks, answered in one user message saved when all are in.
            results = []
            for block in uses:
                use = ToolUseBlock.model_validate(block)
                text = await chat.run_tool(toolset, use)
                error = text.startswith("error:")
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": use.id,
                        "content": text,
                        "is_error": error,
                    }
                )
            chat.add({"role": "user", "content": results})
            continue
        reply = await client.messages.create(
            model="claude-sonnet-4-5",
            max_tokens=1024,
            tools=toolset.to_anthropic(),
            messages=chat.messages,
        )
        chat.add(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in reply.content],
            }
        )
    return "(no answer within the turn limit)"


async def main(data: Path, sdk: str) -> None:
    data.mkdir(parents=True, exist_ok=True)
    chat = Conversation(data / f"plain-{sdk}-conversation.json")
    print(
        f"resuming the saved conversation ({sdk})"
        if chat.resumed
        else "first run: it dies after the third tool call"
    )
    loop = openai_loop if sdk == "openai" else anthropic_loop
    async with (
        scripted_client(sdk) as http,
        memseal.open(data, embedder=None) as memory,
        memory.tools(SCOPE, run_id=f"plain-{sdk}") as tools,
    ):
        answer = await loop(tools.toolset(), chat, http)
        print(f"answer: {answer}")
        summary = await memory.ledger.verify(trust=memory.trust_root)
        print(summary.line())
        print(f"audit it: memseal verify {data} --trust '{memory.trust_root}'")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="the data folder (default: a fresh temp folder)")
    parser.add_argument("--sdk", choices=("openai", "anthropic"), default="openai")
    args = parser.parse_args()
    folder = args.data or Path(tempfile.mkdtemp(prefix="memseal-plain-"))
    asyncio.run(main(folder, args.sdk))
