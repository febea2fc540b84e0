"""``memseal replay --update``: re-record a bundle's run with the current code, under a local key.

The recorded bundle is signed by the key of the data folder it came from,
which CI does not hold. An update therefore makes a *new* log, signed by a
dedicated local replay key (a folder of memseal's own key files, made on
first use), and records the run in it again:

1. A temporary data folder is made with a copy of the local key (and, with
   ``--against DIR``, that folder's instance secret, so re-executed writes
   make the recorded item ids; from the bundle alone the local key's secret
   is used, so the run's own writes make new ids).
2. The memory the run saw is re-applied into it entry by entry, with the
   regression replay's pieces (the entries of the same
   :class:`~memseal.replay.evidence.source.EvidenceSource`, and
   :mod:`memseal.replay.evidence._temp_log`: the same temporary-log copying), so
   every call sees the state it observed.
   The old run's own entries are not copied: the new run's stand in for them
   (and gap entries keep later seqs, hence ``ledger_ref``, where they were).
3. Every recorded call is made again, in order, through a real :class:`Run`
   in ``record`` mode with the recorded tool names, arguments and scope; its
   writes are re-executed and replace the recorded ones.
4. The run is exported with :func:`export_bundle` (a fresh checkpoint signed
   by the local key), and the temporary folder is deleted.

The temporary folder is opened here from the layers' own parts (the ledger's
``open_log``, the engine, a :class:`Run`), not through ``memseal.open``: this
floor stands below the top layer, and the folder needs none of what ``open``
adds for a host (the store chosen by the environment, as-of views, a location
record).

The new bundle verifies with ``--trust`` the local key's vkey and replays to
its own results. A bundle holding memory forgotten since (its text is erased
everywhere) or a call whose arguments were erased cannot be re-recorded:
:class:`UpdateRefused`. Nor, from the bundle alone, can a run that the new
ids, or memory the bundle does not carry, would change (a store answered with
an item held from before the run would make a second copy, say); nor, with
``--against DIR``, a folder whose instance secret is not the recording's.
The evidence decides each refusal it can before any work
(:meth:`EvidenceSource.why_not_update`, :meth:`EvidenceSource.why_not_secret`);
``_check_carried`` refuses as each read is re-made.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from memseal.engine import Engine
from memseal.engine.embedders import Embedder
from memseal.ledger import CheckpointPolicy
from memseal.ledger.errors import InvalidRequest
from memseal.ledger.folder import DataFolder
from memseal.ledger.keys import create_keys, key_files_exist, key_history, load_keys
from memseal.ledger.log import Ledger
from memseal.ledger.opening import LogLocation, OpenedLog, open_log
from memseal.ledger.store import SqlStore
from memseal.replay.evidence._bundle_format import run_scope
from memseal.replay.evidence._temp_log import Source, TempLog, clock_for, parse_time
from memseal.replay.evidence.bundle import MEMORY_KINDS, Bundle, VerifiedBundle, export_bundle
from memseal.replay.evidence.source import Entries, EvidenceSource
from memseal.replay.runs.identity import ScopeIdentity
from memseal.replay.runs.memo import ddl_for as memo_ddl_for
from memseal.replay.runs.run import RECORDED_ERRORS, Run
from memseal.tools import MemoryTools, ToolScope
from memseal.tools.catalog import WRITE_TOOLS

from ._reexec import Cursors
from .regress import ranked_as

__all__ = ["DEFAULT_KEY_FOLDER", "UpdateRefused", "Updated", "local_key", "update"]

#: Where the local replay key lives unless the host names a folder.
DEFAULT_KEY_FOLDER = "memseal-replay-key"


class UpdateRefused(InvalidRequest):
    """The bundle cannot be re-recorded (its text or arguments were erased by a forget)."""


class Updated(msgspec.Struct, kw_only=True):
    """What an update made: the new bundle, the vkey it verifies with, and the notes
    on what differs from the recording (new item ids, a call that saw another size)."""

    bundle: Bundle
    vkey: str  # the local replay key's public half: what CI trusts for the new bundle
    notes: list[str]


def local_key(folder: Path) -> tuple[str, bool]:
    """Load the local replay key in ``folder``, making it on first use: (vkey, created)."""
    if key_files_exist(folder):
        return load_keys(folder).vkey, False
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return create_keys(folder, f"memseal-replay-{secrets.token_hex(4)}").vkey, True


def _call_of(tool: str, arguments: Any) -> tuple[Any, Any]:
    """The name and arguments to send again (a refused call is sent as it was sent)."""
    if tool == "(invalid)" and isinstance(arguments, dict):
        return arguments.get("$name", tool), {}
    if isinstance(arguments, dict) and "$invalid" in arguments:
        return tool, arguments.get("$sent", "")
    return tool, arguments


async def update(
    verified: VerifiedBundle,
    *,
    key_folder: Path,
    against: Path | None = None,
    embedder: Embedder | None = None,
) -> Updated:
    """Re-record the bundle's run under the local key in ``key_folder`` (module docstring)."""
    source = EvidenceSource.of(verified, against)
    refused = source.why_not_update()
    if refused is not None:
        raise UpdateRefused(refused)
    scope = run_scope(verified)
    notes: list[str] = []
    if not source.keeps_ids and any(c.call.tool in WRITE_TOOLS for c in verified.calls):
        notes.append(
            "the run's writes were re-executed with the local key's instance secret: the items "
            "they made have new ids (--against DIR keeps the recorded ones)"
        )
    async with source.open() as entries:
        refused = source.why_not_secret(entries.secret)
        if refused is not None:
            raise UpdateRefused(refused)
        with tempfile.TemporaryDirectory(prefix="memseal-update-") as tmp:
            data = Path(tmp) / "data"
            data.mkdir(mode=0o700)
            shutil.copytree(DataFolder(root=key_folder).keys, DataFolder(root=data).keys)
            if entries.secret is not None:
                DataFolder(root=data).instance_secret.write_bytes(entries.secret)
            # The re-recorded reads rank full text as the recording's store did.
            ranks_as = ranked_as(verified)
            log = TempLog(data, b"", embedder, ranks_as=ranks_as)
            recording = await _Recording.open(data, log, embedder, ranks_as)
            try:
                log.store, log.ledger, log.engine = (
                    recording.ledger.store,
                    recording.ledger,
                    recording.engine,
                )
                await _record(source, entries, log, recording.run, scope, notes)
                bundle = await export_bundle(
                    recording.ledger,
                    key_history(data),
                    verified.run_id,
                    embedders=await recording.engine.embedders(),
                    ranked_by=ranks_as,
                )
                vkey = recording.ledger.store.signer.verifier.text
            finally:
                await recording.close()
    return Updated(bundle=bundle, vkey=vkey, notes=notes)


