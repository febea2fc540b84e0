"""``context.md``: a token-budgeted brief of what memory holds, for the start of a session.

:func:`compile` asks one question per :class:`Brief` (four by default:
about the user, active work, preferences and standing instructions, recent
important events) through the engine's recall, lists the stored learnings
newest and most confident first, and renders markdown under a frontmatter
of ``generated_at``, ``engine``, ``tokens`` and ``refs``::

    ---
    generated_at: 2026-11-30T09:00:00Z
    engine: memseal hybrid hashing-v1
    tokens: 212
    refs: [3f2b..., 9a1c...]
    ---
    # Memory context

    ## About the user
    Prefers dark mode [1] ...

    ## Learnings
    - (fact, 0.9) The deploy pipeline runs on Tuesdays

The document fits ``budget_tokens`` (default 1,500; four characters a
token): learnings are dropped first, from the end; then briefs, from the
last; the first brief is clipped last of all. A brief whose recall fails
is skipped and logged (logger ``memseal.tools.context``); an empty engine
(nothing in reach) yields an empty document. Every read is confined to
the reach (from the :class:`ContextSpec`, or from the scope when compiling
for a :class:`MemoryTools`) and to the trust floor.

context.md is one preset of :class:`~memseal.tools.packs.ContextPack`,
``context_md``: :func:`context_pack` reads and fits the pack (each answered
brief a prose section citing the ids its answer cites, then the learnings
section, every item with its id and trust) and
:meth:`ContextDocument.markdown` renders it as the document above, which is
what :func:`compile` returns, byte for byte as before the pack existed (a
golden test pins it). ``to_json()`` of the pack is the JSON form.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final, Protocol

import msgspec

from memseal.engine import LEARNING_KINDS, Engine, Reach, Trust
from memseal.engine.recall import NO_ANSWER
from memseal.engine.trust import check_min_trust
from memseal.ledger.entry import format_time
from memseal.ledger.errors import InvalidRequest

from .packs import CHARS_PER_TOKEN, ContextPack, PackItem, PackSection
from .scope import ToolScope

__all__ = [
    "CHARS_PER_TOKEN",
    "CONTEXT_MD",
    "DEFAULT_BRIEFS",
    "DEFAULT_BUDGET_TOKENS",
    "Brief",
    "ContextDocument",
    "ContextSpec",
    "compile",
    "context_pack",
    "render_context_md",
]

log = logging.getLogger("memseal.tools.context")

DEFAULT_BUDGET_TOKENS: Final = 1_500
#: The name of context.md's preset of ContextPack.
CONTEXT_MD: Final = "context_md"
_LEARNINGS_PAGE: Final = 50


class Brief(msgspec.Struct, frozen=True, kw_only=True):
    """One section: a heading and the question recalled for it."""

    title: str
    question: str
    limit: int = 5


DEFAULT_BRIEFS: Final[tuple[Brief, ...]] = (
    Brief(
        title="About the user",
        question="Who is the user: their name, role, background and goals?",
    ),
    Brief(
        title="Active work",
        question="What is being worked on now: current tasks, projects and open threads?",
    ),
    Brief(
        title="Preferences and standing instructions",
        question="What preferences, conventions and standing instructions should be followed?",
    ),
    Brief(
        title="Recent important events",
        question="What important events, decisions and changes happened recently?",
    ),
)


class ContextSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`compile` writes: briefs, budget, reach, trust floor and learnings."""

    briefs: tuple[Brief, ...] = DEFAULT_BRIEFS
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    reach: Reach | None = None
    min_trust: Trust = "unverified"
    learnings: int = _LEARNINGS_PAGE
    title: str = "Memory context"


