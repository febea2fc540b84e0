"""Attacks by an admin placed below the root: it mints, lists and revokes only within its reach.

Each test drives a real uvicorn server (tests/integration/test_service_support.py)
with tokens the operator made (``TokenStore``, as ``memseal tokens add`` does), on
the folder's SQLite file and on PostgreSQL when the test server is there: the
tenants' memory lives in the store, the tokens in the folder's ``tokens.db``.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from integration.test_service_support import ServerThread, assert_error
from stores import ADAPTERS, drop_schemas, fresh_url

from memseal.engine import Namespace, Reach
from memseal.service.tokens import TokenStore, _beyond, manages, parse_reach, scope_from
from memseal.tools import ToolScope

BIN = Path(sys.executable).parent
ACME = "team:acme"
LOOK_ALIKE = "team:acme-corp"


class Tenants:
    """A server with a root admin, an admin placed at team:acme and a look-alike tenant."""

    def __init__(self, server: ServerThread) -> None:
        self.server = server
        assert server.admin is not None
        self.root = server.admin
        self.root_id = self.ids()[0]
        self.acme, self.acme_id = self.operator("admin", ACME, label="acme admin")
        self.corp, self.corp_id = self.operator("agent", f"{LOOK_ALIKE}/agent:x")
        with server.client(self.corp) as corp:
            r = corp.post(
                "/v1/tools/memory_store",
                json={"learning": {"text": "acme-corp secret: the merger closes friday"}},
            )
            assert r.status_code == 200, r.text

    def operator(self, role: str, place: str, **fields: Any) -> tuple[str, str]:
        """A token made as ``memseal tokens add`` makes it: (token, id)."""
        label = fields.pop("label", "")
        store = TokenStore(self.server.folder)
        try:
            token, info = store.add(role, scope_from(role=role, place=place, **fields), label=label)
        finally:
            store.close()
        return token, info.id

    def ids(self) -> list[str]:
        store = TokenStore(self.server.folder)
        try:
            return [t.id for t in store.listed()]
        finally:
            store.close()

    def client(self, token: str) -> httpx.Client:
        return self.server.client(token)


@pytest.fixture(scope="module", params=ADAPTERS)
def tenants(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tenants]:
    adapter: str = request.param
    url, schema = (None, None) if adapter == "sqlite" else fresh_url("reach", adapter)
    try:
        folder = tmp_path_factory.mktemp("reach") / "data"
        with ServerThread(folder, store=url) as server:
            yield Tenants(server)
    finally:
        if schema is not None:
            asyncio.run(drop_schemas([schema], adapter))


def _refused(response: httpx.Response, *words: str) -> str:
    message: str = assert_error(response, 403, "forbidden")["error"]["message"]
    for word in words:
        assert word in message, message
    return message


def test_placed_admin_cannot_mint_a_root_admin(tenants: Tenants) -> None:
    before = tenants.ids()
    with tenants.client(tenants.acme) as acme:
        _refused(acme.post("/v1/admin/tokens", json={"role": "admin", "place": "/"}), "`place` /")
        # Nor a global one placed inside its own tenant, nor an auditor of everything.
        _refused(
            acme.post("/v1/admin/tokens", json={"role": "admin", "place": ACME, "reach": "all"}),
            "`reach` all",
            "every namespace",
        )
        _refused(
            acme.post(
                "/v1/admin/tokens", json={"role": "auditor", "place": ACME, "reach": "subtree:/"}
            ),
            "`reach`",
        )
    assert tenants.ids() == before  # nothing was made


def test_placed_admin_cannot_mint_into_a_look_alike_sibling(tenants: Tenants) -> None:
    before = tenants.ids()
    with tenants.client(tenants.acme) as acme:
        for place in (LOOK_ALIKE, f"{LOOK_ALIKE}/agent:x", "team:acmeco/agent:x", "team:acm"):
            _refused(
                acme.post("/v1/admin/tokens", json={"role": "agent", "place": place}), "`place`"
            )
        # Placed inside, but reaching the sibling: refused on the reach.
        for reach in (f"subtree:{LOOK_ALIKE}", f"exact:{LOOK_ALIKE}/agent:x", "of:team:acme-corp"):
            _refused(
                acme.post(
                    "/v1/admin/tokens",
                    json={"role": "agent", "place": f"{ACME}/agent:spy", "reach": reach},
                ),
                "`reach`",
                "outside the reach",
            )
        # What it may make stays out of the sibling's memory.
        made = acme.post(
            "/v1/admin/tokens",
            json={"role": "agent", "place": f"{ACME}/agent:w", "reach": f"subtree:{ACME}"},
        )
        assert made.status_code == 201, made.text
    assert len(tenants.ids()) == len(before) + 1
    with tenants.client(made.json()["token"]) as agent:
        for call in (
            ("memory_fetch", {"query": "merger", "mode": "exact"}),
            ("memory_list", {"limit": 50}),
            ("memory_explore", {"facet": "kind"}),
        ):
            r = agent.post(f"/v1/tools/{call[0]}", json=call[1])
            assert r.status_code == 200, r.text
            assert "merger" not in r.text
        assert (
            agent.post("/v1/tools/memory_explore", json={"facet": "kind"}).json()["result"]["total"]
            == 0
        )


def test_placed_admin_cannot_mint_a_token_wider_than_itself(tenants: Tenants) -> None:
    limited, _ = tenants.operator(
        "admin",
        "team:narrow",
        read_only=True,
        floor="verified",
        allow=["memory_fetch", "memory_get"],
    )
    frozen, _ = tenants.operator("admin", "team:cold", frozen=True)
    here = {"role": "agent", "place": "team:narrow/agent:x", "reach": "subtree:team:narrow"}
    with tenants.client(limited) as admin:
        base = {**here, "read_only": True, "floor": "verified", "allow": ["memory_fetch"]}
        # Each field on its own made wider than the admin's: each refused, naming it.
        for wider, word in (
            ({"read_only": False}, "`read_only`"),
            ({"floor": "unverified"}, "`floor`"),
            ({"floor": "stale"}, "`floor`"),
            ({"allow": None}, "`allow` is required"),
            ({"allow": ["memory_fetch", "memory_store"]}, "memory_store"),
            ({"reach": "of:team:narrow/agent:x"}, "reaches /"),
            ({"reach": None}, "`reach`"),
        ):
            _refused(admin.post("/v1/admin/tokens", json={**base, **wider}), word)
        # The same or narrower in every field is made.
        for narrower in (
            {},
            {"allow": ["memory_get"], "reach": "exact:team:narrow/agent:x"},
            {"role": "auditor", "place": "team:narrow", "allow": ["memory_get"]},
            {"role": "admin", "place": "team:narrow/sub:y", "reach": "subtree:team:narrow/sub:y"},
        ):
            r = admin.post("/v1/admin/tokens", json={**base, **narrower})
            assert r.status_code == 201, (narrower, r.text)
            info = r.json()["info"]
            assert info["writes"] is False and info["floor"] == "verified"
    with tenants.client(frozen) as admin:
        cold = {"role": "agent", "place": "team:cold/agent:x", "reach": "subtree:team:cold"}
        _refused(admin.post("/v1/admin/tokens", json=cold), "`read_only`", "cannot write")
        for ok in ({**cold, "frozen": True}, {**cold, "read_only": True}):
            assert admin.post("/v1/admin/tokens", json=ok).status_code == 201


def test_placed_admin_cannot_mint_an_agent_that_reads_or_forgets_the_root(
    tenants: Tenants,
) -> None:
    # An agent's default reach, of:PLACE, holds the root and every ancestor: memory
    # outside the acme admin's own reach, which such an agent could read and forget.
    with tenants.client(tenants.acme) as acme:
        message = _refused(
            acme.post("/v1/admin/tokens", json={"role": "agent", "place": f"{ACME}/agent:x"}),
            "reaches /",
            f"subtree:{ACME}/agent:x",
        )
        assert "of:team:acme/agent:x" in message
    # The root admin may make it (the operator's default agent).
    with tenants.client(tenants.root) as root:
        made = root.post("/v1/admin/tokens", json={"role": "agent", "place": f"{ACME}/agent:x"})
        assert made.status_code == 201, made.text
        assert made.json()["info"]["reach"] == f"of:{ACME}/agent:x"


def test_placed_admin_lists_only_the_tokens_within_its_reach(tenants: Tenants) -> None:
    _, inside_id = tenants.operator("agent", f"{ACME}/agent:listed", reach=f"exact:{ACME}")
    with tenants.client(tenants.acme) as acme:
        listed = acme.get("/v1/admin/tokens").json()["tokens"]
    ids = {t["id"] for t in listed}
    assert {inside_id, tenants.acme_id} <= ids
    assert tenants.root_id not in ids and tenants.corp_id not in ids
    assert all(Namespace(ACME).contains(Namespace(t["place"])) for t in listed), listed
    # The root admin and the operator list every token.
    with tenants.client(tenants.root) as root:
        every = {t["id"] for t in root.get("/v1/admin/tokens").json()["tokens"]}
    assert {tenants.root_id, tenants.corp_id, inside_id} <= every
    assert every == set(tenants.ids())


def test_placed_admin_cannot_revoke_the_root_admin_nor_learn_that_it_exists(
    tenants: Tenants,
) -> None:
    with tenants.client(tenants.acme) as acme:
        unknown = assert_error(acme.delete("/v1/admin/tokens/tok-000000000000"), 404, "not_found")
        for outside in (tenants.root_id, tenants.corp_id):
            body = assert_error(acme.delete(f"/v1/admin/tokens/{outside}"), 404, "not_found")
            # The same answer as for an id that was never made, the id aside.
            assert body["error"]["message"].replace(outside, "ID") == unknown["error"][
                "message"
            ].replace("tok-000000000000", "ID")
    with tenants.client(tenants.root) as root:
        assert root.get("/v1/admin/tokens").status_code == 200  # still live
    with tenants.client(tenants.corp) as corp:
        assert corp.get("/v1/tools").status_code == 200
    assert all(
        t.revoked_at is None for t in _infos(tenants) if t.id in (tenants.root_id, tenants.corp_id)
    )
    # Within its reach, revoking works.
    _, mine = tenants.operator("agent", f"{ACME}/agent:gone", reach=f"subtree:{ACME}")
    with tenants.client(tenants.acme) as acme:
        gone = acme.delete(f"/v1/admin/tokens/{mine}")
        assert gone.status_code == 200 and gone.json()["revoked_at"] is not None


def test_sub_admin_minted_below_cannot_climb_back_to_its_maker(tenants: Tenants) -> None:
    with tenants.client(tenants.acme) as acme:
        made = acme.post(
            "/v1/admin/tokens",
            json={"role": "admin", "place": f"{ACME}/dept:ops", "label": "ops admin"},
        )
        assert made.status_code == 201, made.text
    sub = made.json()["token"]
    with tenants.client(sub) as ops:
        _refused(ops.post("/v1/admin/tokens", json={"role": "admin", "place": ACME}), "`place`")
        listed = {t["id"] for t in ops.get("/v1/admin/tokens").json()["tokens"]}
        assert tenants.acme_id not in listed and made.json()["info"]["id"] in listed
        assert_error(ops.delete(f"/v1/admin/tokens/{tenants.acme_id}"), 404, "not_found")


def test_admin_reaching_everything_from_a_place_still_manages_only_that_place(
    tenants: Tenants,
) -> None:
    # The operator may give a placed admin a reach of every namespace (it then reads and
    # trust-changes everywhere); it still manages tokens only at or below its place, and
    # the root admin stays the only global one.
    wide, _ = tenants.operator("admin", "team:wide", reach="all")
    with tenants.client(wide) as admin:
        _refused(admin.post("/v1/admin/tokens", json={"role": "admin", "place": "/"}), "`place`")
        _refused(admin.post("/v1/admin/tokens", json={"role": "agent", "place": ACME}), "`place`")
        listed = {t["place"] for t in admin.get("/v1/admin/tokens").json()["tokens"]}
        assert listed == {"team:wide"}
        assert_error(admin.delete(f"/v1/admin/tokens/{tenants.root_id}"), 404)
    # And a root-placed admin whose reach is one tenant is no global admin either.
    rooted, _ = tenants.operator("admin", "/", reach=f"subtree:{ACME}")
    with tenants.client(rooted) as admin:
        _refused(admin.post("/v1/admin/tokens", json={"role": "admin", "place": "/"}), "`place`")
        listed = {t["id"] for t in admin.get("/v1/admin/tokens").json()["tokens"]}
        assert tenants.root_id not in listed and tenants.corp_id not in listed
        assert tenants.acme_id in listed


def test_operator_cli_still_makes_and_lists_every_token(tenants: Tenants) -> None:
    folder = str(tenants.server.folder)
    made = subprocess.run(
        [BIN / "memseal", "tokens", "add", "--data", folder, "--role", "admin", "--place", "/"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert made.stdout.startswith("ms_")
    listed = subprocess.run(
        [BIN / "memseal", "tokens", "list", "--data", folder],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert tenants.root_id in listed and tenants.corp_id in listed and tenants.acme_id in listed
    token, token_id = tenants.operator("agent", f"{LOOK_ALIKE}/agent:cli")
    revoked = subprocess.run(
        [BIN / "memseal", "tokens", "revoke", token_id, "--data", folder],
        capture_output=True,
        text=True,
    )
    assert revoked.returncode == 0, revoked.stderr
    with tenants.client(token) as gone:
        assert_error(gone.get("/v1/tools"), 401)


def _infos(tenants: Tenants) -> list[Any]:
    store = TokenStore(tenants.server.folder)
    try:
        return store.listed()
    finally:
        store.close()


# -- the containment itself, against brute force over a small universe of namespaces ---------

_SEGMENTS = ("team:a", "team:a-b", "team:ab", "agent:x")
#: Every namespace of up to three segments: enough below each reach node (at most two
#: deep) that a subtree always holds more than its node.
UNIVERSE = [
    Namespace("/".join(p)) for depth in range(4) for p in itertools.product(_SEGMENTS, repeat=depth)
]
_NODES = [ns.text for ns in UNIVERSE if len(ns.segments) <= 2]
reaches = st.one_of(
    st.none(),
    st.builds(
        lambda mode, node: Reach(mode=mode, node=node),
        st.sampled_from(["of", "subtree", "exact"]),
        st.sampled_from(_NODES),
    ),
)


def _admits(reach: Reach | None, ns: Namespace) -> bool:
    return reach is None or reach.admits(ns)


@given(inner=reaches, outer=reaches)
def test_a_reach_is_within_another_exactly_when_every_namespace_it_admits_is(
    inner: Reach | None, outer: Reach | None
) -> None:
    within = all(_admits(outer, ns) for ns in UNIVERSE if _admits(inner, ns))
    assert (_beyond(inner, outer) is None) == within, (inner, outer, _beyond(inner, outer))


@given(place=st.sampled_from(_NODES), reach=reaches, target=st.sampled_from(UNIVERSE))
def test_an_admin_manages_a_place_by_whole_segments_never_by_string_prefix(
    place: str, reach: Reach | None, target: Namespace
) -> None:
    admin = ToolScope(place=place, reach=reach)
    below = target.text == place or not place or target.text.startswith(place + "/")
    assert manages(admin, target.text) == (below and _admits(reach, target))
    if place == "team:a":
        assert not manages(admin, "team:a-b") and not manages(admin, "team:ab/agent:x")


def test_root_admin_manages_every_place() -> None:
    root = scope_from(role="admin", place="/")
    assert root.reach == parse_reach(None, "", "admin")
    assert all(manages(root, ns.text) for ns in UNIVERSE)
