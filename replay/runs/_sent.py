"""A call as sent and as recorded: what its fingerprint covers, and the outcome a step keeps.

:func:`sent_form` turns what a host or model sent into the plain JSON a
step records and matches (junk included, described, so a different piece
of junk at a recorded step diverges). The rest is the outcome side: an
error the model can act on is recorded as a result and raised again on
replay, bounded as the step recorded it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import blake3
import msgspec

from memseal.ledger.canonical import MAX_PAYLOAD_BYTES, canonical_json
from memseal.ledger.errors import InvalidRequest, MemsealError, NotFound, Unsupported

from .provenance import Verified

__all__ = [
    "MAX_ERROR_CHARS",
    "MAX_KEY_CHARS",
    "RECORDED_ERRORS",
    "Sent",
    "as_recorded",
    "check_key",
    "error_result",
    "normal",
    "outcome",
    "recorded_call",
    "sent_form",
    "withheld_digest",
]

#: What a model can act on: recorded (memoised) like results, raised again on replay.
RECORDED_ERRORS: tuple[type[MemsealError], ...] = (InvalidRequest, Unsupported, NotFound)
_ERROR_TYPES: dict[str, type[MemsealError]] = {c.__name__: c for c in RECORDED_ERRORS}
# A policy refusal is recorded under its own name; replayed, it is the Unsupported it is
# live (its code is not recorded), never an InvalidRequest a host would catch apart.
_ERROR_TYPES["Refusal"] = Unsupported

_encoder = msgspec.json.Encoder(order="deterministic")


def normal(value: Any) -> Any:
    """The value as plain JSON, as a replay returns it (live and replayed, key order kept)."""
    return msgspec.json.decode(_encoder.encode(value))


#: The longest error message a failed call records (a message may quote what was sent).
MAX_ERROR_CHARS = 1000


def error_result(error: MemsealError) -> dict[str, Any]:
    """The result a failed call records: its error type and bounded message."""
    # A message may quote what the model sent; keep it encodable whatever that was.
    message = str(error).encode("utf-8", "replace").decode("utf-8")
    if len(message) > MAX_ERROR_CHARS:
        message = message[: MAX_ERROR_CHARS - 1] + "\u2026"
    return {"error": {"type": type(error).__name__, "message": message}}


def as_recorded(error: MemsealError) -> MemsealError:
    """The error as its step recorded it: a replay raises the same message."""
    message = error_result(error)["error"]["message"]
    if message == str(error):
        return error
    bounded = type(error)(message)
    bounded.__cause__ = error
    return bounded


#: The longest call key a call may carry (model tool-call ids are a few dozen characters).
MAX_KEY_CHARS = 200


def check_key(key: object) -> str | None:
    """The call key as given (None: no key); raise :class:`InvalidRequest` naming ``key``.

    Checked before a step is reserved, so a bad key records nothing: it is the host's
    (or its adapter's) input, not a call the model made.
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise InvalidRequest(f"`key` must be a string, not {type(key).__name__}")
    if not 1 <= len(key) <= MAX_KEY_CHARS:
        raise InvalidRequest(f"`key` must be 1 to {MAX_KEY_CHARS} characters, not {len(key)}")
    if not key.isprintable():
        raise InvalidRequest("`key` must be printable characters")
    return key


@dataclass(frozen=True, slots=True)
class Sent:
    """A call as sent: what its fingerprint and input hash cover, and its size in bytes."""

    name: str
    arguments: Any
    size: int
    invalid: InvalidRequest | None


def sent_form(name: Any, arguments: Any) -> Sent:
    """What a call is, for recording and matching: the plain JSON arguments, or for junk
    (no tool name, arguments that are not a JSON object) a description of it, so that a
    different piece of junk at a recorded step is a divergence, not a replay of the old
    error. The description's form is the one recorded runs have always used."""
    if not isinstance(name, str) or not name.isidentifier() or len(name) > 64:
        invalid = InvalidRequest(f"the tool name must be a tool's name, not {name!r:.40}")
        sent_name = name if isinstance(name, str) else repr(name)
        described = {"$invalid": str(invalid), "$name": sent_name[:4096]}
        return Sent(
            name="(invalid)", arguments=described, size=_sent_size(arguments), invalid=invalid
        )
    try:
        plain, size = _plain_arguments_sized(name, arguments)
    except InvalidRequest as exc:
        described = {"$invalid": str(exc), "$sent": _sent_text(arguments)}
        return Sent(name=name, arguments=described, size=_sent_size(arguments), invalid=exc)
    return Sent(name=name, arguments=plain, size=size, invalid=None)


def withheld_digest(salt: bytes, arguments: Any) -> str:
    """What a failed call keeps of its arguments: blake3 over a salt and their canonical JSON
    (the salt sits beside it in the erasable payload; without the arguments it says nothing)."""
    return blake3.blake3(salt + _encoder.encode(arguments)).hexdigest()


def _sent_text(arguments: Any) -> str:
    # Part of the description of junk that the fingerprint covers (never recorded as such).
    if isinstance(arguments, bytes):
        return arguments.decode("utf-8", errors="replace")[:4096]
    if isinstance(arguments, str):
        return arguments[:4096]
    return repr(arguments)[:4096]


def _sent_size(arguments: Any) -> int:
    if isinstance(arguments, bytes):
        return len(arguments)
    if isinstance(arguments, str):
        return len(arguments.encode("utf-8", errors="surrogatepass"))
    try:
        return len(_encoder.encode(arguments))
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
        return len(repr(arguments).encode("utf-8", errors="replace"))


def _plain_arguments_sized(name: str, arguments: Any) -> tuple[Any, int]:
    """The arguments as plain JSON (an object, or the JSON text a model API returns), and
    the byte size of their canonical encoding."""
    if isinstance(arguments, str | bytes):
        try:
            arguments = msgspec.json.decode(arguments)
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise InvalidRequest(f"{name}: the arguments are not valid JSON") from None
    if not isinstance(arguments, Mapping):
        raise InvalidRequest(f"{name}: the arguments must be a JSON object")
    data = canonical_json(arguments, field=f"{name}: arguments", limit=MAX_PAYLOAD_BYTES)
    return msgspec.json.decode(data), len(data)


def recorded_call(verified: Verified) -> dict[str, Any] | None:
    """The recorded call as a divergence message shows it (None: its arguments are gone)."""
    if verified.arguments is None:
        if verified.call.error and verified.call.input_size is not msgspec.UNSET:
            kept = f"(not kept: a failed call of {verified.call.input_size} bytes)"
            return {"tool": verified.call.tool, "arguments": kept}
        return None
    return {"tool": verified.call.tool, "arguments": verified.arguments}


def outcome(verified: Verified) -> Any:
    """A replayed step's result, or the error it recorded, raised again."""
    if not verified.call.error:
        return verified.result
    error = verified.result.get("error", {}) if isinstance(verified.result, dict) else {}
    kind = _ERROR_TYPES.get(str(error.get("type")), InvalidRequest)
    message = error.get("message")
    raise kind(message if isinstance(message, str) else f"(forgotten: {message})")
