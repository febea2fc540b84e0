"""The witness over HTTP (c2sp.org/tlog-witness): ``POST /add-checkpoint`` and
``GET /<origin hash>/checkpoint``; the submission and monitoring prefixes are both ``/``.

There is no authentication, as the spec has it: a request is only as good as
the log signature on its checkpoint. Answers are plain text: the cosignature
line, or one line saying why not, with the spec's status code.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from memseal.ledger.cosignature import Cosigner
from memseal.ledger.errors import MemsealError

from .protocol import MAX_REQUEST_BYTES, Witness, WitnessRefusal
from .state import WitnessStore, load_witness_key

__all__ = ["SIZE_CONTENT_TYPE", "create_witness_app", "open_witness"]

#: The 409 answer's media type (tlog-witness).
SIZE_CONTENT_TYPE = "text/x.tlog.size"

_ORIGIN_HASH = re.compile(r"[0-9a-f]{64}")


def open_witness(folder: Path) -> Witness:
    """The witness of a data folder made by ``memseal witness init``."""
    cosigner = Cosigner(load_witness_key(folder))
    return Witness(cosigner, WitnessStore(folder))


async def _body(request: Request) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise WitnessRefusal(413, f"request is longer than {MAX_REQUEST_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def create_witness_app(witness: Witness) -> Starlette:
    """The HTTP app of ``witness`` (the caller closes its store)."""

    async def add_checkpoint(request: Request) -> Response:
        try:
            body = await _body(request)
            line = await asyncio.to_thread(witness.add_checkpoint, body)
        except WitnessRefusal as exc:
            if exc.status == 409:
                return PlainTextResponse(
                    f"{exc.known_size}\n", status_code=409, media_type=SIZE_CONTENT_TYPE
                )
            return PlainTextResponse(f"{exc.message}\n", status_code=exc.status)
        except MemsealError as exc:
            return PlainTextResponse(f"witness error: {exc}\n", status_code=503)
        return PlainTextResponse(line)

    async def checkpoint(request: Request) -> Response:
        digest = request.path_params["origin_hash"]
        if not _ORIGIN_HASH.fullmatch(digest):
            return PlainTextResponse("the origin hash is 64 lowercase hex digits\n", 404)
        log = await asyncio.to_thread(witness.store.by_origin_hash, digest)
        if log is None or log.note is None:
            return PlainTextResponse("no checkpoint cosigned for that log\n", 404)
        return PlainTextResponse(log.note)

    async def vkey(request: Request) -> Response:
        return PlainTextResponse(f"{witness.cosigner.vkey}\n")

    return Starlette(
        routes=[
            Route("/add-checkpoint", add_checkpoint, methods=["POST"]),
            Route("/vkey", vkey, methods=["GET"]),
            Route("/{origin_hash}/checkpoint", checkpoint, methods=["GET"]),
        ]
    )
