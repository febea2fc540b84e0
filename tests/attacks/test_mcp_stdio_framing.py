"""``memseal mcp`` over stdio answers every line, as JSON-RPC 2.0 says it must.

The attack: lines the mcp SDK's stdio reader dropped without a reply, so the client
waited for ever: invalid JSON, invalid UTF-8, a request nested 202 or more levels deep,
a batch, an object or a float id, an empty batch. Each now gets its error (-32700 or
-32600, with the id when it can be read), a batch under 2025-03-26 gets one array of
answers, and the server goes on answering afterwards. A line over the size limit and a
request nested too deep for the decoder are answered under their id too, when it can
be read from the top level of the part read (they were answered with id null).
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from memseal.cli.mcp_stdio import BATCH_VERSIONS, MAX_LINE_BYTES

MEMSEAL = str(Path(sys.executable).parent / "memseal")


class Wire:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    async def answer(self, line: bytes) -> Any:
        await self.send(line)
        assert self.process.stdout is not None
        got = await asyncio.wait_for(self.process.stdout.readline(), timeout=60)
        assert got, "the server closed the wire instead of answering"
        return json.loads(got)

    async def ping(self, id_: int) -> None:
        answer = await self.answer(
            json.dumps({"jsonrpc": "2.0", "id": id_, "method": "ping"}).encode()
        )
        assert answer == {"jsonrpc": "2.0", "id": id_, "result": {}}, answer


async def _open(folder: Path, version: str) -> AsyncIterator[Wire]:
    process = await asyncio.create_subprocess_exec(
        MEMSEAL,
        "mcp",
        "--data",
        str(folder),
        "--place",
        "team:wire/agent:w",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    wire = Wire(process)
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "framing-test", "version": "1"},
            },
        }
        answer = await wire.answer(json.dumps(init).encode())
        assert answer["result"]["protocolVersion"] == version, answer
        await wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield wire
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def _nested(depth: int, id_: int) -> bytes:
    params = b'{"a":' * depth + b"1" + b"}" * depth
    return b'{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":%s}' % (id_, params)


def _nested_id_last(depth: int, id_: str) -> bytes:
    # The TypeScript SDK writes the id after the params.
    params = b'{"a":[' * depth + b'"]}"' + b"]}" * depth
    return b'{"jsonrpc":"2.0","method":"tools/list","params":%s,"id":"%s"}' % (params, id_.encode())


def _deep_with(*members: bytes) -> bytes:
    """A request 3,000 levels deep with ``members`` at its top level, the last after it."""
    deep = b'"params":{"a":' + b"[" * 3000 + b"]" * 3000 + b"}"
    *first, last = members
    return b"{" + b",".join([b'"jsonrpc":"2.0"', b'"method":"ping"', *first, deep, last]) + b"}"


LINES = {
    "invalid_json": (b'{"jsonrpc":', -32700, None),
    "invalid_utf8": (
        b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"\xff"}}',
        -32700,
        None,
    ),
    "nested_202_deep": (_nested(202, 7), -32600, 7),
    "nested_3000_deep": (_nested(3000, 11), -32600, 11),
    "nested_3000_deep_id_last": (_nested_id_last(3000, "late"), -32600, "late"),
    "nested_100000_deep": (b"[" * 100_000 + b"]" * 100_000, -32600, None),
    "nested_100000_deep_id_first": (_nested(100_000, 12), -32600, 12),
    # An id after that much nesting is past what the scan reads: not known within the limit.
    "nested_100000_deep_id_last": (_nested_id_last(100_000, "far"), -32600, None),
    # An integer id no 64-bit field holds is not read (5,000 digits once killed the
    # server: int() refuses them); nor is an id given twice (a parser takes the last).
    "nested_3000_deep_id_of_5000_digits": (_deep_with(b'"id":' + b"1" * 5000), -32600, None),
    "nested_3000_deep_id_of_21_digits": (_deep_with(b'"id":' + b"1" * 21), -32600, None),
    "nested_3000_deep_id_2_64": (_deep_with(b'"id":18446744073709551616'), -32600, None),
    "nested_3000_deep_id_2_64_less_1": (
        _deep_with(b'"id":18446744073709551615'),
        -32600,
        18446744073709551615,
    ),
    "nested_3000_deep_id_twice": (_deep_with(b'"id":7', b'"id":"eight"'), -32600, None),
    "object_id": (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', -32600, None),
    "float_id": (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600, None),
    "null_id": (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600, None),
    "not_jsonrpc": (b'{"jsonrpc":"1.0","id":"x","method":"ping"}', -32600, "x"),
    "a_scalar": (b"42", -32600, None),
    "empty_batch": (b"[]", -32600, None),
}


async def _every_dropped_line_gets_an_error_answer(wire: Wire) -> None:
    for attack, (line, code, id_) in LINES.items():
        answer = await wire.answer(line)
        assert answer["jsonrpc"] == "2.0" and answer["id"] == id_, (attack, answer)
        assert answer["error"]["code"] == code, (attack, answer)
        await wire.ping(99)


async def _a_batch_follows_the_agreed_protocol_version(wire: Wire, version: str) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 8, "method": "ping"},
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1},
        },
        {"jsonrpc": "2.0", "id": {"bad": 1}, "method": "ping"},
        {"jsonrpc": "2.0", "id": "nine", "method": "tools/list"},
    ]
    answer = await wire.answer(json.dumps(batch).encode())
    if version in BATCH_VERSIONS:
        assert isinstance(answer, list), answer
        by_id = {a["id"]: a for a in answer}
        assert set(by_id) == {8, "nine", None}, answer
        assert by_id[8]["result"] == {}
        assert "tools" in by_id["nine"]["result"]
        assert by_id[None]["error"]["code"] == -32600
    else:
        assert answer["error"]["code"] == -32600 and answer["id"] is None, answer
        assert "batch" in answer["error"]["message"]
    await wire.ping(100)


async def _a_line_over_the_limit_is_refused_and_skipped(wire: Wire) -> None:
    body = b"a" * MAX_LINE_BYTES
    for id_, huge in (
        (3, b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"' + body + b'"}}'),
        ("five", b'{"params":{"x":["a", {"b":"}"}]},"id":"five","y":"' + body + b'"}'),
        # The id lies past the part read: it cannot be known within the limit.
        (None, b'{"jsonrpc":"2.0","method":"ping","params":{"x":"' + body + b'"},"id":4}'),
        # An id of 5,000 digits (it once killed the server), and an id given twice.
        (None, b'{"jsonrpc":"2.0","id":' + b"1" * 5000 + b',"method":"ping","p":"' + body + b'"}'),
        (None, b'{"id":6,"jsonrpc":"2.0","id":"six","method":"ping","p":"' + body + b'"}'),
    ):
        answer = await wire.answer(huge)
        assert answer["error"]["code"] == -32600 and "over" in answer["error"]["message"], answer
        assert answer["id"] == id_, answer
        await wire.ping(101)


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18"])
async def test_stdio_answers_every_malformed_line_batch_and_oversized_line(
    tmp_path: Path, version: str
) -> None:
    # One server process per protocol version: starting one is most of this test's time.
    async for wire in _open(tmp_path / "data", version):
        await _every_dropped_line_gets_an_error_answer(wire)
        await _a_batch_follows_the_agreed_protocol_version(wire, version)
        await _a_line_over_the_limit_is_refused_and_skipped(wire)
