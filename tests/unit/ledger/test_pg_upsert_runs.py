"""The runs a held upsert is split into on PostgreSQL (``ledger._pg_sql.upsert_runs``)."""

from __future__ import annotations

from memseal.ledger._pg_sql import upsert_runs

INTO = "memos (run_id, step, memo_key, seq)"
UPSERT = " ON CONFLICT (run_id, step) DO UPDATE SET memo_key = excluded.memo_key"


def test_rows_with_distinct_keys_are_one_run() -> None:
    rows = [("r", 1, "a", 1), ("r", 2, "b", 2), ("s", 1, "c", 3)]
    assert [list(run) for run in upsert_runs(INTO, UPSERT, rows)] == [rows]


def test_a_key_met_again_starts_the_next_run_in_order() -> None:
    rows = [("r", 1, "a", 1), ("r", 2, "b", 2), ("r", 1, "c", 3), ("r", 1, "d", 4)]
    assert [list(run) for run in upsert_runs(INTO, UPSERT, rows)] == [
        rows[:2],
        rows[2:3],
        rows[3:],
    ]


def test_a_plain_insert_or_do_nothing_is_never_split() -> None:
    rows = [("r", 1, "a", 1), ("r", 1, "a", 1)]
    assert [list(run) for run in upsert_runs(INTO, "", rows)] == [rows]
    nothing = " ON CONFLICT (run_id, step) DO NOTHING"
    assert [list(run) for run in upsert_runs(INTO, nothing, rows)] == [rows]
