"""Does memory tell the agent what is current? recall@5, stale@5 and trap@5 on long conversations.

Run: ``make bench`` (after bench.py's table), or
``.venv/bin/python benchmarks/currency_eval.py [--quick] [--json [FILE]] [--split all|dev|held]
[--embedder both|hashing|default]``.

The conversations are ``currency_data.py`` (the dev split: two users) and
``currency_held.py`` with ``currency_fresh.py`` (the held split: four users, 224
statements and 87 questions): six users in all, 330 statements and 131 questions,
each talking to their agent on a few days a month for most of a year (home moves, job changes,
negations, stops, dates, multi-hop questions, absent facts, hypotheticals and
other people's facts), with questions asked along the way. Everything goes
through memseal's public API, in this process, on real SQLite files in one
temporary folder, with a clock that reads the conversation's own time (so each
turn is observed on its day):

* **fetch rows**: the turns are stored in the user's thread with the
  ``memory_store`` tool, and each question is a ``memory_fetch`` of limit 5 in
  the thread, in ``exact``, ``semantic`` and ``hybrid`` mode (exact once: it
  does not depend on the embedder);
* **pack rows**: the same turns go through a lifecycle session
  (``AgentMemory.post_turn``, a belief build queued for each turn and run by the
  job queue's ``RuleExtractor`` at the end of each day, and a compaction,
  ``keep=6``, whenever 20 turns are not yet folded), and each question is the
  ``PRE_TURN`` pack of ``session.pre_turn(question, at=its time)`` and the
  ``SESSION_START`` pack read at that moment. A pack's rank is its order of
  items (sections in order, each section's items in order).

Questions are asked, then logged as turns (as a host loop logs them), so they
are in the memory the later questions search. They are neither gold nor stale.

An item is judged by the turn it is: a turn listed in the question's ``cur``
group ``g`` is current for ``g``, in ``old`` stale, in ``trap`` a trap. A
derived item (a compaction summary, a belief) is judged by its text: holding
one of the question's ``say`` entries it is current (for every group);
otherwise holding a ``was`` entry it is stale, a ``lure`` entry a trap (an entry
is words joined by ``+``, all of which must appear, case-folded).

Metrics, over the top ``k`` = 5 items of each ranking:

* **recall@5**: among the questions with an answer (``cur`` not empty), the
  share where every ``cur`` group has an item in the top 5 (one group for most
  questions; two for a multi-hop one);
* **stale@5**: among the questions whose fact was updated, negated or stopped
  (``old`` not empty), the share where a stale item is in the top 5 and either
  ranks above every current item or no current item is in the top 5;
* **trap@5**: among the absent questions (kind ``absent``: nothing answers
  them), the share where a trap item is in the top 5;
* **n**: answerable / updated / absent questions; **p50**: the median
  milliseconds of the fetch, or of building the pack (its recorded calls). Each
  question is fetched in hybrid mode before semantic: the engine keeps the
  question's embedding, so semantic's p50 leaves out embedding the question.

Lower is better for stale@5 and trap@5. The figures measure behaviour on
these phrasings; ``--split held`` reports the users kept for checking a change.
``--quick`` (one user, the hashing embedder) is a smoke mode for the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# A sibling module: run as a script, this folder is on sys.path.
from currency_data import DEV, Question, Statement, User
from currency_fresh import FRESH
from currency_held import HELD

import memseal
from memseal.apps.lifecycle import (
    SESSION_START,
    AgentMemory,
    ContextPack,
    JobQueue,
    MemoryLayout,
    holistic_recall,
)
from memseal.engine import HashingEmbedder
from memseal.engine.embedders import default_embedder
from memseal.tools import MemoryTools

K = 5
LAYOUT = MemoryLayout(tenant="eval")
THREAD = "main"
FOLD_AFTER = 20  # turns not yet folded before the session compacts
KEEP = 6
_ACKS = ("Got it.", "Noted, thanks.", "Okay.", "Understood.", "Thanks for telling me.")
MODES = ("exact", "semantic", "hybrid")
USERS = DEV + HELD + FRESH

Labels = frozenset[str]


# -- the metrics ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One ranking judged against one question; None where a metric does not apply."""

    recall: bool | None
    stale: bool | None
    trap: bool | None


