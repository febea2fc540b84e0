"""Malformed input to the public API: a clear InvalidRequest naming the field, nothing written.

Covered: wrong types for ``kind``/``body``/``payload``/``mentions``/``redacts``;
kinds that are not snake_case; non-text keys, bytes, NaN and infinities,
integers beyond 64 bits, lone surrogates (text that is not UTF-8) in values
and keys, nesting too deep, an oversized body or payload (and the exact size
limits, which must pass); mentions without a payload; redacts naming a
future seq (refused inside the writer, in its own savepoint, while the rest
of the group commits); a bad ``trust`` or auditor checkpoint for verify;
``memseal.open`` on a file or with bad options; ``read`` of a negative,
boolean, non-integer or missing seq, and ``scan`` with bad bounds; and
arbitrary non-JSON junk from hypothesis. After every refusal the head (size
and leaf hash) is what it was before.

The ledger tests run on each store (the folder's SQLite file, and PostgreSQL
when the test server is there), except those whose input is refused before
anything reaches a store: one store is enough for them (``BEFORE_THE_STORE``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import decimal
import math
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memseal
from memseal.ledger.entry import MAX_ENTRY_BYTES, encode_entry, format_time, make_draft
from memseal.memory import open_audit

MAX_BODY = 64 * 1024
MAX_PAYLOAD = 1024 * 1024


# Refused by argument checks before any statement reaches a store: SQLite alone is enough.
BEFORE_THE_STORE = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


@pytest.fixture
async def memory(tmp_path: Path, store_url: str | None) -> AsyncIterator[memseal.Memory]:
    async with memseal.open(tmp_path / "data", store=store_url, embedder=None) as opened:
        await opened.ledger.append("note", {"n": 0}, {"text": "first"}, mentions=["itm-1"])
        await opened.ledger.append("note", {"n": 1}, {"text": "second"})
        yield opened
        # Whatever a test refused, the ledger is still whole.
        await opened.ledger.verify(trust=opened.vkey)


async def refused(memory: memseal.Memory, field: str, call: Callable[[], Any]) -> str:
    """Run ``call``; it must raise InvalidRequest naming ``field`` and leave the head alone."""
    before = await memory.ledger.head()
    with pytest.raises(memseal.InvalidRequest) as caught:
        await call()
    message = str(caught.value)
    assert field in message, f"{message!r} does not name {field!r}"
    assert await memory.ledger.head() == before
    return message


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


# -- kind ------------------------------------------------------------------------

BAD_KINDS = [
    None,
    7,
    b"note",
    ["note"],
    "",
    "Note",
    "memoryStored",
    "memory-stored",
    "memory stored",
    "_note",
    "9note",
    "note\n",
    "noté",
    "n" * 65,
]


@pytest.mark.parametrize("kind", BAD_KINDS, ids=repr)
@BEFORE_THE_STORE
async def test_bad_kind(memory: memseal.Memory, kind: Any) -> None:
    await refused(memory, "`kind`", lambda: memory.ledger.append(kind, {"n": 1}))


async def test_longest_kind_is_accepted(memory: memseal.Memory) -> None:
    appended = await memory.ledger.append("n" * 64, {})
    assert appended.seq == 2


# -- body ------------------------------------------------------------------------

BAD_BODIES = {
    "list": [1, 2],
    "string": "text",
    "none": None,
    "int": 3,
    "bytes": b"{}",
    "set": {"a"},
}


@pytest.mark.parametrize("body", BAD_BODIES.values(), ids=BAD_BODIES.keys())
@BEFORE_THE_STORE
async def test_body_not_an_object(memory: memseal.Memory, body: Any) -> None:
    await refused(memory, "`body`", lambda: memory.ledger.append("note", body))


# Values JSON cannot carry faithfully, each with the field path the error must name.
BAD_VALUES: dict[str, tuple[Any, str]] = {
    "int key": ({1: "x"}, "`body`"),
    "none key": ({None: "x"}, "`body`"),
    "tuple key": ({("a", "b"): "x"}, "`body`"),
    "nested int key": ({"a": {2: "x"}}, "`body.a`"),
    "bytes value": ({"a": b"raw"}, "`body.a`"),
    "bytearray value": ({"a": bytearray(b"raw")}, "`body.a`"),
    "memoryview value": ({"a": memoryview(b"raw")}, "`body.a`"),
    "nan": ({"a": math.nan}, "`body.a`"),
    "inf": ({"a": math.inf}, "`body.a`"),
    "minus inf": ({"a": -math.inf}, "`body.a`"),
    "nan in a list": ({"a": [1.0, math.nan]}, "`body.a[1]`"),
    "int over 64 bits": ({"a": 2**63}, "`body.a`"),
    "int under 64 bits": ({"a": -(2**63) - 1}, "`body.a`"),
    "lone surrogate value": ({"a": "ok \ud800 then"}, "`body.a`"),
    "lone low surrogate value": ({"a": "\udfff"}, "`body.a`"),
    "lone surrogate key": ({"k\udc00": 1}, "`body key`"),
    "lone surrogate nested key": ({"a": {"\ud83d": 1}}, "`body.a key`"),
    "set value": ({"a": {1, 2}}, "`body.a`"),
    "object value": ({"a": object()}, "`body.a`"),
    "datetime value": ({"a": datetime(2026, 1, 1, tzinfo=UTC)}, "`body.a`"),
    "decimal value": ({"a": decimal.Decimal("1.5")}, "`body.a`"),
    "uuid value": ({"a": uuid.UUID(int=1)}, "`body.a`"),
    "complex value": ({"a": 1j}, "`body.a`"),
    "too deep": (nested(40), "`body"),
}


@pytest.mark.parametrize(("body", "field"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
@BEFORE_THE_STORE
async def test_body_value_json_cannot_carry(memory: memseal.Memory, body: Any, field: str) -> None:
    await refused(memory, field, lambda: memory.ledger.append("note", body))


@pytest.mark.parametrize(("body", "field"), BAD_VALUES.values(), ids=BAD_VALUES.keys())
@BEFORE_THE_STORE
async def test_payload_value_json_cannot_carry(
    memory: memseal.Memory, body: Any, field: str
) -> None:
    payload_field = field.replace("`body", "`payload")
    await refused(memory, payload_field, lambda: memory.ledger.append("note", {}, body))


@BEFORE_THE_STORE
async def test_self_referential_body(memory: memseal.Memory) -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    message = await refused(memory, "`body", lambda: memory.ledger.append("note", loop))
    assert "nested deeper" in message


async def test_64_bit_integers_and_deepest_nesting_are_accepted(memory: memseal.Memory) -> None:
    # The limits are inclusive: exactly what fits must pass, or the tests above prove little.
    body = {"max": 2**63 - 1, "min": -(2**63), "deep": nested(31)}
    appended = await memory.ledger.append("note", body)
    assert appended.seq == 2


@BEFORE_THE_STORE
async def test_huge_integer(memory: memseal.Memory) -> None:
    await refused(memory, "`body.n`", lambda: memory.ledger.append("note", {"n": 10**5000}))


# -- sizes -----------------------------------------------------------------------


def text_of_encoded_size(size: int) -> str:
    """A JSON string value that encodes to exactly ``size`` bytes (with its quotes)."""
    return "x" * (size - 2)


def widest_header() -> int:
    """The bytes a ``note`` entry without payload has around its body, at the widest seq."""
    draft = make_draft("note", {})
    widest = encode_entry(
        draft, seq=2**63 - 1, at=format_time(datetime.now(UTC)), prev="0" * 64, key="0" * 8
    )
    return len(widest) - len(b"{}")


async def test_body_size_limit(memory: memseal.Memory) -> None:
    overhead = len(b'{"t":}')
    over = {"t": text_of_encoded_size(MAX_BODY - overhead + 1)}
    message = await refused(memory, "`body`", lambda: memory.ledger.append("note", over))
    assert str(MAX_BODY) in message
    # A body within its own limit whose entry would pass what a tile bundle frames.
    largest = MAX_ENTRY_BYTES - widest_header()
    whole = {"t": text_of_encoded_size(largest - overhead + 1)}
    message = await refused(memory, "`body`", lambda: memory.ledger.append("note", whole))
    assert str(MAX_ENTRY_BYTES) in message
    at_limit = {"t": text_of_encoded_size(largest - overhead)}
    appended = await memory.ledger.append("note", at_limit)
    assert len((await memory.ledger.read(appended.seq)).leaf) <= MAX_ENTRY_BYTES


async def test_payload_size_limit(memory: memseal.Memory) -> None:
    over = text_of_encoded_size(MAX_PAYLOAD + 1)
    message = await refused(memory, "`payload`", lambda: memory.ledger.append("note", {}, over))
    assert str(MAX_PAYLOAD) in message
    appended = await memory.ledger.append("note", {}, text_of_encoded_size(MAX_PAYLOAD))
    record = await memory.ledger.read(appended.seq)
    assert record.payload is not None and len(record.payload) == MAX_PAYLOAD


# -- mentions and redacts --------------------------------------------------------

BAD_MENTIONS: dict[str, tuple[Any, str]] = {
    "a string": ("itm-1", "`mentions`"),
    "bytes": (b"itm-1", "`mentions`"),
    "none": (None, "`mentions`"),
    "an int": (5, "`mentions`"),
    "a set": ({"itm-1"}, "`mentions`"),
    "a dict": ({"itm-1": 1}, "`mentions`"),
    "an int item": ([1], "`mentions[0]`"),
    "a bytes item": (["ok", b"itm-1"], "`mentions[1]`"),
    "an empty id": ([""], "`mentions[0]`"),
    "a space": (["itm 1"], "`mentions[0]`"),
    "a newline": (["itm-1\n"], "`mentions[0]`"),
    "non-ASCII": (["itm-é"], "`mentions[0]`"),
    "a lone surrogate": (["itm-\ud800"], "`mentions[0]`"),
    "too long": (["x" * 257], "`mentions[0]`"),
    "too many": ([f"i{n}" for n in range(10_001)], "`mentions`"),
}


@pytest.mark.parametrize(("mentions", "field"), BAD_MENTIONS.values(), ids=BAD_MENTIONS.keys())
@BEFORE_THE_STORE
async def test_bad_mentions(memory: memseal.Memory, mentions: Any, field: str) -> None:
    await refused(
        memory, field, lambda: memory.ledger.append("note", {}, {"t": 1}, mentions=mentions)
    )


@BEFORE_THE_STORE
async def test_mentions_without_a_payload(memory: memseal.Memory) -> None:
    message = await refused(
        memory, "`mentions`", lambda: memory.ledger.append("note", {}, mentions=["itm-1"])
    )
    assert "payload" in message


BAD_REDACTS: dict[str, tuple[Any, str]] = {
    "a string": ("0", "`redacts`"),
    "bytes": (b"\x00", "`redacts`"),
    "none": (None, "`redacts`"),
    "an int": (0, "`redacts`"),
    "a set": ({0}, "`redacts`"),
    "negative": ([-1], "`redacts[0]`"),
    "a bool": ([0, True], "`redacts[1]`"),
    "a float": ([0.0], "`redacts[0]`"),
    "a numeric string": (["0"], "`redacts[0]`"),
    "the next seq": ([2], "`redacts`"),
    "a far future seq": ([2**70], "`redacts`"),
}


@pytest.mark.parametrize(("redacts", "field"), BAD_REDACTS.values(), ids=BAD_REDACTS.keys())
async def test_bad_redacts(memory: memseal.Memory, redacts: Any, field: str) -> None:
    await refused(memory, field, lambda: memory.ledger.append("note", {}, redacts=redacts))
    # The payload a bad redaction might have named is untouched.
    assert (await memory.ledger.read(0)).payload is not None


async def test_future_redaction_is_refused_alone_in_its_group(memory: memseal.Memory) -> None:
    # Queued in the same event-loop turn, the three travel to the writer together; the bad
    # one is rolled back in its own savepoint and the others still land, in order.
    results = await asyncio.gather(
        memory.ledger.append("note", {"n": "a"}),
        memory.ledger.append("memory_forgotten", {}, redacts=[50]),
        memory.ledger.append("note", {"n": "b"}),
        return_exceptions=True,
    )
    assert isinstance(results[1], memseal.InvalidRequest)
    assert "`redacts`" in str(results[1])
    seqs = sorted(r.seq for r in results if not isinstance(r, BaseException))
    assert seqs == [2, 3]
    assert await memory.ledger.size() == 4


# -- verify's trust ------------------------------------------------------------------


BAD_TRUST: dict[str, Any] = {
    "empty text": "",
    "not a vkey": "not-a-vkey",
    "two parts": "name+0011aabb",
    "bad key id": "name+XYZ+AQ==",
    "empty list": [],
    "list with an int": [1],
    "list with bytes": [b"vkey"],
    "bytes": b"vkey",
}


@pytest.mark.parametrize("trust", BAD_TRUST.values(), ids=BAD_TRUST.keys())
@BEFORE_THE_STORE
async def test_bad_trust(memory: memseal.Memory, trust: Any) -> None:
    await refused(memory, "`trust`", lambda: memory.ledger.verify(trust=trust))


async def test_trust_with_a_wrong_key_id(memory: memseal.Memory) -> None:
    name, key_id, key = memory.vkey.split("+", 2)
    wrong = f"{name}+{int(key_id, 16) ^ 1:08x}+{key}"
    await refused(memory, "`trust`", lambda: memory.ledger.verify(trust=wrong))


async def test_trust_of_another_valid_key_is_a_verification_failure(
    memory: memseal.Memory, tmp_path: Path
) -> None:
    # Well-formed input, wrong key: not a malformed request but a failed audit.
    async with memseal.open(tmp_path / "other", embedder=None) as other:
        other_vkey = other.vkey
    with pytest.raises(memseal.VerificationError) as caught:
        await memory.ledger.verify(trust=other_vkey)
    assert (caught.value.seq, caught.value.step) == (0, "unknown key")


@pytest.mark.parametrize("trust", [123, 4.5, object()], ids=["int", "float", "object"])
@BEFORE_THE_STORE
async def test_trust_of_a_non_text_scalar(memory: memseal.Memory, trust: Any) -> None:
    await refused(memory, "`trust`", lambda: memory.ledger.verify(trust=trust))


@BEFORE_THE_STORE
async def test_bad_auditor_checkpoint(memory: memseal.Memory) -> None:
    await refused(memory, "`checkpoints`", lambda: memory.ledger.verify(checkpoints=["junk"]))


@BEFORE_THE_STORE
async def test_auditor_checkpoint_not_text(memory: memseal.Memory) -> None:
    notes: Any = [5]
    await refused(memory, "`checkpoints`", lambda: memory.ledger.verify(checkpoints=notes))


async def test_audit_without_trust(memory: memseal.Memory, store_url: str | None) -> None:
    async with open_audit(memory.folder, store=store_url) as ledger:
        await refused(memory, "`trust`", lambda: ledger.verify())


# -- open ------------------------------------------------------------------------


async def test_open_on_a_file(tmp_path: Path) -> None:
    path = tmp_path / "not-a-folder"
    path.write_bytes(b"precious")
    with pytest.raises(memseal.InvalidRequest, match="`path`"):
        async with memseal.open(path, embedder=None):
            pass
    assert path.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-folder"]


@pytest.mark.parametrize("path", [None, 7, b"data", ["data"]], ids=repr)
async def test_open_on_a_non_path(tmp_path: Path, path: Any) -> None:
    with pytest.raises(memseal.InvalidRequest, match="`path`"):
        async with memseal.open(path, embedder=None):
            pass


async def test_open_with_a_bad_key_name(tmp_path: Path) -> None:
    with pytest.raises(memseal.InvalidRequest, match="key name"):
        async with memseal.open(tmp_path / "data", key_name="has space", embedder=None):
            pass
    assert not (tmp_path / "data" / "keys" / "ledger.skey").exists()


BAD_OPTIONS: dict[str, tuple[dict[str, Any], str]] = {
    "empty origin": ({"origin": ""}, "`origin`"),
    "origin not text": ({"origin": 5}, "`origin`"),
    "origin with a newline": ({"origin": "a\nb"}, "origin"),
    "checkpoint_every 0": ({"checkpoint_every": 0}, "`checkpoint_every`"),
    "checkpoint_interval negative": ({"checkpoint_interval": -1}, "`checkpoint_interval`"),
}


@pytest.mark.parametrize(("options", "field"), BAD_OPTIONS.values(), ids=BAD_OPTIONS.keys())
async def test_open_with_a_bad_option(tmp_path: Path, options: dict[str, Any], field: str) -> None:
    with pytest.raises(memseal.InvalidRequest, match=field):
        async with memseal.open(tmp_path / "data", **options, embedder=None):
            pass


@pytest.mark.parametrize(
    "options",
    [{"origin": "a\nb"}, {"checkpoint_every": 0}, {"checkpoint_interval": -1}],
    ids=["origin", "checkpoint_every", "checkpoint_interval"],
)
async def test_a_refused_first_open_writes_nothing(tmp_path: Path, options: dict[str, Any]) -> None:
    folder = tmp_path / "data"
    with pytest.raises(memseal.InvalidRequest):
        async with memseal.open(folder, **options, embedder=None):
            pass
    assert not (folder / "keys").exists()
    assert not (folder / "ledger.db").exists()


@pytest.mark.parametrize(
    "options",
    [{"checkpoint_every": "5"}, {"checkpoint_interval": "x"}, {"checkpoint_interval": math.nan}],
    ids=["every-text", "interval-text", "interval-nan"],
)
async def test_open_with_an_ill_typed_option(tmp_path: Path, options: dict[str, Any]) -> None:
    with pytest.raises(memseal.InvalidRequest, match="`checkpoint_"):
        async with memseal.open(tmp_path / "data", **options, embedder=None):
            pass


async def test_a_naive_clock_is_refused(tmp_path: Path) -> None:
    async with memseal.open(
        tmp_path / "data", clock=lambda: datetime(2026, 1, 1), embedder=None
    ) as opened:
        await refused(opened, "clock", lambda: opened.ledger.append("note", {}))
        assert await opened.ledger.size() == 0


# -- read ------------------------------------------------------------------------


@pytest.mark.parametrize("seq", [-1, -(2**63), True, False, 1.0, "1", None], ids=repr)
@BEFORE_THE_STORE
async def test_read_bad_seq(memory: memseal.Memory, seq: Any) -> None:
    await refused(memory, "`seq`", lambda: memory.ledger.read(seq))


@pytest.mark.parametrize("seq", [2, 3, 10**6])
async def test_read_missing_seq(memory: memseal.Memory, seq: int) -> None:
    with pytest.raises(memseal.NotFound, match=f"seq {seq}"):
        await memory.ledger.read(seq)


@pytest.mark.parametrize("seq", [2**63 - 1, 2**63, 10**30])
async def test_read_seq_beyond_64_bits(memory: memseal.Memory, seq: int) -> None:
    with pytest.raises((memseal.NotFound, memseal.InvalidRequest)):
        await memory.ledger.read(seq)


@pytest.mark.parametrize(("start", "stop"), [("0", None), (0, "9"), (0, 2**64)])
async def test_scan_bad_bounds(memory: memseal.Memory, start: Any, stop: Any) -> None:
    with pytest.raises(memseal.InvalidRequest):
        async for _ in memory.ledger.scan(start, stop):
            pass


# -- hypothesis: arbitrary junk ----------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int


JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
JUNK_LEAVES = st.one_of(
    st.binary(max_size=6),
    st.binary(max_size=6).map(bytearray),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.integers(min_value=2**63, max_value=2**200),
    st.integers(min_value=-(2**200), max_value=-(2**63) - 1),
    # Text holding at least one lone surrogate: not encodable as UTF-8.
    st.tuples(st.text(max_size=4), st.characters(categories=["Cs"]), st.text(max_size=4)).map(
        "".join
    ),
    st.sets(st.integers(), max_size=3),
    st.frozensets(st.integers(), max_size=3),
    st.complex_numbers(allow_nan=False, allow_infinity=False),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.datetimes(),
    st.uuids(),
    st.builds(object),
    st.builds(Point, st.integers()),
)
JUNK_KEYS = st.one_of(
    st.integers(),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.binary(max_size=4),
    st.tuples(st.integers()),
    st.tuples(st.text(max_size=3), st.characters(categories=["Cs"])).map("".join),
)


def _with_junk_inside(junk: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Containers of plain JSON with one junk value (or junk key) somewhere inside."""
    in_list = st.tuples(st.lists(JSON, max_size=3), junk, st.integers(0, 3)).map(
        lambda t: [*t[0][: t[2]], t[1], *t[0][t[2] :]]
    )
    in_dict = st.tuples(st.dictionaries(st.text(max_size=5), JSON, max_size=3), junk).map(
        lambda t: {**t[0], "junk": t[1]}
    )
    bad_key = st.tuples(
        st.dictionaries(st.text(max_size=5), JSON, max_size=3), JUNK_KEYS, JSON
    ).map(lambda t: {**t[0], t[1]: t[2]})
    return in_list | in_dict | bad_key


