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
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, Protocol

import msgspec

from memseal.engine import LEARNING_KINDS, Engine, Reach, Trust
from memseal.engine.recall import NO_ANSWER
from memseal.engine.trust import check_min_trust
from memseal.ledger.entry import format_time
from memseal.ledger.errors import InvalidRequest

from .scope import ToolScope

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_BRIEFS",
    "DEFAULT_BUDGET_TOKENS",
    "Brief",
    "ContextSpec",
    "compile",
]

log = logging.getLogger("memseal.tools.context")

DEFAULT_BUDGET_TOKENS: Final = 1_500
CHARS_PER_TOKEN: Final = 4
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


async def _answered_briefs(engine: Engine, spec: ContextSpec) -> list[tuple[str, list[str]]]:
    """Each brief that recall answered with citations: its section and the ids it cites."""
    briefs: list[tuple[str, list[str]]] = []
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
            (f"## {brief.title}\n{recollection.answer}", [c.id for c in recollection.citations])
        )
    return briefs


async def _learnings(engine: Engine, spec: ContextSpec) -> list[tuple[str, str]]:
    """The learnings section's lines with their ids, in the order the brief shows them."""
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
    return [(_learning_line(i.kind, i.confidence, i.text), i.id) for i in ordered]


async def compile(
    source: Engine | ScopedTools,
    spec: ContextSpec | None = None,
    *,
    now: datetime | None = None,
) -> str:
    """The context.md brief of what ``source`` holds (see the module docstring).

    With tools (a :class:`MemoryTools`, or ``memory.tools(scope)``), their scope's
    reach and default trust apply (a ``spec`` given too keeps its own briefs and
    budget, and the scope's reach). ``now`` stamps ``generated_at`` (default: the current time).
    """
    spec = _check(spec if spec is not None else ContextSpec())
    if isinstance(source, Engine):
        engine = source
    else:
        given, scope = getattr(source, "engine", None), getattr(source, "scope", None)
        if not isinstance(given, Engine) or not isinstance(scope, ToolScope):
            raise InvalidRequest("`source` must be an Engine or memory tools (memory.tools(scope))")
        engine = given
        spec = msgspec.structs.replace(spec, reach=scope.reach, min_trust=scope.default_trust)
    budget = spec.budget_tokens * CHARS_PER_TOKEN

    briefs = await _answered_briefs(engine, spec)
    learned = await _learnings(engine, spec)
    if not briefs and not learned:
        return ""
    stamp = format_time(now if now is not None else datetime.now(UTC))
    modes = engine.modes
    described = f"memseal {'hybrid' if 'hybrid' in modes else modes[0] if modes else 'none'}"
    if engine.embedder_id is not None:
        described += f" {engine.embedder_id}"

    def render(kept_briefs: int, kept_learnings: int) -> str:
        sections = [text for text, _ in briefs[:kept_briefs]]
        refs: list[str] = [ref for _, ids in briefs[:kept_briefs] for ref in ids]
        if kept_learnings:
            lines = [line for line, _ in learned[:kept_learnings]]
            sections.append("## Learnings\n" + "\n".join(lines))
            refs.extend(ref for _, ref in learned[:kept_learnings])
        return _document(stamp, described, list(dict.fromkeys(refs)), spec.title, sections)

    kept_briefs, kept_learnings = len(briefs), len(learned)
    text = render(kept_briefs, kept_learnings)
    while len(text) > budget and kept_learnings:
        kept_learnings -= 1
        text = render(kept_briefs, kept_learnings)
    while len(text) > budget and kept_briefs > 1:
        kept_briefs -= 1
        text = render(kept_briefs, kept_learnings)
    if len(text) > budget and kept_briefs == 1:
        # Clip the one brief left, on a word boundary, to the room there is.
        heading, _, answer = briefs[0][0].partition("\n")
        over = len(text) - budget
        room = max(len(answer) - over - 1, 0)
        cut = answer[:room]
        if " " in cut:
            cut = cut[: cut.rfind(" ")]
        briefs[0] = (f"{heading}\n{cut}…", briefs[0][1])
        text = render(1, 0)
    if len(text) > budget:
        return ""  # not even the frontmatter fits: nothing useful can be said
    return text
