"""schemathesis against the OpenAPI document a real uvicorn server serves on 127.0.0.1.

For every operation of ``/openapi.json`` and for the root admin's, an agent's
and a placed admin's token,
schemathesis generates a bounded number of requests, valid (positive) and
invalid (negative) by the document, and sends them to the server. Whatever
it sends: no 5xx (schemathesis's ``not_a_server_error``), and every 4xx is
JSON in the documented shape ``{"error": {"code": ..., "message": ...}}``
(tool-call refusals may add top-level ``run_id`` and ``step``).

The path parameters are biased towards names that exist (the real tool
names, a run and an item this module records first), so the requests reach
the tools' argument checks, the run registry and the trust routes, not only
the "no such thing" answers. The served document can only say a tool's body
is "an object"; the last test turns each tool's own JSON Schema (from
``GET /v1/tools``) into an operation of its own, so that positive bodies are
valid arguments that run the tools for real, and negative ones are near
misses, both under the same two checks.

The placed admin (at ``team:schema-admin``, a look-alike of the agent's tenant)
has its token ids biased towards real ones, inside its reach and beyond it:
whatever it sends, no 5xx, and afterwards every token beyond its reach is
still live.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import Case, CheckContext, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from test_service_support import ServerThread

from memseal.engine import Namespace
from memseal.service.tokens import TokenStore
from memseal.tools import TOOL_NAMES

#: Hypothesis examples per operation and token (positive and negative cases mixed).
EXAMPLES = 20
#: For the placed admin's run: about 30 s on two loaded cores, under the minute it may take.
PLACED_EXAMPLES = 20
PLACED = "team:schema-admin"
CODE = re.compile(r"[a-z][a-z_]{0,63}")
TOP_LEVEL = {"error", "run_id", "step"}


class Served:
    """The running server, its schemas and what the module recorded in it."""

    def __init__(
        self, server: ServerThread, schema: Any, tools: Any, agent: str, item: str
    ) -> None:
        self.server = server
        self.schema = schema
        self.tools = tools
        self.agent = agent
        self.item = item
        self.placed = server.token("admin", PLACED)
        server.token("agent", f"{PLACED}/agent:victim", reach=f"subtree:{PLACED}")
        listed = _tokens(server)
        #: Token ids: (inside the placed admin's reach, beyond it); never the admin's own.
        self.inside = [t.id for t in listed if t.place == f"{PLACED}/agent:victim"]
        self.beyond = [t.id for t in listed if not Namespace(PLACED).contains(Namespace(t.place))]


def _tools_document(served: dict[str, Any], specs: list[dict[str, Any]]) -> dict[str, Any]:
    """The served document, with ``POST /v1/tools/NAME`` spelled out for each tool's arguments."""
    template = served["paths"]["/v1/tools/{name}"]["post"]
    paths: dict[str, Any] = {}
    for spec in specs:
        operation = json.loads(json.dumps(template))
        operation["operationId"] = f"call_{spec['name']}"
        operation["parameters"] = [p for p in operation["parameters"] if p["name"] != "name"]
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": spec["parameters"]}},
        }
        paths[f"/v1/tools/{spec['name']}"] = {"post": operation}
    return {**served, "paths": paths}


def _tokens(server: ServerThread) -> list[Any]:
    store = TokenStore(server.folder)
    try:
        return store.listed()
    finally:
        store.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder: Path = tmp_path_factory.mktemp("schema") / "data"
    with ServerThread(folder) as server:
        agent = server.token("agent", "team:schema/agent:x")
        with server.client(agent) as c:
            r = c.post(
                "/v1/runs/schema-run/tools/memory_store",
                json={"learning": {"text": "schemathesis was here"}},
            )
            assert r.status_code == 200, r.text
            item = r.json()["result"]["id"]
            specs = c.get("/v1/tools").json()["tools"]
            document = c.get("/openapi.json").json()
        schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", timeout=30)
        tools = schemathesis.openapi.from_dict(_tools_document(document, specs))
        yield Served(server, schema, tools, agent, item)


@schemathesis.check
def error_in_documented_shape(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every 4xx (and 5xx, were there one) is JSON ``{"error": {"code", "message"}}``."""
    if response.status_code < 400:
        return None
    where = f"{case.operation.label} -> {response.status_code}: {response.text[:500]!r}"
    assert response.headers.get("content-type", [""])[0].startswith("application/json"), where
    try:
        body = json.loads(response.content)
    except ValueError as exc:
        raise AssertionError(f"not JSON: {where}") from exc
    assert isinstance(body, dict) and set(body) <= TOP_LEVEL, where
    error = body.get("error")
    assert isinstance(error, dict) and set(error) == {"code", "message"}, where
    assert isinstance(error["code"], str) and CODE.fullmatch(error["code"]), where
    assert isinstance(error["message"], str) and error["message"], where
    return None


def _known(served: Served, role: str) -> dict[str, st.SearchStrategy[str]]:
    known = {
        "name": st.sampled_from(TOOL_NAMES),
        "run_id": st.just("schema-run"),
        "item_id": st.just(served.item),
    }
    if role == "placed-admin":
        # Only this run aims at real token ids: the others' tokens must stay live.
        known["token_id"] = st.sampled_from(served.inside + served.beyond)
    return known


def _cases(operation: Any, served: Served, role: str, bias: bool) -> st.SearchStrategy[Case]:
    """Positive and negative cases; with ``bias``, some with the path naming things that exist."""
    names = [p.name for p in operation.path_parameters]
    known = {k: v for k, v in _known(served, role).items() if k in names and bias}
    options: list[st.SearchStrategy[Case]] = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        options.append(operation.as_strategy(generation_mode=mode))
        if known and mode is GenerationMode.POSITIVE:
            options.append(
                st.fixed_dictionaries(known).flatmap(
                    lambda fixed, m=mode: operation.as_strategy(  # type: ignore[misc]
                        generation_mode=m, path_parameters=fixed
                    )
                )
            )
    return st.one_of(options)


def _run(
    served: Served,
    schema: Any,
    role: str,
    token: str | None,
    known: bool,
    examples: int = EXAMPLES,
) -> None:
    """Every operation of ``schema``, ``examples`` cases per mode; all failures reported at once."""
    assert token is not None
    headers = {"Authorization": f"Bearer {token}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    failures: list[str] = []
    for operation in operations:

        @settings(
            max_examples=examples,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=_cases(operation, served, role, known))
        def check(case: Case) -> None:
            case.call_and_validate(
                base_url=served.server.url,
                headers=headers,
                checks=[not_a_server_error, error_in_documented_shape],
                timeout=30,
            )

        try:
            check()
        except Exception as exc:
            failures.append(f"{role} {operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("role", ["admin", "agent"])
def test_no_5xx_and_every_error_in_the_documented_shape(served: Served, role: str) -> None:
    assert len(list(served.schema.get_all_operations())) >= 20
    token = served.server.admin if role == "admin" else served.agent
    _run(served, served.schema, role, token, known=True)


def test_placed_admin_gets_no_5xx_and_revokes_nothing_beyond_its_reach(served: Served) -> None:
    _run(served, served.schema, "placed-admin", served.placed, True, PLACED_EXAMPLES)
    live = {t.id for t in _tokens(served.server) if t.revoked_at is None}
    assert set(served.beyond) <= live
    with served.server.client(served.agent) as agent:
        assert agent.get("/v1/tools").status_code == 200


def test_tool_arguments_from_the_tool_specs(served: Served) -> None:
    assert len(list(served.tools.get_all_operations())) == len(TOOL_NAMES)
    _run(served, served.tools, "agent", served.agent, known=False)