JUNK: st.SearchStrategy[Any] = st.deferred(lambda: JUNK_LEAVES | _with_junk_inside(JUNK))
JUNK_BODIES = (
    st.tuples(st.dictionaries(st.text(max_size=5), JSON, max_size=3), JUNK).map(
        lambda t: {**t[0], "junk": t[1]}
    )
    | st.tuples(st.dictionaries(st.text(max_size=5), JSON, max_size=3), JUNK_KEYS, JSON).map(
        lambda t: {**t[0], t[1]: t[2]}
    )
    | JUNK.filter(lambda v: not isinstance(v, dict))
)


# One data folder for all examples (the point is that none of them writes anything):
# the function-scoped tmp_path is shared across examples on purpose.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(body=JUNK_BODIES, payload=JUNK)
def test_junk_is_refused_and_writes_nothing(tmp_path: Path, body: Any, payload: Any) -> None:
    async def check() -> None:
        async with memseal.open(tmp_path / "data", embedder=None) as opened:
            before = await opened.ledger.head()
            with pytest.raises(memseal.InvalidRequest, match="`body"):
                await opened.ledger.append("note", body)
            with pytest.raises(memseal.InvalidRequest, match="`payload"):
                await opened.ledger.append("note", {"ok": True}, payload)
            assert await opened.ledger.head() == before

    asyncio.run(check())
