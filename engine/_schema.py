"""The engine's tables, created with the ledger's own when the store opens.

Projections (dropped and rebuilt from the log by ``rebuild``):

* ``engine_items``: one row per live item; ``seq`` is the entry that wrote
  it and doubles as the FTS rowid, so the index needs no second copy. The
  ``engine_items_scope`` index covers what a semantic ranking reads of every
  candidate (scope columns, content hash, seq), so it never reads the text.
* ``engine_fts``: FTS5 over items' text, title and tags, external content
  (the text lives once, in ``engine_items``); Porter stemming over unicode61.
* ``engine_facets``: ``(seq, facet, value)`` for the thirteen explore facets;
  the meta filters read it too.
* ``engine_dates``: the date expressions an item's text mentions (refers_to).
* ``engine_verdicts``: each item's signed trust changes.
* ``engine_meta``: the projection's position and running state hash (reset by
  rebuild), its generation (raised by each rebuild, so engines in other
  processes know to set their in-memory vectors aside), and the embedder the
  vector cache holds (kept).

Kept by ``rebuild``:

* ``engine_vectors``: embeddings cached by (embedder id, content hash);
  expensive to make and not bit-identical across CPU types, so never part
  of the state hash; rows go only when the last item with that content is
  forgotten or when the embedder changes.
* ``engine_scrub``: forgets whose scrub (FTS merge, WAL truncation) has not
  finished; an interrupted scrub resumes when the engine next opens.

The DDL is split on ``;`` by the store, so no statement may contain one.

On PostgreSQL (:data:`POSTGRES_DDL`) the tables and columns are the same
with the server's types: BIGINT seqs, DOUBLE PRECISION confidences (a
``real`` would round them, and the state hash with them), BYTEA vectors,
and ``COLLATE "C"`` on every text that is compared or sorted, so ranges,
orderings and ties are bytewise as in SQLite whatever the database's
locale. ``engine_fts`` is a table of ``tsvector`` documents with a GIN
index in place of the FTS5 virtual table (see :mod:`._ranking`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["DDL", "HASHED", "POSTGRES_DDL", "PROJECTION_TABLES", "PROJECTION_VERSION", "ddl_for"]

PROJECTION_VERSION: Final = "1"

DDL: Final = """
CREATE TABLE IF NOT EXISTS engine_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS engine_items (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    trust TEXT NOT NULL,
    trust_rank INTEGER NOT NULL,
    confidence REAL,
    observed_at TEXT NOT NULL,
    stored_at TEXT NOT NULL,
    text TEXT NOT NULL,
    title TEXT,
    tags TEXT NOT NULL,
    meta TEXT NOT NULL,
    detail TEXT NOT NULL,
    content TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS engine_items_namespace ON engine_items (namespace, seq);
CREATE INDEX IF NOT EXISTS engine_items_observed ON engine_items (observed_at);
CREATE INDEX IF NOT EXISTS engine_items_content ON engine_items (content);
CREATE INDEX IF NOT EXISTS engine_items_scope
    ON engine_items (trust_rank, namespace, kind, observed_at, content);
CREATE VIRTUAL TABLE IF NOT EXISTS engine_fts USING fts5(
    text, title, tags,
    content='engine_items', content_rowid='seq',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS engine_facets (
    seq INTEGER NOT NULL,
    facet TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (seq, facet, value)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS engine_facets_value ON engine_facets (facet, value);
CREATE TABLE IF NOT EXISTS engine_dates (
    seq INTEGER NOT NULL,
    ref TEXT NOT NULL,
    PRIMARY KEY (seq, ref)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS engine_verdicts (
    seq INTEGER PRIMARY KEY,
    item INTEGER NOT NULL,
    trust TEXT NOT NULL,
    previous TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS engine_verdicts_item ON engine_verdicts (item);
CREATE TABLE IF NOT EXISTS engine_vectors (
    embedder TEXT NOT NULL,
    content TEXT NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (embedder, content)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS engine_scrub (seq INTEGER PRIMARY KEY)
"""

POSTGRES_DDL: Final = """
CREATE TABLE IF NOT EXISTS engine_meta (key TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS engine_items (
    seq BIGINT PRIMARY KEY,
    id TEXT COLLATE "C" NOT NULL UNIQUE,
    kind TEXT COLLATE "C" NOT NULL,
    namespace TEXT COLLATE "C" NOT NULL,
    trust TEXT COLLATE "C" NOT NULL,
    trust_rank INTEGER NOT NULL,
    confidence DOUBLE PRECISION,
    observed_at TEXT COLLATE "C" NOT NULL,
    stored_at TEXT COLLATE "C" NOT NULL,
    text TEXT NOT NULL,
    title TEXT,
    tags TEXT NOT NULL,
    meta TEXT NOT NULL,
    detail TEXT NOT NULL,
    content TEXT COLLATE "C" NOT NULL
);
CREATE INDEX IF NOT EXISTS engine_items_namespace ON engine_items (namespace, seq);
CREATE INDEX IF NOT EXISTS engine_items_observed ON engine_items (observed_at);
CREATE INDEX IF NOT EXISTS engine_items_content ON engine_items (content);
CREATE INDEX IF NOT EXISTS engine_items_scope
    ON engine_items (trust_rank, namespace, kind, observed_at, content);
CREATE TABLE IF NOT EXISTS engine_fts (seq BIGINT PRIMARY KEY, doc tsvector NOT NULL);
CREATE INDEX IF NOT EXISTS engine_fts_doc ON engine_fts USING gin (doc);
CREATE TABLE IF NOT EXISTS engine_facets (
    seq BIGINT NOT NULL,
    facet TEXT COLLATE "C" NOT NULL,
    value TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (seq, facet, value)
);
CREATE INDEX IF NOT EXISTS engine_facets_value ON engine_facets (facet, value);
CREATE TABLE IF NOT EXISTS engine_dates (
    seq BIGINT NOT NULL,
    ref TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (seq, ref)
);
CREATE TABLE IF NOT EXISTS engine_verdicts (
    seq BIGINT PRIMARY KEY,
    item BIGINT NOT NULL,
    trust TEXT NOT NULL,
    previous TEXT NOT NULL,
    actor TEXT NOT NULL,
    reason TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS engine_verdicts_item ON engine_verdicts (item);
CREATE TABLE IF NOT EXISTS engine_vectors (
    embedder TEXT COLLATE "C" NOT NULL,
    content TEXT COLLATE "C" NOT NULL,
    vec BYTEA NOT NULL,
    PRIMARY KEY (embedder, content)
);
CREATE TABLE IF NOT EXISTS engine_scrub (seq BIGINT PRIMARY KEY)
"""


def ddl_for(dialect: str) -> str:
    """The engine's tables in a store's dialect."""
    if dialect == "sqlite":
        return DDL
    if dialect == "postgresql":
        return POSTGRES_DDL
    raise ValueError(f"no engine tables for the {dialect!r} dialect")


#: Every projection table in the state hash, with its columns in hashing order.
HASHED: Final[dict[str, tuple[str, ...]]] = {
    "engine_items": (
        "seq",
        "id",
        "kind",
        "namespace",
        "trust",
        "trust_rank",
        "confidence",
        "observed_at",
        "stored_at",
        "text",
        "title",
        "tags",
        "meta",
        "detail",
        "content",
    ),
    "engine_facets": ("seq", "facet", "value"),
    "engine_dates": ("seq", "ref"),
    "engine_verdicts": ("seq", "item", "trust", "previous", "actor", "reason", "at"),
}

#: What rebuild empties (the FTS index is emptied with its own 'delete-all', and in
#: engine_meta only the position and the running hash are reset).
PROJECTION_TABLES: Final = tuple(HASHED)
