"""The error-code -> HTTP status map of the service, whole, and through the real app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memseal.errors import (
    Conflict,
    InvalidRequest,
    KeyFileError,
    MemsealError,
    NotFound,
    ProvenanceError,
    ReplayDivergence,
    StorageError,
    Unsupported,
    VerificationError,
)
from memseal.service.app import create_app
from memseal.service.errors import STATUS, ApiError, from_memseal
from memseal.service.tokens import OutsideReach, TokenStore, scope_from

# What clients are promised (docs/service.md): changing a row here is an API change.
PROMISED = {
    "invalid_request": 400,
    "forbidden": 403,
    "unsupported": 403,
    "not_found": 404,
    "replay_divergence": 409,
    "conflict": 409,
    "verification_failed": 500,
    "storage_unavailable": 503,
}


def _raised(kind: type[MemsealError]) -> MemsealError:
    if kind is VerificationError:
        return VerificationError("the signature does not verify", seq=7, step="signature")
    return kind(f"a {kind.__name__} for the test")


def test_the_map_is_the_promised_table() -> None:
    assert {code: status for _, status, code in STATUS} == PROMISED
    assert len({code for _, _, code in STATUS}) == len(STATUS)


@pytest.mark.parametrize(("kind", "status", "code"), STATUS, ids=[c for _, _, c in STATUS])
def test_every_error_kind_answers_its_status_and_code(
    kind: type[MemsealError], status: int, code: str
) -> None:
    answer = from_memseal(_raised(kind), run_id="r", step=3)
    assert (answer.status, answer.code) == (status, code)
    assert answer.message == str(_raised(kind))
    assert answer.extra == {"run_id": "r", "step": 3}


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ProvenanceError("no memo entry", seq=4), "verification_failed"),
        (KeyFileError("the secret is unreadable"), "storage_unavailable"),
        (OutsideReach("outside the admin's reach"), "forbidden"),
        (MemsealError("no kind of its own"), "invalid_request"),
    ],
)
def test_subclasses_take_the_first_matching_row(error: MemsealError, code: str) -> None:
    answer = from_memseal(error)
    assert (answer.status, answer.code) == (PROMISED[code], code)


# -- through the real app: its handlers, its guard, its error body ------------------------

KINDS: dict[str, type[MemsealError]] = {
    "invalid_request": InvalidRequest,
    "unsupported": Unsupported,
    "forbidden": OutsideReach,
    "not_found": NotFound,
    "replay_divergence": ReplayDivergence,
    "conflict": Conflict,
    "verification_failed": VerificationError,
    "storage_unavailable": StorageError,
}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    tokens = TokenStore(tmp_path)
    admin, _ = tokens.add("admin", scope_from(role="admin", place="/"))
    app = create_app(tmp_path, embedder=None, tokens=tokens, mcp=False, checkpoint_interval=None)

    async def raiser(code: str) -> Any:
        raise _raised(KINDS[code])

    # A route of the test's own on the real app: every other part is the service's.
    app.add_api_route("/test/raise/{code}", raiser)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as client:
            yield client, admin
    tokens.close()


@pytest.mark.parametrize("code", sorted(KINDS))
async def test_the_app_answers_each_code_with_its_status(
    served: tuple[httpx.AsyncClient, str], code: str
) -> None:
    client, _ = served
    r = await client.get(f"/test/raise/{code}")
    assert r.status_code == PROMISED[code]
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == code
    assert r.json()["error"]["message"] == str(_raised(KINDS[code]))


async def test_real_routes_answer_their_refusals(served: tuple[httpx.AsyncClient, str]) -> None:
    client, admin = served
    bearer = {"Authorization": f"Bearer {admin}"}
    r = await client.get("/v1/ledger")
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer"
    r = await client.get("/v1/ledger/entries/999", headers=bearer)
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")
    r = await client.get("/v1/ledger/proofs/consistency?old=999", headers=bearer)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
    r = await client.get("/v1/tools", headers=bearer)
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    r = await client.post(
        "/v1/admin/tokens", headers=bearer, json={"role": "agent", "place": "team:a", "floor": "x"}
    )
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")


def test_api_error_is_in_the_one_error_root() -> None:
    assert issubclass(ApiError, MemsealError)
    assert str(ApiError(401, "unauthorized", "a bearer token is required")) == (
        "a bearer token is required"
    )
