"""``memseal witness``: run a C2SP tlog-witness (init, follow, logs, vkey, evidence, serve).

Exit codes: 0 success, 1 the folder holds evidence (``evidence``), 2 usage or I/O.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from memseal.cli.options import FAILED, OK, USAGE

__all__ = ["add_verbs"]

DEFAULT_WITNESS_DATA = "memseal-witness"


async def _witness(args: argparse.Namespace) -> int:
    from memseal.ledger.cosignature import Cosigner
    from memseal.witness.state import WitnessStore, create_witness_key, load_witness_key

    folder = Path(args.data)
    if args.action == "init":
        if not args.name:
            print(
                "memseal witness init: --name is required (e.g. witness.example/w1)",
                file=sys.stderr,
            )
            return USAGE
        signer = create_witness_key(folder, args.name)
        WitnessStore(folder, create=True).close()
        print(Cosigner(signer).vkey)
        return OK
    if args.action == "vkey":
        print(Cosigner(load_witness_key(folder)).vkey)
        return OK
    if args.action == "serve":
        return await _serve(args, folder)
    store = WitnessStore(folder)
    try:
        if args.action == "follow":
            if not args.vkey:
                print(
                    "memseal witness follow: --vkey is required (the log's vkey)", file=sys.stderr
                )
                return USAGE
            followed = store.follow(args.vkey, args.origin)
            print(
                f"following {followed.origin} ({len(followed.keys)} key(s), "
                f"cosigned size {followed.size})"
            )
            return OK
        if args.action == "logs":
            for log in store.logs():
                keys = " ".join(k.text for k in log.keys)
                print(f"{log.origin}\tsize={log.size}\tcosigned_at={log.cosigned_at}\t{keys}")
            return OK
        # evidence
        found = store.evidence()
        for item in found:
            print(f"--- evidence {item.id}: {item.origin} at {item.at}: {item.reason}")
            print(f"known (cosigned size {item.known_size}):")
            sys.stdout.write(item.known_note or "(none)\n")
            print("conflicting:")
            sys.stdout.write(item.request)
        return FAILED if found else OK
    finally:
        store.close()


async def _serve(args: argparse.Namespace, folder: Path) -> int:
    import uvicorn

    from memseal.witness.app import create_witness_app, open_witness

    witness = open_witness(folder)
    try:
        app = create_witness_app(witness)
        url = f"http://{args.host}:{args.port}"
        print(f"memseal witness {witness.cosigner.name} serving {folder} at {url}", flush=True)
        print(f"  vkey: {witness.cosigner.vkey}", flush=True)
        config = uvicorn.Config(
            app, host=args.host, port=args.port, log_level=args.log_level, access_log=False
        )
        server = uvicorn.Server(config)
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
        try:
            await server.serve()
        except SystemExit:
            print(f"memseal witness serve: cannot serve at {url}", file=sys.stderr)
            return USAGE
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        await asyncio.to_thread(witness.store.close)
    return OK


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``witness`` to the ``memseal`` parser."""
    witness = verbs.add_parser(
        "witness",
        help="a C2SP tlog-witness: cosigns checkpoints that extend the ones it saw",
    )
    witness.add_argument("action", choices=["init", "vkey", "follow", "logs", "evidence", "serve"])
    witness.add_argument(
        "--data",
        default=DEFAULT_WITNESS_DATA,
        help=f"the witness's own folder: its key and state (default ./{DEFAULT_WITNESS_DATA})",
    )
    witness.add_argument("--name", help="init: the witness's key name, e.g. witness.example/w1")
    witness.add_argument("--vkey", help="follow: the log's vkey (memseal keys show)")
    witness.add_argument("--origin", help="follow: the log's origin (default: the vkey's name)")
    witness.add_argument("--host", default="127.0.0.1")
    witness.add_argument("--port", type=int, default=8421)
    witness.add_argument("--log-level", default="warning")
    witness.set_defaults(run=_witness)
