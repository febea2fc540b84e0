"""The item model: what a memory is, what a caller stores, what a read returns.

An item is one of three things a caller stores:

* a **learning** (:class:`Learning`): a short text of kind ``fact``,
  ``lesson``, ``decision``, ``goal``, ``playbook``, ``artifact``,
  ``scratch`` or ``context_summary``, with a ``confidence`` (default 0.8)
  and optional ``evidence``;
* a **document** (:class:`Document`): a text with an optional title;
* a **conversation** (:class:`Conversation`): turns of ``{role, text}``.

Every item carries metadata (:class:`Meta`: source, file_path, url,
thread_id, agent_id, workspace, folder, repo, language, tool_call), tags,
the time it was observed, its trust and its namespace. The structure (id,
kind, namespace, observed time, confidence, trust) goes into a ledger
entry's signed body; everything a person typed (text, title, turns,
evidence, tags, metadata) into its redactable payload.

The request structs validate on their own: :func:`parse_content`,
:func:`check_tags` and :func:`check_meta` turn anything from outside
(structs, or the plain JSON objects a tool call carries) into clean,
NFC-normalised values, raising :class:`InvalidRequest` that names the field.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Final, Literal, get_args

import msgspec

from memseal.ledger.errors import InvalidRequest

from ._convert import convert
from .trust import Trust

__all__ = [
    "ITEM_KINDS",
    "LEARNING_KINDS",
    "MAX_IDS",
    "MAX_TAGS",
    "META_FIELDS",
    "Content",
    "Conversation",
    "Document",
    "Hit",
    "Item",
    "ItemKind",
    "Learning",
    "LearningKind",
    "Meta",
    "Source",
    "Turn",
    "Verdict",
    "check_ids",
    "check_kind",
    "check_meta",
    "check_tags",
    "clean_text",
    "content_kind",
    "content_text",
    "parse_content",
]

LearningKind = Literal[
    "fact", "lesson", "decision", "goal", "playbook", "artifact", "scratch", "context_summary"
]
ItemKind = Literal[
    "fact",
    "lesson",
    "decision",
    "goal",
    "playbook",
    "artifact",
    "scratch",
    "context_summary",
    "document",
    "conversation",
]
LEARNING_KINDS: Final[tuple[str, ...]] = get_args(LearningKind)
ITEM_KINDS: Final[tuple[str, ...]] = get_args(ItemKind)

MAX_LEARNING_CHARS: Final = 16_000
MAX_EVIDENCE_CHARS: Final = 4_000
# A ledger payload is at most 1 MiB of JSON; these leave room for escapes and metadata.
MAX_DOCUMENT_CHARS: Final = 400_000
MAX_TITLE_CHARS: Final = 500
MAX_TURNS: Final = 500
MAX_TAGS: Final = 32
MAX_TAG_CHARS: Final = 64
MAX_META_CHARS: Final = 2_048
MAX_IDS: Final = 200
_ID = re.compile(r"[\x21-\x7e]{1,128}")
_ROLE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_TOKEN = re.compile(r"[a-z][a-z0-9_.-]{0,31}")
# C0 controls other than tab, newline and carriage return, and DEL: never typed on purpose,
# and NUL would cut text short in places (FTS tokenisers, C strings).
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class Source(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where an item came from: a kind (``agent``, ``user``, ``document``...) and an id."""

    kind: str
    id: str | None = None


