"""``memseal worker``: run the background jobs queued for one agent.

``memseal worker --place team:acme/agent:writer`` runs the pending belief
builds of that agent's queue (``<place>/queue:jobs``), each in its own
recorded run, then waits ``--interval`` seconds and looks again, until
interrupted; ``--once`` runs what is pending and exits. A job's reads cover
the agent's subtree (its threads). One plain line a job; errors one line.

A job whose attempt fails is recorded (a signed marker) and tried again
after a backoff, at most ``--max-attempts`` times (default 5); then it is
``failed``. ``memseal jobs status --place team:acme/agent:writer`` lists that
queue's pending, failed and done jobs, one line each with a failed job's
last error, then the counts; ``memseal jobs requeue JOB --place ...
[--reason TEXT]`` makes a failed job pending again, by a signed note
(``serve --worker PLACE`` runs the same jobs in the service's own loop).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from memseal.cli.options import OK, USAGE, store_options, store_url
from memseal.engine import Namespace, Reach
from memseal.ledger.errors import InvalidRequest
from memseal.memory import Memory, open
from memseal.tools import ToolScope
from memseal.tools.lifecycle import DEFAULT_MAX_ATTEMPTS, JobInfo, JobOutcome, JobQueue, RetryPolicy

__all__ = ["add_verbs", "job_line", "outcome_line"]


def outcome_line(outcome: JobOutcome) -> str:
    """One job's outcome as a plain line."""
    if outcome.state == "done":
        return (
            f"job {outcome.id}: done, {len(outcome.learned)} learned, "
            f"{len(outcome.superseded)} superseded (run {outcome.run_id})"
        )
    if outcome.state == "failed":
        then = f"retry at {outcome.retry_at}" if outcome.retry_at else "no more retries"
        return f"job {outcome.id}: failed (attempt {outcome.attempt}, {then}): {outcome.error}"
    return f"job {outcome.id}: {outcome.state}: {outcome.error}"


def job_line(job: JobInfo) -> str:
    """One job of a status as a plain line (a failed attempt's error on it, one line)."""
    line = f"{job.state:<7} {job.id} {job.kind} thread={job.thread} sources={len(job.source_ids)}"
    if job.attempts:
        line += f" attempts={job.attempts}"
        if job.not_before is not None:
            line += f" retry_at={job.not_before}"
        if job.last_error is not None:
            line += " error=" + " ".join(job.last_error.split())
    return line


def _agent_scope(value: str) -> ToolScope:
    place = Namespace(value, field="--place").text
    if not place:
        raise InvalidRequest("`--place` must name the agent's node, like team:acme/agent:writer")
    return ToolScope.placed_at(place, reach=Reach.subtree(place))


def _open_queue(args: argparse.Namespace) -> AbstractAsyncContextManager[Memory]:
    """The data folder the worker and the jobs verbs use: it exists, no embedder, no checkpoints."""
    return open(
        Path(args.data),
        store=store_url(args),
        create=False,
        checkpoint_interval=None,
        embedder=None,
    )


async def _status(args: argparse.Namespace) -> int:
    scope = _agent_scope(args.place)
    async with _open_queue(args) as memory:
        status = await JobQueue(memory, scope).status()
    for job in (*status.pending, *status.failed, *status.done):
        print(job_line(job))
    for item in status.invalid:
        print(f"invalid {item} (a queue item that is not a job)")
    print(
        f"{scope.place}: {len(status.pending)} pending, {len(status.failed)} failed, "
        f"{len(status.done)} done" + (f", {len(status.invalid)} invalid" if status.invalid else "")
    )
    return OK


async def _requeue(args: argparse.Namespace) -> int:
    scope = _agent_scope(args.place)
    async with _open_queue(args) as memory:
        done = await JobQueue(memory, scope).requeue(args.job, reason=args.reason)
    print(f"job {done.job.id}: pending again (round {done.job.round}, note {done.note})")
    return OK


async def _worker(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        print("memseal worker: --interval must be more than 0 seconds", file=sys.stderr)
        return USAGE
    scope = _agent_scope(args.place)
    retry = RetryPolicy(max_attempts=args.max_attempts)
    async with _open_queue(args) as memory:
        queue = JobQueue(memory, scope, retry=retry)
        while True:
            outcomes = await queue.run_pending()
            for outcome in outcomes:
                print(outcome_line(outcome), flush=True)
            if args.once:
                failed = [o for o in outcomes if o.state == "failed"]
                if not outcomes:
                    print("no pending jobs")
                return USAGE if failed else OK
            await asyncio.sleep(args.interval)


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``worker`` and ``jobs status`` to the ``memseal`` parser."""
    worker = verbs.add_parser(
        "worker", parents=[store_options()], help="run the background jobs queued for an agent"
    )
    worker.add_argument("--place", required=True, help="the agent's node (team:acme/agent:w)")
    worker.add_argument("--once", action="store_true", help="run what is pending, then exit")
    worker.add_argument(
        "--interval", type=float, default=2.0, help="seconds between looks (default 2)"
    )
    worker.add_argument(
        "--max-attempts",
        type=int,
        default=DEFAULT_MAX_ATTEMPTS,
        metavar="N",
        help=f"attempts of a failing job before it is failed (default {DEFAULT_MAX_ATTEMPTS})",
    )
    worker.set_defaults(run=_worker)

    jobs = verbs.add_parser("jobs", help="the background job queue of an agent")
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser(
        "status", parents=[store_options()], help="list the pending, failed and done jobs"
    )
    status.add_argument("--place", required=True, help="the agent's node (team:acme/agent:w)")
    status.set_defaults(run=_status)
    requeue = actions.add_parser(
        "requeue", parents=[store_options()], help="make a failed job pending again"
    )
    requeue.add_argument("job", help="the job's id (from jobs status)")
    requeue.add_argument("--place", required=True, help="the agent's node (team:acme/agent:w)")
    requeue.add_argument(
        "--reason", default="re-queued by an operator", help="why (kept in the signed note)"
    )
    requeue.set_defaults(run=_requeue)
