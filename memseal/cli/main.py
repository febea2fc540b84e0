"""The ``memseal`` command line.

Exit codes: 0 success; 1 verification failed; 2 usage or I/O error
(argparse's own usage errors are 2 as well).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import msgspec

from memseal.cli.brain import add_verbs as add_brain_verbs
from memseal.cli.bundle import add_verbs as add_bundle_verbs
from memseal.cli.bundle import verify_bundle_file
from memseal.cli.engine import add_engine_verbs, deep_check
from memseal.cli.migrate import add_verbs as add_migrate_verbs
from memseal.cli.options import (
    FAILED,
    OK,
    USAGE,
    data_options,
    named_urls,
    open_data,
    store_options,
    store_url,
)
from memseal.cli.progress import ProgressLine
from memseal.cli.proof import add_verbs as add_proof_verbs
from memseal.cli.service import add_verbs as add_service_verbs
from memseal.cli.show import add_verbs as add_show_verbs
from memseal.cli.tiles import add_verbs as add_tiles_verbs
from memseal.cli.tiles import add_verify_options, verify_tiles_command
from memseal.cli.trust import trust_text
from memseal.cli.witness import add_verbs as add_witness_verbs
from memseal.cli.worker import add_verbs as add_worker_verbs
from memseal.ledger.errors import MemsealError, VerificationError
from memseal.ledger.keys import create_keys, key_files_exist, load_keys
from memseal.ledger.location import hide_password, is_database_url
from memseal.memory import DATABASE, STORE_ENV, open, open_audit
from memseal.replay.runs.provenance import DerivedCheck

__all__ = ["main"]


async def _verify(args: argparse.Namespace) -> int:
    if args.tiles is not None:
        return await verify_tiles_command(args)
    if args.since is not None or args.token_file is not None:
        print("memseal verify: --since and --token-file go with --tiles", file=sys.stderr)
        return USAGE
    if args.path is None:
        print("memseal verify: give PATH (or --tiles URL_OR_DIR)", file=sys.stderr)
        return USAGE
    if is_database_url(args.path):
        return await _verify_ledger(args, args.path)
    target = Path(args.path)
    if target.is_file():  # a session bundle
        if args.witness or args.witnesses is not None:
            print(
                "memseal verify: --witness checks a ledger's kept checkpoints, not a bundle",
                file=sys.stderr,
            )
            return USAGE
        return verify_bundle_file(target, args.trust)
    if not target.is_dir():
        print(f"memseal verify: {target} is not a memseal data folder", file=sys.stderr)
        return USAGE
    return await _verify_ledger(args, target)


async def _verify_ledger(args: argparse.Namespace, where: str | Path) -> int:
    """Audit the ledger of a data folder or a store URL (an audit needs no keys), its
    memo table against the signed calls and, with ``--deep``, the projections."""
    trust = trust_text(args.trust)
    kept = [Path(p).read_text(encoding="utf-8") for p in args.checkpoint]
    if args.witnesses is not None and not args.witness:
        print("memseal verify: --witnesses K needs --witness VKEY", file=sys.stderr)
        return USAGE
    if args.witness and not kept:
        from memseal.witness.client import WITNESSED_FILE  # not at import: it loads httpx

        # serve --witness keeps the newest cosigned checkpoint in the data folder.
        witnessed = None if isinstance(where, str) else Path(where) / WITNESSED_FILE
        if witnessed is None or not witnessed.is_file():
            print(
                "FAILED: witness: no cosigned checkpoint to check (give --checkpoint FILE, "
                "a checkpoint fetched from the service's checkpoint route)",
                file=sys.stderr,
            )
            return FAILED
        kept = [witnessed.read_text(encoding="utf-8")]
    if args.deep and isinstance(where, str):
        print(
            "memseal verify --deep: give the data folder (its secret keys the projections), "
            f"with ${STORE_ENV} naming the store",
            file=sys.stderr,
        )
        return USAGE
    # A store URL is the whole location; a folder's log may live in the store named.
    store = None if isinstance(where, str) else store_url(args)
    progress = ProgressLine("verifying")
    async with open_audit(where, store=store) as ledger:
        try:
            # The derived tables are collected on the ledger's own scan, checked after it.
            derived = DerivedCheck()
            summary = await ledger.verify(
                trust,
                checkpoints=kept,
                witnesses=[trust_text(w) for w in args.witness],
                quorum=args.witnesses,
                progress=progress,
                observe=derived.add,
            )
            await derived.check(ledger.store)
            deep = await deep_check(ledger.store, Path(where)) if args.deep else None
        except VerificationError as exc:
            progress.close()
            print(f"FAILED: {exc}", file=sys.stderr)
            return FAILED
    if deep is not None and not deep.matches:
        # No ok line: it would say the projections were checked, and they differ.
        print(f"FAILED: {deep.line()}", file=sys.stderr)
        return FAILED
    print(f"{summary.line()}; {verify_scope(deep=deep is not None)}")
    if deep is not None:
        print(f"{deep.line()} in {deep.seconds:.2f} s")
    return OK


#: What ``memseal verify`` checks without ``--deep`` (docs/auditing.md has the table).
CHECKED = (
    "signatures, hash chain, keys, checkpoints, payloads, memos, runs, redactions, "
    "mentions' item refs"
)
#: What only ``--deep`` checks: the rebuild needs the folder's instance secret.
DEEP = "projections (items, namespaces, facets, verdicts, full-text index), mentions' facet refs"


def verify_scope(*, deep: bool) -> str:
    """The part of verify's ok line saying which checks ran, and which need ``--deep``: a
    plain "ok" after an edited projection (an item moved to another tenant) would claim
    more than was checked."""
    if deep:
        return f"checked: {CHECKED}, {DEEP}"
    return f"checked: {CHECKED}; not checked: {DEEP}, which need --deep"


async def _keys(args: argparse.Namespace) -> int:
    folder = Path(args.data)
    if args.action == "show":
        if not folder.is_dir():
            # A mistyped --data is not a lost key: "restore it from a backup" would mislead.
            print(f"memseal keys show: {folder} is not a memseal data folder", file=sys.stderr)
            return USAGE
        print(load_keys(folder).vkey)
        return OK
    if args.action == "rotate":
        store = store_url(args)
        if store is None and not (folder / DATABASE).exists():
            print(f"memseal keys rotate: no ledger in {folder}", file=sys.stderr)
            return USAGE
        async with open_data(args, store) as memory:
            old = memory.vkey
            new = await memory.rotate_key(args.name)
        print(f"rotated: {old}")
        print(f"     to: {new}")
        print("the old key signed the hand-over; auditors keep trusting the first key")
        return OK
    # new
    if key_files_exist(folder):
        print(
            f"memseal keys new: {folder} already has a key; memseal never overwrites one",
            file=sys.stderr,
        )
        return USAGE
    if (folder / DATABASE).exists():
        print(
            f"memseal keys new: {folder} already has a ledger; its key cannot be replaced",
            file=sys.stderr,
        )
        return USAGE
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    keys = create_keys(folder, args.name or f"memseal-{folder.resolve().name}")
    print(keys.vkey)
    return OK


async def _checkpoint(args: argparse.Namespace) -> int:
    async with open_data(args, store_url(args)) as memory:
        sys.stdout.write(await memory.ledger.checkpoint())
    return OK


async def _prove(args: argparse.Namespace) -> int:
    inclusion = args.seq is not None
    consistency = args.from_size is not None or args.to_size is not None
    if inclusion == consistency:
        print("memseal prove: give --seq S [--size N], or --from M --to N", file=sys.stderr)
        return USAGE
    if consistency and args.from_size is None:
        print("memseal prove: --to needs --from", file=sys.stderr)
        return USAGE
    async with open_data(args, store_url(args)) as memory:
        if inclusion:
            sys.stdout.write(await memory.ledger.tlog_proof(args.seq, args.size))
        else:
            proof = await memory.ledger.consistency_proof(args.from_size, args.to_size)
            sys.stdout.write(proof.text())
    return OK


async def _demo(args: argparse.Namespace) -> int:
    """What `make run` does until the service lands: append, verify, print the head."""
    async with open(args.data, embedder=None) as memory:
        before = await memory.ledger.size()
        appended = await memory.ledger.append(
            "note",
            {"source": "make run"},
            {"text": "memseal demo: a signed entry"},
        )
        summary = await memory.ledger.verify(memory.trust_root, progress=ProgressLine("verifying"))
        print(f"data folder: {memory.folder}")
        print(f"public key:  {memory.vkey}")
        print(f"appended:    seq {appended.seq} (the log had {before} entries)")
        print(f"head:        {summary.head}")
        print(summary.line())
        print(f"audit it:    memseal verify {memory.folder} --trust '{memory.trust_root}'")
    return OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memseal",
        description="memseal: a memory service whose every call is a signed ledger entry.",
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    verify = verbs.add_parser(
        "verify", help="audit a ledger (data folder, store URL or bundle) against a public key"
    )
    verify.add_argument(
        "path",
        nargs="?",
        help="a data folder, a postgresql:// store URL, or a session bundle file",
    )
    verify.add_argument("--trust", required=True, help="the trusted vkey, or a file holding it")
    verify.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="FILE",
        help="a signed checkpoint you kept; the log must still contain it (repeatable)",
    )
    verify.add_argument(
        "--witness",
        action="append",
        default=[],
        metavar="VKEY",
        help="a trusted witness's vkey (repeatable): the checkpoints must carry its "
        "cosignature (default checkpoint: the one serve --witness kept in the folder)",
    )
    verify.add_argument(
        "--witnesses",
        type=int,
        metavar="K",
        help="how many of the --witness keys must have cosigned each checkpoint (default 1)",
    )
    verify.add_argument(
        "--deep",
        action="store_true",
        help="also rebuild the projections from the log into a scratch store and compare",
    )
    add_verify_options(verify)
    verify.set_defaults(run=_verify)

    checkpoint = verbs.add_parser(
        "checkpoint", parents=[store_options()], help="cut and print a signed checkpoint"
    )
    checkpoint.set_defaults(run=_checkpoint)

    prove = verbs.add_parser(
        "prove", parents=[store_options()], help="an inclusion or a consistency proof"
    )
    prove.add_argument("--seq", type=int, help="the entry to prove (C2SP tlog-proof)")
    prove.add_argument("--size", type=int, help="against the stored checkpoint of this size")
    prove.add_argument("--from", dest="from_size", type=int, help="the older tree size")
    prove.add_argument("--to", dest="to_size", type=int, help="the newer tree size")
    prove.set_defaults(run=_prove)

    keys = verbs.add_parser("keys", parents=[store_options()], help="key management")
    keys.add_argument("action", choices=["new", "show", "rotate"])
    keys.add_argument("--name", help="the key name (keys new, keys rotate)")
    keys.set_defaults(run=_keys)

    demo = verbs.add_parser(
        "demo", parents=[data_options()], help="append one entry, verify, print the head"
    )
    demo.set_defaults(run=_demo)
    add_engine_verbs(verbs)
    add_bundle_verbs(verbs)
    add_service_verbs(verbs)
    add_migrate_verbs(verbs)
    add_brain_verbs(verbs)
    add_worker_verbs(verbs)
    add_witness_verbs(verbs)
    add_proof_verbs(verbs)
    add_show_verbs(verbs)
    add_tiles_verbs(verbs)
    return parser


def _hide_passwords(text: str, args: argparse.Namespace) -> str:
    """``text`` without the password of any store URL this command was given.

    memseal's own messages name a store by its display form already; a driver's
    message may quote the URL it was handed.
    """
    for url in named_urls(args):
        if is_database_url(url):
            text = hide_password(text, url)
    return text.rstrip()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``memseal`` command ``argv`` (default: the process's arguments); return its
    exit code. Errors end as one line on stderr, never a traceback."""
    args = _parser().parse_args(argv)
    run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.run
    try:
        return asyncio.run(run(args))
    except (MemsealError, OSError) as exc:
        print(f"memseal {args.verb}: {_hide_passwords(str(exc), args)}", file=sys.stderr)
        return USAGE
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        # Stored bytes that do not decode (an entry, a payload) mean a damaged ledger: the
        # layers below raise the decoder's error as it is, and it ends here as one line.
        print(
            f"memseal {args.verb}: stored data does not decode, so the ledger is damaged "
            f"({_hide_passwords(str(exc), args)[:200]}); `memseal verify` names the entry",
            file=sys.stderr,
        )
        return USAGE
    except KeyboardInterrupt:
        print("memseal: interrupted", file=sys.stderr)
        return 130
