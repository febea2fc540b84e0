"""The log's side of tlog-witness: send each new checkpoint to the witnesses, keep their
cosignatures, and serve the checkpoint with them.

:class:`WitnessRelay` is what ``memseal serve --witness URL,VKEY`` runs. For each
witness it remembers the size the witness last cosigned (learnt from a 409
when it does not know it) and sends the consistency proof from that size.
Every cosignature a witness returns is checked against the witness's vkey
before it is kept, so a relay never serves a line that would not verify.
A witness that refuses or is unreachable is logged and skipped: the
checkpoint is served with the cosignatures it has, and a verifier that
needs more refuses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import httpx
import msgspec

from memseal.ledger.checkpoint import parse_checkpoint
from memseal.ledger.cosignature import CosignerKey, check_cosignatures, parse_cosigner_vkey
from memseal.ledger.errors import InvalidRequest, MemsealError, VerificationError
from memseal.ledger.log import Ledger
from memseal.ledger.note import split_note

from .protocol import format_add_checkpoint

__all__ = [
    "WITNESSED_FILE",
    "WitnessError",
    "WitnessRelay",
    "WitnessTarget",
    "parse_witness_option",
    "submit_checkpoint",
]

log = logging.getLogger("memseal.witness")

#: In the log's data folder: the newest checkpoint with the cosignatures it got.
WITNESSED_FILE = "witnessed.checkpoint"


class WitnessError(MemsealError):
    """A witness refused a checkpoint or could not be reached."""

    def __init__(self, message: str, *, status: int | None = None, size: int | None = None):
        super().__init__(message)
        self.status = status
        self.size = size


class WitnessTarget(msgspec.Struct, frozen=True, kw_only=True):
    """A witness to send checkpoints to: its submission prefix and its vkey."""

    url: str
    key: CosignerKey


def parse_witness_option(text: str) -> WitnessTarget:
    """``URL,VKEY`` as ``--witness`` takes it."""
    url, comma, vkey = text.partition(",")
    if not comma or not url or not vkey:
        raise InvalidRequest("--witness takes URL,VKEY (the witness's prefix and its vkey)")
    if not url.startswith(("http://", "https://")):
        raise InvalidRequest(f"--witness URL must start with http:// or https://, not {url!r}")
    try:
        key = parse_cosigner_vkey(vkey)
    except InvalidRequest as exc:
        raise InvalidRequest(f"--witness {url}: {exc}") from None
    return WitnessTarget(url=url.rstrip("/"), key=key)


async def submit_checkpoint(
    client: httpx.AsyncClient,
    target: WitnessTarget,
    note: str,
    old_size: int,
    proof: Sequence[bytes],
) -> str:
    """POST one add-checkpoint; return the witness's verified cosignature line.

    Raises WitnessError with the status (and for 409 the witness's size).
    """
    body = format_add_checkpoint(old_size, list(proof), note)
    try:
        answer = await client.post(
            f"{target.url}/add-checkpoint",
            content=body.encode("utf-8"),
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )
    except httpx.HTTPError as exc:
        raise WitnessError(f"witness {target.url} unreachable: {exc}") from exc
    text = answer.text
    if answer.status_code == 409:
        size_text = text.strip()
        if not size_text.isdigit():
            raise WitnessError(f"witness {target.url}: 409 without a size", status=409)
        raise WitnessError(
            f"witness {target.url} has cosigned size {size_text}", status=409, size=int(size_text)
        )
    if answer.status_code != 200:
        raise WitnessError(
            f"witness {target.url} refused ({answer.status_code}): {text.strip()[:200]}",
            status=answer.status_code,
        )
    # Keep only this witness's lines, and only if they verify on this very note.
    body_text, _ = split_note(note)
    lines = [line for line in text.splitlines(keepends=True) if line.strip()]
    mine = [line for line in lines if line.startswith(f"\u2014 {target.key.name} ")]
    if not mine:
        raise WitnessError(f"witness {target.url} answered no cosignature by {target.key.name}")
    try:
        _, found = check_cosignatures(body_text + "\n" + "".join(mine), [target.key])
    except VerificationError as exc:
        raise WitnessError(f"witness {target.url} answered a bad cosignature: {exc}") from exc
    if not found:
        raise WitnessError(f"witness {target.url} answered no cosignature by its key")
    return "".join(mine)


class WitnessRelay:
    """Sends the log's checkpoints to its witnesses and keeps their cosignatures."""

    def __init__(
        self,
        ledger: Ledger,
        targets: Sequence[WitnessTarget],
        *,
        folder: Path | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._ledger = ledger
        self.targets = tuple(targets)
        self._folder = folder
        self._client = httpx.AsyncClient(timeout=timeout, transport=transport)
        self._known: dict[str, int] = {}
        self._cosigned: dict[str, dict[str, str]] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self.errors: dict[str, str] = {}

    def start(self, interval: float = 1.0) -> None:
        """Watch the ledger's newest checkpoint and witness each new one."""
        self._task = asyncio.get_running_loop().create_task(self._watch(interval))

    async def close(self) -> None:
        """Stop watching and close the HTTP connections."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._client.aclose()

    async def _watch(self, interval: float) -> None:
        while True:
            try:
                latest = await self._ledger.latest_checkpoint()
                if latest is not None:
                    await self.witnessed(latest.note)
            except MemsealError as exc:
                log.warning("witnessing the newest checkpoint failed: %s", exc)
            await asyncio.sleep(interval)

    async def witnessed(self, note: str) -> str:
        """``note`` with every cosignature its witnesses gave (asking those that have not)."""
        body, _ = split_note(note)
        async with self._lock:
            got = self._cosigned.setdefault(body, {})
            for target in self.targets:
                if target.url in got:
                    continue
                try:
                    got[target.url] = await self._ask(target, note, body)
                    self.errors.pop(target.url, None)
                except MemsealError as exc:
                    self.errors[target.url] = str(exc)
                    log.warning("%s", exc)
            # Only the newest checkpoint's lines are worth keeping in memory.
            for other in [b for b in self._cosigned if b != body]:
                if parse_checkpoint(other).size < parse_checkpoint(body).size:
                    del self._cosigned[other]
            witnessed = note + "".join(got[t.url] for t in self.targets if t.url in got)
            if got:
                await asyncio.to_thread(self._keep, witnessed)
            return witnessed

    async def _ask(self, target: WitnessTarget, note: str, body: str) -> str:
        size = parse_checkpoint(body).size
        old = self._known.get(target.url, 0)
        for _attempt in range(2):
            if old > size:
                raise WitnessError(
                    f"witness {target.url} has cosigned size {old}, larger than this log's "
                    f"checkpoint of {size}: the log was rolled back, or another log has this origin"
                )
            proof = (
                [] if old in (0, size) else (await self._ledger.consistency_proof(old, size)).hashes
            )
            try:
                line = await submit_checkpoint(self._client, target, note, old, proof)
            except WitnessError as exc:
                if exc.status == 409 and exc.size is not None and exc.size != old:
                    old = exc.size  # learnt the witness's size: send the proof from there
                    continue
                raise
            self._known[target.url] = size
            return line
        raise WitnessError(f"witness {target.url} keeps changing its size")

    def _keep(self, witnessed: str) -> None:
        if self._folder is None:
            return
        path = self._folder / WITNESSED_FILE
        temporary = path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(witnessed)
        os.replace(temporary, path)
