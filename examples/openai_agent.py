"""The ``openai`` SDK's tool-calling loop on memseal's recorded tools, offline.

    python examples/openai_agent.py --data agent-data

The client is the real ``openai.AsyncOpenAI``; only its transport is
replaced, by an ``httpx.MockTransport`` that plays a scripted model: it reads
each Chat Completions request as the API would (the tools offered, the
messages so far), answers with ``tool_calls`` (store a learning, then fetch
it), and once it has the fetch's result, a final message quoting it. The
loop in between is the one a host writes against the real API: offer
``toolset.to_openai()``, hand each tool call's name and JSON arguments to
``toolset.call``, send the text back as a ``tool`` message. Every call is the
next step of the durable run ``openai-agent``, a signed entry with its memo.
Drop the ``http_client`` argument (and set ``OPENAI_API_KEY``) to talk to the
real API. Without ``--data`` the memory lives in a fresh temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import openai

import memseal

RUN_ID = "openai-agent"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")
TASK = "Remember that the nightly report goes out at 6am, then tell me when it goes out."
MAX_TURNS = 8

#: The tool calls the scripted model makes, one per turn, before it answers.
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("memory_store", {"learning": {"text": "the nightly report goes out at 6am"}}),
    ("memory_fetch", {"query": "nightly report"}),
]


def scripted_model(request: httpx.Request) -> httpx.Response:
    """The model behind the mock transport: one Chat Completions response per request."""
    if request.url.path != "/v1/chat/completions":
        return httpx.Response(404, json={"error": {"message": f"no route {request.url.path}"}})
    body = json.loads(request.content)
    offered = {tool["function"]["name"] for tool in body.get("tools", [])}
    answered = [m for m in body["messages"] if m["role"] == "tool"]
    turn = len(answered)
    if turn < len(SCRIPT):
        name, arguments = SCRIPT[turn]
        if name not in offered:
            return httpx.Response(400, json={"error": {"message": f"tool {name} not offered"}})
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{turn}",
                    "type": "function",
                    # The API hands arguments back as JSON text, not as an object.
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        }
        finish = "tool_calls"
    else:
        fetched = json.loads(answered[-1]["content"])
        hits = fetched.get("hits") or []
        text = f"From memory: {hits[0]['text']}." if hits else "I have nothing stored about that."
        message, finish = {"role": "assistant", "content": text}, "stop"
    return httpx.Response(
        200,
        json={
            "id": f"chatcmpl-scripted-{turn}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        },
    )


async def agent(toolset: Any, client: openai.AsyncOpenAI) -> str:
    """The host's loop: the model asks for tools, memseal runs (and records) them."""
    messages: list[Any] = [{"role": "user", "content": TASK}]
    for _ in range(MAX_TURNS):
        reply = await client.chat.completions.create(
            model="gpt-4o-mini", tools=toolset.to_openai(), messages=messages
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            if call.type != "function":  # a custom (free-text) tool: memseal offers none
                text = f"error: {call.type} tool calls are not offered"
            else:
                text = await toolset.call(call.function.name, call.function.arguments)
                print(f"tool {call.function.name}: {text}")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
    return "(no answer within the turn limit)"


async def main(data: Path) -> None:
    transport = httpx.MockTransport(scripted_model)
    async with (
        httpx.AsyncClient(transport=transport) as http,
        memseal.open(data) as memory,
        memory.tools(SCOPE, run_id=RUN_ID) as tools,
    ):
        # A plain httpx client: every openai release takes one (the newest type the argument
        # as their own httpx2 client, and accept httpx's as well).
        client = openai.AsyncOpenAI(
            api_key="offline", base_url="https://scripted.invalid/v1", http_client=http
        )
        answer = await agent(tools.toolset(), client)
        print(f"answer: {answer}")
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
    folder = args.data or Path(tempfile.mkdtemp(prefix="memseal-openai-"))
    asyncio.run(main(folder))
    sys.exit(0)
