"""One page of a fetch: rank the items in scope by the mode asked, then load the page.

A fetch is ranked in reader snapshots, never in the writer. Its first page fixes the
log prefix the ranking covers (the cursor carries it, so later pages rank the same
items). A hybrid first page ranks both halves over one prefix: the BM25 half reads the
log's size in its own snapshot, so its corpus statistics are exactly that prefix's, and
the semantic half ranks the items below it. That size is vouched for to a recording
caller (``memseal.ledger.store.one_prefix``) when no entry landing meanwhile changed an
item below it; otherwise the caller's snapshots must agree, as for every other read.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref
from dataclasses import dataclass
from datetime import tzinfo
from typing import Final

from memseal.ledger.entry import decode_entry
from memseal.ledger.store import Execute, Snapshots, one_prefix

from ._dialect import EngineSql
from ._item_rows import load_items
from ._ranking import exact, fuse, refers_first
from ._rule_memo import epoch, held, hold, kept_many, reading_since
from ._vectors import VectorCache
from .aboutness import about
from .currency import Candidate, Rule, current_first
from .events import Keyring
from .filters import DateRange
from .items import Hit
from .results import Mode

__all__ = ["HYBRID_DEPTH", "RANK_CAP", "Asked", "rank_page"]

#: Hits a ranking keeps (pages of fetch reach this deep).
RANK_CAP: Final = 1_000
#: How deep a hybrid ranking's semantic list goes at least, through the HNSW index.
HYBRID_DEPTH: Final = 100
#: The log's size as one snapshot sees it: a first page's cursor snapshot.
_LOG_SIZE: Final = "SELECT coalesce(max(seq), -1) + 1 FROM entries"
#: The same and the projections' generation, when a read follows the rule: what it keeps
#: of its candidates is kept under the generation (a rebuild makes every item anew).
_VIEW: Final = (
    "SELECT (SELECT coalesce(max(seq), -1) + 1 FROM entries), "
    "(SELECT value FROM engine_meta WHERE key = 'generation')"
)
#: The events that change an item once stored (the projection's trust and forget); a new
#: item's ``memory_stored`` lies past a read's prefix bound, and other kinds touch no item.
_ALTERING: Final = frozenset({"trust_changed", "memory_forgotten"})
#: How many entries landing during a hybrid read are looked at to vouch for its prefix;
#: past that the read's snapshots must agree (it runs again), as for every other read.
_VOUCH_SPAN: Final = 4096
#: Each store's number in the read memo, by its reader: a seq names an item of one store.
_STORES: weakref.WeakKeyDictionary[Snapshots, int] = weakref.WeakKeyDictionary()
_NUMBERS: Final = itertools.count()
_NUMBERING: Final = threading.Lock()  # engines may read on event loops of their own


@dataclass(frozen=True, slots=True)
class Asked:
    """A checked fetch: the query, its mode, the scope's SQL and the page wanted."""

    text: str
    mode: Mode
    where: str
    params: list[object]
    snapshot: int | None  # the prefix a cursor names; None on a first page
    offset: int
    count: int
    days: DateRange | None
    zone: tzinfo
    #: The currency rule the read follows (None: none, the reads as before it).
    rule: Rule | None = None


async def rank_page(
    reader: Snapshots,
    vectors: VectorCache | None,
    sql: EngineSql,
    keyring: Keyring,
    asked: Asked,
) -> tuple[int, int, list[Hit]]:
    """``(prefix size, hits ranked in all, the page's hits)`` of ``asked``."""
    fresh = asked.snapshot is None and asked.mode == "hybrid"
    store = None if asked.rule is None else _number(reader)
    # Before any snapshot opens: a forget committing after this may be unseen by the read.
    began = epoch()

    def page(execute: Execute) -> tuple[int, int, list[Hit], bool]:
        with reading_since(began):
            return _page(execute, halves, vouch, vectors, sql, keyring, asked, store)

    with one_prefix() as prefix:
        halves = await _rank_halves(reader, vectors, sql, asked, fresh)
        vouch = fresh and prefix.listening
        seen, total, hits, same = await reader.run(page)
        if same:
            prefix.vouch(seen)
    return seen, total, hits


