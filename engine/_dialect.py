"""What the engine says differently to SQLite and to PostgreSQL.

Most of the engine's SQL is the same text for both stores (``?``
placeholders, ``ON CONFLICT`` upserts, ``COLLATE "C"`` columns on
PostgreSQL making comparisons bytewise as in SQLite). What differs is
gathered here, one :class:`EngineSql` per dialect:

* the full-text index: an FTS5 external-content table in SQLite, a table of
  weighted ``tsvector`` documents in PostgreSQL. The PostgreSQL documents
  are made of the words FTS5 would index: split on what is not a letter or
  digit, casefolded, diacritics removed, Porter-stemmed (by the Snowball
  project's Porter stemmer, the algorithm FTS5's ``porter`` tokenizer
  implements), and written by memseal as a ``tsvector`` literal with its
  own positions and weights (:mod:`._tsrank`), so that no server-side text
  parser decides where a word starts and a proof can rank them again.
  PostgreSQL's own ``english`` configuration would stem with Porter2 and
  drop stopwords, so "the" could never be found and some words would stem
  apart from SQLite's;
* the verdicts gathered as JSON beside each item row.

The scrub after a forget differs too (FTS merge and WAL truncation in
SQLite, ``VACUUM`` in PostgreSQL); :mod:`._scrub` holds both.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, Final

import snowballstemmer

from ._tsrank import Document, document, literal

__all__ = [
    "POSTGRES",
    "SQLITE",
    "EngineSql",
    "FtsAdd",
    "FtsRow",
    "FtsWords",
    "fold",
    "for_dialect",
    "index_words",
    "postgres_document",
    "stem",
]

Execute = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
FtsWords = str
"""An item's PostgreSQL document, as the ``tsvector`` literal memseal writes (:mod:`._tsrank`)."""
FtsAdd = Callable[[Execute, int, str, str | None, str, FtsWords | None], None]
"""Index an item: (execute, seq, text, title, tags, its words if computed before)."""
FtsRow = Callable[[int, str, str | None, str, FtsWords | None], tuple[str, tuple[Any, ...]]]
"""What :data:`FtsAdd` inserts, as ``(table (columns), row)`` for a writer to hold for its
group's one INSERT a table (:meth:`ledger.store.WriteTxn.defer`)."""

_ITEM_COLUMNS: Final = (
    "i.seq, i.id, i.kind, i.namespace, i.trust, i.confidence, i.observed_at, i.stored_at, "
    "i.text, i.title, i.tags, i.meta, i.detail, i.content, "
)


def fold(text: str) -> str:
    """``text`` without diacritics (é to e), as the SQLite index's tokenizer sees it."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


_TOKEN: Final = re.compile(r"[^\W_]+")
_stemmers = threading.local()  # a Snowball stemmer keeps state while it stems


#: Words longer than this are stemmed each time: they rarely repeat, and a cache bounded
#: by its count would otherwise hold up to that many words of a document's whole length.
_CACHED_WORD = 64


def stem(word: str) -> str:
    """Snowball's Porter stem of one folded, lowercase word."""
    return _cached_stem(word) if len(word) <= _CACHED_WORD else _stem(word)


def _stem(word: str) -> str:
    stemmer = getattr(_stemmers, "porter", None)
    if stemmer is None:
        stemmer = _stemmers.porter = snowballstemmer.stemmer("porter")
    stemmed: str = stemmer.stemWord(word)
    return stemmed


# Stemming is most of a document's cost, and words repeat across items: each is stemmed
# once per process (the bounds keep a long-running server's cache small: 65,536 words of
# at most 64 characters).
_cached_stem = functools.lru_cache(maxsize=1 << 16)(_stem)


def index_words(text: str) -> str:
    """An item's words as PostgreSQL documents hold them, space-joined: the tokens of
    FTS5's ``unicode61 remove_diacritics 2``, stemmed by Snowball's Porter.

    FTS5's own porter stems some words otherwise (about 2% of English words: "0s",
    "-logi", tokens under 3 or over 64 characters), so these are not always the words
    the SQLite index holds; each store's ranking is its own, and a proof re-ranks as the
    store that ranked the read did.
    """
    folded = text.casefold()
    if not folded.isascii():  # NFKD leaves ASCII as it is, and it has no diacritics
        folded = fold(folded)
    return " ".join([stem(word) for word in _TOKEN.findall(folded)])


class EngineSql:
    """One dialect's statements (see the module docstring)."""

    def __init__(
        self,
        name: str,
        item_select: str,
        fts_add: FtsAdd,
        fts_remove: Callable[[Execute, int, str, str | None, str], None],
        fts_clear: str,
        fts_words: Callable[[str, str | None, str], FtsWords] | None = None,
        ranker: str | None = None,
        fts_row: FtsRow | None = None,
    ) -> None:
        self.name = name
        #: How exact reads rank (:func:`._ranking.exact`): ``fts5`` (SQLite's BM25),
        #: ``ts_rank`` (PostgreSQL's, in the database) or ``ts_rank_python`` (PostgreSQL's,
        #: computed here over a SQLite store: how a proof re-derives a PostgreSQL read).
        self.ranker = ranker or ("ts_rank" if name == "postgresql" else "fts5")
        #: The columns ``rows_to_items`` reads from ``engine_items AS i``, the item's
        #: verdicts (oldest first) gathered as JSON in the last one.
        self.item_select = item_select
        self.fts_add = fts_add
        self.fts_remove = fts_remove
        self.fts_clear = fts_clear
        #: The index words fts_add would compute, for a store path to compute them
        #: before the writer (stemming was a quarter of PostgreSQL's writer time);
        #: None when the database indexes the text itself (SQLite's FTS5).
        self.fts_words = fts_words
        #: The row :attr:`fts_add` inserts, for a writer holding rows; None to call it.
        self.fts_row = fts_row


