"""MemoryLayout: one tenant's tree, and the scope each role gets in it."""

from __future__ import annotations

import pytest

from memseal.apps.lifecycle import MemoryLayout
from memseal.engine import Reach
from memseal.ledger.errors import InvalidRequest


def test_the_tree_of_a_tenant() -> None:
    layout = MemoryLayout(tenant="acme")
    assert layout.team == "team:acme"
    assert layout.brain_root == "team:acme/brain:docs"
    assert layout.brain_source("handbook") == "team:acme/brain:docs/source:handbook"
    assert layout.agent("writer") == "team:acme/agent:writer"
    assert layout.thread("writer", "t-1") == "team:acme/agent:writer/thread:t-1"
    assert MemoryLayout(tenant="org:x/team:acme").team == "org:x/team:acme"


def test_each_role_gets_its_scope() -> None:
    layout = MemoryLayout(tenant="team:acme", default_trust="verified")
    writer = layout.agent_writer("writer")
    assert (writer.place, writer.reach, writer.writes) == (
        "team:acme/agent:writer",
        Reach.of("team:acme/agent:writer"),
        True,
    )
    assert writer.default_trust == "verified"
    # The agent reads its own and the team's learnings, never a sibling nor the brain.
    assert writer.reach is not None
    assert writer.reach.admits("team:acme")
    assert not writer.reach.admits("team:acme/agent:other")
    assert not writer.reach.admits(layout.brain_source("handbook"))
    brain = layout.brain_reader()
    assert not brain.writes and brain.reach == Reach.subtree("team:acme/brain:docs")
    assert brain.reach.admits(layout.brain_source("a")) and brain.reach.admits(
        layout.brain_source("b")
    )
    assert not brain.reach.admits(layout.agent("writer"))
    source = layout.brain_writer("a")
    assert source.writes and source.reach == Reach.exact(layout.brain_source("a"))
    thread = layout.thread_writer("writer", "t1")
    assert thread.place == thread.reach.node if thread.reach else False
    auditor = layout.auditor()
    assert not auditor.writes and auditor.reach == Reach.subtree("team:acme")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: MemoryLayout(tenant=""), "tenant"),
        (lambda: MemoryLayout(tenant="team:acme/bad seg"), "tenant"),
        (lambda: MemoryLayout(tenant="acme", brain="a/b"), "brain"),
        (lambda: MemoryLayout(tenant="acme").agent("a:b"), "agent"),
        (lambda: MemoryLayout(tenant="acme").agent(""), "agent"),
        (lambda: MemoryLayout(tenant="acme").thread("a", "x y"), "thread"),
        (lambda: MemoryLayout(tenant="acme").brain_source("-x"), "source"),
        (lambda: MemoryLayout(tenant="acme", default_trust="high"), "default_trust"),  # type: ignore[arg-type]
        (lambda: MemoryLayout(tenant="acme", floor="verified"), "default_trust"),
    ],
)
def test_bad_names_are_refused_naming_the_field(call: object, field: str) -> None:
    with pytest.raises(InvalidRequest, match=f"`{field}`"):
        call()  # type: ignore[operator]