@dataclass(frozen=True, slots=True)
class _Halves:
    """What a page is ranked from: the prefix and scope both halves ranked, the BM25
    half when it ran before the page's snapshot, the semantic half, and the log size
    the snapshots of every half saw (None: unknown, or not one size)."""

    snapshot: int | None
    where: str
    params: list[object]
    lexical: list[tuple[int, float, float]] | None
    semantic: list[tuple[int, float]]
    at: int | None = None


async def _rank_halves(
    reader: Snapshots, vectors: VectorCache | None, sql: EngineSql, asked: Asked, fresh: bool
) -> _Halves:
    """The rankings made outside the page's snapshot: a first hybrid page's BM25 half
    (which fixes the prefix), and the semantic half of every non-exact mode."""
    where, params, snapshot, text = asked.where, list(asked.params), asked.snapshot, asked.text
    semantic: list[tuple[int, float]] = []
    lexical: list[tuple[int, float, float]] | None = None
    at: int | None = None
    if fresh:
        assert vectors is not None  # _mode refused hybrid without one
        # Both halves rank the same prefix of the log: the one the BM25 half's own
        # snapshot holds, so its corpus statistics are exactly that prefix's (a
        # snapshot's items all lie below its size). The question is embedded
        # meanwhile; the semantic half then ranks that prefix.
        embedding = asyncio.ensure_future(vectors.query_vector(text))
        try:
            snapshot, lexical = await reader.run(
                lambda execute: _lexical_at_size(execute, sql.ranker, where, params, text)
            )
        finally:
            await embedding
    if snapshot is not None:
        where = f"{where} AND i.seq < ?"
        params.append(snapshot)
    if asked.mode != "exact":
        assert vectors is not None  # _mode refused semantic modes without one
        # Through the HNSW index a ranking finds at least the page's end (and one
        # more, for the cursor); hybrid fuses a deeper list, as RRF weighs every rank.
        end = asked.offset + asked.count + 1
        want = end if asked.mode == "semantic" else max(end, HYBRID_DEPTH)
        sizes: list[int] = []
        ranking = vectors.rank(where, params, text, RANK_CAP, want=want, sizes=sizes)
        if asked.mode == "hybrid" and lexical is None:
            # A later page, whose cursor names the prefix: the BM25 half on a second
            # reader while the semantic half runs (the slower of the two, not the sum).
            lexical, semantic = await asyncio.gather(
                reader.run(
                    lambda execute: exact(execute, sql.ranker, where, params, text, RANK_CAP)
                ),
                ranking,
            )
        else:
            semantic = await ranking
            # The last size is the snapshot the ranking was made in; a first hybrid
            # page's BM25 half ranked in one of the log's size ``snapshot``.
            if sizes and (not fresh or sizes[-1] == snapshot):
                at = sizes[-1]
    return _Halves(
        snapshot=snapshot, where=where, params=params, lexical=lexical, semantic=semantic, at=at
    )


