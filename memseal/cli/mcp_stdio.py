"""The stdio wire of ``memseal mcp``: every line the client sends gets an answer.

The mcp SDK's stdio reader drops a line it cannot validate without replying, so a
client that sent invalid JSON, a request nested too deep, a batch, or an object or
float id waited for ever. This module sits between the process's file descriptors and
the SDK's ``stdio_server``: it reads each line itself and answers what JSON-RPC 2.0
says it must, passing only well-formed messages on.

* a line that is not JSON (invalid UTF-8 included): ``-32700`` with id ``null``;
* a message that is not a valid request: ``-32600``, with the id when it can be read
  (a string or an integer at the top level), ``null`` otherwise. Nested deeper than
  :data:`MAX_DEPTH`, an id of another type, a line over :data:`MAX_LINE_BYTES` and a
  scalar are all this. A line too long or too deep to parse has its id read by
  :func:`_scan_id`, from the part read and without recursion, so its client still
  learns which request failed; conservatively: ``null`` for an integer id outside 64
  bits or an ``id`` key given twice. Such a line is not parsed to its end, so one that
  is also invalid JSON is answered ``-32600`` (under its id), not ``-32700``;
* a batch (a JSON array) is taken only when the session agreed to a protocol version
  that has batches (2025-03-26): its requests go to the server one by one and their
  answers go back as one array, invalid members answered in place. Under any other
  version a batch is ``-32600``.

The SDK writes whole lines through :meth:`_Wire.write`, which is where batch answers
are gathered. At the end of input the wire waits until every request it passed on has
been answered (or cancelled by the client) before it tells the SDK the input is over:
the SDK answers whatever is still in flight then with ``-32000 Connection closed`` and
drops its work, so a client that writes its calls and closes its end (a pipe, a
script) would lose them. As the SDK does, fd 0 and 1 are pointed at the null device and at stderr
while serving, so stray output from a handler cannot corrupt the wire.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

import anyio
import anyio.to_thread
import mcp_types
import msgspec
import pydantic
from mcp.server.stdio import stdio_server

__all__ = ["BATCH_VERSIONS", "MAX_DEPTH", "MAX_LINE_BYTES", "stdio_wire"]

#: Deeper than any MCP message needs; the SDK's own validator gives up near 200.
MAX_DEPTH = 64
#: Beyond the largest tool call the service takes (1 MiB of arguments), with room.
MAX_LINE_BYTES = 4 * 1024 * 1024
#: Protocol versions whose JSON-RPC layer has batches.
BATCH_VERSIONS = frozenset({"2025-03-26"})

_PARSE_ERROR = -32700
_INVALID_REQUEST = -32600
_encode = msgspec.json.Encoder().encode


def _depth_over(value: Any, limit: int) -> bool:
    # Iterative: the point is to refuse what would exhaust a recursive walk.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return False


def _readable_id(message: Any) -> str | int | None:
    if isinstance(message, dict):
        found = message.get("id")
        if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
            return found
    return None


# One JSON string (escapes whole, no raw control characters; possessive, so a string cut
# short fails in one pass rather than backtracking), one JSON integer, and the
# next byte that can open, close or quote anything inside a nested value.
_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]++|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*+"')
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?![0-9.eE])")
_SCALAR = re.compile(rb"-?[0-9][0-9.eE+-]*|true|false|null")
_STRUCTURAL = re.compile(rb'["{}\[\]]')
_SPACE = re.compile(rb"[ \t\r\n]*")
_CLOSE = {ord("{"): ord("}"), ord("["): ord("]")}
#: Keys and nested brackets or strings :func:`_scan_id` reads before it gives up (tens of
#: milliseconds, a fraction of a second at worst): a 6,000-deep value, or 20,000 top-level
#: keys, is read through.
_SCAN_STEPS = 20_000


def _after_space(data: bytes, at: int) -> int:
    space = _SPACE.match(data, at)
    assert space is not None  # the pattern matches the empty string
    return space.end()


def _skip_nested(data: bytes, at: int, steps: int) -> tuple[int | None, int]:
    """The index past the object or array opening at ``at`` (None if ``data`` ends first,
    the brackets do not pair or ``steps`` run out), and the steps left. A stack, not
    recursion: the value may be any depth."""
    stack = [_CLOSE[data[at]]]
    at += 1
    while stack:
        steps -= 1
        found = _STRUCTURAL.search(data, at)
        if found is None or steps < 0:
            return None, steps
        at, byte = found.start(), data[found.start()]
        if byte == ord('"'):
            string = _STRING.match(data, at)
            if string is None:
                return None, steps
            at = string.end()
        elif byte in _CLOSE:
            stack.append(_CLOSE[byte])
            at += 1
        elif stack.pop() == byte:
            at += 1
        else:
            return None, steps
    return at, steps


def _text(string: bytes) -> str | None:
    """A JSON string's value; None if its bytes are not UTF-8 (the line is not JSON)."""
    try:
        return msgspec.json.decode(string, type=str)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None


