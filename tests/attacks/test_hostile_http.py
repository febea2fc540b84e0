"""Hostile HTTP input gets a clean 4xx in the error shape: never a 500, never a traceback.

Through a real uvicorn server: JSON nested past the interpreter's recursion
limit, invalid UTF-8 inside JSON strings, integers past 64 bits (in a
cursor, a query, a path, a header), bodies over their route's limit (with
a Content-Length, and chunked), and methods a route does not have. A
hypothesis property sends generated hostile bodies to the tool routes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from integration.test_service_support import ServerThread, assert_error

from memseal.service.guard import SMALL_BODY_BYTES
from memseal.tools import TOOL_NAMES

MIB = 1024 * 1024
TOOL_ROUTES = ("/v1/tools/memory_fetch", "/v1/runs/hostile-run/tools/memory_fetch")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with ServerThread(tmp_path_factory.mktemp("hostile") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def agent(server: ServerThread) -> Iterator[httpx.Client]:
    with server.client(server.token("agent", "team:hostile/agent:a")) as client:
        yield client


@pytest.fixture(scope="module")
def admin(server: ServerThread) -> Iterator[httpx.Client]:
    assert server.admin is not None
    with server.client(server.admin) as client:
        yield client


def _mentions(response: httpx.Response, *words: str) -> None:
    message = response.json()["error"]["message"]
    assert all(w in message for w in words), message


@pytest.mark.parametrize("depth", [1_000, 5_000, 100_000])
@pytest.mark.parametrize("route", TOOL_ROUTES)
def test_json_nested_past_the_recursion_limit_gets_400(
    agent: httpx.Client, route: str, depth: int
) -> None:
    for body in (b"[" * depth + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth):
        r = agent.post(route, content=body)
        assert_error(r, 400, "invalid_request")
        _mentions(r, "nests deeper")


@pytest.mark.parametrize("route", TOOL_ROUTES)
def test_json_nested_500_deep_still_gets_400_naming_the_field(
    agent: httpx.Client, route: str
) -> None:
    r = agent.post(route, content=b'{"query":' * 500 + b"1" + b"}" * 500)
    assert_error(r, 400, "invalid_request")
    _mentions(r, "query", "nest")


@pytest.mark.parametrize("route", TOOL_ROUTES)
def test_invalid_utf8_inside_a_json_string_gets_400(agent: httpx.Client, route: str) -> None:
    for body in (
        b'{"query": "dark \xff mode"}',
        b'{"query": "\xed\xa0\x80"}',  # a UTF-16 surrogate, encoded
        b'{"qu\xc3ery": "x"}',
        b'{"query": "x", "filter": {"tags": ["\xc0\xaf"]}}',
    ):
        r = agent.post(route, content=body)
        assert_error(r, 400, "invalid_request")
        _mentions(r, "UTF-8")


def _cursor_with(cursor: str, seq: int, offset: int | None = None) -> str:
    fields = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    fields[3] = seq
    if offset is not None:
        fields[4:] = [offset]
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_a_cursor_seq_past_64_bits_gets_400_naming_the_cursor(agent: httpx.Client) -> None:
    for i in range(3):
        r = agent.post("/v1/tools/memory_store", json={"learning": {"text": f"cursor note {i}"}})
        assert r.status_code == 200, r.text
    listed = agent.post("/v1/tools/memory_list", json={"limit": 1}).json()["result"]
    fetched = agent.post(
        "/v1/tools/memory_fetch", json={"query": "cursor note", "mode": "exact", "limit": 1}
    ).json()["result"]
    for seq in (2**63, 2**63 + 1, 2**64 - 1):
        forged = _cursor_with(listed["next_cursor"], seq)
        r = agent.post("/v1/tools/memory_list", json={"limit": 1, "cursor": forged})
        assert_error(r, 400, "invalid_request")
        _mentions(r, "`cursor`")
        for offset in (None, 2**63):
            forged = _cursor_with(fetched["next_cursor"], seq if offset is None else 1, offset)
            r = agent.post(
                "/v1/tools/memory_fetch",
                json={"query": "cursor note", "mode": "exact", "limit": 1, "cursor": forged},
            )
            assert_error(r, 400, "invalid_request")
            _mentions(r, "`cursor`")


def test_integers_past_64_bits_in_queries_paths_and_headers_get_400(
    agent: httpx.Client, admin: httpx.Client
) -> None:
    for huge in (2**63, 2**64, 10**30):
        for path, params in (
            ("/v1/ledger/entries", {"start": huge}),
            ("/v1/ledger/entries", {"limit": huge}),
            ("/v1/ledger/proofs/inclusion", {"seq": huge}),
            ("/v1/ledger/proofs/inclusion", {"seq": 0, "size": huge}),
            ("/v1/ledger/proofs/consistency", {"old": huge}),
            ("/v1/ledger/proofs/consistency", {"old": 1, "new": huge}),
            (f"/v1/ledger/entries/{huge}", {}),
        ):
            r = admin.get(path, params=params)
            assert_error(r, 400, "invalid_request")
        r = agent.post(
            "/v1/tools/memory_fetch",
            json={"query": "x"},
            headers={"X-Memseal-Run": "hostile-step", "X-Memseal-Step": str(huge)},
        )
        assert_error(r, 400, "invalid_request")
        _mentions(r, "X-Memseal-Step")
        r = agent.post("/v1/tools/memory_list", json={"limit": huge})
        assert_error(r, 400, "invalid_request")
        _mentions(r, "limit")
    r = agent.get(f"/v1/runs/{'9' * 40}")
    assert_error(r, 404, "not_found")


def test_hostile_json_on_the_token_trust_and_mcp_routes_gets_4xx(
    agent: httpx.Client, admin: httpx.Client
) -> None:
    nested = b"[" * (SMALL_BODY_BYTES // 2) + b"]" * (SMALL_BODY_BYTES // 2 - 1)
    for path in ("/v1/admin/tokens", "/v1/admin/items/x/promote"):
        for body in (nested, b'{"role": "agent", "place": "team:\xff", "reason": "\xff"}'):
            assert_error(admin.post(path, content=body), 400, "invalid_request")
        big = b'{"role": "agent", "place": "team:x", "label": "' + b"a" * SMALL_BODY_BYTES + b'"}'
        assert_error(admin.post(path, content=big), 413, "too_large")
    mcp = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    for body in (
        b"[" * 100_000 + b"]" * 100_000,
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": "\xff"}}',
    ):
        r = agent.post("/mcp", content=body, headers=mcp)
        assert 400 <= r.status_code < 500, (r.status_code, r.text)


def test_a_tool_body_over_the_limit_gets_413_before_it_is_read(agent: httpx.Client) -> None:
    over = b'{"query": "' + b"x" * MIB + b'"}'
    for route in TOOL_ROUTES:
        assert_error(agent.post(route, content=over), 413, "too_large")
    # Exactly at the limit the body reaches the tools (which refuse the query's length).
    at = b'{"query": "' + b"x" * (MIB - 13) + b'"}'
    assert len(at) == MIB
    assert_error(agent.post(TOOL_ROUTES[0], content=at), 400, "invalid_request")


def test_a_100_mb_chunked_body_gets_413_not_a_parse_error(agent: httpx.Client) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"query": "'
        for _ in range(100 * 16):
            yield b"x" * (64 * 1024)
        yield b'"}'

    r = agent.post(TOOL_ROUTES[0], content=chunks())
    assert "content-length" not in r.request.headers
    assert_error(r, 413, "too_large")


def test_a_body_larger_than_its_route_takes_gets_413(
    agent: httpx.Client, admin: httpx.Client
) -> None:
    small = b"{" + b" " * SMALL_BODY_BYTES + b"}"
    assert_error(admin.post("/v1/admin/tokens", content=small), 413, "too_large")
    assert_error(agent.request("GET", "/v1/tools", content=small), 413, "too_large")
    assert_error(agent.request("DELETE", "/v1/runs/x", content=small), 413, "too_large")


def test_the_tool_body_limit_is_configurable(tmp_path: Path) -> None:
    with (
        ServerThread(tmp_path / "data", max_body=8 * 1024) as small,
        small.client(small.token("agent", "team:small")) as c,
    ):
        text = "y" * 4000
        r = c.post("/v1/tools/memory_store", json={"learning": {"text": text}})
        assert r.status_code == 200, r.text
        r = c.post("/v1/tools/memory_store", json={"learning": {"text": text * 3}})
        assert_error(r, 413, "too_large")
        _mentions(r, "8,192")


def test_a_405_answer_carries_an_allow_header(agent: httpx.Client) -> None:
    for method, path, allowed in (
        ("PUT", "/v1/tools", "GET"),
        ("GET", "/v1/tools/memory_fetch", "POST"),
        ("PUT", "/v1/runs/r1", "DELETE, GET"),
        ("POST", "/v1/ledger", "GET"),
    ):
        r = agent.request(method, path)
        assert_error(r, 405, "method_not_allowed")
        assert r.headers["allow"] == allowed


# -- the property: hostile bodies on the tool routes never get a 5xx -------------------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_names = st.sampled_from(
    ["namespace", "reach", "query", "cursor", "limit", "filter", "learning", "ids"]
)


@st.composite
def hostile_bodies(draw: st.DrawFn) -> bytes:
    """A tool call's arguments made hostile: deep, broken, not UTF-8, huge numbers."""
    value: Any = draw(st.dictionaries(_names | st.text(max_size=8), _json_values, max_size=4))
    body = json.dumps(value).encode()
    how = draw(st.sampled_from(["plain", "deep", "utf8", "cut", "bytes", "number", "cursor"]))
    if how == "deep":
        depth = draw(st.integers(min_value=30, max_value=50_000))
        opener, closer = draw(
            st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b'{"query":', b"}")])
        )
        body = opener * depth + body + closer * depth
    elif how == "utf8":
        bad = draw(
            st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"])
        )
        at = draw(st.integers(min_value=0, max_value=len(body)))
        body = b'{"query": "' + bad + b'", "x": ' + body[:at] + b"}"
    elif how == "cut":
        body = body[: draw(st.integers(min_value=0, max_value=len(body)))]
    elif how == "bytes":
        body = draw(st.binary(max_size=200))
    elif how == "number":
        digits = draw(st.integers(min_value=19, max_value=5000))
        body = b'{"limit": ' + b"9" * digits + b', "query": "x"}'
    else:
        seq = draw(st.integers(min_value=2**62, max_value=2**70))
        raw = json.dumps([1, "list", "0123456789abcdef", seq, 0]).encode()
        cursor = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        body = json.dumps({"cursor": cursor, "limit": 1}).encode()
    return body


