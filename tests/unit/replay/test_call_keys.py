"""Call keys at the unit level: the check, the fingerprint, and the signed body's bytes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from memseal.ledger.errors import InvalidRequest
from memseal.replay.runs._sent import MAX_KEY_CHARS, check_key
from memseal.replay.runs.calls import ToolCall, decode_tool_call
from memseal.replay.runs.identity import ScopeIdentity, fingerprint

SECRET = b"s" * 32
SCOPE = ScopeIdentity(place="team:acme", reach=None, writes=True, floor="unverified")


def _body(**extra: Any) -> ToolCall:
    return ToolCall(
        run_id="r",
        step=0,
        tool="memory_list",
        memo_key="m",
        fingerprint="f",
        input_hash="i",
        result_hash="h",
        error=False,
        observed_size=1,
        wrote=(),
        cites=(),
        supersedes=None,
        result={},
        **extra,
    )


@pytest.mark.parametrize("key", [None, "call_abc", "toolu_01A09q90qw90lq917835lq9", "k" * 200])
def test_a_valid_key_is_kept_as_given(key: str | None) -> None:
    assert check_key(key) == key


@pytest.mark.parametrize(
    "key", [0, 1.5, b"call", ["call"], "", "k" * (MAX_KEY_CHARS + 1), "a\x00b"]
)
def test_a_bad_key_is_refused_naming_key(key: object) -> None:
    with pytest.raises(InvalidRequest, match="`key`"):
        check_key(key)


def test_the_key_is_part_of_the_fingerprint_and_no_key_keeps_the_old_one() -> None:
    args = {"query": "deploy key"}
    plain = fingerprint(SECRET, "memory_fetch", args, SCOPE)
    assert fingerprint(SECRET, "memory_fetch", args, SCOPE, None) == plain
    keyed = fingerprint(SECRET, "memory_fetch", args, SCOPE, "call_a")
    assert keyed != plain
    assert keyed != fingerprint(SECRET, "memory_fetch", args, SCOPE, "call_b")


def test_an_unkeyed_body_has_no_key_field_and_a_keyed_one_round_trips() -> None:
    unkeyed = msgspec.json.encode(_body())
    assert b'"key"' not in unkeyed
    assert decode_tool_call(unkeyed).key is msgspec.UNSET
    keyed = msgspec.json.encode(_body(key="call_a"))
    assert decode_tool_call(keyed).key == "call_a"
    assert keyed.endswith(b',"key":"call_a"}')