def _scan_id(data: bytes) -> str | int | None:
    """The top-level ``id`` of the JSON object ``data`` begins, read without parsing the
    rest: for a line refused before it is parsed (over the size limit, where ``data`` is
    its first part, or nested too deep for the decoder). The top level is read strictly
    (keys, colons, commas) and nested values are skipped by their brackets alone, so it
    costs one pass, no recursion and at most :data:`_SCAN_STEPS` steps. None when no
    string or integer id is read before ``data`` ends, stops being an object or the steps
    run out, as the parsed line would answer; None too when the part read holds ``id``
    more than once (a parser takes the last, which may lie past the part read)."""
    ids = _top_level_ids(data)
    return ids[0] if len(ids) == 1 else None


def _top_level_ids(data: bytes) -> list[str | int | None]:
    """The value of each top-level ``id`` key :func:`_scan_id` reads, in order (None for
    one that is no string and no integer it takes)."""
    at = _after_space(data, 0)
    if data[at : at + 1] != b"{":
        return []
    found: list[str | int | None] = []
    at, steps = at + 1, _SCAN_STEPS
    while steps > 0:
        steps -= 1
        at = _after_space(data, at)
        key = _STRING.match(data, at)
        if key is None:
            return found
        at = _after_space(data, key.end())
        if data[at : at + 1] != b":":
            return found
        at = _after_space(data, at + 1)
        value: re.Match[bytes] | None = None
        if data[at : at + 1] in (b"{", b"["):
            end, steps = _skip_nested(data, at, steps)
        else:
            value = _STRING.match(data, at) or _SCALAR.match(data, at)
            end = None if value is None else value.end()
        if end is None or end == len(data):
            return found  # cut short: a number's digits may go on past the part read
        name = key.group()
        if name == b'"id"' or (b"\\" in name and _text(name) == "id"):
            integer = _INTEGER.fullmatch(data, at, end)
            if integer is not None:
                found.append(_integer_id(integer.group()))
            else:
                is_text = value is not None and value.re is _STRING
                found.append(_text(value.group()) if value is not None and is_text else None)
        at = _after_space(data, end)
        if data[at : at + 1] != b",":
            return found
        at += 1
    return found


def _integer_id(digits: bytes) -> int | None:
    """An integer id as the decoder holds it natively (a signed or unsigned 64-bit
    number); None beyond: ``int()`` of thousands of digits raises, and no client's id
    is that large."""
    if len(digits.lstrip(b"-")) > 20:
        return None
    number = int(digits)
    return number if -(2**63) <= number < 2**64 else None