class _Recording:
    """The temporary folder opened for the new run: its ledger (signed by the local key),
    the engine over it, and the runs it makes."""

    def __init__(self, opened: OpenedLog, ledger: Ledger, engine: Engine) -> None:
        self.opened, self.ledger, self.engine = opened, ledger, engine

    @classmethod
    async def open(
        cls, data: Path, log: TempLog, embedder: Embedder | None, ranks_as: str
    ) -> _Recording:
        # The folder's own SQLite file, whatever MEMSEAL_STORE says; its clock is the
        # copied entry's (log.clock), and it cuts no checkpoint but the export's.
        opened = await open_log(
            LogLocation(folder=data), create=False, clock=log.clock, schema=_schema
        )
        try:
            policy = CheckpointPolicy(origin=opened.origin, every=None, interval=None)
            ledger = Ledger(opened.store, opened.history[0], policy)
        except BaseException:
            await opened.store.close()
            raise
        try:
            engine = await Engine.open(
                ledger,
                opened.store,
                opened.keys.secret,
                clock=log.clock,
                embedder=embedder,
                ranks_as=ranks_as,
            )
        except BaseException:
            await ledger.close()
            raise
        ledger.start()
        return cls(opened, ledger, engine)

    def run(self, run_id: str, scope: ToolScope, *, mode: str) -> Run:
        """A run over the folder, as ``Memory.run`` makes one."""
        return Run(
            run_id=run_id,
            mode=mode,
            tools=MemoryTools(self.engine, scope),
            scope=ScopeIdentity.of(scope),
            ledger=self.ledger,
            store=self.ledger.store,
            secret=self.opened.keys.secret,
            keys=self.opened.history,
            owner="memseal-replay-update",
        )

    async def close(self) -> None:
        try:
            await self.engine.close()
        finally:
            await self.ledger.close()


