"""Decoding untrusted tool arguments, with errors a model can read.

:func:`decode` takes what a model sent (a mapping, or the JSON text of
one) for one tool and checks, in order:

1. the arguments are a JSON object of plain JSON values (text keys, finite
   numbers; an empty text is the empty object, and a member whose value is
   null is left out, as OpenAI strict mode sends absent options), nested
   at most :data:`MAX_DEPTH` deep and at most :data:`MAX_ARGUMENT_BYTES`
   long as JSON;
2. no object, at any depth, has a ``namespace`` or ``reach`` key: the host
   fixes those (scoping invariant 4), and this wins over any other fault;
3. the object decodes into the tool's type (:mod:`memseal.tools.args`)
   through msgspec, strictly: every key known, every value of the right
   type and within its limits. Nothing is built by calling a constructor.

Each failure is an :class:`InvalidRequest` whose message is lowercase and
names the tool, the field and the rule, e.g. ``memory_list: `filter.kinds`
is not an item kind (artifact, ...)``, so a model can correct its call. It
never quotes the value sent: a failed call's message is recorded, and no
forget could reach it (the names of unknown keys and tools are quoted, as
the field a message is about).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Final, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from memseal.ledger.canonical import MAX_PAYLOAD_BYTES
from memseal.ledger.errors import InvalidRequest

__all__ = [
    "FORBIDDEN_KEYS",
    "MAX_ARGUMENT_BYTES",
    "MAX_DEPTH",
    "as_plain",
    "decode",
    "decode_object",
    "fail",
    "given",
    "quote",
]

T = TypeVar("T")

#: The arguments of one call, as JSON: what one signed tool-call payload can hold.
MAX_ARGUMENT_BYTES: Final = MAX_PAYLOAD_BYTES
MAX_DEPTH: Final = 32
#: Keys the host fixes: refused wherever they appear in a model's arguments.
FORBIDDEN_KEYS: Final = frozenset({"namespace", "reach"})


def fail(tool: str, message: str) -> InvalidRequest:
    """An :class:`InvalidRequest` for ``tool``: ``tool: message``, lowercase first letter."""
    text = message[:1].lower() + message[1:]
    return InvalidRequest(f"{tool}: {text}")


def _path(parts: Sequence[str | int]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            shown = quote(part, 40)
            text += f".{shown}" if text else shown
    return text or "arguments"


_TYPE_NAMES: Final = {
    "str": "text",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "null",
}
_SAFE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _kind_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def as_plain(tool: str, arguments: object) -> dict[str, Any]:
    """The arguments as a plain JSON object (dict, list, str, int, float, bool, None), checked.

    Takes a mapping or the JSON text of an object (what model APIs return);
    empty text is ``{}``, and an object member set to null is dropped.
    Raises :class:`InvalidRequest` for anything that is not a JSON object
    of finite numbers and text keys, nested at most :data:`MAX_DEPTH` deep,
    at most :data:`MAX_ARGUMENT_BYTES` as JSON.
    """
    if isinstance(arguments, str | bytes | bytearray | memoryview):
        try:
            raw = bytes(arguments) if not isinstance(arguments, str) else arguments.encode()
        except UnicodeEncodeError:
            reason = "the text holds a lone surrogate"
            raise fail(tool, f"`arguments` are not valid JSON: {reason}") from None
        if len(raw) > MAX_ARGUMENT_BYTES:
            raise fail(
                tool,
                f"`arguments` are {len(raw):,} bytes of JSON; the limit is {MAX_ARGUMENT_BYTES:,}",
            )
        try:
            # OpenAI hands back "" for a call without arguments: that is an empty object.
            value: object = msgspec.json.decode(raw) if raw.strip() else {}
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            reason = str(exc).split(" - at ")[0].removeprefix("JSON is malformed: ")
            reason = reason[:1].lower() + reason[1:]
            raise fail(tool, f"`arguments` are not valid JSON: {reason}") from None
        except RecursionError:
            # msgspec decodes recursively: text nested past the interpreter's limit never
            # reaches the depth check below, so it gets the same answer here.
            raise fail(tool, f"`arguments` nest deeper than {MAX_DEPTH} levels") from None
    else:
        value = arguments
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    if not isinstance(value, dict):
        raise fail(tool, f"`arguments` must be a JSON object, not {_kind_of(value)}")
    plain = _plain(tool, value)
    if not isinstance(arguments, str | bytes | bytearray | memoryview):
        try:
            size = len(msgspec.json.encode(plain))
        except UnicodeEncodeError:
            raise fail(tool, f"`{_unencodable(plain)}` holds a lone surrogate, not text") from None
        if size > MAX_ARGUMENT_BYTES:
            raise fail(
                tool, f"`arguments` are {size:,} bytes of JSON; the limit is {MAX_ARGUMENT_BYTES:,}"
            )
    return plain  # type: ignore[return-value]


@cache
def _argument_names() -> frozenset[str]:
    """Every property name in any tool's argument schema, at any depth."""
    from .catalog import TOOL_NAMES  # the tools' own modules import this one
    from .specs import spec_for

    names: set[str] = set()

    def walk(schema: object) -> None:
        if isinstance(schema, dict):
            properties = schema.get("properties")
            if isinstance(properties, dict):
                names.update(str(k) for k in properties)
            for value in schema.values():
                walk(value)
        elif isinstance(schema, list):
            for value in schema:
                walk(value)

    for name in TOOL_NAMES:
        walk(spec_for(name).parameters)
    return frozenset(names)


