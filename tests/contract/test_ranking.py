"""The ranking contract: what every store's search keeps, checked on each store.

SQLite ranks exact questions with FTS5's BM25; PostgreSQL with ``ts_rank``
over the same words (engine/_ranking.py). Their scores differ, and so may
the order of items that match alike for different reasons (PostgreSQL keeps
no corpus statistics: a rare word weighs no more than a common one). What
both keep, and what these tests hold each store to:

* an item holding every word of a question outranks one holding only some;
* a title or tag match outranks a text-only match of the same word;
* stemmed forms match (deploying / deploy, approvals / approval), and
  accents fold (café / cafe), both ways;
* a question of common words alone finds the items holding them; with other
  words in the question, the common ones count for nothing;
* ties go to the newer item;
* scope (reach, trust floor, filters) applies before ranking: a better match
  out of scope never appears, and never pushes one in scope off a page;
* a question's FTS or tsquery syntax is plain text;
* semantic and hybrid search (the hashing embedder) serve on both;
* pages through a cursor add up to the one long page, and see only what the
  first page saw.

Each test runs on the folder's SQLite file and, when the test server is
there, on a fresh PostgreSQL schema (the ``store_url`` fixture). The word
weights need a memory where the words asked for are in fewer than half of
the items (``FILLERS``) to show; ``test_the_contract_holds_in_a_tiny_memory``
checks the order holds without them too (SQLite's BM25 then weighs every
word at 1e-6, and only the unrounded scores tell the items apart).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
from clock import Clock

from memseal.cli.engine import open_engine
from memseal.engine import Document, Engine, HashingEmbedder, Learning, Reach

PLACE = "team:acme/agent:writer"
MODES: Final = ("exact", "semantic", "hybrid")


@pytest.fixture
async def engine(tmp_path: Path, store_url: str | None) -> AsyncIterator[Engine]:
    async with open_engine(
        tmp_path / "data",
        create=True,
        clock=Clock(),
        embedder=HashingEmbedder(),
        store=store_url,
        # The contract is the ranker's: the currency rule (its own tests) reorders near
        # texts by time afterwards, which is not what these orders are about.
        currency=False,
    ) as opened:
        yield opened


async def _learn(engine: Engine, text: str, namespace: str = PLACE, **extra: Any) -> str:
    return (await engine.store(Learning(text=text), namespace=namespace, **extra)).id


async def _texts(engine: Engine, query: str, **options: Any) -> list[str]:
    options.setdefault("mode", "exact")
    return [h.item.text for h in (await engine.fetch(query, **options)).hits]


async def _ids(engine: Engine, query: str, **options: Any) -> list[str]:
    options.setdefault("mode", "exact")
    return [h.item.id for h in (await engine.fetch(query, **options)).hits]


FILLERS = (
    "Lunch is at noon on weekdays",
    "The office closes early on Fridays",
    "Invoices are due within thirty days",
    "Parking passes are renewed each spring",
)


async def _fill(engine: Engine) -> None:
    """Unrelated items, so that the words asked for are in fewer than half of them."""
    for text in FILLERS:
        await _learn(engine, text)


# -- coverage, fields, words -------------------------------------------------------------------


async def test_an_item_holding_every_word_outranks_one_holding_some(engine: Engine) -> None:
    # The partial matches are shorter and repeat their word, and they are newer: only the
    # share of the question's words an item holds can put the complete one first.
    complete = "The release checklist needs the deploy pipeline approval from the lead engineer"
    await _learn(engine, complete)
    await _learn(engine, "deploy deploy deploy")
    await _learn(engine, "pipeline pipeline")
    await _learn(engine, "approval approval, pipeline")
    await _fill(engine)
    texts = await _texts(engine, "deploy pipeline approval")
    assert texts[0] == complete
    assert set(texts[1:]) == {
        "deploy deploy deploy",
        "pipeline pipeline",
        "approval approval, pipeline",
    }


async def test_a_title_match_outranks_a_text_only_match(engine: Engine) -> None:
    await _fill(engine)
    titled = await engine.store(
        Document(title="Kubernetes", text="Notes on how our clusters are run day to day"),
        namespace=PLACE,
    )
    # Newer, so a tie would go to it: only the title's weight puts the document first.
    plain = await _learn(engine, "Kubernetes notes on how our clusters are run day to day")
    assert await _ids(engine, "kubernetes") == [titled.id, plain]


async def test_a_tag_match_outranks_a_text_only_match(engine: Engine) -> None:
    await _fill(engine)
    tagged = await _learn(engine, "Notes on how our clusters are run day to day", tags=["helm"])
    plain = await _learn(engine, "Helm notes on how our clusters are run day to day")
    assert await _ids(engine, "helm") == [tagged, plain]


# Items holding one stem in different forms, and the questions that must find all of them.
STEMS = [
    (("We deploy on Tuesdays", "Deploying takes an hour"), ("deploy", "deploying", "deployed")),
    (("Two approvals are needed", "The approval came late"), ("approval", "approvals")),
    (("The runbooks were updated",), ("runbook", "runbooks")),
]
FOLDS = [
    ("Meet at the café by the station", "cafe"),
    ("Meet at the cafe by the station", "café"),
    ("The naïve approach failed", "naive"),
    ("Résumé review on Monday", "RESUME"),
]


async def test_stemmed_forms_match(engine: Engine) -> None:
    ids = {text: await _learn(engine, text) for texts, _ in STEMS for text in texts}
    await _fill(engine)
    for texts, questions in STEMS:
        for asked in questions:
            assert set(await _ids(engine, asked)) == {ids[t] for t in texts}, asked


async def test_accents_and_case_fold(engine: Engine) -> None:
    ids = {stored: await _learn(engine, stored) for stored, _ in FOLDS}
    await _fill(engine)
    cafes = {ids[FOLDS[0][0]], ids[FOLDS[1][0]]}
    assert set(await _ids(engine, "cafe")) == cafes
    assert set(await _ids(engine, "café")) == cafes
    assert await _ids(engine, "naive") == [ids["The naïve approach failed"]]
    assert await _ids(engine, "naïve") == [ids["The naïve approach failed"]]
    assert await _ids(engine, "RESUME") == [ids["Résumé review on Monday"]]


async def test_common_words_count_only_when_nothing_else_is_asked(engine: Engine) -> None:
    with_the = "The lunch is at noon"
    other = "The standup is at nine"
    none = "Deploys go out weekly"
    for text in (with_the, other, none):
        await _learn(engine, text)
    # Alone, common words are searched for: items holding them, and only those.
    assert set(await _texts(engine, "the")) == {with_the, other}
    assert set(await _texts(engine, "is at")) == {with_the, other}
    # With other words, the common ones count for nothing.
    assert await _texts(engine, "the lunch") == [with_the]
    assert await _texts(engine, "what is the zebra") == []
    assert await _texts(engine, "???") == []


async def test_ties_go_to_the_newer_item(engine: Engine) -> None:
    # Matching alike (same words, same lengths): the newest first, in every store. (With the
    # fillers the scores are real ones, not all zero.)
    await _fill(engine)
    ids = [await _learn(engine, f"receipt number {n} approved") for n in range(3)]
    assert {h.score for h in (await engine.fetch("receipt", mode="exact")).hits} != {0.0}
    assert await _ids(engine, "receipt approved") == ids[::-1]
    assert await _ids(engine, "receipt") == ids[::-1]


async def test_the_contract_holds_in_a_tiny_memory(engine: Engine) -> None:
    # Two items: each word of the question is in half of them or more.
    complete = await _learn(engine, "deploy pipeline")
    partial = await _learn(engine, "deploy")
    assert await _ids(engine, "deploy pipeline") == [complete, partial]
    titled = await engine.store(Document(title="Helm", text="how charts are kept"), namespace=PLACE)
    plain = await _learn(engine, "Helm: how charts are kept")
    assert (await _ids(engine, "helm"))[:2] == [titled.id, plain]


# -- scope before ranking ----------------------------------------------------------------------


async def test_reach_applies_before_ranking(engine: Engine) -> None:
    # Better matches (every word, repeated) in a namespace outside the reach...
    for n in range(6):
        await _learn(engine, f"rollback plan rollback plan {n}", namespace="team:acme-corp")
    # ...and weaker ones inside it (the writer's place and its team).
    inside = [
        await _learn(engine, "a rollback is rare"),
        await _learn(engine, "plan the rollback", namespace="team:acme"),
        await _learn(engine, "the plan for Friday"),
    ]
    reach = Reach.of(PLACE)
    for mode in MODES:
        page = await _ids(engine, "rollback plan", mode=mode, reach=reach, limit=3)
        assert set(page) == set(inside), mode
        first = await engine.fetch("rollback plan", mode=mode, reach=reach, limit=2)
        assert first.next_cursor is not None
        rest = await engine.fetch(
            "rollback plan", mode=mode, reach=reach, limit=2, cursor=first.next_cursor
        )
        assert {h.item.id for h in (*first.hits, *rest.hits)} == set(inside), mode
        assert rest.next_cursor is None


async def test_the_trust_floor_applies_before_ranking(engine: Engine) -> None:
    weak = await _learn(engine, "the canary takes ten minutes")
    for n in range(5):
        await _learn(engine, f"canary canary minutes canary {n}")
    bad = await _learn(engine, "canary canary canary canary ten minutes")
    await engine.promote(weak, actor="reviewer", reason="checked")
    await engine.reject(bad, actor="reviewer", reason="wrong")
    for mode in MODES:
        assert await _ids(engine, "canary minutes", mode=mode, min_trust="verified", limit=1) == [
            weak
        ], mode
        everything = await _ids(engine, "canary minutes", mode=mode, limit=50)
        assert bad not in everything and weak in everything, mode
        assert len(everything) == 6, mode


async def test_filters_apply_before_ranking(engine: Engine) -> None:
    lesson = (
        await engine.store(
            Learning(text="retry the flaky test once", kind="lesson"),
            namespace=PLACE,
            tags=["ci"],
        )
    ).id
    for n in range(5):
        await _learn(engine, f"flaky test retry flaky test retry {n}", tags=["noise"])
    for mode in MODES:
        by_kind = await _ids(engine, "flaky test retry", mode=mode, filter={"kinds": ["lesson"]})
        assert by_kind == [lesson], mode
        by_tag = await _ids(
            engine, "flaky test retry", mode=mode, filter={"tags_any": ["ci"]}, limit=1
        )
        assert by_tag == [lesson], mode


# -- syntax, modes, pages ----------------------------------------------------------------------

SYNTAX = [
    '"pipeline" OR NEAR(deploy) *',
    "deploy AND NOT pipeline",
    "text:deploy title:pipeline",
    "deploy* -pipeline ^approval",
    '(deploy "unbalanced',
    "deploy & !pipeline | approval",
    "deploy <-> pipeline",
    "deploy:* 'pipeline':A",
    "{deploy} [pipeline] approval; DROP TABLE engine_items; --",
    "deploy/pipeline\\approval",
    "%_deploy%",
]


async def test_query_syntax_is_plain_text(engine: Engine) -> None:
    await _learn(engine, "The deploy pipeline needs an approval")
    await _learn(engine, "Deploying near the pipeline")
    await _learn(engine, "Approval of the budget")
    await _learn(engine, "Lunch is at noon")
    for question in SYNTAX:
        # Exact search reads the question's words and nothing else: the same hits, in the
        # same order, as the words alone. The other modes answer too (no error, some hits).
        words = " ".join(re.findall(r"\w+", question))
        asked = await _ids(engine, question)
        assert asked and asked == await _ids(engine, words), question
        for mode in ("semantic", "hybrid"):
            assert await _ids(engine, question, mode=mode), (question, mode)
    assert len((await engine.list(limit=50)).items) == 4  # no statement ran but the searches


async def test_semantic_and_hybrid_serve(engine: Engine) -> None:
    assert engine.modes == MODES
    await _learn(engine, "darkmode everywhere")
    revenue = await _learn(engine, "quarterly revenue report")
    await _learn(engine, "tea or coffee")
    semantic = await engine.fetch("dark modes", mode="semantic")
    assert semantic.hits[0].item.text == "darkmode everywhere"
    assert -1.0 <= semantic.hits[-1].score <= semantic.hits[0].score <= 1.0
    hybrid = await engine.fetch("revenue")
    assert hybrid.mode == "hybrid"
    assert hybrid.hits[0].item.id == revenue
    assert hybrid.hits[0].score == 2.0  # first in both rankings: 61 / 61 twice
    assert all(h.score == round(h.score, 4) and 0 < h.score <= 2.0 for h in hybrid.hits)


async def test_pages_add_up_to_the_long_page(engine: Engine) -> None:
    for n in range(9):
        words = " ".join(["release"] * (1 + n % 3) + ["notes"] * (1 + n % 2))
        await _learn(engine, f"{words} for version {n}")
    await _learn(engine, "unrelated lunch memo")
    for mode in MODES:
        whole = await _ids(engine, "release notes", mode=mode, limit=50)
        paged: list[str] = []
        fetched = await engine.fetch("release notes", mode=mode, limit=2)
        # Stored after the first page: later pages never show it.
        await _learn(engine, f"release notes release notes written meanwhile ({mode})")
        while True:
            paged += [h.item.id for h in fetched.hits]
            if fetched.next_cursor is None:
                break
            fetched = await engine.fetch(
                "release notes", mode=mode, limit=2, cursor=fetched.next_cursor
            )
        assert paged == whole, mode
        assert len(set(paged)) == len(paged) >= 9, mode


async def test_a_word_the_index_splits_is_searched_as_a_phrase(engine: Engine) -> None:
    await _fill(engine)
    joined = await _learn(engine, "set config_value before the deploy")
    await _learn(engine, "the value of the config was wrong")
    assert await _ids(engine, "config_value") == [joined]
    assert await _ids(engine, "value_config") == []
