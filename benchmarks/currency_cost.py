"""What the currency rule costs a read: fetch and recall with the rule off, then on, one run.

Run: ``make bench`` (after the currency evaluation), or
``.venv/bin/python benchmarks/currency_cost.py [--quick] [--memories N] [--rounds R]
[--embedder hashing|default] [--cold] [--json [FILE]]``.

Issue 38's bar: nothing slower than 1.2x the fetch p50 without the rule, on the
same machine in one run. One engine (``memseal.open``, real SQLite files in a
temporary folder) holds ``--memories`` conversational memories (3,000 by default):
synthetic users telling their agent about the same few dozen subjects again and
again over a year (moves, jobs, pets, a partner, habits; some about another person,
some only supposing, some questions), each a stored ``Conversation`` of a user line
and an assistant's reply, observed on its own day. So a read's first candidates
are often about one subject, which is where the rule does its work.

Each question is read in ``exact``, ``semantic`` and ``hybrid`` fetch (limit 10)
and by ``recall`` (hybrid, the extractive answerer), once with the rule off and
once on (:func:`memseal.engine.currency.following` ``None`` and the current
version, the same engine and caches), the two back to back and their order
alternating question by question, over ``--rounds`` rounds, so a neighbour's load
falls on both. Questions are embedded once before timing (a cached vector), so the
semantic rows time the ranking and the rule, not the embedder. It prints p50 and
p90 of each side in milliseconds and the ratio on/off of the p50s.

What the rule reads of a text (and a content's vector) is kept between reads
(``memseal.engine._rule_memo``), as an agent's reads keep meeting the same
memories; ``--cold`` empties that memo before every timed read with the rule on
(and off, to keep the sides alike), the cost of a read whose 32 candidates are all
new to the process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import memseal
from memseal.engine import Engine, HashingEmbedder, NewItem
from memseal.engine._rule_memo import forget_all, forget_windows
from memseal.engine.currency import VERSION, following
from memseal.engine.embedders import default_embedder
from memseal.engine.items import Conversation, Turn
from memseal.engine.results import Mode

MODES: tuple[Mode, ...] = ("exact", "semantic", "hybrid")
PLACE = "user:bench"
BAR = 1.2
#: With --new-windows: a question never asked before, over texts already read.
NEW_WINDOWS = False

# Subjects a user keeps coming back to: (what it is, statements, question).
_SUBJECTS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (
        "city",
        ("I live in {v} now.", "We relocated to {v} last month.", "Home is {v} these days."),
        "Which city do I live in now?",
    ),
    (
        "job",
        (
            "I work as a {v} at the moment.",
            "Since March I have been a {v}.",
            "I started a new job as a {v}.",
        ),
        "What is my job?",
    ),
    (
        "pet",
        (
            "We adopted a {v} called Biscuit.",
            "Our {v} keeps me up at night.",
            "I have a {v} at home.",
        ),
        "What pet do I have?",
    ),
    (
        "car",
        ("I drive a {v} to work.", "We sold the old car and bought a {v}.", "My car is a {v} now."),
        "What car do I drive?",
    ),
    (
        "sport",
        (
            "I go {v} three times a week.",
            "I gave up {v} after the injury.",
            "These days I am into {v}.",
        ),
        "Which sport do I do?",
    ),
    (
        "diet",
        ("I am {v} since January.", "I stopped being {v}.", "I eat {v} now."),
        "What do I eat?",
    ),
    (
        "manager",
        ("My manager is {v}.", "Since the reorg my boss is {v}.", "I report to {v} now."),
        "Who is my manager?",
    ),
    (
        "phone",
        ("I switched to a {v} phone.", "My phone is a {v}.", "I dropped my {v} and got a new one."),
        "Which phone do I use?",
    ),
    (
        "language",
        (
            "I am learning {v} in the evenings.",
            "I no longer study {v}.",
            "My {v} lessons start on Monday.",
        ),
        "Which language am I learning?",
    ),
    (
        "commute",
        (
            "I commute by {v}.",
            "I take the {v} to the office now.",
            "No more {v} for me, I work from home.",
        ),
        "How do I get to work?",
    ),
    (
        "trip",
        (
            "We booked a trip to {v} in August.",
            "We cancelled the trip to {v}.",
            "The {v} trip is moved to October.",
        ),
        "Where are we travelling this summer?",
    ),
    (
        "band",
        ("My favourite band is {v}.", "I saw {v} live on Friday.", "I am not into {v} any more."),
        "Which band do I like?",
    ),
)
_VALUES = {
    "city": ("Berlin", "Lisbon", "Porto", "Madrid", "Vienna", "Oslo", "Dublin", "Prague"),
    "job": ("nurse", "teacher", "designer", "developer", "baker", "lawyer", "pilot"),
    "pet": ("dog", "cat", "parrot", "rabbit", "hamster", "tortoise"),
    "car": ("Volvo", "Toyota", "Tesla", "Fiat", "Skoda", "Renault"),
    "sport": ("running", "swimming", "climbing", "cycling", "rowing", "boxing"),
    "diet": ("vegetarian", "vegan", "pescatarian", "keto", "gluten free"),
    "manager": ("Priya", "Dana", "Marco", "Elena", "Kofi", "Sven"),
    "phone": ("Pixel", "iPhone", "Fairphone", "Nokia", "Samsung"),
    "language": ("Spanish", "Japanese", "German", "Italian", "Korean", "Greek"),
    "commute": ("bike", "train", "bus", "tram", "car", "ferry"),
    "trip": ("Japan", "Peru", "Iceland", "Morocco", "Canada", "Vietnam"),
    "band": ("Radiohead", "Blur", "Portishead", "Massive Attack", "Pulp", "Bjork"),
}
_OTHERS = ("my brother Tomas", "my sister Ana", "my friend Lea", "my colleague Omar")
_ASIDES = (
    "",
    " Anyway, the weather was awful today.",
    " Remind me to call the bank tomorrow.",
    " The kids had a long day at school.",
    " Work was busy with the quarterly report.",
)
_REPLIES = ("Got it.", "Noted, thanks.", "Okay, I will remember that.", "Thanks for telling me.")


def _said(rng: random.Random) -> str:
    """One user line: mostly the user's fact, some another person's, some supposing or asking."""
    name, phrasings, question = rng.choice(_SUBJECTS)
    value = rng.choice(_VALUES[name])
    line = rng.choice(phrasings).format(v=value)
    roll = rng.random()
    if roll < 0.15:
        other = rng.choice(_OTHERS)
        line = f"{other[0].upper()}{other[1:]} says {line[0].lower()}{line[1:]}".replace(
            " I ", " he "
        )
    elif roll < 0.22:
        line = f"If things work out, I would {line[0].lower()}{line[1:]}"
    elif roll < 0.27:
        line = question
    return line + rng.choice(_ASIDES)


def memories(count: int, seed: int = 38) -> list[NewItem]:
    """``count`` conversational memories, one a day or so over a year, in time order."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    step = timedelta(days=365) / max(count, 1)
    return [
        NewItem(
            content=Conversation(
                turns=(
                    Turn(role="user", text=_said(rng)),
                    Turn(role="assistant", text=rng.choice(_REPLIES)),
                )
            ),
            namespace=PLACE,
            observed_at=start + step * i,
        )
        for i in range(count)
    ]


