"""A forget leaves nothing forgotten behind: every copy memseal holds of a forgotten text goes.

Each test plants a needle (a text, a source id, a thread id, a query, a bad value), makes the
call paths that copy it, forgets, and reads every row of every table behind memseal's back.
The ledger still verifies afterwards, and the other texts still replay.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from attack_db import attacker

import memseal
from memseal import ToolScope
from memseal.engine import Citation, Hit, Recollection
from memseal.memory import Memory

SCOPE = ToolScope.placed_at("team:acme/agent:writer")
PLACE = "team:acme/agent:writer"


def _held(memory: Memory) -> bytes:
    """Every byte of every row of every table the store holds, read behind memseal's back."""
    store: Any = memory.ledger.store
    out: list[bytes] = []
    with attacker(memory) as conn:
        if store.dialect == "sqlite":
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master "
                    "WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                ).fetchall()
            ]
        else:
            names = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                    (store.schema,),
                ).fetchall()
            ]
        for name in names:
            for row in conn.execute(f'SELECT * FROM "{name}"').fetchall():
                for value in row:
                    if isinstance(value, bytes | bytearray | memoryview):
                        out.append(bytes(value))
                    else:
                        out.append(str(value).encode("utf-8", "replace"))
    return b"\x00".join(out)


async def _verified(memory: Memory) -> None:
    await memory.engine.scrub()
    await memory.ledger.verify(trust=memory.vkey)
    await memory.verify(deep=True)


# -- 1. meta.source.id -----------------------------------------------------------------------


async def test_a_forget_erases_the_source_id_a_recorded_read_showed(memory: Memory) -> None:
    needle = "slack-msg-ZQX-4471-from-alice"
    kept = "slack-msg-KEEP-0001"
    gone = await memory.engine.store(
        {"learning": {"text": "alice likes the window seat"}},
        namespace=PLACE,
        meta={"source": {"kind": "user", "id": needle}},
    )
    other = await memory.engine.store(
        {"learning": {"text": "bob likes the aisle seat"}},
        namespace=PLACE,
        meta={"source": {"kind": "user", "id": kept}},
    )

    async def calls() -> Any:
        async with memory.run("run-src", SCOPE) as run:
            return await run.call("memory_list", {})

    listed = await calls()
    assert {i["meta"]["source"]["id"] for i in listed["items"]} == {needle, kept}
    await memory.tools(SCOPE).call("memory_forget", {"ids": [gone.id]})
    await _verified(memory)
    assert needle.encode() not in _held(memory)
    replayed = await calls()
    shown = {i["id"]: i for i in replayed["items"]}
    assert shown[other.id]["meta"]["source"] == {"kind": "user", "id": kept}
    assert set(shown[gone.id]["meta"]["source"]["id"]) == {"forgotten_at"}


# -- 2. a forget's own filter ----------------------------------------------------------------


async def test_a_forget_by_thread_leaves_no_copy_of_the_thread_id(memory: Memory) -> None:
    thread = "thread-ZQX-private-7731"
    tag = "tag-zqx-private"
    await memory.engine.store(
        {"conversation": {"turns": [{"role": "user", "text": "hello there"}]}},
        namespace=PLACE,
        meta={"thread_id": thread},
    )
    await memory.engine.store(
        {"learning": {"text": "tagged for removal"}}, namespace=PLACE, tags=[tag]
    )
    async with memory.run("run-forget", SCOPE) as run:
        await run.call("memory_forget", {"filter": {"thread_id": thread}})
        await run.call("memory_forget", {"filter": {"tags_any": [tag], "kinds": ["fact"]}})
    await _verified(memory)
    held = _held(memory)
    assert thread.encode() not in held
    assert tag.encode() not in held
    # The run still resumes on its recorded path (the fingerprint, keyed, stays).
    async with memory.run("run-forget", SCOPE) as run:
        first = await run.call("memory_forget", {"filter": {"thread_id": thread}})
        assert len(first["forgotten"]) == 1


# -- 3. a recall's uncited hits ----------------------------------------------------------------


class _Quoter:
    """A host answerer that quotes every hit it is given and cites only the first."""

    async def answer(
        self, question: str, hits: Sequence[Hit], *, instructions: str | None = None
    ) -> Recollection:
        first = hits[0]
        return Recollection(
            answer=" / ".join(h.item.text for h in hits),
            citations=(
                Citation(ref=1, id=first.item.id, kind=first.item.kind, text="x", score=1.0),
            ),
        )


@pytest.fixture
async def quoting(tmp_path: Path, store_url: str | None) -> AsyncIterator[Memory]:
    async with memseal.open(
        tmp_path / "q", store=store_url, embedder=None, checkpoint_interval=None, answerer=_Quoter()
    ) as opened:
        yield opened


async def test_a_forget_reaches_a_recall_that_quoted_an_uncited_hit(quoting: Memory) -> None:
    memory = quoting
    cited = await memory.engine.store({"learning": {"text": "deploy on friday"}}, namespace=PLACE)
    secret = "deploy vault code ZQX 99817"
    quoted = await memory.engine.store({"learning": {"text": secret}}, namespace=PLACE)
    async with memory.run("run-recall", SCOPE) as run:
        recalled = await run.call("memory_recall", {"question": "deploy"})
    assert secret in recalled["answer"]
    assert [c["id"] for c in recalled["citations"]] == [cited.id]
    await memory.tools(SCOPE).call("memory_forget", {"ids": [quoted.id]})
    await _verified(memory)
    assert secret.encode() not in _held(memory)