def _sqlite_add(
    execute: Execute, seq: int, text: str, title: str | None, tags: str, words: FtsWords | None
) -> None:
    execute(
        "INSERT INTO engine_fts (rowid, text, title, tags) VALUES (?, ?, ?, ?)",
        (seq, text, title, tags),
    )


def _sqlite_row(
    seq: int, text: str, title: str | None, tags: str, words: FtsWords | None
) -> tuple[str, tuple[Any, ...]]:
    return ("engine_fts (rowid, text, title, tags)", (seq, text, title, tags))


def _sqlite_remove(execute: Execute, seq: int, text: str, title: str | None, tags: str) -> None:
    # An external-content FTS5 table forgets a row given the text it indexed.
    execute(
        "INSERT INTO engine_fts (engine_fts, rowid, text, title, tags) "
        "VALUES ('delete', ?, ?, ?, ?)",
        (seq, text, title, tags),
    )


SQLITE: Final = EngineSql(
    "sqlite",
    item_select=_ITEM_COLUMNS
    + "(SELECT json_group_array(json_array(v.seq, v.trust, v.previous, v.actor, v.reason, v.at)) "
    " FROM (SELECT * FROM engine_verdicts WHERE item = i.seq ORDER BY seq) AS v)",
    fts_add=_sqlite_add,
    fts_remove=_sqlite_remove,
    fts_clear="INSERT INTO engine_fts (engine_fts) VALUES ('delete-all')",
    fts_row=_sqlite_row,
)


def postgres_document(text: str, title: str | None, tags: str) -> Document:
    """An item's PostgreSQL document: text, title and tags as weights D, A and B."""
    return document(index_words(text), index_words(title or ""), index_words(tags))


def _postgres_words(text: str, title: str | None, tags: str) -> FtsWords:
    return literal(postgres_document(text, title, tags))


def _postgres_add(
    execute: Execute, seq: int, text: str, title: str | None, tags: str, words: FtsWords | None
) -> None:
    if words is None:
        words = _postgres_words(text, title, tags)
    execute("INSERT INTO engine_fts (seq, doc) VALUES (?, ?::tsvector)", (seq, words))


def _postgres_row(
    seq: int, text: str, title: str | None, tags: str, words: FtsWords | None
) -> tuple[str, tuple[Any, ...]]:
    # No ``::tsvector`` here: in a multi-row INSERT's VALUES PostgreSQL reads an untyped
    # parameter (psycopg sends text so) as the column's type, as the cast does.
    if words is None:
        words = _postgres_words(text, title, tags)
    return ("engine_fts (seq, doc)", (seq, words))


def _postgres_remove(execute: Execute, seq: int, text: str, title: str | None, tags: str) -> None:
    execute("DELETE FROM engine_fts WHERE seq = ?", (seq,))


POSTGRES: Final = EngineSql(
    "postgresql",
    item_select=_ITEM_COLUMNS
    + "(SELECT coalesce(json_agg(json_build_array(v.seq, v.trust, v.previous, v.actor, "
    "v.reason, v.at) ORDER BY v.seq), '[]')::text FROM engine_verdicts v WHERE v.item = i.seq)",
    fts_add=_postgres_add,
    fts_remove=_postgres_remove,
    fts_clear="DELETE FROM engine_fts",
    fts_words=_postgres_words,
    fts_row=_postgres_row,
)


#: SQLite's statements, with exact reads ranked as PostgreSQL ranks them.
SQLITE_RANKED_AS_POSTGRES: Final = EngineSql(
    "sqlite",
    item_select=SQLITE.item_select,
    fts_add=_sqlite_add,
    fts_remove=_sqlite_remove,
    fts_clear=SQLITE.fts_clear,
    ranker="ts_rank_python",
    fts_row=_sqlite_row,
)


def for_dialect(name: str, *, ranks_as: str | None = None) -> EngineSql:
    """The statements of the store dialect ``name``; ValueError for any other.

    ``ranks_as="postgresql"`` on a SQLite store ranks exact reads as PostgreSQL does.
    """
    if ranks_as not in (None, name) and (name, ranks_as) != ("sqlite", "postgresql"):
        raise ValueError(f"the engine cannot rank as {ranks_as!r} on a {name} store")
    if name == "sqlite" and ranks_as == "postgresql":
        return SQLITE_RANKED_AS_POSTGRES
    if name == "sqlite":
        return SQLITE
    if name == "postgresql":
        return POSTGRES
    raise ValueError(f"the engine does not speak the {name!r} dialect")