class Meta(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """An item's metadata; every field optional, every field a person may have typed."""

    source: Source | None = None
    file_path: str | None = None
    url: str | None = None
    thread_id: str | None = None
    agent_id: str | None = None
    workspace: str | None = None
    folder: str | None = None
    repo: str | None = None
    language: str | None = None
    tool_call: str | None = None


META_FIELDS: Final[tuple[str, ...]] = tuple(f for f in Meta.__struct_fields__ if f != "source")


class Turn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One message of a conversation: who spoke and what was said."""

    role: str
    text: str


class Learning(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    forbid_unknown_fields=True,
    rename={"kind": "learning_kind"},
):
    """A short learned text; in JSON its ``kind`` is spelled ``learning_kind``, as tools send it."""

    text: str
    kind: str = "fact"
    confidence: float = 0.8
    evidence: str | None = None


class Document(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A longer text stored whole, with an optional title."""

    text: str
    title: str | None = None


class Conversation(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A stored exchange: its turns in order."""

    turns: tuple[Turn, ...]


Content = Learning | Document | Conversation


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """One signed trust change of an item."""

    seq: int
    trust: Trust
    previous: Trust
    actor: str
    reason: str
    at: str


class Item(msgspec.Struct, frozen=True, kw_only=True):
    """A stored memory as reads return it.

    ``seq`` is the ledger entry that wrote it (its provenance, the
    ``ledger_ref`` hosts show), ``stored_at`` that entry's time,
    ``observed_at`` when the memory was observed (UTC, RFC 3339).
    ``sources`` are the item ids it was derived from, ``verdicts`` its
    trust changes, oldest first.
    """

    id: str
    kind: ItemKind
    text: str
    trust: Trust
    namespace: str
    observed_at: str
    seq: int
    stored_at: str
    title: str | None = None
    confidence: float | None = None
    tags: tuple[str, ...] = ()
    meta: Meta = Meta()
    turns: tuple[Turn, ...] | None = None
    evidence: str | None = None
    sources: tuple[str, ...] = ()
    verdicts: tuple[Verdict, ...] = ()


class Hit(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An item and its score in one ranking (rounded to four places).

    Set only by a read following the currency rule (:mod:`.currency`), each omitted
    when unset, so a hit without them encodes as before the rule: ``superseded_by``,
    the id of a newer item about the same subject, ranked above this one;
    ``hypothetical``, the text only supposes ("if I ever moved..."); ``subject``, the
    other person the text is about (None: the speaker, the user).
    """

    item: Item
    score: float
    superseded_by: str | None = None
    hypothetical: bool = False
    subject: str | None = None


def clean_text(value: object, field: str, limit: int, *, required: bool = True) -> str:
    """NFC-normalised, stripped text within ``limit`` characters; never empty if required."""
    if not isinstance(value, str):
        raise InvalidRequest(f"`{field}` must be text, not {type(value).__name__}")
    text = unicodedata.normalize("NFC", value).strip()
    if required and not text:
        raise InvalidRequest(f"`{field}` must not be empty")
    if len(text) > limit:
        raise InvalidRequest(f"`{field}` is {len(text)} characters; the limit is {limit}")
    if _CONTROL.search(text):
        raise InvalidRequest(f"`{field}` contains a control character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRequest(f"`{field}` is not valid UTF-8 text ({exc.reason})") from exc
    return text


def check_ids(value: object, field: str = "ids") -> list[str]:
    """1 to 200 ids, duplicates dropped (first kept); each printable ASCII, at most 128."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidRequest(f"`{field}` must be a list of item ids")
    if not 1 <= len(value) <= MAX_IDS:
        raise InvalidRequest(f"`{field}` must list 1 to {MAX_IDS} ids, not {len(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not _ID.fullmatch(item):
            raise InvalidRequest(f"`{field}[{i}]` is not an item id")
    return list(dict.fromkeys(value))


def check_kind(value: object, field: str, allowed: Sequence[str] = ITEM_KINDS) -> str:
    """``value`` if it is one of ``allowed`` kinds; otherwise InvalidRequest naming ``field``."""
    if not isinstance(value, str) or value not in allowed:
        what = "a learning kind" if allowed is LEARNING_KINDS else "an item kind"
        raise InvalidRequest(f"`{field}` is not {what} ({', '.join(allowed)})")
    return value


def _clean_learning(value: Learning, field: str) -> Learning:
    confidence = value.confidence
    if isinstance(confidence, bool) or not math.isfinite(confidence) or not 0 <= confidence <= 1:
        raise InvalidRequest(f"`{field}.confidence` must be a number from 0 to 1")
    return Learning(
        text=clean_text(value.text, f"{field}.text", MAX_LEARNING_CHARS),
        kind=check_kind(value.kind, f"{field}.learning_kind", LEARNING_KINDS),
        confidence=float(confidence),
        evidence=None
        if value.evidence is None
        else clean_text(value.evidence, f"{field}.evidence", MAX_EVIDENCE_CHARS),
    )


def _clean_document(value: Document, field: str) -> Document:
    title = value.title
    if title is not None:
        title = clean_text(title, f"{field}.title", MAX_TITLE_CHARS, required=False) or None
    return Document(text=clean_text(value.text, f"{field}.text", MAX_DOCUMENT_CHARS), title=title)


def _clean_conversation(value: Conversation, field: str) -> Conversation:
    if not value.turns:
        raise InvalidRequest(f"`{field}.turns` must list at least one turn")
    if len(value.turns) > MAX_TURNS:
        raise InvalidRequest(f"`{field}.turns` lists {len(value.turns)} turns; at most {MAX_TURNS}")
    turns = []
    total = 0
    for i, turn in enumerate(value.turns):
        if not isinstance(turn.role, str) or not _ROLE.fullmatch(turn.role):
            raise InvalidRequest(
                f"`{field}.turns[{i}].role` must be a lowercase word like `user` or `assistant`"
            )
        text = clean_text(turn.text, f"{field}.turns[{i}].text", MAX_LEARNING_CHARS)
        total += len(text)
        turns.append(Turn(role=turn.role, text=text))
    if total > MAX_DOCUMENT_CHARS:
        raise InvalidRequest(
            f"`{field}.turns` hold {total} characters; the limit is {MAX_DOCUMENT_CHARS}"
        )
    return Conversation(turns=tuple(turns))


_ONE_OF = ("learning", "document", "conversation")


def parse_content(value: object, field: str = "content") -> Content:
    """A clean :data:`Content` from a struct or a ``{"learning": {...}}``-style object.

    The object form holds exactly one of ``learning``, ``document`` or
    ``conversation``, as the store tool's arguments do.
    """
    if isinstance(value, Learning):
        return _clean_learning(value, "learning")
    if isinstance(value, Document):
        return _clean_document(value, "document")
    if isinstance(value, Conversation):
        return _clean_conversation(value, "conversation")
    if not isinstance(value, dict):
        raise InvalidRequest(f"`{field}` must be a learning, document or conversation")
    present = [key for key in _ONE_OF if key in value]
    unknown = sorted(str(key) for key in value if key not in _ONE_OF)
    if unknown:
        raise InvalidRequest(f"`{field}`: unknown field `{unknown[0]}`")
    if len(present) != 1:
        raise InvalidRequest(f"`{field}` must hold exactly one of learning, document, conversation")
    key = present[0]
    if key == "learning":
        return _clean_learning(convert(value[key], Learning, key), key)
    if key == "document":
        return _clean_document(convert(value[key], Document, key), key)
    return _clean_conversation(convert(value[key], Conversation, key), key)


def content_kind(content: Content) -> ItemKind:
    """The item kind a piece of content is stored as."""
    if isinstance(content, Learning):
        kind: ItemKind = content.kind  # type: ignore[assignment]  # checked by parse_content
        return kind
    return "document" if isinstance(content, Document) else "conversation"


def content_text(content: Content) -> str:
    """The searchable text of an item (a conversation as ``role: text`` lines)."""
    if isinstance(content, Conversation):
        return "\n".join(f"{turn.role}: {turn.text}" for turn in content.turns)
    return content.text


def check_tags(value: object, field: str = "tags") -> tuple[str, ...]:
    """``value`` as a tuple of checked tags (none when None); errors name ``field``."""
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidRequest(f"`{field}` must be a list of text tags")
    if len(value) > MAX_TAGS:
        raise InvalidRequest(f"`{field}` lists {len(value)} tags; at most {MAX_TAGS}")
    tags = [clean_text(tag, f"{field}[{i}]", MAX_TAG_CHARS) for i, tag in enumerate(value)]
    for i, tag in enumerate(tags):
        if "\n" in tag or "\r" in tag or "\t" in tag:
            raise InvalidRequest(f"`{field}[{i}]` must be one line")
    return tuple(dict.fromkeys(tags))


def check_meta(value: object, field: str = "meta") -> Meta:
    """``value`` as checked Meta (empty when None); errors name ``field``."""
    if value is None:
        return Meta()
    meta = value if isinstance(value, Meta) else convert(value, Meta, field)
    cleaned: dict[str, Any] = {}
    for name in META_FIELDS:
        raw = getattr(meta, name)
        if raw is not None:
            text = clean_text(raw, f"{field}.{name}", MAX_META_CHARS)
            if "\n" in text or "\r" in text:
                raise InvalidRequest(f"`{field}.{name}` must be one line")
            cleaned[name] = text
    if meta.source is not None:
        kind = meta.source.kind
        if not isinstance(kind, str) or not _TOKEN.fullmatch(kind):
            raise InvalidRequest(
                f"`{field}.source.kind` must be a lowercase word like `agent` or `user`"
            )
        source_id = meta.source.id
        if source_id is not None:
            source_id = clean_text(source_id, f"{field}.source.id", MAX_META_CHARS)
        cleaned["source"] = Source(kind=kind, id=source_id)
    return Meta(**cleaned)
