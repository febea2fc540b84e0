"""The log as C2SP tlog-tiles under ``/tlog/``: the checkpoint, hash tiles, entry bundles.

``/tlog/checkpoint``, ``/tlog/tile/<L>/<N>[.p/<W>]``, ``/tlog/tile/entries/<N>[.p/<W>]``
and ``/tlog/signatures/<N>[.p/<W>]`` are the files of :mod:`memseal.ledger.tiles`,
read from the stored tree (a hash tile is one read of its stored hashes, after one read
of the log's size), as far as the log reaches (past the newest checkpoint too: a tile's
bytes are final once the tree covers it, and a client asks only for what a checkpoint
it verified needs). Any tlog-tiles client (Go's ``tlog.TileHashReader``, a
witness, a monitor) follows the log from them.

Who reads what: hash tiles and the checkpoint disclose no content (hashes and a
size), entry bundles and signatures the signed bodies (kinds, namespaces, item ids,
hashes; never a payload). By default every file takes an auditor or admin token, as
the ledger routes do; ``create_app(tlog_public=True)`` (``serve --tlog-public``) opens
the checkpoint and hash tiles to anyone, ``tlog_public_entries=True`` the bundles too.
An agent token never reads a bundle unless they are public.

Caching: a full tile's bytes are final, a partial tile's path names its width, so both
are ``immutable`` for a year; ``public`` only when the file needs no token (a shared
cache must not keep what a token fetched). The checkpoint changes: public ones may be
cached five seconds, the others not at all.
"""

from __future__ import annotations

from typing import Final

import msgspec
from fastapi import APIRouter, Request
from fastapi.responses import Response

from memseal.ledger.tiles import HASHES, parse_tile_path
from memseal.ledger.tiles_store import read_tile

from ..deps import ServiceDep
from ..errors import ApiError
from ..state import Service
from ..tokens import role_token

__all__ = ["PREFIX", "TlogAccess", "router", "tlog_checkpoint", "tlog_file"]

router = APIRouter(tags=["tlog"])

PREFIX: Final = "/tlog"
_TILE_TYPE: Final = "application/octet-stream"
_NOTE_TYPE: Final = "text/plain; charset=utf-8"
_IMMUTABLE: Final = "max-age=31536000, immutable"
_READERS: Final = ("auditor", "admin")
_OK: Final[dict[int | str, dict[str, object]]] = {
    200: {
        "description": "the file's bytes (C2SP tlog-tiles)",
        "content": {_TILE_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


class TlogAccess(msgspec.Struct, frozen=True, kw_only=True):
    """Which tlog files need no token: the checkpoint and hash tiles, the entry bundles."""

    public: bool = False
    public_entries: bool = False


def _access(request: Request) -> TlogAccess:
    access: TlogAccess | None = getattr(request.app.state, "tlog", None)
    return access if access is not None else TlogAccess()


def _admit(request: Request, service: Service, public: bool) -> None:
    """Let the request through if the file is public, else only an auditor's or admin's."""
    if public:
        return
    who = service.authenticate(request.headers.get("authorization"))
    if who.role not in _READERS:
        raise ApiError(
            403, "forbidden", f"{role_token(who.role)} cannot read this tlog file (auditor/admin)"
        )


@router.get(
    f"{PREFIX}/checkpoint",
    summary="tlog-tiles: the newest signed checkpoint (one is cut if none exists)",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def tlog_checkpoint(request: Request, service: ServiceDep) -> Response:
    """
    \f
    The checkpoint the tiles cover, with its witnesses' cosignatures.
    """
    access = _access(request)
    _admit(request, service, access.public)
    ledger = service.memory.ledger
    latest = await ledger.latest_checkpoint()
    note = latest.note if latest is not None else await ledger.checkpoint()
    relay = getattr(request.app.state, "witnesses", None)
    if relay is not None:
        note = await relay.witnessed(note)
    cache = "public, max-age=5" if access.public else "no-store"
    return Response(note, media_type=_NOTE_TYPE, headers={"Cache-Control": cache})


@router.get(
    PREFIX + "/{path:path}",
    summary="tlog-tiles: a hash tile, an entry bundle or its signatures",
    response_class=Response,
    responses=_OK,
)
async def tlog_file(request: Request, service: ServiceDep, path: str) -> Response:
    """
    \f
    One tile of the log's tree (its size, at least the newest checkpoint's); 400 for a
    path that is not a tile's, 404 for a tile that tree does not have.
    """
    access = _access(request)
    if not access.public and not access.public_entries:
        _admit(request, service, False)  # nothing is public: who asks comes before what
    ref = parse_tile_path(path)
    public = access.public if ref.kind == HASHES else access.public_entries
    _admit(request, service, public)
    store = service.memory.ledger.store
    # The log's size bounds the tiles: one cheap read, where the newest checkpoint would
    # read them all. A tile past the newest checkpoint holds final bytes all the same.
    size = (await store.head()).size
    data = await read_tile(store, ref, size)
    cache = f"{'public' if public else 'private'}, {_IMMUTABLE}"
    return Response(data, media_type=_TILE_TYPE, headers={"Cache-Control": cache})
