"""Holistic recall: one budgeted read across a host-fixed set of reaches, as a ContextPack.

A host reads memory for its model through several reaches at once: the
agent's own learnings, the team's, the brain's documents and the current
thread. :func:`holistic_recall` asks each reach of a :class:`PackPreset`
through its own :class:`Recorder` (a run of the replay layer, one per reach
and scope: the model never names a reach, the host hands them in), then

1. merges the hits of every section and drops duplicates (the same id, or
   the same text seen through two reaches: the first, best placed, wins);
2. puts current first (:mod:`._current`): the engine's currency rule over
   every item and every summary line, leaving out an item a newer one in the
   pack replaced (listed in :attr:`ContextPack.superseded`), unless it names
   what the question asks about for its replacement (a bridge, :mod:`._question`:
   shown just after the replacement, marked replaced by it, and only with it),
   and showing a replaced summary line as changed; a belief drawn from a turn of the pack
   (its ``turn:`` tags) is weighed at that turn's time and never replaced by it; a
   read's own ``superseded_by`` mark is shown, hypotheticals and others'
   facts (:mod:`._asides`: unless the question supposes, asks about someone
   else or names the person) are marked and come after every section's other
   items, in a section of their own (its title ending in
   :data:`ASIDE_TITLE`), and what only asks comes after its section's others;
3. ranks what is left in the rule's order (each section's weight over the
   hit's place in its section, counted among the items that may answer; at
   equal weight a searched section's item before a listed one's), and
4. fits it into ``budget_tokens``: items are taken best first while the
   markdown rendering still fits, measured by :func:`count_tokens` (four
   characters a token, as context.md counts), the counter
   :attr:`ContextPack.tokens` states. An item is clipped to
   :data:`MAX_ITEM_CHARS`, a summary by its lines: the newest that fit,
   its lines about someone else the first to go.

The pack renders as markdown (:meth:`ContextPack.markdown`: a section per
reach, each line citing its item's id and trust) and as JSON
(:meth:`ContextPack.to_json`, the msgspec form). The budget bounds the
markdown, which is what a model is given.

"Supersede" here is a reading rule, not a write: nothing is forgotten; the
signed belief builds of the background jobs do the lasting version. The
rule's lexical test misses updates in other words ("I live in Berlin", "I
moved to Lisbon"), so :mod:`._phrasings` still adds a few first-person forms,
and a search is widened by the words that state what the user is asked about
(:func:`expand`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol

import msgspec

from memseal.engine import ITEM_KINDS, LEARNING_KINDS, Trust
from memseal.engine.aboutness import about, sentences
from memseal.engine.trust import check_min_trust
from memseal.ledger.errors import InvalidRequest
from memseal.tools.packs import (
    CHARS_PER_TOKEN,
    REACHES,
    ContextPack,
    PackItem,
    PackSection,
    ReachName,
    count_tokens,
    render_markdown,
)

from ._asides import Asked, apart, asked_by
from ._current import (
    Judged,
    Ranked,
    changed_line,
    check_sources,
    judge,
    summary_lines,
    weighed,
)
from ._job_records import SOURCE_TAG
from ._phrasings import phrased
from ._question import bridges, expand, placed, replacement

__all__ = [
    "ABOUT_TAG",
    "CHARS_PER_TOKEN",
    "LEARNINGS",
    "PRESETS",
    "PRE_TURN",
    "REACHES",
    "SESSION_START",
    "THROUGH_TAG",
    "ContextPack",
    "PackItem",
    "PackPreset",
    "PackSection",
    "ReachName",
    "Recorder",
    "SectionSpec",
    "count_tokens",
    "fit",
    "holistic_recall",
]

MAX_ITEM_CHARS: Final = 800
#: What a section's suppositions and others' facts are titled, after the section's own title.
ASIDE_TITLE: Final = ": supposed, or someone else's"
#: The tag a compaction summary carries: the seq of the newest turn it folded.
THROUGH_TAG: Final = "through:"
#: The tag of a belief about another person (``about:Tomas``): whose fact it is.
ABOUT_TAG: Final = "about:"
_LIMIT_MAX: Final = 50


class Recorder(Protocol):
    """Where a read goes: a recorded run (``memory.run(...)``) bound to one scope.

    ``key`` names the call within the run, so a resumed session gets the
    recorded result of the same moment, and never a second live write.

    A port with several implementations: the replay layer's ``Run``, the
    unrecorded ``PastReader`` over a view of the past, and ``memory.tools(...)``
    (the top layer's ``RecordedTools``), which a job queue reads its status through.
    """

    def call(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, key: str | None = None
    ) -> Awaitable[Any]:
        """Call a memory tool in the run."""


class SectionSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One section of a preset: which reach, how it is read, how much of it.

    ``how`` is ``search`` (the pack's query, ranked) or ``recent`` (the
    newest items, for a thread's last turns or the latest learnings).
    """

    reach: ReachName
    title: str
    how: Literal["search", "recent"] = "search"
    limit: int = 5
    kinds: tuple[str, ...] | None = None
    weight: float = 1.0

    def __post_init__(self) -> None:
        if self.reach not in REACHES:
            raise InvalidRequest(f"`reach` {self.reach!r} is not one of {', '.join(REACHES)}")
        if not isinstance(self.title, str) or not self.title.strip() or "\n" in self.title:
            raise InvalidRequest("`title` must be one line of text")
        if self.how not in ("search", "recent"):
            raise InvalidRequest("`how` must be search or recent")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int):
            raise InvalidRequest(f"`limit` must be a whole number from 1 to {_LIMIT_MAX}")
        if not 1 <= self.limit <= _LIMIT_MAX:
            raise InvalidRequest(f"`limit` must be a whole number from 1 to {_LIMIT_MAX}")
        if self.kinds is not None:
            for kind in self.kinds:
                if kind not in ITEM_KINDS:
                    raise InvalidRequest(f"`kinds`: {kind!r} is not an item kind")
        if not isinstance(self.weight, int | float) or not 0 < self.weight <= 100:
            raise InvalidRequest("`weight` must be a number above 0, at most 100")