# -- 4. cursors ------------------------------------------------------------------------------


def _query_part(cursor: str) -> str:
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    return str(msgspec.json.decode(raw)[2])


async def test_a_cursor_does_not_confirm_a_guessed_query(tmp_path: Path) -> None:
    # The same question asked of two memories (two instance secrets) must not give the
    # same fingerprint: unkeyed, anyone could hash a guess and compare.
    found: list[str] = []
    for name in ("one", "two"):
        async with memseal.open(
            tmp_path / name, store=None, embedder=None, checkpoint_interval=None
        ) as memory:
            for text in ("the vault code is 1", "the vault code is 2", "the vault code is 3"):
                await memory.engine.store({"learning": {"text": text}}, namespace=PLACE)
            tools = memory.tools(SCOPE)
            first = await tools.call("memory_fetch", {"query": "vault code", "limit": 1})
            listed = await tools.call("memory_list", {"limit": 1, "filter": {"thread_id": "t-9"}})
            assert "next_cursor" not in listed
            listed = await tools.call("memory_list", {"limit": 1})
            found += [_query_part(first["next_cursor"]), _query_part(listed["next_cursor"])]
            # Cursors still round-trip.
            second = await tools.call(
                "memory_fetch", {"query": "vault code", "limit": 1, "cursor": first["next_cursor"]}
            )
            assert second["hits"][0]["id"] != first["hits"][0]["id"]
            more = await tools.call("memory_list", {"limit": 1, "cursor": listed["next_cursor"]})
            assert more["items"][0]["id"] != listed["items"][0]["id"]
    assert found[0] != found[2] and found[1] != found[3]


# -- 5. markers name the forget that erased each text -------------------------------------------


async def test_each_erased_text_names_the_forget_that_erased_it(memory: Memory) -> None:
    a = await memory.engine.store({"learning": {"text": "alpha deploy note"}}, namespace=PLACE)
    b = await memory.engine.store({"learning": {"text": "bravo deploy note"}}, namespace=PLACE)
    c = await memory.engine.store({"learning": {"text": "charlie deploy note"}}, namespace=PLACE)

    async def fetched() -> Any:
        async with memory.run("run-two", SCOPE) as run:
            return await run.call("memory_fetch", {"query": "deploy", "mode": "exact"})

    await fetched()
    tools = memory.tools(SCOPE)
    await tools.call("memory_forget", {"ids": [a.id]})
    first = (await memory.ledger.head()).size - 2  # the memory_forgotten entry, then its call
    await tools.call("memory_forget", {"ids": [b.id]})
    second = (await memory.ledger.head()).size - 2
    await _verified(memory)
    hits = {h["id"]: h for h in (await fetched())["hits"]}
    assert hits[a.id]["text"] == {"forgotten_at": first}
    assert hits[b.id]["text"] == {"forgotten_at": second}
    assert hits[c.id]["text"] == "charlie deploy note"
    # A third forget that erases the last text erases the payload whole; the marks hold.
    await tools.call("memory_forget", {"ids": [c.id]})
    third = (await memory.ledger.head()).size - 2
    await _verified(memory)
    hits = {h["id"]: h for h in (await fetched())["hits"]}
    assert [hits[i]["text"]["forgotten_at"] for i in (a.id, b.id, c.id)] == [first, second, third]


# -- 6. refused calls' messages ----------------------------------------------------------------

NEEDLE = "zqxneedle"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("memory_fetch", {"query": "q", "mode": NEEDLE}),
        ("memory_fetch", {"query": "q", "filter": {"kinds": [NEEDLE]}}),
        ("memory_fetch", {"query": "q", "filter": {"sources": [NEEDLE + " x"]}}),
        ("memory_fetch", {"query": "q", "filter": {"observed_after": NEEDLE}}),
        ("memory_fetch", {"query": "q", "refers_to": {"from": NEEDLE}}),
        ("memory_fetch", {"query": "q", "min_trust": NEEDLE}),
        ("memory_list", {"filter": {"observed_before": "2026-13-45T99:00:00Z " + NEEDLE}}),
        ("memory_explore", {"facet": NEEDLE}),
        ("memory_store", {"conversation": {"turns": [{"role": NEEDLE + "!", "text": "x"}]}}),
        ("memory_store", {"learning": {"text": "x"}, "tags": [NEEDLE * 10]}),
    ],
)
async def test_a_refused_call_records_no_value_it_was_sent(
    memory: Memory, tool: str, arguments: dict[str, Any]
) -> None:
    async with memory.run("run-bad", SCOPE) as run:
        with pytest.raises(memseal.InvalidRequest) as caught:
            await run.call(tool, arguments)
    message = str(caught.value)
    assert NEEDLE not in message
    assert "`" in message  # it still names the field
    assert NEEDLE.encode() not in _held(memory)
    await _verified(memory)