def questions() -> list[str]:
    """Each subject's question, and a second wording of it."""
    asked = [question for _, _, question in _SUBJECTS]
    return asked + [f"Remind me: {q[0].lower()}{q[1:]}" for q in asked]


def _p(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(len(ordered) * share) - 1)]


async def _timed(read: Callable[[], Awaitable[object]], rule: int | None, cold: bool) -> float:
    if cold:
        forget_all()
    elif NEW_WINDOWS:
        forget_windows()
    with following(rule):
        began = time.perf_counter()
        await read()
        return (time.perf_counter() - began) * 1000


def _readers(engine: Engine, question: str) -> dict[str, Callable[[], Awaitable[object]]]:
    def fetch(mode: Mode) -> Callable[[], Awaitable[object]]:
        return lambda: engine.fetch(question, mode=mode, limit=10)

    reads: dict[str, Callable[[], Awaitable[object]]] = {mode: fetch(mode) for mode in MODES}
    reads["recall"] = lambda: engine.recall(question, limit=10)
    return reads


async def measure(
    folder: Path, count: int, rounds: int, embedder: Any, cold: bool = False
) -> dict[str, Any]:
    """Fill a store of ``count`` memories, then time every read off and on (see above)."""
    items = memories(count)
    asked = questions()
    async with memseal.open(folder, embedder=embedder, checkpoint_interval=None) as memory:
        engine = memory.engine
        began = time.perf_counter()
        for base in range(0, len(items), 500):
            await engine.store_many(items[base : base + 500])
        filled = time.perf_counter() - began
        times: dict[str, dict[str, list[float]]] = {}
        for question in asked:  # warm: each question's vector cached, pages read once
            for read in _readers(engine, question).values():
                await _timed(read, VERSION, cold)
        for r in range(rounds):
            for index, question in enumerate(asked):
                for name, read in _readers(engine, question).items():
                    sides = times.setdefault(name, {"off": [], "on": []})
                    order = ("off", "on") if (index + r) % 2 == 0 else ("on", "off")
                    for side in order:
                        sides[side].append(
                            await _timed(read, None if side == "off" else VERSION, cold)
                        )
    rows = {}
    for name, sides in times.items():
        off, on = statistics.median(sides["off"]), statistics.median(sides["on"])
        rows[name] = {
            "off_p50": round(off, 2),
            "off_p90": round(_p(sides["off"], 0.9), 2),
            "on_p50": round(on, 2),
            "on_p90": round(_p(sides["on"], 0.9), 2),
            "ratio": round(on / off, 2),
            "n": len(sides["on"]),
        }
    return {"memories": count, "fill_s": round(filled, 1), "rows": rows}