class PackPreset(msgspec.Struct, frozen=True, kw_only=True):
    """A named pack shape: its sections, budget, and the question used when none is given."""

    name: str
    title: str
    sections: tuple[SectionSpec, ...]
    budget_tokens: int = 1_500
    question: str = "What should be remembered about the user, the work and its decisions?"
    min_trust: Trust | None = None

    def __post_init__(self) -> None:
        _check_budget(self.budget_tokens)
        if not self.sections:
            raise InvalidRequest("`sections` must list at least one section")
        if self.min_trust is not None:
            check_min_trust(self.min_trust)

    def with_budget(self, budget_tokens: int) -> PackPreset:
        """This preset with another budget."""
        return msgspec.structs.replace(self, budget_tokens=budget_tokens)


def _check_budget(value: object, field: str = "budget_tokens") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
        raise InvalidRequest(f"`{field}` must be a whole number from 0 to 1000000")
    return value


def _aside(item: PackItem, asked: Asked) -> bool:
    """Whether ``item`` is an aside to the question (:func:`._asides.apart`)."""
    return apart(item.hypothetical, item.subject, asked)


# -- fitting ------------------------------------------------------------------------------


def _clip(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    one_line = " / ".join(" ".join(part.split()) for part in text.splitlines() if part.strip())
    if len(one_line) <= limit:
        return one_line
    cut = one_line[: limit - 1]
    if " " in cut:
        cut = cut[: cut.rfind(" ")]
    return cut + "…"


def _fitting(lines: Sequence[str], asides: Sequence[bool], limit: int = MAX_ITEM_CHARS) -> str:
    """The ``lines`` of a summary that fit ``limit`` as :func:`_clip` joins them, in their
    order, chosen newest first and the ``asides`` after every other line. A summary lists
    its lines oldest first and drops the oldest when over its own budget, and a pack does
    the same: clipping the joined text's end showed the oldest lines, the values the
    newer ones replaced, and left out the newest, the likeliest current. A line about
    someone else answers nothing about the user (as an aside item), so it goes first."""
    sizes = [len(" ".join(line.split())) for line in lines]
    chosen: list[int] = []
    room = limit + len(" / ")
    for index in sorted(range(len(lines)), key=lambda i: (asides[i], -i)):
        if not chosen or sizes[index] + len(" / ") <= room:
            chosen.append(index)
            room -= sizes[index] + len(" / ")
    return "\n".join(lines[i] for i in sorted(chosen))


def _shown(item: PackItem, judged: Judged, asked: Asked) -> str:
    """What a pack shows of ``item``: a summary less its replaced lines (each shown as
    changed, or left out when a later line of its own says it anew), cut to fit."""
    if item.kind != "context_summary":
        return item.text
    out: list[str] = []
    asides: list[bool] = []
    for index, line in enumerate(summary_lines(item.text)):
        newer = judged.lines.get((item.id, index))
        if newer is None:
            read = about(line.text)
            out.append(line.raw)
            asides.append(apart(read.hypothetical, read.subject, asked))
        elif newer:
            out.append(changed_line(line, newer))
            asides.append(False)
    return _fitting(out, asides)


def _answers(item: PackItem, asked: Asked) -> bool:
    """Whether ``item`` may answer the query: neither :func:`_aside` nor only asking."""
    if _aside(item, asked):
        return False
    read = sentences(item.text)
    return not read or any(s.states for s in read) or not any(s.question for s in read)


def _current_order(
    merged: Sequence[tuple[int, PackItem]],
    judged: Judged,
    asked: Asked,
    bridging: Mapping[str, str],
) -> list[tuple[int, PackItem]]:
    """``merged`` (section, item) in the rule's order, less the items a shown one
    replaced; a summary after the newest item that changed it, a bridge just after its
    replacement (:func:`placed`), and what only asks and (unless the query asks about
    them) hypotheticals and others' facts after the rest."""
    by_id = {item.id: (index, item) for index, item in merged}
    ordered = [by_id[i] for i in judged.order if i not in judged.replaced]
    for summary in dict.fromkeys(s for s, _ in judged.lines):
        newer = {n for (s, _), n in judged.lines.items() if s == summary and n}
        places = [p for p, (_, item) in enumerate(ordered) if item.id in newer]
        entry = by_id[summary]
        if not places or ordered.index(entry) > max(places):
            continue
        ordered.remove(entry)
        ordered.insert(max(p for p, (_, item) in enumerate(ordered) if item.id in newer) + 1, entry)
    ordered = placed(ordered, judged.order, {i: item for i, (_, item) in by_id.items()}, bridging)
    # What only asks and asides go after the rest; a bridge goes with its replacement.
    later = {item.id: not _answers(item, asked) for _, item in ordered}
    return sorted(ordered, key=lambda e: later.get(replacement(e[1].id, bridging), later[e[1].id]))


def _merged(
    specs: Sequence[SectionSpec], found: Sequence[Sequence[PackItem]], asked: Asked
) -> list[tuple[float, int, int, PackItem]]:
    """Every section's items less duplicates, best first: ``(-weight, order, section,
    item)``, the weight a section's over the item's place in it."""
    seen_ids: set[str] = set()
    seen_texts: set[str] = set()
    merged: list[tuple[float, int, int, PackItem]] = []
    for index, (spec, items) in enumerate(zip(specs, found, strict=True)):
        place = 0
        for item in items:
            text = " ".join(item.text.split()).casefold()
            if item.id in seen_ids or text in seen_texts:
                continue
            seen_ids.add(item.id)
            seen_texts.add(text)
            merged.append((-spec.weight / (1 + place), len(merged), index, item))
            # A section's places are counted among what may answer: a question, a
            # supposition or someone else's fact goes after the rest, so it takes no
            # place from the section's next item (as the rule counts a climb's places).
            place += _answers(item, asked)
    # At equal weight, what the query ranked goes before what is only listed by time: a
    # recent turn is not ranked by the message at all (the preset's order broke the tie).
    merged.sort(key=lambda entry: (entry[0], specs[entry[2]].how == "recent", entry[1]))
    return merged


def _sections(
    specs: Sequence[SectionSpec],
    kept: Sequence[Sequence[PackItem]],
    positions: Sequence[Sequence[int]],
    asked: Asked,
    bridging: Mapping[str, str],
) -> tuple[PackSection, ...]:
    """The kept items as sections, in the order of their best item: what the rule put
    first is shown first (a summary after the newer turns that changed it, whatever its
    weight). A section's suppositions and others' facts follow every section's other
    items, as a section of their own: they answer nothing about the user. A bridge
    (``bridging``) goes where its replacement goes, just after it."""
    asides = {item.id: _aside(item, asked) for items in kept for item in items}
    parts: list[tuple[bool, int, int, str, list[PackItem]]] = []
    for i, (items, at) in enumerate(zip(kept, positions, strict=True)):
        for aside in (False, True):
            chosen = [
                k
                for k, item in enumerate(items)
                if asides.get(replacement(item.id, bridging), asides[item.id]) is aside
            ]
            if chosen:
                title = specs[i].title + (ASIDE_TITLE if aside else "")
                parts.append(
                    (aside, min(at[k] for k in chosen), i, title, [items[k] for k in chosen])
                )
    return tuple(
        PackSection(reach=specs[i].reach, title=title, items=tuple(items))
        for _, _, i, title, items in sorted(parts, key=lambda part: part[:3])
    )


def fit(
    title: str,
    specs: Sequence[SectionSpec],
    found: Sequence[Sequence[PackItem]],
    budget_tokens: int,
    *,
    preset: str = "",
    query: str = "",
    sources: Mapping[str, Sequence[str]] | None = None,
) -> ContextPack:
    """Merge, dedupe, put current first, rank and fit ``found`` (each section's hits,
    best first) into ``budget_tokens`` (see the module docstring). ``sources`` maps a
    belief's id to the ``turn:`` tags of the turns it was drawn from."""
    _check_budget(budget_tokens)
    if len(specs) != len(found):
        raise InvalidRequest("`found` must hold one list of items per section")
    check_sources(sources)
    asked = asked_by(query)
    merged = _merged(specs, found, asked)
    ranked = [
        Ranked(
            id=i.id,
            kind=i.kind,
            text=i.text,
            as_of=i.as_of,
            ledger_ref=i.ledger_ref,
            sources=tuple((sources or {}).get(i.id, ())),
        )
        for _, _, _, i in merged
    ]
    # A read's own mark is shown (``superseded_by``), not acted on: the pack leaves out
    # only what it judged itself (see the module docstring for why).
    # The phrasing list weighs a belief at its turn's time too, as the rule does.
    by_rule, at_turns = judge(ranked), weighed(ranked)
    judged = phrased(by_rule, at_turns)
    bridging = bridges(at_turns, by_rule, judged, query)
    ordered = _current_order(
        [(index, item) for _, _, index, item in merged], judged, asked, bridging
    )
    kept: list[list[PackItem]] = [[] for _ in specs]
    positions: list[list[int]] = [[] for _ in specs]

    def sections() -> tuple[PackSection, ...]:
        return _sections(specs, kept, positions, asked, bridging)

    dropped = 0
    for position, (index, item) in enumerate(ordered):
        if item.id in bridging and all(bridging[item.id] != i.id for k in kept for i in k):
            continue  # its replacement did not fit: alone, it would read as current
        shown = msgspec.structs.replace(item, text=_clip(_shown(item, judged, asked)))
        # Within a section, items keep the rule's order.
        at = sum(1 for p in positions[index] if p < position)
        kept[index].insert(at, shown)
        positions[index].insert(at, position)
        if count_tokens(render_markdown(title, sections())) > budget_tokens:
            del kept[index][at]
            del positions[index][at]
            dropped += 1
    final = sections()
    cited = {i.id for s in final for i in s.items}
    return ContextPack(
        preset=preset,
        title=title,
        query=query,
        budget_tokens=budget_tokens,
        tokens=count_tokens(render_markdown(title, final)),
        sections=final,
        superseded=tuple(sorted(i for i in judged.replaced if i not in cited)),
        dropped=dropped,
    )


# -- reading ------------------------------------------------------------------------------


def _item(entry: Mapping[str, Any], *, listed: bool = False) -> PackItem:
    """A pack item of a fetch hit (its currency marks as the read set them) or, when
    ``listed``, of a listed item (read as the engine reads a hit's: a list ranks
    nothing, so nothing there is superseded)."""
    meta = entry.get("meta") or {}
    as_of = int(entry["ledger_ref"])
    kind = str(entry["kind"])
    text = str(entry["text"])
    for tag in meta.get("tags", ()):
        if isinstance(tag, str) and tag.startswith(THROUGH_TAG):
            with contextlib.suppress(ValueError):
                as_of = int(tag[len(THROUGH_TAG) :])
    if listed:
        read = about(text)
        hypothetical, subject, newer = read.hypothetical, read.subject, None
    else:
        hypothetical = entry.get("hypothetical") is True
        subject, newer = entry.get("subject"), entry.get("superseded_by")
    return PackItem(
        hypothetical=hypothetical,
        subject=subject if isinstance(subject, str) else None,
        superseded_by=newer if isinstance(newer, str) else None,
        as_of=as_of,
        id=str(entry["id"]),
        kind=kind,
        text=text,
        trust=str(entry["trust"]),
        observed_at=str(meta.get("observed_at", "")),
        ledger_ref=int(entry["ledger_ref"]),
        confidence=entry.get("confidence"),
        score=entry.get("score"),
    )


def _sources(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``turn:`` tags of a belief ``entry``: the turns it was drawn from (a turn's
    own ``turn:<n>`` tag names its place in the thread, not a source)."""
    if entry.get("kind") not in LEARNING_KINDS:
        return ()
    tags = (entry.get("meta") or {}).get("tags", ())
    return tuple(t for t in tags if isinstance(t, str) and t.startswith(f"{SOURCE_TAG}:"))


def _arguments(
    spec: SectionSpec, query: str, refers_to: Mapping[str, str] | None, min_trust: str | None
) -> tuple[str, dict[str, Any]]:
    args: dict[str, Any] = {"limit": spec.limit}
    if spec.kinds is not None:
        args["filter"] = {"kinds": list(spec.kinds)}
    if min_trust is not None:
        args["min_trust"] = min_trust
    if spec.how == "recent":
        return "memory_list", args
    args["query"] = expand(query)[:2_000]
    if refers_to is not None:
        args["refers_to"] = dict(refers_to)
    return "memory_fetch", args


async def holistic_recall(
    readers: Mapping[str, Recorder],
    preset: PackPreset,
    *,
    query: str | None = None,
    refers_to: Mapping[str, str] | None = None,
    budget_tokens: int | None = None,
    key: str | None = None,
) -> ContextPack:
    """One budgeted read of ``preset``'s sections through the host's ``readers``.

    ``readers`` maps each reach name to the recorder reading it (a run bound
    to that reach's scope); a section whose reach is not given is an
    :class:`InvalidRequest`, never skipped. ``query`` (default: the preset's
    question) drives the search sections, ``refers_to`` (``{"from", "to"}``
    local dates) ranks the days it names first. With ``key``, section ``i``
    is called under the key ``{key}/{i}``, so a resumed run replays it.
    """
    if not isinstance(preset, PackPreset):
        raise InvalidRequest("`preset` must be a PackPreset")
    budget = _check_budget(preset.budget_tokens if budget_tokens is None else budget_tokens)
    asked = preset.question if query is None else query
    if not isinstance(asked, str) or not asked.strip():
        raise InvalidRequest("`query` must be non-empty text")
    for spec in preset.sections:
        if spec.reach not in readers:
            raise InvalidRequest(f"preset {preset.name!r} reads `{spec.reach}`, not given")
    found: list[list[PackItem]] = []
    sources: dict[str, tuple[str, ...]] = {}
    for index, spec in enumerate(preset.sections):
        name, args = _arguments(spec, asked, refers_to, preset.min_trust)
        result = await readers[spec.reach].call(
            name, args, key=None if key is None else f"{key}/{index}"
        )
        entries = result["hits"] if name == "memory_fetch" else result["items"]
        found.append([_item(entry, listed=name != "memory_fetch") for entry in entries])
        sources |= {str(entry["id"]): _sources(entry) for entry in entries}
    return fit(
        preset.title,
        preset.sections,
        found,
        budget,
        preset=preset.name,
        query=asked,
        sources=sources,
    )


# -- presets ------------------------------------------------------------------------------

_LEARNED: Final = tuple(k for k in LEARNING_KINDS if k not in ("context_summary", "scratch"))

#: Session start: where the conversation stands, and the standing learnings.
SESSION_START: Final = PackPreset(
    name="session_start",
    title="Memory at session start",
    budget_tokens=1_500,
    sections=(
        SectionSpec(
            reach="thread",
            title="Conversation so far",
            how="recent",
            limit=1,
            kinds=("context_summary",),
            weight=4,
        ),
        SectionSpec(
            reach="thread", title="Recent turns", how="recent", limit=6, kinds=("conversation",)
        ),
        SectionSpec(
            reach="own", title="Your learnings", how="recent", limit=10, kinds=_LEARNED, weight=2
        ),
        SectionSpec(
            reach="team", title="Team learnings", how="recent", limit=10, kinds=_LEARNED, weight=1.5
        ),
        SectionSpec(reach="brain", title="From the brain", limit=5, weight=0.8),
    ),
)

#: Pre-turn: what bears on the incoming message, from every reach.
PRE_TURN: Final = PackPreset(
    name="pre_turn",
    title="Memory for this message",
    budget_tokens=1_000,
    sections=(
        SectionSpec(
            reach="thread",
            title="Conversation summary",
            how="recent",
            limit=1,
            kinds=("context_summary",),
            # Below the search's first hit (3): the summary holds the oldest values, and
            # at 4 it led every pack (stale@5 0.37, not 0.15, on the evaluation's dev split).
            weight=2.5,
        ),
        SectionSpec(
            reach="thread",
            title="Earlier in this conversation",
            limit=6,
            kinds=("conversation",),
            weight=3,
        ),
        SectionSpec(
            reach="thread",
            title="Recent turns",
            how="recent",
            limit=4,
            kinds=("conversation",),
            weight=2,
        ),
        SectionSpec(reach="own", title="Your learnings", limit=5, kinds=_LEARNED, weight=2),
        SectionSpec(reach="team", title="Team learnings", limit=5, kinds=_LEARNED, weight=1.5),
        SectionSpec(reach="brain", title="From the brain", limit=5, weight=1),
    ),
)

#: The context.md shape over the learnings reaches: what the agent and its team learned.
LEARNINGS: Final = PackPreset(
    name="learnings",
    title="Memory context",
    budget_tokens=1_500,
    sections=(
        SectionSpec(reach="own", title="Your learnings", how="recent", limit=20, kinds=_LEARNED),
        SectionSpec(reach="team", title="Team learnings", how="recent", limit=20, kinds=_LEARNED),
    ),
)

PRESETS: Final = {p.name: p for p in (SESSION_START, PRE_TURN, LEARNINGS)}