@given(
    body=hostile_bodies(),
    tool=st.sampled_from([*TOOL_NAMES, "no_such_tool"]),
    in_run=st.booleans(),
)
def test_hostile_json_bodies_on_the_tool_routes_never_get_a_5xx(
    agent: httpx.Client, body: bytes, tool: str, in_run: bool
) -> None:
    path = f"/v1/runs/hostile-prop/tools/{tool}" if in_run else f"/v1/tools/{tool}"
    r = agent.post(path, content=body)
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code != 200:
        assert set(r.json()["error"]) == {"code", "message"}, r.text


def test_a_run_id_outside_latin_1_exports_without_a_500(agent: httpx.Client) -> None:
    # Header values are latin-1: the bundle's Content-Disposition once echoed the run id raw.
    for run_id, quoted in (("%ff", "%EF%BF%BD"), ('say-"hi"', "say-%22hi%22"), ("✓ run", None)):
        r = agent.post(f"/v1/runs/{run_id}/tools/memory_fetch", json={"query": "x"})
        assert r.status_code == 200, r.text
        r = agent.get(f"/v1/runs/{run_id}/export")
        assert r.status_code == 200, r.text
        disposition = r.headers["content-disposition"]
        assert disposition.isascii() and disposition.startswith('attachment; filename="')
        if quoted is not None:
            assert f"filename*=UTF-8''{quoted}.bundle" in disposition
