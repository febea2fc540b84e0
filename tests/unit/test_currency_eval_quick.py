"""The currency evaluation (benchmarks/currency_eval.py): its metrics on hand-made rankings,
its data's consistency, and its ``--quick`` run end to end (no quality threshold)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    """A benchmarks script as a module (the folder is not a package; the eval imports its
    data by bare name, as it does when run as a script)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


data = _load("currency_data")
evaluation = _load("currency_eval")
USERS, Q, Question, check = evaluation.USERS, data.Q, data.Question, data.check
judge, label, summarise = evaluation.judge, evaluation.label, evaluation.summarise

MOVED = Q(
    "Which city is home now?",
    "update",
    cur=("t9",),
    old=("t1",),
    say=("lisbon",),
    was=("berlin",),
)
HOPS = Q("Where does my manager sit?", "multihop", cur=(("t2",), ("t3",)), say=("hamburg",))
ABSENT = Q("Do I have a dog?", "absent", trap=("t4",), lure=("pixel",))
CUR, OLD, TRAP = frozenset({"cur0"}), frozenset({"old"}), frozenset({"trap"})
NONE: frozenset[str] = frozenset()


def test_recall_stale_and_trap_of_hand_made_rankings() -> None:
    assert judge([OLD, NONE, CUR], MOVED) == judge([OLD, CUR], MOVED)
    v = judge([OLD, NONE, CUR], MOVED)
    assert (v.recall, v.stale, v.trap) == (True, True, None)
    v = judge([CUR, OLD], MOVED)
    assert (v.recall, v.stale) == (True, False)
    # The current item past the fifth place: not recalled, and the stale one alone is stale.
    v = judge([OLD, NONE, NONE, NONE, NONE, CUR], MOVED)
    assert (v.recall, v.stale) == (False, True)
    # A stale item past the fifth place is not counted.
    v = judge([CUR, NONE, NONE, NONE, NONE, OLD], MOVED)
    assert (v.recall, v.stale) == (True, False)
    v = judge([NONE, NONE], MOVED)
    assert (v.recall, v.stale) == (False, False)
    # Multi-hop: every group must be found.
    assert judge([frozenset({"cur0"})], HOPS).recall is False
    assert judge([frozenset({"cur1"}), NONE, frozenset({"cur0"})], HOPS).recall is True
    assert judge([CUR], HOPS).stale is None
    # Absent: no recall, a trap anywhere in the top five.
    v = judge([NONE, NONE, NONE, NONE, TRAP], ABSENT)
    assert (v.recall, v.stale, v.trap) == (None, None, True)
    assert judge([NONE, NONE, NONE, NONE, NONE, TRAP], ABSENT).trap is False


def test_summarise_counts_each_metric_over_its_own_questions() -> None:
    verdicts = [
        judge([OLD, CUR], MOVED),  # recalled, stale
        judge([CUR], MOVED),  # recalled
        judge([NONE], MOVED),  # missed
        judge([frozenset({"cur1"}), frozenset({"cur0"})], HOPS),  # recalled
        judge([TRAP], ABSENT),
        judge([NONE], ABSENT),
    ]
    figures = summarise(verdicts)
    assert figures["recall@5"] == 0.75
    assert figures["stale@5"] == pytest.approx(1 / 3, abs=0.001)
    assert figures["trap@5"] == 0.5
    assert figures["n"] == {"answerable": 4, "updated": 3, "absent": 2}
    assert summarise([])["recall@5"] is None


def test_labels_by_turn_and_by_a_derived_items_text() -> None:
    turns = {"id-1": "t1", "id-9": "t9", "id-4": "t4"}
    assert label("id-9", "conversation", "", MOVED, turns) == CUR
    assert label("id-1", "conversation", "", MOVED, turns) == OLD
    assert label("id-4", "conversation", "", ABSENT, turns) == TRAP
    assert label("id-x", "conversation", "user: I live in Lisbon", MOVED, turns) == NONE
    # A summary or a belief: its text decides, the current value first.
    assert label("s", "context_summary", "- I moved to Lisbon\n- Berlin", MOVED, turns) == CUR
    assert label("s", "fact", "The user lives in Berlin.", MOVED, turns) == OLD
    assert label("s", "fact", "If I had a dog: Pixel", ABSENT, turns) == TRAP
    gave_up = Q("Coffee?", "negation", cur=("a",), old=("b",), say=("coffee+gave up",), was=("x",))
    assert label("s", "fact", "I gave up tea", gave_up, {}) == NONE
    assert label("s", "fact", "I gave up coffee", gave_up, {}) == CUR


def test_the_data_is_consistent_and_large_enough() -> None:
    check(USERS)
    statements = [
        e for u in USERS for s in u.sessions for e in s.entries if not isinstance(e, Question)
    ]
    questions = [e for u in USERS for s in u.sessions for e in s.entries if isinstance(e, Question)]
    assert len(USERS) >= 4 and len(statements) >= 200
    kinds = {q.kind for q in questions}
    assert {"update", "negation", "stop", "date", "multihop", "absent", "other"} <= kinds
    broken = Q("Where?", "update", cur=("zz",), say=("x",))
    bad = type(USERS[0])(
        name="x",
        split="dev",
        sessions=(type(USERS[0].sessions[0])(day="2026-01-01", entries=(broken,)),),
    )
    with pytest.raises(ValueError, match="not said before"):
        check((bad,))


def test_quick_run_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "currency.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "currency_eval.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert table[0].split("|")[2].strip() == "recall@5"
    figures = json.loads(out.read_text())
    assert set(figures["rows"]) == {
        "exact fetch",
        "semantic fetch (hashing)",
        "hybrid fetch (hashing)",
        "PRE_TURN pack (hashing)",
        "SESSION_START pack (hashing)",
    }
    for name, row in figures["rows"].items():
        assert any(line.startswith(f"| {name} |") for line in table)
        assert row["n"]["answerable"] > 0 and row["n"]["updated"] > 0 and row["n"]["absent"] > 0
        for metric in ("recall@5", "stale@5", "trap@5"):
            assert 0.0 <= row[metric] <= 1.0
