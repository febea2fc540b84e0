"""``memseal brain ingest`` and ``memseal brain remove``: documents into a brain node.

``ingest PATH --source NAME`` ingests a file or a folder into the node
``TENANT/brain:docs/source:NAME`` (the layout's; ``brain:NAME`` without a tenant;
re-ingest writes only what changed); ``remove
--source NAME --doc ID`` forgets one document's chunks. Plain output, one
line per result; errors are one line (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memseal.apps.lifecycle import DEFAULT_BUDGET, Brain, MemoryLayout
from memseal.cli.options import OK, USAGE, store_options, store_url
from memseal.cli.progress import ProgressLine
from memseal.engine import Namespace
from memseal.ledger.errors import InvalidRequest
from memseal.memory import open
from memseal.tools import ToolScope

__all__ = ["add_verbs", "brain_place"]


def brain_place(source: str, tenant: str = "") -> str:
    """The brain node of source ``source``: under a ``tenant``, the one its
    :class:`MemoryLayout` names (``TENANT/brain:docs/source:NAME``, which every session's
    brain reach reads); without one, ``brain:NAME``. A bad name is refused."""
    try:
        if tenant:
            return MemoryLayout(tenant=tenant).brain_source(source)
        return Namespace(f"brain:{source}", field="place").text
    except InvalidRequest:
        raise InvalidRequest(
            f"`--source` {source!r:.60} (under `--tenant` {tenant!r:.60}) does not make a "
            "namespace: use letters, digits and ._@+=-"
        ) from None


def _brain(memory: object, args: argparse.Namespace, progress: ProgressLine | None) -> Brain:
    scope = ToolScope.placed_at(brain_place(args.source, args.tenant))
    return Brain(memory, scope, budget=args.budget, progress=progress)  # type: ignore[arg-type]


async def _ingest(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        print(f"memseal brain ingest: {path} does not exist", file=sys.stderr)
        return USAGE
    place = brain_place(args.source, args.tenant)
    progress = ProgressLine("ingesting")
    async with open(
        Path(args.data), store=store_url(args), checkpoint_interval=None, embedder=args.embedder
    ) as memory:
        brain = _brain(memory, args, progress)
        try:
            report = await brain.ingest(path, source_id=args.doc, run_id=args.run_id)
        finally:
            progress.close()
    print(f"{place}: {report.line()}")
    for name, why in report.skipped:
        print(f"skipped {_shown(name)}: {_shown(why)}")
    return OK


def _shown(text: str) -> str:
    """``text`` on one line: a file name's control characters escaped, so a name cannot
    forge or hide a line of the report."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


async def _remove(args: argparse.Namespace) -> int:
    place = brain_place(args.source, args.tenant)
    async with open(
        Path(args.data),
        store=store_url(args),
        create=False,
        checkpoint_interval=None,
        embedder=None,
    ) as memory:
        brain = _brain(memory, args, None)
        if args.doc is None:
            report = await brain.remove_all(run_id=args.run_id)
        else:
            report = await brain.remove(args.doc, run_id=args.run_id)
    what = "every document" if args.doc is None else repr(args.doc)
    print(f"{place}: removed {what}: {report.forgotten} chunk(s) forgotten (run {report.run_id})")
    return OK


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``brain ingest`` and ``brain remove`` to the ``memseal`` parser."""
    brain = verbs.add_parser("brain", help="ingest documents into a brain node, or remove one")
    actions = brain.add_subparsers(dest="action", required=True, metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False, parents=[store_options()])
    common.add_argument(
        "--source", required=True, help="the source's name: node TENANT/brain:docs/source:NAME"
    )
    common.add_argument(
        "--tenant", default="", metavar="NS", help="the namespace above the brain (team:acme)"
    )
    common.add_argument(
        "--run", dest="run_id", default=None, metavar="ID", help="the run to record it in"
    )
    common.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="characters a chunk")

    ingest = actions.add_parser(
        "ingest", parents=[common], help="ingest a file or folder (re-ingest: only changes)"
    )
    ingest.add_argument("path", help="a markdown, text or source file, or a folder of them")
    ingest.add_argument(
        "--doc",
        default=None,
        help="the document id of a file (default: its name); a folder's prefix",
    )
    ingest.add_argument(
        "--exact-only",
        dest="embedder",
        action="store_const",
        const=None,
        default="default",
        help="embed nothing (exact search only)",
    )
    ingest.set_defaults(run=_ingest)

    remove = actions.add_parser("remove", parents=[common], help="forget one document's chunks")
    remove.add_argument(
        "--doc", default=None, help="the document id to remove (default: every document)"
    )
    remove.set_defaults(run=_remove)