def _page(
    execute: Execute,
    halves: _Halves,
    vouch: bool,
    vectors: VectorCache | None,
    sql: EngineSql,
    keyring: Keyring,
    asked: Asked,
    store: int | None,
) -> tuple[int, int, list[Hit], bool]:
    """In the page's snapshot: ``(prefix size, hits ranked in all, the page's hits,
    whether the prefix is vouched for)``; ``store`` is the store's number in the read
    memo (a read that follows the rule)."""
    snapshot, rule = halves.snapshot, asked.rule
    # The first page's snapshot is the log's size as this transaction sees it:
    # everything ranked here is older, everything stored later is not.
    view = execute(_LOG_SIZE if rule is None else _VIEW, ())[0]
    seen: int = view[0]
    # A hybrid read is the prefix its BM25 half ranked if nothing since changed
    # an item below it (new items lie past every bound).
    same = vouch and snapshot is not None and _unchanged(execute, snapshot, seen)
    if snapshot is not None:
        seen = snapshot
    ranked = _ranked(execute, halves, sql, asked)
    marks: dict[int, str] = {}
    window: dict[int, Candidate] = {}
    if rule is not None:
        semantic = None if asked.mode == "exact" else vectors
        place = f"{store}\n{view[1]}\n"
        # Every seq ranked lives here when the ranking was made in this snapshot (an exact
        # read's) or in one of the same log (the projections are the log's).
        live = asked.mode == "exact" or halves.at == view[0]
        kept = _Kept(rule, semantic, place, live)
        window = _candidates(execute, ranked[: rule.window], kept)
        ranked, marks = current_first(ranked, window, rule)
    if asked.days is not None:
        ranked = refers_first(execute, ranked, asked.days, asked.zone)
    page = ranked[asked.offset : asked.offset + asked.count]
    items = load_items(execute, sql.item_select, [seq for seq, _ in page], keyring)
    hits = [Hit(item=items[seq], score=score) for seq, score in page if seq in items]
    if rule is not None:
        hits = _marked(hits, marks, window, rule.reading)
    return seen, len(ranked), hits, same


def _ranked(
    execute: Execute, halves: _Halves, sql: EngineSql, asked: Asked
) -> list[tuple[int, float]]:
    """The mode's ranking, before the currency rule and the dates reorder it: the
    semantic half, both halves fused, or BM25 ranked in the page's snapshot."""
    if asked.mode == "semantic":
        return halves.semantic
    if halves.lexical is not None:
        return fuse(halves.lexical, halves.semantic, RANK_CAP)
    return [
        (seq, score)
        for seq, score, _ in exact(
            execute, sql.ranker, halves.where, halves.params, asked.text, RANK_CAP
        )
    ]


@dataclass(frozen=True, slots=True)
class _Kept:
    """What a read that follows ``rule`` keeps of its candidates, and where: the read
    memo's slot (the rule's opening length, and the embedder whose vectors it holds)
    and the key's opening (the store's number and the projections' generation)."""

    rule: Rule
    vectors: VectorCache | None  # the embedder the ranking scored by (None: an exact read)
    place: str
    live: bool  # every seq ranked lives in this snapshot (ranked here, or in one as large)

    @property
    def slot(self) -> str:
        return f"candidate{self.rule.chars}" + (
            "" if self.vectors is None else f"\n{self.vectors.id}"
        )


def _candidates(
    execute: Execute, head: list[tuple[int, float]], kept: _Kept
) -> dict[int, Candidate]:
    """The rule's view of the first candidates: time, opening text and (a semantic
    ranking's embedder named) the vector it scored them by.

    What a candidate is never changes while its item lives (only its trust does), so
    the read memo keeps it for the next read that meets the item, by store, generation
    and seq; a forget in this process empties the memo, as for what the rule read."""
    if len(head) < 2:
        return {}
    seqs = [seq for seq, _ in head]
    slot = kept.slot
    found: dict[int, Candidate] = {}
    missing: list[int] = []
    for seq, known in zip(seqs, held(slot, [f"{kept.place}{seq}" for seq in seqs]), strict=True):
        if known is None:
            missing.append(seq)
        else:
            found[seq] = known
    if found and not kept.live:
        # Ranked in an earlier snapshot: an item forgotten since (another process's
        # forget, or this one's before the memo is emptied) is no candidate here, as
        # when its row is read.
        here = execute(
            f"SELECT i.seq FROM engine_items i WHERE i.seq IN ({','.join('?' * len(found))})",
            list(found),
        )
        live = {seq for (seq,) in here}
        found = {seq: c for seq, c in found.items() if seq in live}
    if missing:
        read = _read_candidates(execute, missing, kept)
        hold(slot, [(f"{kept.place}{c.seq}", c) for c in read])
        found.update((c.seq, c) for c in read)
    return found


