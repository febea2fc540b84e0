"""Result skeletons: texts out, references in, back again; forgotten texts marked."""

from __future__ import annotations

import os
from typing import Any

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.replay.runs.identity import ScopeIdentity, fingerprint, input_hash, memo_key
from memseal.replay.runs.results import TEXT_REF, restore, result_hash, split, text_salts

RESULT = {
    "hits": [
        {
            "id": "m1",
            "kind": "fact",
            "text": "prefers dark mode",
            "score": 0.5,
            "trust": "unverified",
            "meta": {"tags": ["ui"], "url": "https://example.test/a"},
        }
    ],
    "mode": "hybrid",
    "next_cursor": None,
}


def test_texts_leave_the_skeleton_and_come_back() -> None:
    parts = split(RESULT)
    hit = parts.skeleton["hits"][0]
    assert hit["id"] == "m1" and hit["kind"] == "fact" and hit["trust"] == "unverified"
    assert set(hit["text"]) == {TEXT_REF}
    assert set(hit["meta"]["tags"][0]) == {TEXT_REF}
    assert "prefers dark mode" not in repr(parts.skeleton)
    assert "example.test" not in repr(parts.skeleton)
    assert restore(parts.skeleton, parts.texts, None) == RESULT


def test_an_erased_payload_marks_every_text_forgotten() -> None:
    parts = split(RESULT)
    back = restore(parts.skeleton, None, 41)
    assert back["hits"][0]["text"] == {"forgotten_at": 41}
    assert back["hits"][0]["meta"]["tags"] == [{"forgotten_at": 41}]
    assert back["mode"] == "hybrid"


def test_equal_texts_get_different_salted_references() -> None:
    one, two = split({"text": "same"}), split({"text": "same"})
    assert one.skeleton != two.skeleton
    assert result_hash(one.skeleton) != result_hash(two.skeleton)


def test_equal_texts_of_one_call_get_distinct_salts_and_references() -> None:
    parts = split({"hits": [{"text": "same"}, {"text": "same"}, {"title": "same"}]})
    salts = [salt for salt, _ in parts.texts.values()]
    assert len(parts.texts) == 3 and len(set(salts)) == 3
    assert all(len(bytes.fromhex(salt)) == 16 for salt in salts)


def test_text_salts_are_cut_from_one_keyed_stream_of_the_call_seed() -> None:
    seed = os.urandom(32)
    salts = text_salts(seed, 5)
    assert len(set(salts)) == 5 and all(len(s) == 16 for s in salts)
    # Deterministic in the seed (nothing else): a fresh seed gives other salts.
    assert text_salts(seed, 5) == salts and text_salts(seed, 2) == salts[:2]
    assert not set(text_salts(os.urandom(32), 5)) & set(salts)


def test_a_result_salted_one_urandom_a_text_still_restores() -> None:
    # Results recorded before the per-call seed: each salt stored beside its text, so a
    # replay or a verify never re-derives one.
    salt = os.urandom(16)
    ref = blake3.blake3(salt + b"prefers dark mode").hexdigest()
    texts = {ref: [salt.hex(), "prefers dark mode"]}
    assert restore({"text": {TEXT_REF: ref}}, texts, None) == {"text": "prefers dark mode"}


@pytest.mark.parametrize("attack", ["swap text", "drop text", "bad salt"])
def test_a_tampered_text_is_refused(attack: str) -> None:
    parts = split(RESULT)
    texts = {k: list(v) for k, v in parts.texts.items()}
    ref = next(iter(texts))
    if attack == "swap text":
        texts[ref][1] = "prefers light mode"
    elif attack == "drop text":
        del texts[ref]
    else:
        texts[ref][0] = "00" * 16
    with pytest.raises(ValueError):
        restore(parts.skeleton, texts, None)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values)
def test_split_then_restore_is_the_identity(value: Any) -> None:
    parts = split(value)
    assert restore(parts.skeleton, parts.texts, None) == _lists(value)


def _lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_lists(v) for v in value]
    return value


def test_memo_keys_are_positions_and_fingerprints_identities() -> None:
    assert memo_key("run-1", 0) != memo_key("run-1", 1) != memo_key("run-2", 1)
    assert memo_key("run-1", 3) == memo_key("run-1", 3)
    scope = ScopeIdentity(place="team:a", reach=None, writes=True, floor="unverified")
    secret = b"\x01" * 32
    base = fingerprint(secret, "memory_fetch", {"query": "x"}, scope)
    assert base == fingerprint(secret, "memory_fetch", {"query": "x"}, scope)
    assert base != fingerprint(secret, "memory_fetch", {"query": "y"}, scope)
    assert base != fingerprint(secret, "memory_list", {"query": "x"}, scope)
    narrower = ScopeIdentity(place="team:a", reach="exact:team:a", writes=True, floor="unverified")
    assert base != fingerprint(secret, "memory_fetch", {"query": "x"}, narrower)
    assert base != fingerprint(b"\x02" * 32, "memory_fetch", {"query": "x"}, scope)
    # The input hash is keyed too, and never equal to the fingerprint.
    assert input_hash(secret, {"query": "x"}) != input_hash(b"\x02" * 32, {"query": "x"})
    assert input_hash(secret, {"query": "x"}) != base
