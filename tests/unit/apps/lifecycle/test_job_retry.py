"""The retry policy and the folding of a job's markers into its state (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from msgspec.structs import replace as msgspec_replace

from memseal.apps.lifecycle import RetryPolicy
from memseal.apps.lifecycle._retry import (
    FailureMark,
    RequeueMark,
    attempt_run,
    decode_failure,
    decode_requeue,
    encode_mark,
    jitter_of,
    job_state,
)
from memseal.ledger.errors import InvalidRequest

JOB = "a" * 32
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _mark(
    attempt: int, *, round: int = 0, retry_at: str | None = "later", job: str = JOB
) -> FailureMark:
    return FailureMark(
        v=1,
        job=job,
        round=round,
        attempt=attempt,
        run=attempt_run(job, round, attempt),
        at="2026-12-01T09:00:00.000000Z",
        error=f"boom {round}.{attempt}",
        retry_at=retry_at,
    )


def test_the_backoff_doubles_from_the_base_up_to_the_cap_and_stops_at_the_last_attempt() -> None:
    policy = RetryPolicy(max_attempts=6, base_seconds=5, max_seconds=30)
    assert [policy.delay(n) for n in range(1, 7)] == [5, 10, 20, 30, 30, 30]
    assert policy.retry_at(1, T0) == T0 + timedelta(seconds=5)
    assert policy.retry_at(5, T0) == T0 + timedelta(seconds=30)
    assert policy.retry_at(6, T0) is None  # the sixth attempt was the last
    assert RetryPolicy().max_attempts == 5
    # Far past the cap: no overflow, the cap.
    assert RetryPolicy(max_attempts=1_000).delay(999) == 3_600


def test_the_jitter_is_the_same_for_the_same_job_and_attempt_so_a_replay_agrees() -> None:
    policy = RetryPolicy(base_seconds=30)
    # Pinned: a worker of another version, or a replay, must draw exactly this.
    assert policy.delay(1, job=JOB) == 34.28420959607243
    assert policy.delay(2, job=JOB) == 55.58615554608843
    again = RetryPolicy(base_seconds=30)
    for attempt in range(1, 6):
        assert again.delay(attempt, job=JOB) == policy.delay(attempt, job=JOB)
        assert again.retry_at(attempt, T0, job=JOB) == policy.retry_at(attempt, T0, job=JOB)
    assert policy.retry_at(1, T0, job=JOB) == T0 + timedelta(seconds=34.28420959607243)
    # Another attempt of the same job draws anew (not the same factor every time).
    assert jitter_of(JOB, 1) != jitter_of(JOB, 2)


def test_the_jitter_spreads_jobs_within_a_quarter_of_the_base_either_way() -> None:
    policy = RetryPolicy(base_seconds=40, max_seconds=40)
    jobs = [f"{n:032x}" for n in range(400)]
    delays = [policy.delay(1, job=job) for job in jobs]
    assert all(30 <= d <= 50 for d in delays)  # 40 s, plus or minus 25%
    assert len(set(delays)) == len(jobs)  # no two jobs come back in the same instant
    # Spread over the whole band, both sides of the base, not bunched at it.
    assert min(delays) < 31 and max(delays) > 49
    below = sum(d < 40 for d in delays)
    assert 150 < below < 250
    for tenth in range(10):  # every tenth of the band is reached
        low = 30 + 2 * tenth
        assert any(low <= d < low + 2 for d in delays)
    # At the cap too: the capped delay is the one jittered.
    assert 30 <= policy.delay(9, job=jobs[0]) <= 50
    # Off, or without a job: the base, exactly.
    assert RetryPolicy(base_seconds=40, max_seconds=40, jitter=0).delay(1, job=jobs[0]) == 40
    assert policy.delay(1) == 40


@pytest.mark.parametrize("jitter", [-0.1, 0.6, float("nan"), True, "0.2"])
def test_a_bad_jitter_is_refused_naming_it(jitter: object) -> None:
    with pytest.raises(InvalidRequest, match="`jitter`"):
        RetryPolicy(jitter=jitter)  # type: ignore[arg-type]


def test_markers_fold_into_pending_then_failed_and_a_requeue_opens_a_new_round() -> None:
    fresh = job_state(JOB, done=False, done_run=None, failures=[], requeues=[])
    assert (fresh.state, fresh.attempts, fresh.run_id) == ("pending", 0, f"job-{JOB}")
    once = job_state(JOB, done=False, done_run=None, failures=[_mark(1)], requeues=[])
    assert (once.state, once.attempts, once.not_before) == ("pending", 1, "later")
    assert once.run_id == f"job-{JOB}.0.2" and once.last_error == "boom 0.1"
    capped = [_mark(1), _mark(2), _mark(3, retry_at=None)]
    failed = job_state(JOB, done=False, done_run=None, failures=capped, requeues=[])
    assert (failed.state, failed.attempts, failed.run_id) == ("failed", 3, f"job-{JOB}.0.3")
    requeue = RequeueMark(v=1, job=JOB, round=1, at="t", reason="fixed")
    again = job_state(JOB, done=False, done_run=None, failures=capped, requeues=[requeue])
    assert (again.state, again.round, again.attempts, again.not_before) == ("pending", 1, 0, None)
    assert again.run_id == f"job-{JOB}.1.1"
    done = job_state(JOB, done=True, done_run="job-x.1.1", failures=capped, requeues=[requeue])
    assert (done.state, done.run_id) == ("done", "job-x.1.1")


def test_two_markers_of_one_attempt_count_once_and_the_one_that_gives_up_wins() -> None:
    # Two workers, one on a stale view, both recorded attempt 2.
    marks = [_mark(1), _mark(2), _mark(2, retry_at=None)]
    state = job_state(JOB, done=False, done_run=None, failures=marks, requeues=[])
    assert (state.state, state.attempts) == ("failed", 2)
    # Another job's markers, and another round's, are not this job's attempts.
    others = [_mark(1, job="b" * 32), _mark(4, round=7)]
    state = job_state(JOB, done=False, done_run=None, failures=others, requeues=[])
    assert (state.state, state.attempts) == ("pending", 0)


def test_markers_decode_strictly_and_a_foreign_text_is_no_marker() -> None:
    mark = _mark(2)
    assert decode_failure(encode_mark(mark)) == mark
    requeue = RequeueMark(v=1, job=JOB, round=1, at="t", reason="fixed")
    assert decode_requeue(encode_mark(requeue)) == requeue
    for text in ("", "job done", '{"v": 1}', encode_mark(requeue), None, 3):
        assert decode_failure(text) is None
    assert decode_requeue(encode_mark(mark)) is None
    assert decode_failure(encode_mark(_mark(0))) is None  # attempts count from 1


def test_a_lost_marker_never_hands_out_an_attempt_number_already_used() -> None:
    # Attempt 2's marker is gone (say, forgotten): the next attempt is 4, never 3 again,
    # so each attempt gets a fresh run and the count still climbs to the cap.
    state = job_state(JOB, done=False, done_run=None, failures=[_mark(1), _mark(3)], requeues=[])
    assert (state.state, state.attempts, state.run_id) == ("pending", 3, f"job-{JOB}.0.4")


def test_a_planned_attempt_names_its_run_for_the_rounds_next_attempt_only() -> None:
    planned = msgspec_replace(_mark(1), planned=True)
    state = job_state(JOB, done=False, done_run=None, failures=[planned, _mark(2)], requeues=[])
    assert (state.run_id, state.plan_run) == (f"job-{JOB}.0.3", f"job-{JOB}")
    # Unplanned markers name none, and their text is as it always was (no `planned` key).
    assert (
        job_state(JOB, done=False, done_run=None, failures=[_mark(1)], requeues=[]).plan_run is None
    )
    assert '"planned"' not in encode_mark(_mark(1)) and '"planned":true' in encode_mark(planned)
    assert decode_failure(encode_mark(planned)) == planned
    # A re-queue opens a round that asks the model afresh.
    requeue = RequeueMark(v=1, job=JOB, round=1, at="t", reason="fixed")
    fresh = job_state(JOB, done=False, done_run=None, failures=[planned], requeues=[requeue])
    assert fresh.plan_run is None
