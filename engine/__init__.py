"""memseal.engine: the memory model over the signed ledger.

Items are stored, re-trusted and forgotten as signed ledger entries; the
queryable memory is a set of SQLite projections rebuilt from the log. See
docs/engine.md. The public names are re-exported here; modules whose names
start with ``_`` are internal.
"""

from ._ann import ANN_MIN
from ._projection import state_hash
from ._ranked_by import SQLITE_RANKED_BELOW, ranked_at, ranked_by, sqlite_ranked_below
from ._rebuild import check_projections
from .embedders import Embedder, HashingEmbedder, default_embedder
from .engine import RANK_CAP, Clock, Engine, Progress
from .events import (
    ENGINE_KINDS,
    Keyring,
    MemoryForgotten,
    MemoryStored,
    StoredPayload,
    TrustChanged,
    TrustPayload,
)
from .explore import FACETS, Bucket, Exploration
from .filters import DateRange, Filter
from .items import (
    ITEM_KINDS,
    LEARNING_KINDS,
    Content,
    Conversation,
    Document,
    Hit,
    Item,
    ItemKind,
    Learning,
    Meta,
    Source,
    Turn,
    Verdict,
)
from .namespaces import Namespace, Reach
from .recall import Answerer, Citation, ExtractiveAnswerer, Recollection
from .results import (
    Fetched,
    Forgotten,
    Got,
    Mode,
    NewItem,
    Page,
    ProjectionCheck,
    RebuildReport,
    Stored,
    TrustChange,
)
from .trust import TRUST_LEVELS, Trust

__all__ = [
    "ANN_MIN",
    "ENGINE_KINDS",
    "FACETS",
    "ITEM_KINDS",
    "LEARNING_KINDS",
    "RANK_CAP",
    "SQLITE_RANKED_BELOW",
    "TRUST_LEVELS",
    "Answerer",
    "Bucket",
    "Citation",
    "Clock",
    "Content",
    "Conversation",
    "DateRange",
    "Document",
    "Embedder",
    "Engine",
    "Exploration",
    "ExtractiveAnswerer",
    "Fetched",
    "Filter",
    "Forgotten",
    "Got",
    "HashingEmbedder",
    "Hit",
    "Item",
    "ItemKind",
    "Keyring",
    "Learning",
    "MemoryForgotten",
    "MemoryStored",
    "Meta",
    "Mode",
    "Namespace",
    "NewItem",
    "Page",
    "Progress",
    "ProjectionCheck",
    "Reach",
    "RebuildReport",
    "Recollection",
    "Source",
    "Stored",
    "StoredPayload",
    "Trust",
    "TrustChange",
    "TrustChanged",
    "TrustPayload",
    "Turn",
    "Verdict",
    "check_projections",
    "default_embedder",
    "ranked_at",
    "ranked_by",
    "sqlite_ranked_below",
    "state_hash",
]
