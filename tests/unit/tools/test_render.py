"""Rendering: compact JSON, scores to four places, the meta subset, never a namespace."""

from __future__ import annotations

import json

from memseal.engine import (
    Citation,
    Fetched,
    Got,
    Hit,
    Item,
    Meta,
    Recollection,
    Source,
)
from memseal.tools import to_text
from memseal.tools.render import (
    MAX_TEXT_CHARS,
    TEXT_BUDGET_BYTES,
    render_fetched,
    render_got,
    render_item,
    render_recollection,
)


def _item(text: str = "prefers dark mode", **extra: object) -> Item:
    fields: dict[str, object] = {
        "id": "a" * 32,
        "kind": "fact",
        "text": text,
        "trust": "unverified",
        "namespace": "team:acme/agent:writer",
        "observed_at": "2026-11-30T09:00:00.000000Z",
        "seq": 7,
        "stored_at": "2026-11-30T09:00:00.001000Z",
        "confidence": 0.8,
    }
    fields.update(extra)
    return Item(**fields)  # type: ignore[arg-type]


def test_a_hit_renders_the_seed_shape_with_trust_and_ledger_ref() -> None:
    meta = Meta(
        source=Source(kind="user", id="u1"),
        file_path="src/app.py",
        url="https://example.com",
        thread_id="t-1",
        agent_id="writer",
        workspace="ws",
        repo="acme/app",
        language="python",
        tool_call="call-1",
    )
    item = _item(meta=meta, tags=("ui", "pref"))
    hit = render_item(item, 0.123456)
    assert hit == {
        "id": "a" * 32,
        "kind": "fact",
        "text": "prefers dark mode",
        "score": 0.1235,
        "confidence": 0.8,
        "trust": "unverified",
        "ledger_ref": 7,
        "meta": {
            "source": {"kind": "user", "id": "u1"},
            "file_path": "src/app.py",
            "url": "https://example.com",
            "thread_id": "t-1",
            "tags": ["ui", "pref"],
            "observed_at": "2026-11-30T09:00:00.000000Z",
        },
    }
    assert "namespace" not in to_text(hit) and "team:acme" not in to_text(hit)
    document = render_item(_item(kind="document", title="Runbook", confidence=None))
    assert document["title"] == "Runbook" and "confidence" not in document
    assert document["meta"] == {"observed_at": "2026-11-30T09:00:00.000000Z"}


def test_results_are_compact_json() -> None:
    fetched = Fetched(hits=(Hit(item=_item(), score=0.5),), mode="exact", min_trust="verified")
    text = to_text(render_fetched(fetched))
    assert " " not in text.replace("prefers dark mode", "")
    decoded = json.loads(text)
    assert (decoded["mode"], decoded["min_trust"]) == ("exact", "verified")
    assert "next_cursor" not in decoded
    got = render_got(Got(items=(_item(),), missing=("x",), filtered=("y",)))
    assert (got["missing"], got["filtered"]) == (["x"], ["y"])
    recalled = render_recollection(
        Recollection(
            answer="prefers dark mode [1]",
            citations=(Citation(ref=1, id="a" * 32, kind="fact", text="x", score=0.333333),),
        )
    )
    assert recalled["citations"][0]["score"] == 0.3333


def test_texts_are_clipped_to_fit_one_signed_payload() -> None:
    long = _item(kind="document", text="word " * 5_000, confidence=None)
    one = render_got(Got(items=(long,), missing=(), filtered=()))["items"][0]
    assert one["truncated"] is True and len(one["text"]) == MAX_TEXT_CHARS
    assert one["text"].endswith("…")
    short = render_got(Got(items=(_item(),), missing=(), filtered=()))["items"][0]
    assert "truncated" not in short
    # Fifty long texts of four-byte characters share the budget; short ones keep theirs.
    wide = _item(kind="document", text="😀" * 16_000, confidence=None)
    items = (_item(), *([wide] * 49))
    rendered = render_got(Got(items=items, missing=(), filtered=()))["items"]
    assert rendered[0]["text"] == "prefers dark mode" and "truncated" not in rendered[0]
    total = sum(len(entry["text"].encode()) for entry in rendered)
    assert total <= TEXT_BUDGET_BYTES
    assert all(entry["truncated"] for entry in rendered[1:])
    assert len(to_text({"items": rendered}).encode()) < 1024 * 1024