def _error(code: int, message: str, id_: str | int | None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


@dataclass
class _Batch:
    waiting: set[str | int]
    answers: list[Any] = field(default_factory=list)


class _Wire:
    """Both ends of the stdio wire: lines in from the client, lines out from the SDK."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = anyio.Lock()
        self._version: str | None = None
        self._initialize_ids: set[str | int] = set()
        self._batches: list[_Batch] = []
        self._pending: set[str | int] = set()
        self._answered = anyio.Event()

    # -- in: the client's lines, answered or passed on ------------------------------

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            line = await anyio.to_thread.run_sync(
                self._reader.readline, MAX_LINE_BYTES + 1, abandon_on_cancel=True
            )
            if not line:
                await self._drain()
                return
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                await anyio.to_thread.run_sync(self._skip_rest, abandon_on_cancel=True)
                # The id, when the part read holds it, is read from that part alone.
                message = f"a line over {MAX_LINE_BYTES} bytes"
                await self._send(_error(_INVALID_REQUEST, message, _scan_id(line)))
                continue
            if not line.strip():
                continue
            for passed in await self._take(line):
                yield passed

    async def _drain(self) -> None:
        """Wait for the answer to every request passed on (see the module docstring)."""
        while self._pending:
            await self._answered.wait()
            self._answered = anyio.Event()

    def _settle(self, id_: str | int) -> None:
        if id_ in self._pending:
            self._pending.discard(id_)
            self._answered.set()

    def _skip_rest(self) -> None:
        while True:
            chunk = self._reader.readline(MAX_LINE_BYTES)
            if not chunk or chunk.endswith(b"\n"):
                return

    async def _take(self, line: bytes) -> list[str]:
        """The messages of ``line`` to pass to the server; answers the rest itself."""
        try:
            decoded = msgspec.json.decode(line)
        except (msgspec.DecodeError, UnicodeDecodeError):
            await self._send(_error(_PARSE_ERROR, "parse error: the line is not JSON", None))
            return []
        except RecursionError:
            message = f"invalid request: nested deeper than {MAX_DEPTH} levels"
            await self._send(_error(_INVALID_REQUEST, message, _scan_id(line)))
            return []
        if _depth_over(decoded, MAX_DEPTH):
            message = f"invalid request: nested deeper than {MAX_DEPTH} levels"
            await self._send(_error(_INVALID_REQUEST, message, _readable_id(decoded)))
            return []
        if not isinstance(decoded, list):
            checked = self._check(decoded)
            if isinstance(checked, dict):
                await self._send(checked)
                return []
            return [checked]
        if self._version not in BATCH_VERSIONS:
            agreed = self._version or "none yet"
            message = f"invalid request: batches are not part of the agreed protocol ({agreed})"
            await self._send(_error(_INVALID_REQUEST, message, None))
            return []
        if not decoded:
            await self._send(_error(_INVALID_REQUEST, "invalid request: an empty batch", None))
            return []
        passed: list[str] = []
        batch = _Batch(waiting=set())
        for member in decoded:
            checked = self._check(member)
            if isinstance(checked, dict):
                batch.answers.append(checked)
                continue
            passed.append(checked)
            if isinstance(member, dict) and "method" in member and "id" in member:
                batch.waiting.add(member["id"])
        if batch.waiting:
            self._batches.append(batch)
        elif batch.answers:
            await self._send(batch.answers)
        return passed

    def _check(self, message: Any) -> str | dict[str, Any]:
        """The message as a line for the server, or the error that answers it."""
        id_ = _readable_id(message)
        if isinstance(message, dict) and "id" in message and id_ is None:
            return _error(
                _INVALID_REQUEST, "invalid request: an id must be a string or an integer", None
            )
        try:
            mcp_types.jsonrpc_message_adapter.validate_python(message)
        except pydantic.ValidationError:
            return _error(_INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 message", id_)
        if isinstance(message, dict) and message.get("method") == "initialize" and id_ is not None:
            self._initialize_ids.add(id_)
        if isinstance(message, dict) and "method" in message and id_ is not None:
            self._pending.add(id_)
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            # A cancelled request may get no answer at all: nothing to wait for.
            cancelled = _readable_id({"id": (message.get("params") or {}).get("requestId")})
            if cancelled is not None:
                self._settle(cancelled)
        return _encode(message).decode()

    # -- out: the server's lines, batches gathered ----------------------------------

    async def write(self, text: str) -> None:
        """One line from the SDK (it writes each message whole, then flushes)."""
        try:
            message = msgspec.json.decode(text)
        except msgspec.DecodeError:
            message = None
        id_ = _readable_id(message)
        if id_ is not None and id_ in self._initialize_ids and isinstance(message, dict):
            self._initialize_ids.discard(id_)
            version = (message.get("result") or {}).get("protocolVersion")
            self._version = version if isinstance(version, str) else None
        if id_ is not None and "method" not in (message or {}):
            self._settle(id_)
            for batch in self._batches:
                if id_ in batch.waiting:
                    batch.waiting.discard(id_)
                    batch.answers.append(message)
                    if not batch.waiting:
                        self._batches.remove(batch)
                        await self._send(batch.answers)
                    return
        await self._write_line(text.rstrip("\n").encode())

    async def flush(self) -> None:
        """Each line is flushed as it is written."""

    async def _send(self, message: Any) -> None:
        await self._write_line(_encode(message))

    async def _write_line(self, data: bytes) -> None:
        async with self._lock:
            await anyio.to_thread.run_sync(self._write_now, data + b"\n")

    def _write_now(self, data: bytes) -> None:
        self._writer.write(data)
        self._writer.flush()


@contextlib.contextmanager
def _claimed_stdio() -> Any:
    """Private duplicates of fd 0 and 1 for the wire; the fds themselves diverted."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved = (os.dup(0), os.dup(1))
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        with os.fdopen(wire_in, "rb") as reader, os.fdopen(wire_out, "wb") as writer:
            yield reader, writer
    finally:
        os.dup2(saved[0], 0)
        os.dup2(saved[1], 1)
        os.close(saved[0])
        os.close(saved[1])


@contextlib.asynccontextmanager
async def stdio_wire() -> AsyncIterator[tuple[Any, Any]]:
    """Like the SDK's ``stdio_server()``: (read stream, write stream) for ``Server.run``."""
    with _claimed_stdio() as (reader, writer):
        wire = _Wire(cast(BinaryIO, reader), cast(BinaryIO, writer))
        # The SDK only iterates its stdin and calls write/flush on its stdout.
        async with stdio_server(stdin=cast(Any, wire), stdout=cast(Any, wire)) as streams:
            yield streams