def _first(top: Sequence[Labels], wanted: str) -> int | None:
    return next(
        (i for i, labels in enumerate(top) if any(x.startswith(wanted) for x in labels)), None
    )


def judge(ranking: Sequence[Labels], question: Question, k: int = K) -> Verdict:
    """The verdict on ``ranking`` (each item's labels, best first): see the module docstring."""
    top = list(ranking[:k])
    recall = None
    if question.cur:
        recall = all(any(f"cur{g}" in labels for labels in top) for g in range(len(question.cur)))
    stale = None
    if question.old:
        old, current = _first(top, "old"), _first(top, "cur")
        stale = old is not None and (current is None or old < current)
    trap = None
    if question.kind == "absent":
        trap = any("trap" in labels for labels in top)
    return Verdict(recall=recall, stale=stale, trap=trap)


def _holds(text: str, entries: Iterable[str]) -> bool:
    return any(all(word in text for word in entry.split("+")) for entry in entries)


def label(
    item_id: str, kind: str, text: str, question: Question, turns: Mapping[str, str]
) -> Labels:
    """An item's labels for ``question``: ``cur<g>``, ``old``, ``trap`` (or none).

    ``turns`` maps a stored turn's item id to its id in the data."""
    turn = turns.get(item_id)
    if turn is not None:
        found = {f"cur{g}" for g, group in enumerate(question.cur) if turn in group}
        found |= {"old"} if turn in question.old else set()
        found |= {"trap"} if turn in question.trap else set()
        return frozenset(found)
    if kind == "conversation":  # a logged question: neither gold nor stale
        return frozenset()
    said = text.casefold()
    if _holds(said, question.say):
        return frozenset(f"cur{g}" for g in range(max(len(question.cur), 1)))
    if _holds(said, question.was):
        return frozenset({"old"})
    if _holds(said, question.lure):
        return frozenset({"trap"})
    return frozenset()


@dataclass
class Row:
    """One contestant's verdicts, with each question's kind and split, and its latencies."""

    name: str
    verdicts: list[tuple[Question, str, Verdict]] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)

    def add(self, question: Question, split: str, verdict: Verdict, ms: float) -> None:
        self.verdicts.append((question, split, verdict))
        self.ms.append(ms)

    def figures(self, split: str | None = None) -> dict[str, Any]:
        chosen = [v for _, s, v in self.verdicts if split is None or s == split]
        return summarise(chosen) | {"p50_ms": _p50(self.ms)}


