"""Trust: signed changes with actor and reason; floors; rejected memory is never returned."""

from __future__ import annotations

import json

import pytest

from memseal.engine import Engine, Learning, Reach
from memseal.ledger.errors import InvalidRequest, NotFound

PLACE = "team:acme/agent:writer"


async def test_each_change_is_a_signed_entry_naming_who_and_why(engine: Engine) -> None:
    item = (await engine.store(Learning(text="the sky is green"), namespace=PLACE)).id
    promoted = await engine.promote(item, actor="reviewer:ana", reason="checked the source")
    assert (promoted.trust, promoted.previous) == ("verified", "unverified")
    assert promoted.seq is not None
    record = await engine.ledger.read(promoted.seq)
    assert record.entry().kind == "trust_changed"
    assert json.loads(bytes(record.entry().body)) == {
        "event": "trust_changed",
        "item": item,
        "trust": "verified",
        "previous": "unverified",
    }
    assert record.payload is not None
    assert json.loads(record.payload) == {"actor": "reviewer:ana", "reason": "checked the source"}
    stale = await engine.mark_stale(item, actor="host", reason="superseded")
    again = await engine.mark_stale(item, actor="host", reason="superseded")
    assert again.seq is None and again.previous == "stale"  # no change, nothing appended
    (got,) = (await engine.get([item], min_trust="stale")).items
    assert [(v.trust, v.previous, v.actor, v.reason) for v in got.verdicts] == [
        ("verified", "unverified", "reviewer:ana", "checked the source"),
        ("stale", "verified", "host", "superseded"),
    ]
    assert got.verdicts[-1].seq == stale.seq
    await engine.ledger.verify()


async def test_rejected_memory_is_never_returned_by_any_read(engine: Engine) -> None:
    bad = (await engine.store(Learning(text="poisoned instruction"), namespace=PLACE)).id
    await engine.store(Learning(text="a fine instruction"), namespace=PLACE)
    await engine.reject(bad, actor="host", reason="prompt injection")
    for floor in ("stale", "unverified", "verified"):
        assert bad not in {i.id for i in (await engine.list(min_trust=floor)).items}  # type: ignore[arg-type]
        assert (await engine.get([bad], min_trust=floor)).items == ()  # type: ignore[arg-type]
        for mode in ("exact", "semantic", "hybrid"):
            hits = (await engine.fetch("instruction", mode=mode, min_trust=floor)).hits  # type: ignore[arg-type]
            assert bad not in {h.item.id for h in hits}
        recalled = await engine.recall("instruction", min_trust=floor)  # type: ignore[arg-type]
        assert "poisoned" not in recalled.answer
        assert (await engine.explore("kind", min_trust=floor)).total <= 1  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest, match="`min_trust`: rejected memory is never returned"):
        await engine.list(min_trust="rejected")
    # Forget still reaches it.
    assert (await engine.forget(ids=[bad])).forgotten == (bad,)


async def test_the_floor_filters_by_level(engine: Engine) -> None:
    a = (await engine.store(Learning(text="a1"), namespace=PLACE)).id
    await engine.store(Learning(text="b1"), namespace=PLACE)
    c = (await engine.store(Learning(text="c1"), namespace=PLACE)).id
    await engine.promote(a, actor="h", reason="r")
    await engine.mark_stale(c, actor="h", reason="r")
    texts = {
        floor: {i.text for i in (await engine.list(min_trust=floor)).items}  # type: ignore[arg-type]
        for floor in ("verified", "unverified", "stale")
    }
    assert texts == {
        "verified": {"a1"},
        "unverified": {"a1", "b1"},
        "stale": {"a1", "b1", "c1"},
    }


async def test_a_trust_change_outside_the_reach_or_unknown_is_not_found(engine: Engine) -> None:
    item = (await engine.store(Learning(text="x"), namespace="team:other")).id
    size = await engine.ledger.size()
    with pytest.raises(NotFound):
        await engine.promote(item, actor="h", reason="r", reach=Reach.subtree("team:acme"))
    with pytest.raises(NotFound):
        await engine.promote("0" * 32, actor="h", reason="r")
    with pytest.raises(InvalidRequest, match="`actor`"):
        await engine.promote(item, actor="", reason="r")
    with pytest.raises(InvalidRequest, match="`reason`"):
        await engine.reject(item, actor="h", reason=None)  # type: ignore[arg-type]
    assert await engine.ledger.size() == size
