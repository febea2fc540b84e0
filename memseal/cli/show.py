"""``memseal show``: what the memory held at a point of its log.

``show --as-of N`` (a tree size), ``--at T`` (an RFC 3339 time) or ``--run R
--step S`` (what run ``R`` saw at step ``S``) names the point; ``--query Q``
searches the memory as of then (exact search), ``--id ID`` (repeatable) gets
items, neither lists the newest. ``--namespace NS`` reads only ``NS`` and the
namespaces under it (default: every namespace). Prints one JSON object,
``{"as_of": N, "result": ...}``: the read tool's result, as a model would have
read it then. Nothing is recorded. Exit 0, or 2 for a bad point or option.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, Final

import msgspec

from memseal.apps.as_of import parse_count
from memseal.cli.options import OK, USAGE, open_data, store_options, store_url
from memseal.engine import Namespace, Reach
from memseal.ledger.errors import InvalidRequest
from memseal.tools import ToolScope

__all__ = ["CLI_NAMES", "add_verbs", "count_option"]

#: How the options name each part of a point in errors.
CLI_NAMES: Final = {"size": "--as-of", "at": "--at", "run": "--run", "step": "--step"}


def count_option(option: str) -> Callable[[str], int]:
    """An argparse ``type`` reading a size or step as the HTTP query does (ASCII digits:
    ``int`` also takes ``+1``, ``1_0`` and other scripts' digits), naming ``option``."""

    def count(text: str) -> int:
        try:
            parse_count(text, option)
        except InvalidRequest as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return int(text)

    return count


def _scope(namespace: str | None) -> ToolScope:
    if namespace is None:
        return ToolScope(writes=False)
    node = Namespace.parse(namespace, field="--namespace").text
    return ToolScope(place=node, reach=Reach.subtree(node), writes=False)


def _call(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    if args.query is not None:
        return "memory_fetch", {"query": args.query, "limit": args.limit}
    if args.ids:
        return "memory_get", {"ids": args.ids}
    return "memory_list", {"limit": args.limit}


async def _show(args: argparse.Namespace) -> int:
    if args.query is not None and args.ids:
        print("memseal show: give --query or --id, not both", file=sys.stderr)
        return USAGE
    scope = _scope(args.namespace)  # a bad namespace is refused before anything opens
    async with open_data(args, store_url(args)) as memory:
        view = await memory.as_of(
            args.as_of, at=args.at, run=args.run_id, step=args.step, names=CLI_NAMES
        )
        name, arguments = _call(args)
        result = await view.tools(scope).call(name, arguments)
    text = msgspec.json.format(msgspec.json.encode({"as_of": view.size, "result": result}))
    print(text.decode())
    return OK


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``show`` to the ``memseal`` parser."""
    show = verbs.add_parser(
        "show",
        parents=[store_options()],
        help="what the memory held at a point of its log (read-only, unrecorded)",
    )
    show.add_argument(
        "--as-of", dest="as_of", type=count_option("--as-of"), metavar="N", help="a tree size"
    )
    show.add_argument("--at", metavar="TIME", help="an RFC 3339 time, like 2026-05-01T12:00:00Z")
    show.add_argument("--run", dest="run_id", metavar="ID", help="a recorded run (with --step)")
    show.add_argument("--step", type=count_option("--step"), metavar="S", help="the run's step")
    show.add_argument(
        "--namespace", metavar="NS", help="read NS and the namespaces under it (default: all)"
    )
    show.add_argument("--query", metavar="Q", help="search the memory as of then (exact)")
    show.add_argument(
        "--id", dest="ids", action="append", default=[], metavar="ID", help="get this item"
    )
    show.add_argument("--limit", type=int, default=10, help="hits or items to show (default 10)")
    show.set_defaults(run=_show)