def summarise(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """recall@5, stale@5 and trap@5 over ``verdicts``, each with how many it counts."""

    def share(values: list[bool]) -> float | None:
        return None if not values else round(sum(values) / len(values), 3)

    recall = [v.recall for v in verdicts if v.recall is not None]
    stale = [v.stale for v in verdicts if v.stale is not None]
    trap = [v.trap for v in verdicts if v.trap is not None]
    return {
        "recall@5": share(recall),
        "stale@5": share(stale),
        "trap@5": share(trap),
        "n": {"answerable": len(recall), "updated": len(stale), "absent": len(trap)},
    }


def _p50(samples: list[float]) -> float:
    return round(statistics.median(samples), 2) if samples else 0.0


# -- the conversation's time ----------------------------------------------------------------


class Clock:
    """The memory's clock: the conversation's current moment, a microsecond on each reading
    (so no two entries share one instant)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self._ticks = 0

    def at(self, moment: datetime) -> None:
        self.now, self._ticks = max(moment, self.now), 0

    def __call__(self) -> datetime:
        self._ticks += 1
        return self.now + timedelta(microseconds=self._ticks)


def moments(user: User) -> Iterable[tuple[int, datetime, Statement | Question, bool]]:
    """Each entry of ``user`` with its turn number, its time and whether it ends a day."""
    turn = 0
    for session in user.sessions:
        day = datetime.fromisoformat(session.day).replace(hour=9, tzinfo=UTC)
        for index, entry in enumerate(session.entries):
            last = index == len(session.entries) - 1
            yield turn, day + timedelta(minutes=3 * index), entry, last
            turn += 1


# -- the contestants ------------------------------------------------------------------------


class FetchSide:
    """The fetch rows: turns stored by ``memory_store``; questions fetched in every mode."""

    def __init__(self, memory: memseal.Memory, user: User, modes: Sequence[str]) -> None:
        self.tools = MemoryTools(memory.engine, LAYOUT.thread_writer(user.name, THREAD))
        self.modes = modes
        self.turns: dict[str, str] = {}

    async def said(self, turn: int, text: str, reply: str, label_: str | None) -> None:
        stored = await self.tools.call(
            "memory_store",
            {
                "conversation": {
                    "turns": [{"role": "user", "text": text}, {"role": "assistant", "text": reply}]
                },
                "tags": [f"turn:{turn}"],
            },
        )
        if label_ is not None:
            self.turns[stored["id"]] = label_

    async def ask(self, question: Question) -> dict[str, tuple[list[Labels], float]]:
        out: dict[str, tuple[list[Labels], float]] = {}
        for mode in self.modes:
            began = time.perf_counter()
            found = await self.tools.call(
                "memory_fetch", {"query": question.text, "mode": mode, "limit": K}
            )
            ms = (time.perf_counter() - began) * 1000
            out[mode] = (
                [label(h["id"], h["kind"], h["text"], question, self.turns) for h in found["hits"]],
                ms,
            )
        return out


class PackSide:
    """The pack rows: a lifecycle session with belief builds and compaction."""

    def __init__(self, memory: memseal.Memory, user: User, clock: Clock) -> None:
        self.jobs = JobQueue(memory, LAYOUT.learnings_writer(user.name), clock=clock)
        self.session = AgentMemory(memory, LAYOUT, agent=user.name, thread=THREAD, jobs=self.jobs)
        self.turns: dict[str, str] = {}
        self.unfolded = 0

    async def said(self, turn: int, text: str, reply: str, label_: str | None) -> None:
        build = await self.session.post_turn(turn=turn, user=text, assistant=reply)
        if label_ is not None:
            self.turns[build.source_ids[0]] = label_
        self.unfolded += 1

    async def day_ends(self, turn: int) -> None:
        await self.jobs.run_pending()
        if self.unfolded >= FOLD_AFTER:
            await self.session.compact(turn=turn, keep=KEEP)
            self.unfolded = KEEP

    def _labels(self, pack: ContextPack, question: Question) -> list[Labels]:
        items = [item for section in pack.sections for item in section.items]
        return [label(i.id, i.kind, i.text, question, self.turns) for i in items]

    async def ask(
        self, question: Question, turn: int, at: datetime
    ) -> dict[str, tuple[list[Labels], float]]:
        began = time.perf_counter()
        pre = await self.session.pre_turn(question.text, turn=turn, at=at)
        pre_ms = (time.perf_counter() - began) * 1000
        began = time.perf_counter()
        start = await holistic_recall(self.session.readers, SESSION_START)
        start_ms = (time.perf_counter() - began) * 1000
        return {
            "PRE_TURN": (self._labels(pre, question), pre_ms),
            "SESSION_START": (self._labels(start, question), start_ms),
        }


# -- one embedder ---------------------------------------------------------------------------


async def _converse(
    users: Sequence[User],
    fetch: Sequence[FetchSide],
    packs: Sequence[PackSide],
    clock: Clock,
    rows: Mapping[str, Row],
) -> None:
    """The users' conversations interleaved in time order (the clock only moves forward)."""
    timeline = sorted(
        (at, index, turn, entry, last)
        for index, user in enumerate(users)
        for turn, at, entry, last in moments(user)
    )
    for at, index, turn, entry, last in timeline:
        clock.at(at)
        split = users[index].split
        if isinstance(entry, Question):
            asked = await fetch[index].ask(entry) | await packs[index].ask(entry, turn, at)
            for name, (ranking, ms) in asked.items():
                rows[name].add(entry, split, judge(ranking, entry), ms)
            text, reply, said = entry.text, "Let me look that up.", None
        else:
            text, reply, said = entry.text, _ACKS[turn % len(_ACKS)], entry.id
        await fetch[index].said(turn, text, reply, said)
        await packs[index].said(turn, text, reply, said)
        if last:
            await packs[index].day_ends(turn)


async def run_embedder(
    where: Path, tag: str, embedder: Any, users: Sequence[User], exact: bool
) -> list[Row]:
    """Every user's conversation through the fetch side and the pack side for one embedder."""
    # Hybrid before semantic: the first mode to see a question embeds it, and hybrid is
    # the default; semantic's p50 is then a ranking of an embedding already made.
    modes = ("exact",) if exact else ()
    modes += ("hybrid", "semantic")
    shown = sorted(modes, key=MODES.index)
    rows = {m: Row(f"{m} fetch{'' if m == 'exact' else f' ({tag})'}") for m in shown}
    rows |= {p: Row(f"{p} pack ({tag})") for p in ("PRE_TURN", "SESSION_START")}
    clock = Clock()
    async with (
        memseal.open(
            where / f"fetch-{tag}", embedder=embedder, clock=clock, checkpoint_interval=None
        ) as fetched,
        memseal.open(
            where / f"life-{tag}", embedder=embedder, clock=clock, checkpoint_interval=None
        ) as lived,
    ):
        fetch = [FetchSide(fetched, user, modes) for user in users]
        packs = [PackSide(lived, user, clock) for user in users]
        try:
            await _converse(users, fetch, packs, clock, rows)
        finally:
            for pack in packs:
                await pack.session.close()
    return list(rows.values())


# -- the table ------------------------------------------------------------------------------


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(rows: Sequence[Row], split: str | None = None) -> list[str]:
    lines = [
        "| contestant | recall@5 | stale@5 | trap@5 | n (answerable/updated/absent) | p50 ms |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        f = row.figures(split)
        n = f["n"]
        lines.append(
            f"| {row.name} | {_cell(f['recall@5'])} | {_cell(f['stale@5'])} | "
            f"{_cell(f['trap@5'])} | {n['answerable']}/{n['updated']}/{n['absent']} | "
            f"{f['p50_ms']:.1f} |"
        )
    return lines


def by_kind(rows: Sequence[Row]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each row's figures per question kind (in the JSON only)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        kinds = sorted({q.kind for q, _, _ in row.verdicts})
        out[row.name] = {
            kind: summarise([v for q, _, v in row.verdicts if q.kind == kind]) for kind in kinds
        }
    return out


async def evaluate(quick: bool, split: str, embedders: str) -> dict[str, Any]:
    users = [u for u in USERS if split == "all" or u.split == split]
    if quick:
        users = users[:1]
    chosen: list[tuple[str, Any, str]] = []
    if embedders in ("both", "hashing") or quick:
        chosen.append(("hashing", HashingEmbedder(), "HashingEmbedder"))
    model = None if quick or embedders == "hashing" else default_embedder()
    if model is not None:
        chosen.append(("MiniLM", model, model.id))
    notes = [f"{tag}: {described}" for tag, _, described in chosen]
    if model is None and not quick and embedders != "hashing":
        notes.append("default embedder not installed: its rows are skipped")
    rows: list[Row] = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as where:
        for index, (tag, embedder, _) in enumerate(chosen):
            rows += await run_embedder(Path(where), tag, embedder, users, exact=index == 0)
    turns = sum(1 for u in users for s in u.sessions for e in s.entries if isinstance(e, Statement))
    asked = sum(1 for u in users for s in u.sessions for e in s.entries if isinstance(e, Question))
    return {
        "users": [u.name for u in users],
        "statements": turns,
        "questions": asked,
        "embedders": notes,
        "seconds": round(time.perf_counter() - began, 1),
        "rows": {r.name: r.figures() for r in rows},
        "splits": {s: {r.name: r.figures(s) for r in rows} for s in ("dev", "held")},
        "kinds": by_kind(rows),
        "table": table(rows),
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one user, the hashing embedder")
    parser.add_argument(
        "--json", nargs="?", const="-", default=None, help="also write the figures (FILE or -)"
    )
    parser.add_argument("--split", choices=("all", "dev", "held"), default="all")
    parser.add_argument("--embedder", choices=("both", "hashing", "default"), default="both")
    args = parser.parse_args(argv)
    out = asyncio.run(evaluate(args.quick, args.split, args.embedder))
    print(
        f"memseal currency eval ({'quick' if args.quick else 'full'}, split {args.split}): "
        f"{len(out['users'])} users, {out['statements']} statements and {out['questions']} "
        f"questions logged as turns; {'; '.join(out['embedders'])}; {out['seconds']} s"
    )
    print("\n".join(out["table"]))
    if args.json == "-":
        print(json.dumps(out, indent=1))
    elif args.json is not None:
        Path(args.json).write_text(json.dumps(out, indent=1))
    sys.stdout.flush()
    return out


if __name__ == "__main__":
    main()
