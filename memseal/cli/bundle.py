"""Command-line verbs of session bundles: ``export`` and ``replay`` (and ``verify FILE``).

Exit codes (DESIGN.md's CLI table): export 0 / 2; replay 0 all results
match, 3 some result changed (a per-step diff is printed), 1 the bundle
fails verification, 2 usage or I/O. ``replay --update`` prints the same
diff, then writes a new bundle re-recorded under a local replay key
(:mod:`memseal._bundle_update`): 0 written, 1 the input fails verification,
2 usage, or a bundle that cannot be re-recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from memseal.cli.options import FAILED, OK, USAGE, open_data, store_options, store_url
from memseal.cli.trust import trust_text
from memseal.engine.embedders import Embedder
from memseal.ledger.errors import InvalidRequest, KeyFileError, VerificationError
from memseal.ledger.folder import DataFolder
from memseal.replay.evidence.bundle import (
    VerifiedBundle,
    decode_bundle,
    encode_bundle,
    export_bundle,
    verify_bundle,
)
from memseal.replay.evidence.source import default_trust
from memseal.replay.regress._update import DEFAULT_KEY_FOLDER, UpdateRefused, local_key, update
from memseal.replay.regress.regress import DEFAULT_TOLERANCE, embedder_for, regress

__all__ = ["add_verbs", "verify_bundle_file"]

#: ``replay``: some result changed.
CHANGED = 3


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``export`` and ``replay`` to the ``memseal`` parser."""
    export = verbs.add_parser(
        "export", parents=[store_options()], help="write one run as a session bundle"
    )
    export.add_argument("--run", required=True, dest="run_id", help="the run id")
    export.add_argument("-o", "--output", required=True, help="the bundle file to write")
    export.add_argument(
        "--with-read-proofs",
        action="store_true",
        help="also carry what `memseal prove-read BUNDLE` needs: every entry before the "
        "run's last read (their texts only within the run's reach) and a checkpoint at each "
        "size a read observed; the bundle then grows with the log before the run",
    )
    export.set_defaults(run=_export)

    replay = verbs.add_parser("replay", help="re-execute a bundle's calls and compare results")
    replay.add_argument("file", help="the session bundle")
    replay.add_argument("--against", help="the data folder it came from (exact comparison)")
    replay.add_argument(
        "--trust",
        help="the trusted vkey or a file holding it (default: the --against folder's first "
        "key, else the bundle's own first key, which checks integrity, not identity)",
    )
    replay.add_argument(
        "--embedder",
        choices=["auto", "hashing", "default", "none"],
        default="auto",
        help="the embedder to search with (auto: the one the recording used, if known)",
    )
    replay.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"bundle-only mode: how far a score may move (default {DEFAULT_TOLERANCE})",
    )
    replay.add_argument(
        "--update",
        action="store_true",
        help="write a new bundle whose results are the new ones, re-signed with the local "
        "replay key (exit 0 when written)",
    )
    replay.add_argument(
        "-o",
        "--output",
        help="with --update: the new bundle (default: FILE with .updated.bundle; never FILE "
        "itself unless named here)",
    )
    replay.add_argument(
        "--key",
        default=DEFAULT_KEY_FOLDER,
        help=f"with --update: the local replay key's folder, made on first use "
        f"(default ./{DEFAULT_KEY_FOLDER})",
    )
    replay.set_defaults(run=_replay)


async def _export(args: argparse.Namespace) -> int:
    folder = Path(args.data)
    store = store_url(args)
    if store is None and not DataFolder(root=folder).has_database():
        print(f"memseal export: no ledger in {folder}", file=sys.stderr)
        return USAGE
    async with open_data(args, store) as memory:
        bundle = await export_bundle(
            memory.ledger,
            await memory.key_history(),
            args.run_id,
            embedders=await memory.engine.embedders(),
            with_read_proofs=args.with_read_proofs,
        )
    data = encode_bundle(bundle)
    Path(args.output).write_bytes(data)
    prefix = "" if bundle.reads is None else f" (+{len(bundle.reads.prefix)} for read proofs)"
    print(
        f"exported run {args.run_id!r}: {len(bundle.entries)} entries{prefix}, "
        f"{len(data)} bytes, to {args.output}"
    )
    print(f"verify it with: memseal verify {args.output} --trust '{bundle.keys[0]}'")
    return OK