def _check(spec: object) -> ContextSpec:
    if not isinstance(spec, ContextSpec):
        raise InvalidRequest("`spec` must be a ContextSpec")
    for name in ("budget_tokens", "learnings"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidRequest(f"`{name}` must be a whole number, 0 or more")
    check_min_trust(spec.min_trust)
    return spec


def _learning_line(kind: str, confidence: float | None, text: str) -> str:
    one_line = " ".join(text.split())
    label = kind if confidence is None else f"{kind}, {confidence:g}"
    return f"- ({label}) {one_line}"


def _document(
    generated_at: str, engine: str, refs: Sequence[str], title: str, sections: Sequence[str]
) -> str:
    body = f"# {title}\n\n" + "\n\n".join(sections) + "\n"
    refs_text = "[" + ", ".join(refs) + "]"
    tokens = 0
    # The frontmatter names the document's own size, which changes with the digits; settle it.
    for _ in range(3):
        head = (
            f"---\ngenerated_at: {generated_at}\nengine: {engine}\n"
            f"tokens: {tokens}\nrefs: {refs_text}\n---\n"
        )
        settled = math.ceil(len(head + body) / CHARS_PER_TOKEN)
        if settled == tokens:
            break
        tokens = settled
    return head + body


class ScopedTools(Protocol):
    """Tools over an engine for one scope: a :class:`MemoryTools`, or the recorded
    tools ``memory.tools(scope)`` hands a host."""

    @property
    def engine(self) -> Engine:
        """The engine the brief reads items from."""

    @property
    def scope(self) -> ToolScope:
        """The scope whose reach and default trust the brief keeps to."""


async def _answered_briefs(engine: Engine, spec: ContextSpec) -> list[PackSection]:
    """Each brief that recall answered with citations: a prose section citing its ids."""
    briefs: list[PackSection] = []
    for brief in spec.briefs:
        try:
            recollection = await engine.recall(
                brief.question, reach=spec.reach, min_trust=spec.min_trust, limit=brief.limit
            )
        except Exception:
            log.warning("context.md: brief %r failed; skipped", brief.title, exc_info=True)
            continue
        if not recollection.citations or recollection.answer == NO_ANSWER:
            continue
        briefs.append(
            PackSection(
                reach="own",
                title=brief.title,
                items=(),
                answer=recollection.answer,
                cites=tuple(c.id for c in recollection.citations),
            )
        )
    return briefs


async def _learnings(engine: Engine, spec: ContextSpec) -> list[PackItem]:
    """The learnings section's items, in the order the brief shows them."""
    if not spec.learnings:
        return []
    try:
        page = await engine.list(
            filter={"kinds": list(LEARNING_KINDS)},
            reach=spec.reach,
            min_trust=spec.min_trust,
            limit=min(spec.learnings, _LEARNINGS_PAGE),
        )
    except Exception:
        log.warning("context.md: listing learnings failed; skipped", exc_info=True)
        return []
    # Newest day first; within a day, the most confident first; then newest.
    ordered = sorted(
        page.items,
        key=lambda i: (i.observed_at[:10], i.confidence or 0.0, i.seq),
        reverse=True,
    )
    return [
        PackItem(
            id=i.id,
            kind=i.kind,
            text=i.text,
            trust=i.trust,
            observed_at=i.observed_at,
            ledger_ref=i.seq,
            confidence=i.confidence,
            as_of=i.seq,
        )
        for i in ordered
    ]


def render_context_md(pack: ContextPack, *, generated_at: str, engine: str) -> str:
    """A ``context_md`` pack as the context.md document: frontmatter (``generated_at``,
    ``engine``, its own ``tokens``, the ``refs`` it cites in order), the title, each prose
    section's answer, and item sections as ``- (kind, confidence) text`` lines."""
    sections = []
    for section in pack.sections:
        if section.answer is not None:
            sections.append(f"## {section.title}\n{section.answer}")
        else:
            lines = [_learning_line(i.kind, i.confidence, i.text) for i in section.items]
            sections.append(f"## {section.title}\n" + "\n".join(lines))
    refs = list(dict.fromkeys(pack.ids))
    return _document(generated_at, engine, refs, pack.title, sections)


class ContextDocument(msgspec.Struct, frozen=True, kw_only=True):
    """context.md as data: its ``context_md`` pack and the frontmatter's time and engine."""

    pack: ContextPack
    generated_at: str
    engine: str

    def markdown(self) -> str:
        """The context.md text (empty when memory had nothing to say in the budget)."""
        if not self.pack.sections and self.pack.tokens == 0:
            return ""
        return render_context_md(self.pack, generated_at=self.generated_at, engine=self.engine)


def _engine_of(source: Engine | ScopedTools, spec: ContextSpec) -> tuple[Engine, ContextSpec]:
    if isinstance(source, Engine):
        return source, spec
    given, scope = getattr(source, "engine", None), getattr(source, "scope", None)
    if not isinstance(given, Engine) or not isinstance(scope, ToolScope):
        raise InvalidRequest("`source` must be an Engine or memory tools (memory.tools(scope))")
    return given, msgspec.structs.replace(spec, reach=scope.reach, min_trust=scope.default_trust)


def _fitted(
    spec: ContextSpec, briefs: list[PackSection], learned: list[PackItem], render: _Render
) -> ContextPack:
    """The pack within the budget: learnings dropped first, from the end; then briefs,
    from the last; the first brief clipped last of all; nothing if even that is over."""
    budget = spec.budget_tokens * CHARS_PER_TOKEN
    total = len(briefs) + len(learned)

    def pack(kept_briefs: int, kept_learnings: int) -> ContextPack:
        sections = list(briefs[:kept_briefs])
        if kept_learnings:
            sections.append(
                PackSection(reach="own", title="Learnings", items=tuple(learned[:kept_learnings]))
            )
        shell = ContextPack(
            preset=CONTEXT_MD,
            title=spec.title,
            query="",
            budget_tokens=spec.budget_tokens,
            tokens=0,
            sections=tuple(sections),
            dropped=total - kept_briefs - kept_learnings,
        )
        tokens = math.ceil(len(render(shell)) / CHARS_PER_TOKEN)
        return msgspec.structs.replace(shell, tokens=tokens)

    def length(fitted: ContextPack) -> int:
        return len(render(fitted))

    kept_briefs, kept_learnings = len(briefs), len(learned)
    fitted = pack(kept_briefs, kept_learnings)
    while length(fitted) > budget and kept_learnings:
        kept_learnings -= 1
        fitted = pack(kept_briefs, kept_learnings)
    while length(fitted) > budget and kept_briefs > 1:
        kept_briefs -= 1
        fitted = pack(kept_briefs, kept_learnings)
    if length(fitted) > budget and kept_briefs == 1:
        # Clip the one brief left, on a word boundary, to the room there is.
        answer = briefs[0].answer or ""
        over = length(fitted) - budget
        room = max(len(answer) - over - 1, 0)
        cut = answer[:room]
        if " " in cut:
            cut = cut[: cut.rfind(" ")]
        briefs[0] = msgspec.structs.replace(briefs[0], answer=f"{cut}…")
        fitted = pack(1, 0)
    if length(fitted) > budget:
        # Not even the frontmatter fits: nothing useful can be said.
        return msgspec.structs.replace(fitted, sections=(), tokens=0, dropped=total)
    return fitted


_Render = Callable[[ContextPack], str]


async def context_pack(
    source: Engine | ScopedTools,
    spec: ContextSpec | None = None,
    *,
    now: datetime | None = None,
) -> ContextDocument:
    """context.md as its ``context_md`` pack (see the module docstring): the briefs and
    learnings of ``source`` fitted into the budget, with the frontmatter's fields.

    With tools (a :class:`MemoryTools`, or ``memory.tools(scope)``), their scope's
    reach and default trust apply (a ``spec`` given too keeps its own briefs and
    budget, and the scope's reach). ``now`` stamps ``generated_at`` (default: the current time).
    """
    engine, spec = _engine_of(source, _check(spec if spec is not None else ContextSpec()))
    briefs = await _answered_briefs(engine, spec)
    learned = await _learnings(engine, spec)
    stamp = format_time(now if now is not None else datetime.now(UTC))
    modes = engine.modes
    described = f"memseal {'hybrid' if 'hybrid' in modes else modes[0] if modes else 'none'}"
    if engine.embedder_id is not None:
        described += f" {engine.embedder_id}"
    if not briefs and not learned:
        empty = ContextPack(
            preset=CONTEXT_MD,
            title=spec.title,
            query="",
            budget_tokens=spec.budget_tokens,
            tokens=0,
            sections=(),
        )
        return ContextDocument(pack=empty, generated_at=stamp, engine=described)

    def render(pack: ContextPack) -> str:
        return render_context_md(pack, generated_at=stamp, engine=described)

    fitted = _fitted(spec, briefs, learned, render)
    return ContextDocument(pack=fitted, generated_at=stamp, engine=described)


async def compile(
    source: Engine | ScopedTools,
    spec: ContextSpec | None = None,
    *,
    now: datetime | None = None,
) -> str:
    """The context.md brief of what ``source`` holds (see the module docstring): the
    markdown of :func:`context_pack`.

    With tools (a :class:`MemoryTools`, or ``memory.tools(scope)``), their scope's
    reach and default trust apply (a ``spec`` given too keeps its own briefs and
    budget, and the scope's reach). ``now`` stamps ``generated_at`` (default: the current time).
    """
    return (await context_pack(source, spec, now=now)).markdown()