def _read_candidates(execute: Execute, seqs: list[int], kept: _Kept) -> list[Candidate]:
    """The candidates ``seqs`` that live in this snapshot, read from their rows."""
    # The opening characters only: a whole document would cost for nothing here.
    # The keyed content hash and the text's length name the text to the read memo.
    rows = execute(
        f"SELECT i.seq, i.id, i.observed_at, substr(i.text, 1, {int(kept.rule.chars)}), "
        f"i.content, length(i.text) FROM engine_items i "
        f"WHERE i.seq IN ({','.join('?' * len(seqs))})",
        seqs,
    )
    vectors: dict[str, bytes] = {}
    if kept.vectors is not None:
        contents = [r[4] for r in rows]
        # The ranking scored them by the vectors it holds: the stored ones, bit for bit.
        vectors = kept.vectors.held_vectors(contents)
        rest = [content for content in contents if content not in vectors]
        if rest:
            vectors.update(_vectors_of(execute, kept.vectors.id, rest))
    return [
        Candidate(
            seq=seq,
            id=id_,
            observed_at=at,
            text=body,
            vector=vectors.get(content),
            key=f"{content}:{length}",
        )
        for seq, id_, at, body, content, length in rows
    ]


def _vectors_of(execute: Execute, embedder: str, contents: list[str]) -> dict[str, bytes]:
    """The stored vector of each content that has one, ``embedder``'s (kept in the read
    memo: a content's vector, once stored, stays as it is until a forget drops it)."""
    keys = [f"{embedder}\n{content}" for content in contents]
    found = {c: v for c, v in zip(contents, held("vector", keys), strict=True) if v is not None}
    wanted = sorted(set(contents) - found.keys())
    if wanted:
        read = {
            content: bytes(vec)
            for content, vec in execute(
                "SELECT content, vec FROM engine_vectors WHERE embedder = ? "
                f"AND content IN ({','.join('?' * len(wanted))})",
                [embedder, *wanted],
            )
        }
        hold("vector", [(f"{embedder}\n{content}", vec) for content, vec in read.items()])
        found.update(read)
    return found


def _marked(
    hits: list[Hit], marks: dict[int, str], window: dict[int, Candidate], reading: int
) -> list[Hit]:
    """``hits`` with the rule's marks: what replaced each, and what its text is about as
    the rule's ``reading`` reads it (kept in the read memo under the key the rule saw
    it by, when it saw it)."""
    keys = [None if (seen := window.get(hit.item.seq)) is None else seen.key for hit in hits]
    found = kept_many(f"about{reading}", keys, lambda i: about(hits[i].item.text, reading))
    return [
        Hit(
            item=hit.item,
            score=hit.score,
            superseded_by=marks.get(hit.item.seq),
            hypothetical=read.hypothetical,
            subject=read.subject,
        )
        for hit, read in zip(hits, found, strict=True)
    ]


def _number(reader: Snapshots) -> int:
    """The store's number in the read memo (its reader's, numbered on first use)."""
    number = _STORES.get(reader)
    if number is None:
        with _NUMBERING:
            number = _STORES.setdefault(reader, next(_NUMBERS))
    return number


def _lexical_at_size(
    execute: Execute, ranker: str, where: str, params: list[object], text: str
) -> tuple[int, list[tuple[int, float, float]]]:
    """The log's size in this snapshot and the BM25 ranking of the items below it."""
    size: int = execute(_LOG_SIZE, ())[0][0]
    return size, exact(execute, ranker, where, params, text, RANK_CAP)


def _unchanged(execute: Execute, since: int, now: int) -> bool:
    """Whether no entry in ``[since, now)`` changed an item stored before ``since``."""
    if now - since > _VOUCH_SPAN:
        return False
    rows = execute("SELECT leaf FROM entries WHERE seq >= ? AND seq < ?", (since, now))
    return all(decode_entry(bytes(leaf)).kind not in _ALTERING for (leaf,) in rows)
