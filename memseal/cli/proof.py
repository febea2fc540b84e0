"""Command-line verbs of read proofs: ``prove-read`` and ``verify-read``.

``prove-read DATA|BUNDLE --run R --step S -o PROOF`` writes the proof that
step S of run R (a read) returned its recorded result, from the data folder
or from a bundle exported with ``--with-read-proofs`` (checked first against
``--trust``, by default the bundle's own first key); ``verify-read PROOF --trust
VKEY`` checks it offline, with no data folder, and re-derives the read
(see :mod:`memseal.replay.read_proof`). ``memseal prove`` (inclusion and
consistency proofs of single entries) is another verb.

Exit codes (DESIGN.md's CLI table): prove-read 0 written, 1 not written
because the proof would not verify (it checks the proof as an auditor will,
against the folder's first key: a read whose ranking needs texts outside its
reach says to ``--disclose all``), 2 usage or I/O (an unknown run or step, a
write, a read whose memory was forgotten since);
verify-read 0 ok, 1 the proof fails (the message names the step, the seq
and the field), 2 usage or I/O.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memseal.cli.options import FAILED, OK, USAGE, store_options, store_url
from memseal.cli.trust import trust_text
from memseal.ledger.errors import VerificationError
from memseal.ledger.folder import DataFolder
from memseal.ledger.location import is_database_url
from memseal.memory import open
from memseal.replay.evidence.bundle import decode_bundle, verify_bundle
from memseal.replay.evidence.read_proof import (
    decode_read_proof,
    encode_read_proof,
    prove_read_from_bundle,
    verify_read,
)

__all__ = ["add_verbs"]


def add_verbs(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``prove-read`` and ``verify-read`` to the ``memseal`` parser."""
    prove = verbs.add_parser(
        "prove-read",
        parents=[store_options()],
        help="write a self-contained proof of what one recorded read returned",
    )
    prove.add_argument(
        "source",
        nargs="?",
        help="the data folder holding the run (default: --data), or a session bundle "
        "exported with --with-read-proofs",
    )
    prove.add_argument("--run", required=True, dest="run_id", help="the run id")
    prove.add_argument("--step", required=True, type=int, help="the step of the read")
    prove.add_argument("-o", "--output", required=True, help="the proof file to write")
    prove.add_argument(
        "--disclose",
        choices=["reach", "all"],
        default="reach",
        help="whose texts the proof carries: reach (default) the texts the read could see, "
        "no other; all every memory text before the read too, so exact (BM25) scores "
        "re-derive byte for byte when other namespaces hold memory",
    )
    prove.add_argument(
        "--trust",
        help="with a bundle: the trusted vkey, or a file holding it (default: the bundle's "
        "own first key, which checks integrity, not identity)",
    )
    prove.set_defaults(run=_prove_read)

    verify = verbs.add_parser(
        "verify-read",
        help="check a read proof offline and re-derive the read (0 ok, 1 failed)",
    )
    verify.add_argument("proof", help="the read proof file")
    verify.add_argument("--trust", required=True, help="the trusted vkey, or a file holding it")
    verify.add_argument(
        "--embedder",
        choices=["auto", "hashing", "default", "none"],
        default="auto",
        help="the embedder to re-derive semantic and hybrid reads with (auto: the one the "
        "proof names, when available here)",
    )
    verify.set_defaults(run=_verify_read)


async def _prove_read(args: argparse.Namespace) -> int:
    if args.source is not None and is_database_url(args.source):
        print(
            "memseal prove-read: name a store with --store URL, and the data folder that "
            "holds its keys with --data DIR (or as the first argument)",
            file=sys.stderr,
        )
        return USAGE
    source = Path(args.source if args.source is not None else args.data)
    store = store_url(args)
    if source.is_file():
        return await _prove_from_bundle(args, source)
    if store is None and not DataFolder(root=source).has_database():
        print(f"memseal prove-read: no ledger in {source}", file=sys.stderr)
        return USAGE
    async with open(
        source, store=store, create=False, checkpoint_interval=None, embedder=None
    ) as memory:
        data = await memory.prove_read(args.run_id, args.step, disclose=args.disclose)
        first = (await memory.key_history())[0].text
    return await _write_checked(args, data, first)


async def _prove_from_bundle(args: argparse.Namespace, source: Path) -> int:
    if args.disclose != "reach":
        print(
            "memseal prove-read: a bundle carries the texts of the run's reach only: "
            "`--disclose all` needs the data folder",
            file=sys.stderr,
        )
        return USAGE
    data = source.read_bytes()
    try:
        bundle = decode_bundle(data)
        first = trust_text(args.trust) if args.trust else bundle.keys[0]
        verified = verify_bundle(bundle, first)
    except VerificationError as exc:
        print(f"FAILED: the bundle: {' '.join(str(exc).split())}", file=sys.stderr)
        return FAILED
    if verified.run_id != args.run_id:
        print(
            f"memseal prove-read: the bundle holds run {verified.run_id!r}, not {args.run_id!r}",
            file=sys.stderr,
        )
        return USAGE
    proof = prove_read_from_bundle(verified, args.step)
    return await _write_checked(args, encode_read_proof(proof), first)


async def _write_checked(args: argparse.Namespace, data: bytes, first: str) -> int:
    """Check the proof as an auditor will, then write it."""
    proof = decode_read_proof(data)
    try:
        # Check it as an auditor will before writing it: a read whose ranking needs texts
        # outside its reach (BM25 statistics) fails here, with the hint to disclose them.
        await verify_read(data, first)
    except VerificationError as exc:
        print(
            f"memseal prove-read: not written, the proof would not verify: "
            f"{' '.join(str(exc).split())}",
            file=sys.stderr,
        )
        return FAILED
    Path(args.output).write_bytes(data)
    shared = sum(1 for e in proof.prefix if e.payload is not None)
    print(
        f"wrote the read proof of step {args.step} of run {args.run_id!r} to {args.output}: "
        f"{len(proof.prefix)} entries before the read ({shared} with their texts), "
        f"{len(data)} bytes"
    )
    print(f"verify it with: memseal verify-read {args.output} --trust '{first}'")
    return OK


async def _verify_read(args: argparse.Namespace) -> int:
    path = Path(args.proof)
    if not path.is_file():
        print(f"memseal verify-read: no proof file at {path}", file=sys.stderr)
        return USAGE
    trust = trust_text(args.trust)
    data = path.read_bytes()
    try:
        verified = await verify_read(data, trust, embedder=args.embedder)
    except VerificationError as exc:
        print(f"FAILED: {' '.join(str(exc).split())}", file=sys.stderr)
        return FAILED
    print(verified.line())
    return OK
