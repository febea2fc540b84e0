"""``memseal worker``: run the background jobs queued for one agent.

``memseal worker --place team:acme/agent:writer`` runs the pending belief
builds of that agent's queue (``<place>/queue:jobs``), each in its own
recorded run, then waits ``--interval`` seconds and looks again, until
interrupted; ``--once`` runs what is pending and exits. One plain line a
job; errors one line.

``--place`` takes the explicit scope ``serve --worker`` takes, read by the
same parser (:func:`memseal.service.workers.parse_worker`):
``PLACE[,reach=subtree:PLACE][,trust=LEVEL][,attempts=N]``; a job's reads
cover the agent's subtree (its threads), at ``trust`` and above. So a job
queued for an agent runs under the same scope, and so in the same run,
whichever of the two runs it; bad text is refused naming ``--place`` and the
field. ``--max-attempts N`` is the older spelling of ``attempts=N`` (giving
both is refused).

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

from memseal.apps.lifecycle import DEFAULT_MAX_ATTEMPTS, JobInfo, JobOutcome, JobQueue
from memseal.cli.options import OK, USAGE, store_options, store_url
from memseal.memory import Memory, open
from memseal.service.workers import WorkerScope, parse_worker

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


def _agent_scope(args: argparse.Namespace) -> WorkerScope:
    """The explicit scope ``--place`` states (``serve --worker``'s syntax and parser)."""
    return parse_worker(args.place, field="--place", attempts=getattr(args, "max_attempts", None))


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
    scope = _agent_scope(args).scope
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
    scope = _agent_scope(args).scope
    async with _open_queue(args) as memory:
        done = await JobQueue(memory, scope).requeue(args.job, reason=args.reason)
    print(f"job {done.job.id}: pending again (round {done.job.round}, note {done.note})")
    return OK


async def _worker(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        print("memseal worker: --interval must be more than 0 seconds", file=sys.stderr)
        return USAGE
    worker = _agent_scope(args)
    async with _open_queue(args) as memory:
        queue = JobQueue(memory, worker.scope, retry=worker.retry)
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


_PLACE = "PLACE[,reach=R][,trust=T]"
_PLACE_HELP = "the agent's node (team:acme/agent:w), in the worker's scope syntax"


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``worker`` and ``jobs status`` to the ``memseal`` parser."""
    worker = verbs.add_parser(
        "worker", parents=[store_options()], help="run the background jobs queued for an agent"
    )
    worker.add_argument(
        "--place",
        required=True,
        metavar="PLACE[,reach=R][,trust=T][,attempts=N]",
        help="the agent's node (team:acme/agent:w) and the scope its jobs run under, as "
        "serve --worker takes it: reach subtree:PLACE (the only one accepted), trust T "
        "(default unverified), N attempts a failing job (default 5)",
    )
    worker.add_argument("--once", action="store_true", help="run what is pending, then exit")
    worker.add_argument(
        "--interval", type=float, default=2.0, help="seconds between looks (default 2)"
    )
    worker.add_argument(
        "--max-attempts",
        type=int,
        default=None,
        metavar="N",
        help="attempts of a failing job before it is failed, as attempts=N in --place "
        f"(default {DEFAULT_MAX_ATTEMPTS})",
    )
    worker.set_defaults(run=_worker)

    jobs = verbs.add_parser("jobs", help="the background job queue of an agent")
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser(
        "status", parents=[store_options()], help="list the pending, failed and done jobs"
    )
    status.add_argument("--place", required=True, help=_PLACE_HELP, metavar=_PLACE)
    status.set_defaults(run=_status)
    requeue = actions.add_parser(
        "requeue", parents=[store_options()], help="make a failed job pending again"
    )
    requeue.add_argument("job", help="the job's id (from jobs status)")
    requeue.add_argument("--place", required=True, help=_PLACE_HELP, metavar=_PLACE)
    requeue.add_argument(
        "--reason", default="re-queued by an operator", help="why (kept in the signed note)"
    )
    requeue.set_defaults(run=_requeue)
