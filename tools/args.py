"""Strict tool arguments: one closed msgspec Struct per tool.

Every type here is the single source of a tool's arguments: its JSON
Schema is generated from it (:mod:`memseal.tools.specs`), and a model's
arguments are decoded into it by msgspec (strict types, unknown fields
forbidden; :mod:`memseal.tools.decode`), never by calling a constructor.
Optional arguments are ``UNSET`` when absent, so a schema lists them as
optional rather than nullable, and the arguments as sent stay apart from
the defaults. The limits are the seed's (``limit`` 1 to 50, default 10;
1 to 200 ids) and the engine's (text lengths, tags, turns).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from memseal.engine._paging import DEFAULT_LIMIT, MAX_LIMIT
from memseal.engine.engine import MAX_INSTRUCTIONS_CHARS, MAX_QUERY_CHARS
from memseal.engine.items import (
    MAX_DOCUMENT_CHARS,
    MAX_EVIDENCE_CHARS,
    MAX_IDS,
    MAX_LEARNING_CHARS,
    MAX_META_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    MAX_TURNS,
    ItemKind,
    LearningKind,
)

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_IDS",
    "MAX_INSTRUCTIONS_CHARS",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "ExploreArgs",
    "Facet",
    "FetchArgs",
    "ForgetArgs",
    "GetArgs",
    "ListArgs",
    "ModelFilter",
    "ReadTrust",
    "RecallArgs",
    "RefersTo",
    "StoreArgs",
    "StoreConversation",
    "StoreDocument",
    "StoreLearning",
    "StoreTurn",
    "arguments_type",
]

# The batch, page and text sizes the engine enforces are the engine's (imported above): the
# schema a model sees states exactly what the engine accepts. These two are the tools' own.
MAX_FILTER_VALUES: Final = 50
MAX_CURSOR_CHARS: Final = 400

ReadTrust = Literal["stale", "unverified", "verified"]
Facet = Literal[
    "kind",
    "source",
    "source_id",
    "workspace",
    "folder",
    "file_path",
    "language",
    "repo",
    "url",
    "thread",
    "agent",
    "tool_call",
    "tag",
]

_STRUCT: Final[dict[str, Any]] = {
    "frozen": True,
    "kw_only": True,
    "forbid_unknown_fields": True,
}

# -- shared pieces ------------------------------------------------------------------------------

MetaText = Annotated[str, Meta(min_length=1, max_length=MAX_META_CHARS)]


class RefersTo(msgspec.Struct, rename={"start": "from", "end": "to"}, **_STRUCT):
    """The local days a question is about (inclusive)."""

    start: Annotated[
        str,
        Meta(
            pattern=r"^\d{4}-\d{2}-\d{2}$",
            description="First day, a local date like 2026-11-30.",
            extra_json_schema={"format": "date"},
        ),
    ]
    end: Annotated[
        str,
        Meta(
            pattern=r"^\d{4}-\d{2}-\d{2}$",
            description="Last day (inclusive), a local date like 2026-11-30.",
            extra_json_schema={"format": "date"},
        ),
    ]


class ModelFilter(msgspec.Struct, **_STRUCT):
    """Narrows what a tool sees; every field optional, all given fields must match."""

    kinds: (
        Annotated[
            list[ItemKind],
            Meta(
                min_length=1,
                max_length=MAX_FILTER_VALUES,
                description="Only these kinds of memory.",
            ),
        ]
        | UnsetType
    ) = UNSET
    sources: (
        Annotated[
            list[Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_.-]{0,31}$")]],
            Meta(
                min_length=1,
                max_length=MAX_FILTER_VALUES,
                description="Only memory from these source kinds, such as agent, user or document.",
            ),
        ]
        | UnsetType
    ) = UNSET
    tags_any: (
        Annotated[
            list[Annotated[str, Meta(min_length=1, max_length=MAX_TAG_CHARS)]],
            Meta(
                min_length=1,
                max_length=MAX_FILTER_VALUES,
                description="Only memory carrying at least one of these tags.",
            ),
        ]
        | UnsetType
    ) = UNSET
    workspace: (
        Annotated[MetaText, Meta(description="Only memory from this workspace.")] | UnsetType
    ) = UNSET
    folder: Annotated[MetaText, Meta(description="Only memory from this folder.")] | UnsetType = (
        UNSET
    )
    file_path: (
        Annotated[MetaText, Meta(description="Only memory about this file path.")] | UnsetType
    ) = UNSET
    repo: (
        Annotated[MetaText, Meta(description="Only memory about this repository.")] | UnsetType
    ) = UNSET
    url: Annotated[MetaText, Meta(description="Only memory from this URL.")] | UnsetType = UNSET
    thread_id: (
        Annotated[MetaText, Meta(description="Only memory from this conversation thread.")]
        | UnsetType
    ) = UNSET
    agent_id: (
        Annotated[MetaText, Meta(description="Only memory recorded by this agent.")] | UnsetType
    ) = UNSET
    observed_after: (
        Annotated[
            str,
            Meta(
                max_length=40,
                description="Only memory observed at or after this time (RFC 3339, "
                "like 2026-11-30T09:00:00Z).",
                extra_json_schema={"format": "date-time"},
            ),
        ]
        | UnsetType
    ) = UNSET
    observed_before: (
        Annotated[
            str,
            Meta(
                max_length=40,
                description="Only memory observed before this time (RFC 3339).",
                extra_json_schema={"format": "date-time"},
            ),
        ]
        | UnsetType
    ) = UNSET


FilterArg = Annotated[
    ModelFilter,
    Meta(description="Narrows the memory considered; every field optional."),
]
LimitArg = Annotated[
    int,
    Meta(
        ge=1,
        le=MAX_LIMIT,
        description=f"How many results, 1 to {MAX_LIMIT}.",
        extra_json_schema={"default": DEFAULT_LIMIT},
    ),
]
CursorArg = Annotated[
    str,
    Meta(
        pattern=r"^[A-Za-z0-9_-]{1,400}$",
        max_length=MAX_CURSOR_CHARS,
        description="A next_cursor from an earlier result, to continue it; passed back unchanged.",
    ),
]
MinTrustArg = Annotated[
    ReadTrust,
    Meta(
        description="The lowest trust to return: stale, unverified or verified. "
        "The host sets the default and the lowest allowed; rejected memory is never returned."
    ),
]
RefersToArg = Annotated[
    RefersTo,
    Meta(
        description="The days the question is about, as local dates: memory about them "
        "ranks first and nothing is dropped."
    ),
]
IdsArg = Annotated[
    list[Annotated[str, Meta(pattern=r"^[\x21-\x7e]{1,128}$")]],
    Meta(min_length=1, max_length=MAX_IDS, description=f"Memory ids, 1 to {MAX_IDS}."),
]

# -- the read tools -----------------------------------------------------------------------------


class RecallArgs(msgspec.Struct, **_STRUCT):
    """The strict arguments of ``memory_recall``: a question answered from cited memory."""

    question: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=MAX_QUERY_CHARS,
            description="The question to answer from memory.",
        ),
    ]
    filter: FilterArg | UnsetType = UNSET
    limit: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_LIMIT,
                description=f"How many memories to draw the answer from, 1 to {MAX_LIMIT}.",
                extra_json_schema={"default": DEFAULT_LIMIT},
            ),
        ]
        | UnsetType
    ) = UNSET
    instructions: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=MAX_INSTRUCTIONS_CHARS,
                description="How to answer (passed to the answerer; the default one quotes "
                "the best passages).",
            ),
        ]
        | UnsetType
    ) = UNSET
    refers_to: RefersToArg | UnsetType = UNSET
    min_trust: MinTrustArg | UnsetType = UNSET


ModeArg = Annotated[
    Literal["exact", "semantic", "hybrid"],
    Meta(
        description="How to search: exact (words), semantic (meaning) or hybrid (both). "
        "Default: hybrid where served."
    ),
]


class FetchArgs(msgspec.Struct, **_STRUCT):
    """The strict arguments of ``memory_fetch``: a search query, its mode and filters."""

    query: Annotated[
        str,
        Meta(min_length=1, max_length=MAX_QUERY_CHARS, description="What to search memory for."),
    ]
    mode: ModeArg | UnsetType = UNSET
    filter: FilterArg | UnsetType = UNSET
    limit: LimitArg | UnsetType = UNSET
    cursor: CursorArg | UnsetType = UNSET
    refers_to: RefersToArg | UnsetType = UNSET
    min_trust: MinTrustArg | UnsetType = UNSET


class ListArgs(msgspec.Struct, **_STRUCT):
    """The strict arguments of ``memory_list``: a filter and a page of newest items."""

    filter: FilterArg | UnsetType = UNSET
    limit: LimitArg | UnsetType = UNSET
    cursor: CursorArg | UnsetType = UNSET
    min_trust: MinTrustArg | UnsetType = UNSET


class GetArgs(msgspec.Struct, **_STRUCT):
    """The strict arguments of ``memory_get``: items by id."""

    ids: IdsArg
    min_trust: MinTrustArg | UnsetType = UNSET


class ExploreArgs(msgspec.Struct, **_STRUCT):
    """The strict arguments of ``memory_explore``: counts per value of one facet."""

    facet: Annotated[
        Facet,
        Meta(description="Which property to count the memory by."),
    ]
    filter: FilterArg | UnsetType = UNSET
    limit: (
        Annotated[
            int,
            Meta(
                ge=1,
                le=MAX_LIMIT,
                description=f"How many values to list, 1 to {MAX_LIMIT}, most common first.",
                extra_json_schema={"default": DEFAULT_LIMIT},
            ),
        ]
        | UnsetType
    ) = UNSET
    min_trust: MinTrustArg | UnsetType = UNSET


# -- the write tools ----------------------------------------------------------------------------


class StoreLearning(msgspec.Struct, **_STRUCT):
    """A short thing learned."""

    text: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=MAX_LEARNING_CHARS,
            description="What was learned, in one or a few sentences.",
        ),
    ]
    learning_kind: (
        Annotated[
            LearningKind,
            Meta(
                description="What sort of learning it is.",
                extra_json_schema={"default": "fact"},
            ),
        ]
        | UnsetType
    ) = UNSET
    confidence: (
        Annotated[
            float,
            Meta(
                ge=0,
                le=1,
                description="How sure, from 0 to 1.",
                extra_json_schema={"default": 0.8},
            ),
        ]
        | UnsetType
    ) = UNSET
    evidence: (
        Annotated[
            str,
            Meta(
                min_length=1,
                max_length=MAX_EVIDENCE_CHARS,
                description="What it was learned from.",
            ),
        ]
        | UnsetType
    ) = UNSET


class StoreDocument(msgspec.Struct, **_STRUCT):
    """A document kept whole."""

    text: Annotated[
        str,
        Meta(min_length=1, max_length=MAX_DOCUMENT_CHARS, description="The document's text."),
    ]
    title: (
        Annotated[str, Meta(max_length=MAX_TITLE_CHARS, description="The document's title.")]
        | UnsetType
    ) = UNSET


class StoreTurn(msgspec.Struct, **_STRUCT):
    """One turn of a conversation passed to ``memory_store``."""

    role: Annotated[
        str,
        Meta(
            pattern=r"^[a-z][a-z0-9_-]{0,31}$",
            description="Who spoke: a lowercase word like user or assistant.",
        ),
    ]
    text: Annotated[
        str,
        Meta(min_length=1, max_length=MAX_LEARNING_CHARS, description="What they said."),
    ]


class StoreConversation(msgspec.Struct, **_STRUCT):
    """A conversation kept as its turns."""

    turns: Annotated[
        list[StoreTurn],
        Meta(
            min_length=1,
            max_length=MAX_TURNS,
            description=f"The turns in order, 1 to {MAX_TURNS}.",
        ),
    ]


class StoreArgs(msgspec.Struct, **_STRUCT):
    """The strict arguments of ``memory_store``: a learning, document or conversation, tagged."""

    learning: (
        Annotated[
            StoreLearning,
            Meta(description="A short thing learned: a fact, lesson, decision, goal and so on."),
        ]
        | UnsetType
    ) = UNSET
    document: (
        Annotated[StoreDocument, Meta(description="A document to keep whole.")] | UnsetType
    ) = UNSET
    conversation: (
        Annotated[StoreConversation, Meta(description="A conversation to keep.")] | UnsetType
    ) = UNSET
    tags: (
        Annotated[
            list[Annotated[str, Meta(min_length=1, max_length=MAX_TAG_CHARS)]],
            Meta(max_length=MAX_TAGS, description=f"Tags to find it by, at most {MAX_TAGS}."),
        ]
        | UnsetType
    ) = UNSET


class ForgetArgs(msgspec.Struct, **_STRUCT):
    """The strict arguments of ``memory_forget``: the items to erase, by id or filter."""

    ids: (
        Annotated[
            list[Annotated[str, Meta(pattern=r"^[\x21-\x7e]{1,128}$")]],
            Meta(
                min_length=1,
                max_length=MAX_IDS,
                description=f"The ids of the memories to forget, 1 to {MAX_IDS}.",
            ),
        ]
        | UnsetType
    ) = UNSET
    filter: (
        Annotated[
            ModelFilter,
            Meta(
                description="Forget every memory matching this filter; it must set at least "
                "one field.",
                extra_json_schema={"minProperties": 1},
            ),
        ]
        | UnsetType
    ) = UNSET


_STATIC: Final[dict[str, type[msgspec.Struct]]] = {
    "memory_recall": RecallArgs,
    "memory_fetch": FetchArgs,
    "memory_list": ListArgs,
    "memory_get": GetArgs,
    "memory_explore": ExploreArgs,
    "memory_store": StoreArgs,
    "memory_forget": ForgetArgs,
}


@cache
def _fetch_type(modes: tuple[str, ...]) -> type[FetchArgs]:
    """memory_fetch's arguments with ``mode`` listing exactly ``modes``."""
    if modes == ("exact", "semantic", "hybrid"):
        return FetchArgs
    default = "hybrid" if "hybrid" in modes else modes[0]
    mode = Annotated[
        Literal[modes],  # type: ignore[valid-type]
        Meta(
            description=f"How to search: {', '.join(modes)}. Default: {default}.",
        ),
    ]
    made = msgspec.defstruct(
        f"FetchArgs_{'_'.join(modes)}",
        [("mode", mode | UnsetType, UNSET)],
        bases=(FetchArgs,),
        module=__name__,
        **_STRUCT,
    )
    return made  # type: ignore[return-value]


def arguments_type(name: str, modes: Sequence[str] = ("exact", "semantic", "hybrid")) -> type[Any]:
    """The arguments type of tool ``name`` (memory_fetch's ``mode`` lists ``modes``)."""
    if name == "memory_fetch":
        return _fetch_type(tuple(modes))
    return _STATIC[name]
