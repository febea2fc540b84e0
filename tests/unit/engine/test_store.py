"""Storing: signed entries with structure in the body and text in the payload; keyed ids; dedupe."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec

from memseal.engine import (
    Conversation,
    Document,
    Engine,
    Keyring,
    Learning,
    Meta,
    NewItem,
    Source,
    Turn,
)

PLACE = "team:acme/agent:writer"


async def _entry(engine: Engine, seq: int) -> tuple[dict[str, Any], dict[str, Any] | None]:
    record = await engine.ledger.read(seq)
    body = json.loads(bytes(record.entry().body))
    payload = None if record.payload is None else json.loads(record.payload)
    return body, payload


async def test_a_learning_is_one_signed_entry_with_text_only_in_the_payload(
    engine: Engine,
) -> None:
    stored = await engine.store(
        Learning(text="Dana prefers dark mode", kind="fact", confidence=0.9, evidence="she said"),
        namespace=PLACE,
        tags=["ui", "prefs"],
        meta=Meta(source=Source(kind="agent", id="bot-7"), repo="acme/web", url="https://x.y/z"),
    )
    assert not stored.replayed
    record = await engine.ledger.read(stored.seq)
    assert record.entry().kind == "memory_stored"
    body, payload = await _entry(engine, stored.seq)
    assert body == {
        "event": "memory_stored",
        "item": stored.id,
        "kind": "fact",
        "namespace": PLACE,
        "observed_at": body["observed_at"],
        "trust": "unverified",
        "confidence": 0.9,
    }
    assert payload is not None
    assert payload["text"] == "Dana prefers dark mode"
    assert payload["tags"] == ["ui", "prefs"]
    assert payload["meta"]["repo"] == "acme/web"
    for typed in ("Dana", "dark", "ui", "acme/web", "bot-7", "she said", "https"):
        assert typed not in record.leaf.decode(), typed
    # The ledger's mention index points forget at this payload.
    assert await engine.ledger.mentioning(stored.id) == [stored.seq]
    await engine.ledger.verify()


async def test_documents_and_conversations_keep_their_shape(engine: Engine) -> None:
    doc = await engine.store(
        Document(title="Runbook", text="Roll back with make rollback."), namespace=PLACE
    )
    talk = await engine.store(
        Conversation(turns=(Turn(role="user", text="hi"), Turn(role="assistant", text="hello"))),
        namespace=PLACE,
    )
    got = await engine.get([doc.id, talk.id])
    document, conversation = got.items
    assert (document.kind, document.title, document.text) == (
        "document",
        "Runbook",
        "Roll back with make rollback.",
    )
    assert document.confidence is None
    assert conversation.kind == "conversation"
    assert conversation.text == "user: hi\nassistant: hello"
    assert conversation.turns == (
        Turn(role="user", text="hi"),
        Turn(role="assistant", text="hello"),
    )


async def test_the_same_memory_twice_is_a_replay_that_appends_nothing(engine: Engine) -> None:
    first = await engine.store({"learning": {"text": "Deploys on Tuesday"}}, namespace=PLACE)
    size = await engine.ledger.size()
    again = await engine.store(
        Learning(text="  Deploys on Tuesday  "), namespace=PLACE, tags=["other"]
    )
    assert (again.id, again.replayed, again.seq) == (first.id, True, first.seq)
    assert await engine.ledger.size() == size
    # Another kind, place or text is another memory.
    assert (
        await engine.store(Learning(text="Deploys on Tuesday", kind="decision"), namespace=PLACE)
    ).id != first.id
    assert (
        await engine.store(Learning(text="Deploys on Tuesday"), namespace="team:acme")
    ).id != first.id


async def test_two_identical_concurrent_stores_give_one_item(engine: Engine) -> None:
    results = await asyncio.gather(
        *(engine.store(Learning(text="only once"), namespace=PLACE) for _ in range(8))
    )
    assert len({r.id for r in results}) == 1
    assert sum(not r.replayed for r in results) == 1
    page = await engine.list()
    assert [i.text for i in page.items] == ["only once"]


async def test_after_a_forget_the_same_memory_is_stored_anew(engine: Engine) -> None:
    first = await engine.store(Learning(text="temporary"), namespace=PLACE)
    await engine.forget(ids=[first.id])
    again = await engine.store(Learning(text="temporary"), namespace=PLACE)
    assert again.id == first.id and not again.replayed and again.seq > first.seq
    assert [i.seq for i in (await engine.get([first.id])).items] == [again.seq]
    await engine.ledger.verify()


async def test_ids_are_keyed_by_the_instance_secret() -> None:
    content = Learning(text="short")
    one = Keyring(b"\x01" * 32).item_id(PLACE, "fact", content)
    two = Keyring(b"\x02" * 32).item_id(PLACE, "fact", content)
    assert one != two and len(one) == 32
    assert one == Keyring(b"\x01" * 32).item_id(PLACE, "fact", content)
    assert "\x01" not in repr(Keyring(b"\x01" * 32))


async def test_store_many_group_commits_and_dedupes(engine: Engine) -> None:
    items = [NewItem(content=Learning(text=f"note {i % 5}"), namespace=PLACE) for i in range(10)]
    results = await engine.store_many(items)
    assert len({r.id for r in results}) == 5
    assert sum(not r.replayed for r in results) == 5
    assert await engine.ledger.size() == 5


async def test_observed_at_defaults_to_the_clock_and_may_be_given(engine: Engine) -> None:
    now = await engine.store(Learning(text="now"), namespace=PLACE)
    then = await engine.store(
        Learning(text="then"), namespace=PLACE, observed_at="2024-03-02T10:00:00+01:00"
    )
    got = {i.text: i for i in (await engine.get([now.id, then.id])).items}
    assert got["now"].observed_at.startswith("2026-11-30T09:00:00.")
    assert got["then"].observed_at == "2024-03-02T09:00:00.000000Z"


async def test_hosts_may_store_verified_and_cite_sources(engine: Engine) -> None:
    base = await engine.store(Learning(text="base fact"), namespace=PLACE)
    derived = await engine.store(
        Learning(text="derived lesson", kind="lesson"),
        namespace=PLACE,
        trust="verified",
        sources=[base.id],
    )
    (item,) = (await engine.get([derived.id])).items
    assert (item.trust, item.sources, item.kind) == ("verified", (base.id,), "lesson")


async def test_results_encode_to_json(engine: Engine, data: Path) -> None:
    stored = await engine.store(Learning(text="json please"), namespace=PLACE)
    encoded = json.loads(msgspec.json.encode(await engine.get([stored.id])))
    assert encoded["items"][0]["text"] == "json please"
    assert data.is_dir()