def _plain(tool: str, root: dict[Any, Any]) -> object:
    """A deep copy of ``root`` as plain JSON values; iterative, so depth cannot overflow.

    A host-fixed key anywhere wins over any other fault, so the model
    always learns that the namespace and reach are not its to choose.
    """
    out: dict[str, Any] = {}
    fault: str | None = None
    stack: list[tuple[object, Any, list[str | int], int]] = [(root, out, [], 1)]
    while stack:
        source, target, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            fault = fault or f"`{_path(path)}` nests deeper than {MAX_DEPTH} levels"
            continue
        pairs: list[tuple[str | int, object]]
        if isinstance(source, dict):
            pairs = []
            for key, item in source.items():
                if not isinstance(key, str):
                    fault = fault or f"`{_path(path)}` has a key that is not text: {key!r:.40}"
                    continue
                if key in FORBIDDEN_KEYS:
                    raise fail(tool, _forbidden(key, path))
                if item is None and key in _argument_names():
                    # No argument is nullable, and OpenAI strict mode sends every optional
                    # one it leaves out as null: a null member is an absent one. A name no
                    # tool takes stays, so the decoder still refuses it as unknown.
                    continue
                pairs.append((key, item))
        else:
            assert isinstance(source, list)
            pairs = list(enumerate(source))
        for key, item in pairs:
            here = [*path, key]
            copied: Any = item
            if isinstance(item, Mapping):
                copied = {}
                stack.append((dict(item), copied, here, depth + 1))
            elif isinstance(item, list | tuple):
                copied = [None] * len(item)
                stack.append((list(item), copied, here, depth + 1))
            elif item is None or isinstance(item, bool | str):
                pass
            elif isinstance(item, int):
                if not -(2**63) <= item < 2**64:
                    fault = fault or f"`{_path(here)}` is out of range"
                copied = int(item)
            elif isinstance(item, float):
                if not math.isfinite(item):
                    fault = fault or f"`{_path(here)}` must be a finite number"
                copied = float(item)
            else:
                fault = fault or f"`{_path(here)}` must be a JSON value, not {type(item).__name__}"
            target[key] = copied
    if fault is not None:
        raise fail(tool, fault)
    return out


def _unencodable(root: object) -> str:
    """The path of the first key or text in ``root`` that UTF-8 cannot encode."""
    stack: list[tuple[Any, list[str | int]]] = [(root, [])]
    while stack:
        value, path = stack.pop()
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in pairs:
            here = [*path, key]
            if isinstance(key, str) and not _encodes(key):
                return _path(path) if path else "arguments"
            if isinstance(item, str) and not _encodes(item):
                return _path(here)
            if isinstance(item, dict | list):
                stack.append((item, here))
    return "arguments"


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def quote(text: str, limit: int = 60) -> str:
    """``text`` fit to sit between backticks in a message: never empty, never a backtick."""
    if not text:
        return '""'
    shown = text.replace("`", "'")
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _forbidden(key: str, path: Sequence[str | int]) -> str:
    where = _path([*path, key])
    return (
        f"`{where}` is not an argument: the host fixes the namespace and reach of every "
        "call, and a model never chooses them"
    )


_AT = re.compile(r" - at `\$(.*)`$")
_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[\"((?:[^\"\\]|\\.)*)\"\]")
_EXPECTED = re.compile(r"Expected `(\w+)`, got `(\w+)`")
_BOUND = re.compile(r"Expected `(\w+)` (>=|<=|>|<) (\S+)")
_LENGTH = re.compile(r"Expected `(\w+)` of length (>=|<=) (\d+)")
_REGEX = re.compile(r"Expected `str` matching regex")
_ENUM = re.compile(r"Invalid enum value (.*)")
_UNKNOWN = re.compile(r"Object contains unknown field `(.*)`")
_MISSING = re.compile(r"Object missing required field `(.*)`")

#: What a pattern-checked field must look like, by its last name.
_PATTERNS: Final = {
    "sources": "is not a source kind (a lowercase word like agent, user or document)",
    "ids": "is not a memory id",
    "cursor": "is malformed; pass back a next_cursor unchanged",
    "from": "is not a date like 2026-11-30",
    "to": "is not a date like 2026-11-30",
    "role": "must be a lowercase word like user or assistant",
}
#: What an enum field holds, by its last name.
_ENUMS: Final = {
    "kinds": "an item kind",
    "learning_kind": "a learning kind",
    "mode": "a fetch mode this engine serves",
    "min_trust": "a trust level a read may ask for",
    "facet": "a facet",
}


