"""Entries: canonical bytes, the salted payload commitment, domain-separated signatures."""

from __future__ import annotations

import hashlib
import math

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.ledger.canonical import MAX_BODY_BYTES, canonical_json
from memseal.ledger.entry import (
    GENESIS_PREV,
    decode_entry,
    encode_entry,
    leaf_hash,
    make_draft,
    signing_message,
)
from memseal.ledger.errors import InvalidRequest


def test_entry_bytes_are_canonical_and_in_field_order() -> None:
    draft = make_draft("note", {"b": 1, "a": [True, None]})
    data = encode_entry(
        draft, seq=0, at="2026-11-30T00:00:00.000000Z", prev=GENESIS_PREV, key="0a0b0c0d"
    )
    assert data == (
        b'{"v":1,"seq":0,"at":"2026-11-30T00:00:00.000000Z","kind":"note",'
        b'"prev":"' + GENESIS_PREV.encode() + b'","key":"0a0b0c0d","redacts":[],'
        b'"payload_hash":null,"body":{"a":[true,null],"b":1}}'
    )
    entry = decode_entry(data)
    assert (entry.seq, entry.kind, bytes(entry.body)) == (0, "note", b'{"a":[true,null],"b":1}')


def test_the_leaf_hash_is_rfc6962_and_the_signature_is_domain_separated() -> None:
    data = b'{"v":1}'
    assert leaf_hash(data) == hashlib.sha256(b"\x00" + data).digest()
    assert signing_message(leaf_hash(data)) == b"memseal/entry/v1\x00" + leaf_hash(data)


def test_the_payload_hash_is_salted_so_equal_texts_differ() -> None:
    one = make_draft("note", {}, {"text": "hello"})
    two = make_draft("note", {}, {"text": "hello"})
    assert one.payload == two.payload == b'{"text":"hello"}'
    assert one.salt is not None and two.salt is not None and one.salt != two.salt
    assert one.payload_hash == blake3.blake3(one.salt + one.payload).hexdigest()
    assert one.payload_hash != two.payload_hash


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"x": math.nan}, "`body.x` is nan"),
        ({"x": math.inf}, "`body.x` is inf"),
        ({"x": 2**64}, "64 bits"),
        ({"x": b"raw"}, "bytes"),
        ({1: "x"}, "key of type int"),
        ({"x": "\udc80"}, "not valid UTF-8"),
        ({"\udc80": 1}, "not valid UTF-8"),
        ({"x": {1, 2}}, "set"),
        ({"x": object()}, "not a JSON value"),
    ],
)
def test_what_json_cannot_carry_is_refused_by_name(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        make_draft("note", value)  # type: ignore[arg-type]


def test_deep_nesting_and_oversize_are_refused() -> None:
    deep: object = 1
    for _ in range(40):
        deep = [deep]
    with pytest.raises(InvalidRequest, match="nested deeper"):
        make_draft("note", {"x": deep})
    with pytest.raises(InvalidRequest, match="limit"):
        make_draft("note", {"x": "a" * MAX_BODY_BYTES})


@pytest.mark.parametrize("kind", ["", "Note", "note-1", "1note", "n" * 65, 3])
def test_kinds_are_snake_case(kind: object) -> None:
    with pytest.raises(InvalidRequest, match="`kind`"):
        make_draft(kind, {})  # type: ignore[arg-type]


@given(st.dictionaries(st.text(), st.integers(-(2**63), 2**63 - 1) | st.text() | st.none()))
def test_canonical_json_is_independent_of_key_order(value: dict[str, object]) -> None:
    reordered = dict(reversed(list(value.items())))
    assert canonical_json(value, field="v", limit=10**6) == canonical_json(
        reordered, field="v", limit=10**6
    )
