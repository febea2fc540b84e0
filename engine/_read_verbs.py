"""The engine's read verbs: get, list, fetch, explore and recall.

:class:`ReadVerbs` is one part of :class:`~memseal.engine.engine.Engine`, kept
apart from the writes and the set-up because every read runs on the store's
snapshot pool, never on its writer: each is confined by reach, trust floor and
filter before anything is ranked (see :mod:`memseal.engine._scope`). The engine
supplies the state it reads through, declared here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo
from typing import Final

from memseal.ledger.errors import InvalidRequest, StorageError, Unsupported
from memseal.ledger.store import Snapshots

from ._dates import check_zone
from ._dialect import EngineSql
from ._fetch import Asked, rank_page
from ._item_rows import got_from_rows, rows_to_items
from ._paging import DEFAULT_LIMIT, Cursor, check_limit, decode_cursor, encode_cursor
from ._scope import scope_sql
from ._vectors import VectorCache
from .currency import in_force
from .events import Keyring
from .explore import Exploration, check_facet, explore
from .filters import DateRange, Filter, check_date_range, check_filter
from .items import check_ids, clean_text
from .namespaces import Reach, check_reach
from .recall import Answerer, Recollection
from .results import Fetched, Got, Mode, Page
from .trust import DEFAULT_MIN_TRUST, Trust, check_min_trust, trust_rank

__all__ = ["MAX_INSTRUCTIONS_CHARS", "MAX_QUERY_CHARS", "ReadVerbs"]

MAX_QUERY_CHARS: Final = 2_000
MAX_INSTRUCTIONS_CHARS: Final = 4_000


class ReadVerbs:
    """The reads of an :class:`~memseal.engine.engine.Engine` (see the module docstring)."""

    _reader: Snapshots
    _sql: EngineSql
    _keyring: Keyring
    _vectors: VectorCache | None
    _zone: tzinfo
    _currency: bool
    _answerer: Answerer

    @property
    def modes(self) -> tuple[Mode, ...]:
        """The fetch modes served: exact always; semantic and hybrid with an embedder."""
        if self._vectors is None:
            return ("exact",)
        return ("exact", "semantic", "hybrid")

    def _mode(self, mode: object) -> Mode:
        if mode is None:
            return "hybrid" if "hybrid" in self.modes else "exact"
        if mode not in ("exact", "semantic", "hybrid"):
            raise InvalidRequest("`mode` is not one of exact, semantic, hybrid")
        if mode not in self.modes:
            raise Unsupported(
                f"`mode` {mode} needs an embedder; this engine serves exact search only"
            )
        chosen: Mode = mode
        return chosen

    async def get(
        self,
        ids: Sequence[str],
        *,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
    ) -> Got:
        """Items by id, in the order asked; unknown or out-of-reach ids come back as missing."""
        wanted = check_ids(ids)
        floor = trust_rank(check_min_trust(min_trust))
        scope = check_reach(reach)
        marks = ",".join("?" * len(wanted))
        found = await self._reader.rows(
            f"SELECT {self._sql.item_select}, i.trust_rank FROM engine_items i "
            f"WHERE i.id IN ({marks})",
            wanted,
        )
        return got_from_rows(found, wanted, scope, floor, self._keyring)

    async def list(
        self,
        *,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
    ) -> Page:
        """Items newest first; the cursor pages on to older items, unmoved by new writes."""
        picked = check_filter(filter)
        floor = check_min_trust(min_trust)
        count = check_limit(limit)
        scope = check_reach(reach)
        query = self._keyring.query_ref("list", picked, scope, floor)
        before = 2**62
        if cursor is not None:
            before = decode_cursor(cursor, "list", query).seq
        where, params = scope_sql(scope, floor, picked)
        found = await self._reader.rows(
            f"SELECT {self._sql.item_select} FROM engine_items i WHERE {where} AND i.seq < ? "
            "ORDER BY i.seq DESC LIMIT ?",
            [*params, before, count + 1],
        )
        items = rows_to_items(found[:count], self._keyring)
        next_cursor = None
        if len(found) > count:
            next_cursor = encode_cursor(Cursor(v=1, op="list", query=query, seq=items[-1].seq))
        return Page(items=tuple(items), next_cursor=next_cursor)

    async def fetch(
        self,
        query: str,
        *,
        mode: Mode | None = None,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
        refers_to: DateRange | dict[str, object] | None = None,
        zone: tzinfo | None = None,
    ) -> Fetched:
        """Ranked hits for ``query``: ``exact`` (BM25), ``semantic`` or ``hybrid`` (RRF).

        With no mode, hybrid when served, else exact. ``refers_to`` moves
        the items about those days (read in ``zone``, the host's) first and
        drops none. The cursor keeps later pages to the items the first
        page could see.
        """
        text = clean_text(query, "query", MAX_QUERY_CHARS)
        chosen = self._mode(mode)
        picked = check_filter(filter)
        floor = check_min_trust(min_trust)
        count = check_limit(limit)
        days = check_date_range(refers_to)
        scope = check_reach(reach)
        where_zone = check_zone(zone, self._zone)
        key = self._keyring.query_ref(
            "fetch", text, chosen, picked, scope, floor, days, str(where_zone)
        )
        snapshot: int | None = None
        offset = 0
        if cursor is not None:
            position = decode_cursor(cursor, "fetch", key)
            snapshot, offset = position.seq, position.offset
        where, params = scope_sql(scope, floor, picked)
        asked = Asked(
            text=text,
            mode=chosen,
            where=where,
            params=params,
            snapshot=snapshot,
            offset=offset,
            count=count,
            days=days,
            zone=where_zone,
            rule=in_force(self._currency),
        )
        seen, total, hits = await rank_page(
            self._reader, self._vectors, self._sql, self._keyring, asked
        )
        next_cursor = None
        if total > offset + count:
            next_cursor = encode_cursor(
                Cursor(v=1, op="fetch", query=key, seq=seen, offset=offset + count)
            )
        return Fetched(hits=tuple(hits), mode=chosen, min_trust=floor, next_cursor=next_cursor)

    async def explore(
        self,
        facet: str,
        *,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
        limit: int = DEFAULT_LIMIT,
    ) -> Exploration:
        """How the items in scope spread over ``facet`` (see :mod:`memseal.engine.explore`)."""
        name = check_facet(facet)
        picked = check_filter(filter)
        floor = check_min_trust(min_trust)
        count = check_limit(limit)
        where, params = scope_sql(check_reach(reach), floor, picked)
        return await self._reader.run(lambda execute: explore(execute, name, where, params, count))

    async def recall(
        self,
        question: str,
        *,
        filter: Filter | dict[str, object] | None = None,
        reach: Reach | None = None,
        min_trust: Trust = DEFAULT_MIN_TRUST,
        limit: int = DEFAULT_LIMIT,
        instructions: str | None = None,
        refers_to: DateRange | dict[str, object] | None = None,
        zone: tzinfo | None = None,
        answerer: Answerer | None = None,
    ) -> Recollection:
        """``{answer, citations}`` for ``question`` from the best hits, by the answerer."""
        told = None
        if instructions is not None:
            told = clean_text(instructions, "instructions", MAX_INSTRUCTIONS_CHARS) or None
        if answerer is not None and not isinstance(answerer, Answerer):
            raise InvalidRequest("`answerer` must have an async answer(question, hits, ...)")
        fetched = await self.fetch(
            question,
            filter=filter,
            reach=reach,
            min_trust=min_trust,
            limit=limit,
            refers_to=refers_to,
            zone=zone,
        )
        chosen = answerer if answerer is not None else self._answerer
        result = await chosen.answer(question, fetched.hits, instructions=told)
        if not isinstance(result, Recollection):
            raise StorageError(f"answerer {type(chosen).__name__} did not return a Recollection")
        drawn = tuple(dict.fromkeys(hit.item.id for hit in fetched.hits))
        kept = tuple(c for c in result.citations if c.id in drawn)
        return Recollection(answer=result.answer, citations=kept, drawn_from=drawn)
