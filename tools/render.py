"""Compact results: what a model reads back from each tool.

Results are plain JSON values (dicts of text, numbers, lists), rendered as
compact JSON text by :func:`to_text`. An item or hit renders as::

    {"id", "kind", "text", "title"?, "score"?, "confidence"?, "trust",
     "ledger_ref", "meta": {...}, "superseded_by"?, "hypothetical"?, "subject"?,
     "truncated"?}

* ``score`` is rounded to four places; ``confidence`` appears for
  learnings; ``ledger_ref`` is the seq of the signed ledger entry that
  wrote the memory;
* ``meta`` is the seed's subset: ``source`` ``{kind, id?}``,
  ``file_path``, ``url``, ``thread_id``, ``tags`` and ``observed_at``,
  each only when set;
* a hit's ``superseded_by`` (the id of a newer memory about the same
  subject, ranked above it), ``hypothetical`` (true: the text only supposes)
  and ``subject`` (the other person it is about) come from the engine's
  currency rule (``memseal.engine.currency``), each only when set;
* the namespace is never rendered: a model never learns where in the tree
  a memory lives, only that it may see it.

Texts are clipped so that one result always fits a signed tool-call
payload: each at most :data:`MAX_TEXT_CHARS` characters (a learning's
own limit, so learnings are never clipped alone), and all of a result's
texts together at most :data:`TEXT_BUDGET_BYTES` of UTF-8, shared fairly.
A clipped text ends in ``…`` and its entry says ``"truncated": true``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from memseal.engine import (
    Exploration,
    Fetched,
    Forgotten,
    Got,
    Hit,
    Item,
    Page,
    Recollection,
    Stored,
)
from memseal.engine.items import MAX_LEARNING_CHARS

__all__ = [
    "MAX_TEXT_CHARS",
    "TEXT_BUDGET_BYTES",
    "render_exploration",
    "render_fetched",
    "render_forgotten",
    "render_got",
    "render_item",
    "render_page",
    "render_recollection",
    "render_stored",
    "to_text",
]

MAX_TEXT_CHARS: Final = MAX_LEARNING_CHARS
TEXT_BUDGET_BYTES: Final = 512 * 1024
_ELLIPSIS: Final = "…"
_encoder = msgspec.json.Encoder()


def to_text(result: Any) -> str:
    """A result as compact JSON text (UTF-8, no spaces)."""
    return _encoder.encode(result).decode()


def _meta(item: Item) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    source = item.meta.source
    if source is not None:
        meta["source"] = (
            {"kind": source.kind} if source.id is None else {"kind": source.kind, "id": source.id}
        )
    for name in ("file_path", "url", "thread_id"):
        value = getattr(item.meta, name)
        if value is not None:
            meta[name] = value
    if item.tags:
        meta["tags"] = list(item.tags)
    meta["observed_at"] = item.observed_at
    return meta


def render_item(item: Item, score: float | None = None) -> dict[str, Any]:
    """One memory (a hit when ``score`` is given), unclipped."""
    out: dict[str, Any] = {"id": item.id, "kind": item.kind, "text": item.text}
    if item.title is not None:
        out["title"] = item.title
    if score is not None:
        out["score"] = round(float(score), 4)
    if item.confidence is not None:
        out["confidence"] = item.confidence
    out["trust"] = item.trust
    out["ledger_ref"] = item.seq
    out["meta"] = _meta(item)
    return out


def _clip(entries: Sequence[dict[str, Any]]) -> None:
    """Clip ``entries``' texts in place to the per-text and per-result limits."""
    for entry in entries:
        if len(entry["text"]) > MAX_TEXT_CHARS:
            entry["text"] = entry["text"][: MAX_TEXT_CHARS - 1] + _ELLIPSIS
            entry["truncated"] = True
    sizes = [len(entry["text"].encode()) for entry in entries]
    if sum(sizes) <= TEXT_BUDGET_BYTES:
        return
    # Water-filling: the shortest texts keep their length, the rest share what is left.
    share = TEXT_BUDGET_BYTES
    left = len(sizes)
    for size in sorted(sizes):
        if size * left > share:
            break
        share -= size
        left -= 1
    cap = share // left
    for entry, size in zip(entries, sizes, strict=True):
        if size > cap:
            room = cap - len(_ELLIPSIS.encode())
            cut = entry["text"].encode()[: max(room, 0)].decode("utf-8", "ignore")
            entry["text"] = cut + _ELLIPSIS
            entry["truncated"] = True


def _items(items: Sequence[Item]) -> list[dict[str, Any]]:
    rendered = [render_item(item) for item in items]
    _clip(rendered)
    return rendered


def _hits(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    rendered = [_hit(hit) for hit in hits]
    _clip(rendered)
    return rendered


def _hit(hit: Hit) -> dict[str, Any]:
    out = render_item(hit.item, hit.score)
    # The currency rule's marks, only when set: a read without them renders as before.
    if hit.superseded_by is not None:
        out["superseded_by"] = hit.superseded_by
    if hit.hypothetical:
        out["hypothetical"] = True
    if hit.subject is not None:
        out["subject"] = hit.subject
    return out


def render_fetched(fetched: Fetched) -> dict[str, Any]:
    """A fetch result as the JSON a model receives."""
    out: dict[str, Any] = {
        "hits": _hits(fetched.hits),
        "mode": fetched.mode,
        "min_trust": fetched.min_trust,
    }
    if fetched.next_cursor is not None:
        out["next_cursor"] = fetched.next_cursor
    return out


def render_page(page: Page) -> dict[str, Any]:
    """A listing page as the JSON a model receives, with its next cursor."""
    out: dict[str, Any] = {"items": _items(page.items)}
    if page.next_cursor is not None:
        out["next_cursor"] = page.next_cursor
    return out


def render_got(got: Got) -> dict[str, Any]:
    """A ``memory_get`` result as the JSON a model receives."""
    return {
        "items": _items(got.items),
        "missing": list(got.missing),
        "filtered": list(got.filtered),
    }


def render_recollection(recollection: Recollection) -> dict[str, Any]:
    """A recall's answer and citations as the JSON a model receives."""
    citations = [
        {
            "ref": c.ref,
            "id": c.id,
            "kind": c.kind,
            "text": c.text,
            "score": round(float(c.score), 4),
        }
        for c in recollection.citations
    ]
    _clip(citations)
    return {"answer": recollection.answer, "citations": citations}


def render_exploration(exploration: Exploration) -> dict[str, Any]:
    """A facet's buckets as the JSON a model receives."""
    return {
        "facet": exploration.facet,
        "buckets": [{"value": b.value, "count": b.count} for b in exploration.buckets],
        "total": exploration.total,
        "missing": exploration.missing,
        "more_buckets": exploration.more_buckets,
        "truncated": exploration.truncated,
    }


def render_stored(stored: Stored) -> dict[str, Any]:
    """A store result as JSON: the item's id and whether it was already kept."""
    return {"id": stored.id, "replayed": stored.replayed}


def render_forgotten(forgotten: Forgotten) -> dict[str, Any]:
    """A forget result as JSON: the ids erased and the ids skipped."""
    return {"forgotten": list(forgotten.forgotten), "skipped": list(forgotten.skipped)}