def table(rows: dict[str, dict[str, Any]]) -> list[str]:
    lines = [
        "| read | off p50 ms | off p90 ms | on p50 ms | on p90 ms | on/off p50 | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        read = "recall (hybrid)" if name == "recall" else f"{name} fetch"
        lines.append(
            f"| {read} | {row['off_p50']} | {row['off_p90']} | {row['on_p50']} | "
            f"{row['on_p90']} | {row['ratio']} | {row['n']} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 memories, 2 rounds")
    parser.add_argument("--memories", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--embedder", choices=("hashing", "default"), default="hashing")
    parser.add_argument("--cold", action="store_true", help="empty the rule's memo every read")
    parser.add_argument(
        "--new-windows",
        action="store_true",
        help="keep each text's reading, forget what the rule made of whole windows every read",
    )
    parser.add_argument(
        "--json", nargs="?", const="-", default=None, help="also write the figures (FILE or -)"
    )
    args = parser.parse_args(argv)
    global NEW_WINDOWS
    NEW_WINDOWS = args.new_windows
    count, rounds = (500, 2) if args.quick else (args.memories, args.rounds)
    embedder = HashingEmbedder() if args.embedder == "hashing" else default_embedder()
    if embedder is None:
        parser.error("the default embedder is not installed (pip install 'memseal[embed]')")
    with tempfile.TemporaryDirectory() as where:
        out = asyncio.run(measure(Path(where), count, rounds, embedder, args.cold))
    out["embedder"], out["cold"] = args.embedder, args.cold
    out["table"] = table(out["rows"])
    worst = max(row["ratio"] for row in out["rows"].values())
    print(
        f"memseal currency cost: {count} memories ({args.embedder} embedder, filled in "
        f"{out['fill_s']} s), {len(questions())} questions x {rounds} rounds, rule off vs on"
        f"{', memo emptied every read' if args.cold else ''}"
        f"{', windows forgotten every read' if args.new_windows else ''}; "
        f"worst on/off p50 {worst} (bar {BAR})"
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