def _failed(exc: VerificationError) -> int:
    """One line on stderr, whatever the bundle put in the message."""
    print(f"FAILED: {' '.join(str(exc).split())}", file=sys.stderr)
    return FAILED


def verify_bundle_file(path: Path, trust: str) -> int:
    """``memseal verify FILE --trust VKEY`` for a bundle: 0 ok, 1 failed."""
    try:
        verified = verify_bundle(path.read_bytes(), trust_text(trust))
    except VerificationError as exc:
        return _failed(exc)
    print(verified.line())
    return OK


def _updated_path(path: Path) -> Path:
    if path.suffix == ".bundle":
        return path.with_suffix(".updated.bundle")
    return path.with_name(path.name + ".updated.bundle")


async def _replay(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not args.update and (args.output is not None or args.key != DEFAULT_KEY_FOLDER):
        print("memseal replay: -o and --key go with --update", file=sys.stderr)
        return USAGE
    if not path.is_file():
        print(f"memseal replay: no bundle at {path}", file=sys.stderr)
        return USAGE
    against = None if args.against is None else Path(args.against)
    if against is not None and not DataFolder(root=against).has_database():
        print(f"memseal replay: --against {against} holds no ledger", file=sys.stderr)
        return USAGE
    data = path.read_bytes()
    try:
        bundle = decode_bundle(data)
        if args.trust is not None:
            trust, whose = trust_text(args.trust), "the given key"
        else:
            chosen = default_trust(bundle, against)
            trust, whose = chosen.vkey, chosen.whose
        verified = verify_bundle(bundle, trust)
    except VerificationError as exc:
        return _failed(exc)
    print(f"{verified.line()}; trusted: {whose}")
    embedder = await asyncio.to_thread(embedder_for, verified, args.embedder)
    try:
        report = await regress(
            verified, against=against, embedder=embedder, tolerance=args.tolerance
        )
    except VerificationError as exc:
        return _failed(exc)
    print(report.text())
    if args.update:
        return await _update(args, path, verified, against, embedder, len(report.changed))
    return CHANGED if report.changed else OK


async def _update(
    args: argparse.Namespace,
    path: Path,
    verified: VerifiedBundle,
    against: Path | None,
    embedder: Embedder | None,
    changed: int,
) -> int:
    output = _updated_path(path) if args.output is None else Path(args.output)
    key_folder = Path(args.key)
    try:
        vkey, created = await asyncio.to_thread(local_key, key_folder)
        updated = await update(verified, key_folder=key_folder, against=against, embedder=embedder)
    except UpdateRefused as exc:
        print(f"memseal replay --update: {exc}", file=sys.stderr)
        return USAGE
    except VerificationError as exc:
        return _failed(exc)
    except (InvalidRequest, KeyFileError) as exc:
        print(f"memseal replay --update: {exc}", file=sys.stderr)
        return USAGE
    data = encode_bundle(updated.bundle)
    try:
        output.write_bytes(data)
    except OSError as exc:
        print(f"memseal replay --update: cannot write {output}: {exc.strerror}", file=sys.stderr)
        return USAGE
    for note in updated.notes:
        print(f"note: {note}")
    made = "made on first use" if created else "kept"
    print(
        f"updated: wrote run {verified.run_id!r} re-recorded with the current code "
        f"({changed} changed step(s)) to {output}: {len(updated.bundle.entries)} entries, "
        f"{len(data)} bytes"
    )
    print(
        f"signed with the LOCAL replay key in {key_folder} ({made}), not the recording's key: "
        f"{vkey}"
    )
    print(f"verify it with: memseal verify {output} --trust '{vkey}'")
    return OK