def _schema(store: SqlStore) -> None:
    """The tables a run writes: the engine's and the memo table (a re-recording serves
    no as-of view, so it needs none of their tables)."""
    Engine.register_schema(store)
    store.add_schema(memo_ddl_for(store.dialect))


async def _record(
    source: EvidenceSource,
    entries: Entries,
    log: TempLog,
    make_run: Any,
    scope: Any,
    notes: list[str],
) -> None:
    assert log.store is not None
    replaced: set[int] = set()  # recorded writes the re-executed ones stand in for
    cursors = Cursors()  # each recorded next_cursor, as the re-made page returned it
    fed = 0

    async def feed(stop: int) -> None:
        """Copy source entries up to ``stop``, then pad with gaps so the log holds ``stop``."""
        nonlocal fed
        size = (await log.store.head()).size if log.store is not None else 0
        batch: list[Source | int] = []
        for item in await entries.read(fed, stop) if stop > fed else []:
            seq = item if isinstance(item, int) else item.seq
            if isinstance(item, int) or seq in replaced or item.kind not in MEMORY_KINDS:
                # Only memory entries are re-applied (the engine reads nothing else; the old
                # run's entries are the new run's to make, another run's or a key rotation are
                # no business of the new log's). A gap keeps later seqs where they were,
                # unless the new run's own entry already holds this seq.
                if size + len(batch) <= seq:
                    batch.append(seq)
                continue
            if item.payload is None and item.committed:
                raise UpdateRefused(
                    f"entry {seq}'s text was forgotten (by the run or since): the memory the "
                    "run saw cannot be rebuilt, so the run cannot be re-recorded"
                )
            batch.append(item)
        fed = max(fed, stop)
        batch += list(range(size + len(batch), stop))
        if batch:
            await log.append(batch)

    # The new run starts where the old one did (at its run_started entry, which run_scope checked).
    verified = source.verified
    assert verified is not None  # why_not_update refused a source without a run
    started = source.run_started
    await feed(started)
    log.now = parse_time(verified.entries[started].at)
    run = make_run(verified.run_id, scope, mode="record")
    async with run:
        for call in source.calls:
            body = call.call
            target = body.observed_size
            await feed(target)
            size = (await log.store.head()).size
            if size != target:
                notes.append(f"step {body.step} observed {target} entries but ran at {size}")
            written = await entries.read(target, target + len(body.wrote)) if body.wrote else []
            log.now = parse_time(clock_for(call, written))
            name, arguments = _call_of(body.tool, call.arguments)
            if not source.keeps_ids and not cursors.knows(arguments):
                raise UpdateRefused(
                    source.needs_folder(
                        f"step {body.step} continues a page that, re-made here, returned no "
                        "next_cursor, or one of another run"
                    )
                )
            arguments = cursors.send(arguments)
            if body.wrote:
                replaced.update(body.wrote)
            # A keyed call keeps its key, so the new bundle replays by key as the old one did.
            key = body.key if isinstance(body.key, str) else None
            redone: Any = None
            with contextlib.suppress(*RECORDED_ERRORS):  # recorded as the step's result
                redone = await run.call(name, arguments, key=key)
            cursors.seen(call.result, redone)
            _check_carried(body.step, body.tool, call.result, redone, source, target)


def _check_carried(
    step: int, tool: str, recorded: Any, redone: Any, source: EvidenceSource, size: int
) -> None:
    """Refuse a re-made read that differs where it counts memory the bundle may lack.

    A bundle carries the memory the run's results cite. Where the log held entries it
    left out (another run's), an explore counted memory past it, a get's ``filtered``
    items are not carried and a page's ``next_cursor`` told of memory past the page:
    re-made otherwise, such a read cannot tell a change of code from missing memory.
    """
    if not (isinstance(recorded, dict) and isinstance(redone, dict)):
        return
    if source.whole_below(size):
        return
    if tool == "memory_explore" and redone != recorded:
        why = "explores counts over memory the bundle does not carry"
    elif recorded.get("filtered") and redone.get("filtered") != recorded.get("filtered"):
        why = "read items the bundle does not carry (filtered)"
    elif isinstance(recorded.get("next_cursor"), str) and redone.get("next_cursor") is None:
        why = "returned a page whose next_cursor told of memory the bundle does not carry"
    else:
        return
    raise UpdateRefused(source.needs_folder(f"step {step} {why}"))
