"""Namespaces and reach: parsing, ancestry, and segment-boundary matching in SQL and Python."""

from __future__ import annotations

import sqlite3

import pytest

from memseal.engine import Namespace, Reach
from memseal.engine.namespaces import reach_sql
from memseal.ledger.errors import InvalidRequest

PATHS = [
    "",
    "team:acme",
    "team:acme-corp",
    "team:acmeco",
    "team:acme/agent:writer",
    "team:acme/agent:writer/run:7",
    "team:acme/agent:reader",
    "team:acme-corp/agent:writer",
    "user:dana",
]


def test_a_namespace_parses_into_segments() -> None:
    ns = Namespace("team:acme/agent:writer")
    assert ns.segments == (("team", "acme"), ("agent", "writer"))
    assert [a.text for a in ns.ancestors()] == ["", "team:acme", "team:acme/agent:writer"]
    assert Namespace.root().is_root and str(Namespace.root()) == ""
    assert Namespace("team:acme").child("agent", "x") == Namespace("team:acme/agent:x")


@pytest.mark.parametrize(
    "bad",
    [
        "team",
        "team:",
        ":acme",
        "Team:acme",
        "team:acme/",
        "/team:acme",
        "team:ac me",
        "a:b:c",
        "team:acme//agent:x",
        "team:ac/me",
        "t" * 40 + ":x",
        "team:" + "a" * 200,
    ],
)
def test_a_malformed_namespace_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidRequest, match="`namespace`"):
        Namespace(bad)


def test_too_deep_a_namespace_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="segments"):
        Namespace("/".join(f"n:{i}" for i in range(17)))


def _sql_matches(reach: Reach | None) -> set[str]:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (namespace TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [(p,) for p in PATHS])
    where, params = reach_sql(reach, "namespace")
    return {row[0] for row in conn.execute(f"SELECT namespace FROM t WHERE {where}", params)}


@pytest.mark.parametrize(
    ("reach", "expected"),
    [
        (Reach.exact("team:acme"), {"team:acme"}),
        (
            Reach.subtree("team:acme"),
            {
                "team:acme",
                "team:acme/agent:writer",
                "team:acme/agent:writer/run:7",
                "team:acme/agent:reader",
            },
        ),
        (Reach.of("team:acme/agent:writer"), {"", "team:acme", "team:acme/agent:writer"}),
        (Reach.subtree(""), set(PATHS)),
        (Reach.of(""), {""}),
        (None, set(PATHS)),
    ],
)
def test_reach_respects_segment_boundaries(reach: Reach | None, expected: set[str]) -> None:
    assert _sql_matches(reach) == expected
    assert {p for p in PATHS if reach is None or reach.admits(p)} == expected


def test_team_acme_never_reaches_team_acme_corp() -> None:
    for reach in (Reach.exact("team:acme"), Reach.subtree("team:acme"), Reach.of("team:acme")):
        assert not reach.admits("team:acme-corp")
        assert not reach.admits("team:acme-corp/agent:writer")
        assert "team:acme-corp" not in _sql_matches(reach)


def test_a_reach_checks_its_node() -> None:
    with pytest.raises(InvalidRequest, match="`reach`"):
        Reach.of("not a namespace")