def _parts(where: str) -> list[str | int]:
    parts: list[str | int] = []
    for match in _STEP.finditer(where):
        name, index, quoted = match.groups()
        if name is not None:
            parts.append(name)
        elif index is not None:
            parts.append(int(index))
        else:
            parts.append(quoted)
    return parts


def _value_at(root: object, parts: Sequence[str | int]) -> object:
    value = root
    for part in parts:
        found = (isinstance(part, int) and isinstance(value, list) and 0 <= part < len(value)) or (
            isinstance(part, str) and isinstance(value, dict) and part in value
        )
        if not found:
            return None
        value = value[part]  # type: ignore[index]
    return value


def _enum_values(schema: Mapping[str, Any] | None, parts: Sequence[str | int]) -> list[str]:
    node: Any = schema
    for part in parts:
        if not isinstance(node, Mapping):
            return []
        node = node.get("items") if isinstance(part, int) else node.get("properties", {}).get(part)
    while isinstance(node, Mapping) and "items" in node and "enum" not in node:
        node = node["items"]
    if isinstance(node, Mapping) and isinstance(node.get("enum"), list):
        return [str(v) for v in node["enum"]]
    return []


def _explain(
    tool: str,
    exc: msgspec.ValidationError,
    plain: Mapping[str, Any],
    schema: Mapping[str, Any] | None,
) -> InvalidRequest:
    text = str(exc)
    match = _AT.search(text)
    parts: list[str | int] = []
    if match is not None:
        parts = _parts(match.group(1))
        text = text[: match.start()]
    field = _path(parts)
    last = next((p for p in reversed(parts) if isinstance(p, str)), "")
    if m := _UNKNOWN.fullmatch(text):
        key = quote(m.group(1))
        if not parts:
            return fail(tool, f"`{key}` is not an argument of {tool}; the schema lists each one")
        return fail(tool, f"`{_path([*parts, key])}` is not a field of `{field}`")
    if m := _MISSING.fullmatch(text):
        return fail(tool, f"`{_path([*parts, m.group(1)])}` is required")
    if _ENUM.fullmatch(text):
        values = _enum_values(schema, parts)
        noun = _ENUMS.get(last, "one of the allowed values")
        while parts and isinstance(parts[-1], int):
            parts = parts[:-1]
        sent = _value_at(plain, _parts(match.group(1)) if match else [])
        extra = f" ({', '.join(values)})" if values else ""
        if last == "min_trust" and sent == "rejected":
            extra += "; rejected memory is never returned"
        # The rule, never the value: a recorded error keeps its message, and no forget
        # reaches a refused call's payload.
        return fail(tool, f"`{_path(parts)}` is not {noun}{extra}")
    if m := _EXPECTED.fullmatch(text):
        want, got = m.groups()
        return fail(
            tool,
            f"`{field}` must be {_TYPE_NAMES.get(want, want)}, not {_TYPE_NAMES.get(got, got)}",
        )
    if m := _LENGTH.fullmatch(text):
        kind, op, size = m.groups()
        if kind == "str":
            if op == ">=" and size == "1":
                return fail(tool, f"`{field}` must not be empty")
            return fail(tool, f"`{field}` is too long; the limit is {size} characters")
        if op == ">=":
            return fail(
                tool, f"`{field}` must list at least {size} value{'' if size == '1' else 's'}"
            )
        return fail(tool, f"`{field}` lists too many values; at most {size}")
    if m := _BOUND.fullmatch(text):
        kind, op, bound = m.groups()
        words = {">=": "at least", "<=": "at most", ">": "more than", "<": "less than"}[op]
        return fail(tool, f"`{field}` must be {words} {bound}")
    if _REGEX.match(text):
        index_free = [p for p in parts if isinstance(p, str)]
        rule = _PATTERNS.get(index_free[-1] if index_free else "", "is not valid here")
        return fail(tool, f"`{field}` {rule}")
    return fail(tool, f"`{field}`: {text}")


def decode_object(
    tool: str,
    plain: Mapping[str, Any],
    kind: type[T],
    schema: Mapping[str, Any] | None = None,
) -> T:
    """``plain`` (already checked by :func:`as_plain`) decoded into ``kind``, strictly.

    ``schema`` (the tool's parameters) lets an enum error list the allowed values.
    """
    try:
        result: Any = msgspec.convert(plain, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise _explain(tool, exc, plain, schema) from None
    return result  # type: ignore[no-any-return]


def decode(
    tool: str,
    arguments: object,
    kind: type[T],
    schema: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], T]:
    """The arguments as sent (plain JSON) and decoded into ``kind``; see the module docstring."""
    plain = as_plain(tool, arguments)
    return plain, decode_object(tool, plain, kind, schema)


def given(value: T | UnsetType) -> T | None:
    """None for an argument the model left out."""
    return None if value is UNSET else value
