"""The evidence a replay or an update works from, and what it holds.

An :class:`EvidenceSource` is one of three kinds:

``folder``  a data folder alone: every entry of its log with its payload,
    and the instance secret that keys item ids and cursors; no recorded run.
``bundle``  a verified bundle alone: the run's calls and the entries it
    reached (the seqs between them read as gaps); no instance secret.
``bundle_against_folder``  a verified bundle and the data folder it came
    from (``--against DIR``): the run's calls, and the whole log and secret
    behind them, checked leaf for leaf against the bundle when opened.

Regression replay and ``replay --update`` ask the source what it allows
(:meth:`EvidenceSource.why_not_update`, :meth:`EvidenceSource.why_not_rerun`,
:attr:`EvidenceSource.keeps_ids`, :meth:`EvidenceSource.whole_below`) rather
than branching on where the evidence came from, and read its entries through
:meth:`EvidenceSource.open`. The refusals a bundle alone meets are decided
here, from the bundle, before any work.
"""

from __future__ import annotations

import bisect
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from memseal.engine.events import (
    Keyring,
    MemoryForgotten,
    MemoryStored,
    decode_event,
    decode_stored_payload,
)
from memseal.engine.items import Content, Conversation, Document, Learning
from memseal.ledger.errors import InvalidRequest, VerificationError
from memseal.ledger.folder import DataFolder
from memseal.ledger.keys import key_history
from memseal.ledger.opening import LogLocation, log_store
from memseal.ledger.store import SqlStore
from memseal.replay.runs.calls import RUN_STARTED, marked_forget
from memseal.tools.catalog import WRITE_TOOLS

from ._bundle_format import Bundle, BundleCall, VerifiedBundle, run_scope
from ._temp_log import Source, source_of

__all__ = ["Entries", "EvidenceSource", "Kind", "Trust", "default_trust"]

Kind = Literal["folder", "bundle", "bundle_against_folder"]


class Trust(msgspec.Struct, frozen=True, kw_only=True):
    """The vkey a bundle is verified against when none is given, and whose it is."""

    vkey: str
    whose: str


def default_trust(bundle: Bundle, folder: Path | None = None) -> Trust:
    """The folder's first key when the bundle is checked against one, else the bundle's
    own first key, which checks integrity but not who signed it."""
    if folder is not None:
        return Trust(vkey=key_history(folder)[0].text, whose=f"the first key of {folder}")
    return Trust(
        vkey=bundle.keys[0] if bundle.keys else "",
        whose="the bundle's own first key (integrity only: pass --trust for identity)",
    )


class Entries(Protocol):
    """The source opened for reading: the recorded entries in seq order, and the
    instance secret behind them when the source holds it."""

    @property
    def secret(self) -> bytes | None:
        """The data folder's instance secret; None for a bundle alone."""

    async def read(self, start: int, stop: int) -> list[Source | int]:
        """The entries ``start <= seq < stop``, a bare int for each seq it lacks (a gap)."""


class EvidenceSource(msgspec.Struct, frozen=True, kw_only=True):
    """What a replay or an update works from (the module docstring). Made by :meth:`of`,
    which derives what the bundle carries; a folder, when named, is opened only by
    :meth:`open`."""

    verified: VerifiedBundle | None = None
    folder: Path | None = None
    carried_seqs: tuple[int, ...] = ()  # the seqs the bundle holds entries of, sorted
    carried_items: frozenset[str] = frozenset()  # the items whose stored entry it holds
    erased_items: frozenset[str] = frozenset()  # the items whose text a forget erased

    @classmethod
    def of(cls, verified: VerifiedBundle | None, folder: Path | None = None) -> EvidenceSource:
        """The evidence of a verified bundle, a data folder, or a bundle against a folder."""
        if verified is None:
            if folder is None:
                raise InvalidRequest("evidence needs a bundle, a data folder or both")
            return cls(folder=folder)
        stored = [
            (item, verified.entries[item.seq])
            for item in verified.bundle.entries
            if verified.entries[item.seq].kind == "memory_stored"
        ]
        return cls(
            verified=verified,
            folder=folder,
            carried_seqs=tuple(sorted({item.seq for item in verified.bundle.entries})),
            carried_items=frozenset(
                event.item
                for _, e in stored
                if isinstance(event := decode_event(e.kind, bytes(e.body)), MemoryStored)
            ),
            erased_items=frozenset(
                i
                for item, e in stored
                if item.payload is None and e.payload_hash is not None
                for i in _items(e.body)
            ),
        )

    # -- what it holds ---------------------------------------------------------------------

    @property
    def kind(self) -> Kind:
        """Which of the three kinds of evidence this is."""
        if self.verified is None:
            return "folder"
        return "bundle" if self.folder is None else "bundle_against_folder"

    @property
    def holds_run(self) -> bool:
        """Whether it holds a recorded run (its calls, in step order)."""
        return self.verified is not None

    @property
    def has_payloads(self) -> bool:
        """Whether it holds every entry of the log with its payload (bar the texts a forget
        erased), not only the entries a run reached."""
        return self.folder is not None

    @property
    def keeps_ids(self) -> bool:
        """Whether it holds the recording's instance secret, so re-made writes make the
        recorded item ids and re-made pages the recorded cursors."""
        return self.folder is not None

    @property
    def mode(self) -> Literal["exact", "bundle"]:
        """How a replay compares: ``exact`` over the whole log, or ``bundle`` over the run's
        own memory (scores within a tolerance, cursors by what they continue)."""
        return "exact" if self.has_payloads and self.keeps_ids else "bundle"

    @property
    def calls(self) -> tuple[BundleCall, ...]:
        """The run's recorded calls, by step (none for a data folder alone)."""
        return () if self.verified is None else self.verified.calls

    @property
    def run_started(self) -> int:
        """The seq of the run's ``run_started`` entry, where a re-made run starts."""
        if self.verified is None:
            raise InvalidRequest(_NO_RUN)
        entries = self.verified.entries
        return min(s for s, e in entries.items() if e.kind == RUN_STARTED)

    def whole_below(self, size: int) -> bool:
        """Whether it holds every entry ``seq < size`` (a bundle lacks other runs')."""
        if self.has_payloads:
            return True
        return bisect.bisect_left(self.carried_seqs, size) == size

    def carries_any(self, items: Iterable[str]) -> bool:
        """Whether it holds the stored entry of any of ``items`` (a folder holds them all)."""
        return self.has_payloads or not self.carried_items.isdisjoint(items)

    # -- what it allows --------------------------------------------------------------------

    @property
    def can_update(self) -> bool:
        """Whether ``replay --update`` may re-record the run from it (:meth:`why_not_update`)."""
        return self.why_not_update() is None

    def why_not_update(self) -> str | None:
        """Why the run cannot be re-recorded from this evidence, decided before any work;
        None when it can (the folder's checks come when it is opened). VerificationError
        (step ``run``) when the bundle's run has no valid scope."""
        if self.verified is None:
            return _NO_RUN
        for call in self.verified.calls:
            if call.arguments is None:
                why = (
                    "a failed call keeps no arguments"
                    if call.withheld is not None
                    else "its arguments were erased by a forget"
                )
                return f"step {call.call.step} cannot be re-run: {why}"
        run_scope(self.verified)  # a bundle whose run has no valid scope fails verification
        if self.keeps_ids:
            return None
        return _not_self_contained(self.verified, self.run_started)

    def needs_folder(self, what: str) -> str:
        """The refusal of a step the bundle alone cannot re-record: ``what``, and why."""
        return _alone(what)

    def why_not_secret(self, secret: bytes | None) -> str | None:
        """Why the folder's instance ``secret`` is not the recording's (it would key other
        ids and cursors), or None. One stored item is enough to tell: its id is the keyed
        hash of its content."""
        if secret is None or self.verified is None:
            return None
        keyring = Keyring(secret)
        for item in self.verified.bundle.entries:
            entry = self.verified.entries[item.seq]
            if entry.kind != "memory_stored" or item.payload is None:
                continue
            event = decode_event(entry.kind, bytes(entry.body))
            assert isinstance(event, MemoryStored)
            content = _content(event, item.payload)
            if keyring.item_id(event.namespace, event.kind, content) != event.item:
                return (
                    f"the --against folder's instance secret is not the one the bundle was "
                    f"recorded with: it does not make item {event.item} (entry {item.seq})"
                )
            return None
        return None

    def why_not_rerun(self, call: BundleCall) -> str | None:
        """Why a replay cannot re-execute ``call`` from this evidence (its report note), or
        None when it can."""
        body = call.call
        if (
            call.arguments is None
            or body.tool == "(invalid)"
            or (isinstance(call.arguments, dict) and "$invalid" in call.arguments)
            or marked_forget(body.tool, body.error, call.arguments)
        ):
            return (
                "its arguments were erased by a forget (or are a forget's own, its "
                "filter values marked), were not JSON, or were not "
                "kept (a failed call keeps only their hash and size)"
            )
        if not self.erased_items.isdisjoint(body.cites):
            # Its memory's text was forgotten since: no log holds it any more, so the call
            # cannot run on what it saw; its recorded entries stand.
            return "it cites memory forgotten since; that text is erased everywhere"
        if not self.keeps_ids and body.tool in WRITE_TOOLS:
            # Without the instance secret a re-executed write makes other item ids (and misses
            # the dedupe of a memory stored before): its recorded entries are applied instead.
            return "a write: its recorded entries are applied; --against re-executes it"
        if body.tool == "memory_explore" and not self.whole_below(body.observed_size):
            # An explore counts every item in reach; the entries the bundle left out (another
            # run's, say) would change it with no change of code.
            return (
                "an explore counts all the memory in reach, and the bundle holds only what the "
                "run cited; --against compares it"
            )
        return None

    # -- reading it ------------------------------------------------------------------------

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Entries]:
        """The entries to rebuild memory from: the folder's whole log (checked against the
        bundle: VerificationError, step ``against``) or the bundle's own entries."""
        if self.folder is None:
            assert self.verified is not None
            yield _BundleEntries(self.verified)
            return
        secret_path = DataFolder(root=self.folder).instance_secret
        try:
            secret = secret_path.read_bytes()
        except OSError as exc:
            raise InvalidRequest(
                f"--against {self.folder}: cannot read {secret_path}: {exc}"
            ) from exc
        entries = _FolderEntries(log_store(LogLocation(folder=self.folder)), secret)
        await entries.store.open()
        try:
            if self.verified is not None:
                await _check_folder(entries.store, self.verified)
            yield entries
        finally:
            await entries.store.close()


_NO_RUN = (
    "a data folder alone holds no recorded run: export the run as a bundle "
    "(memseal export --run ID) and replay it with --against"
)


class _FolderEntries:
    """Every entry of a data folder's log (read-only): never a gap."""

    def __init__(self, store: SqlStore, secret: bytes) -> None:
        self.store, self.secret = store, secret

    async def read(self, start: int, stop: int) -> list[Source | int]:
        out: list[Source | int] = []
        async for record in self.store.scan(start, stop):
            out.append(source_of(record.seq, record.entry(), record.payload))
        return out


class _BundleEntries:
    """The bundle's own entries; a seq it does not hold reads as a gap (a bare int)."""

    secret = None

    def __init__(self, verified: VerifiedBundle) -> None:
        self.by_seq: dict[int, Source] = {
            item.seq: source_of(item.seq, verified.entries[item.seq], item.payload)
            for item in verified.bundle.entries
        }

    async def read(self, start: int, stop: int) -> list[Source | int]:
        return [self.by_seq.get(seq, seq) for seq in range(start, stop)]


async def _check_folder(store: SqlStore, verified: VerifiedBundle) -> None:
    """Refuse a folder the bundle did not come from: VerificationError (step ``against``)
    unless it holds the checkpoint's size at least, and each bundle entry leaf for leaf."""
    size = (await store.head()).size
    if size < verified.size:
        raise VerificationError(
            f"the data folder holds {size} entries; the bundle's checkpoint has {verified.size}: "
            "it is not the folder the bundle came from (or it was truncated)",
            step="against",
        )
    for item in verified.bundle.entries:
        record = await store.read(item.seq)
        if record.leaf != item.leaf:
            raise VerificationError(
                "the data folder's entry differs from the bundle's: not the folder it came from",
                seq=item.seq,
                step="against",
            )


def _not_self_contained(verified: VerifiedBundle, started: int) -> str | None:
    """Why, from the bundle alone, new ids or missing memory would change the run.

    From the bundle alone the run's writes make new ids, with the local key's
    instance secret. That is harmless while nothing outside the re-made call
    itself names an item the run made, and while every read needs only the
    memory the bundle carries. Each case below would otherwise change what a
    step saw, silently, and the new bundle would record it as if the code had:

    1. a store the recording answered with an item held from before the run
       (``replayed``, nothing written) would make a second copy;
    2. a call naming, in its arguments, an item the run made would name an id
       the new log does not hold;
    3. a trust change or a forget made outside the run, while it ran, would
       apply to the old id and miss the item.

    A read of memory the bundle may not carry is refused as it is re-made; a
    cursor is re-made.
    """
    made: set[str] = set()  # the ids the run's own stores made
    own: set[int] = set()  # the run's own write entries (re-made, never copied)
    for call in verified.calls:
        body, result, step = call.call, call.result, call.call.step
        own.update(body.wrote)
        why = ""
        if body.tool == "memory_store" and isinstance(result, dict):
            if result.get("replayed") is not True:
                made.add(str(result.get("id")))
            elif result.get("id") not in made:
                why = f"stored text the memory held from before the run (item {result.get('id')})"
        if any(text in made for text in _strings(call.arguments)):
            why = "names an item the run made"
        if why:
            return _alone(f"step {step} {why}")
    for seq, entry in sorted(verified.entries.items()):
        if seq > started and seq not in own:
            hit = made.intersection(_targets(entry.kind, bytes(entry.body)))
            if hit:
                return _alone(
                    f"entry {seq} ({entry.kind}, made outside the run) names "
                    f"item {min(hit)}, which the run made"
                )
    return None


def _alone(what: str) -> str:
    return (
        f"{what}: from the bundle alone the run's items get new ids and the memory the run "
        "saw cannot be rebuilt as it was; re-record with --against DIR, the data folder the "
        "bundle came from, which keeps the recorded ids"
    )


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a call's arguments (ids may sit in any list or filter)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _targets(kind: str, body: bytes) -> tuple[str, ...]:
    """The items a trust change or a forget entry names (none for a store)."""
    if kind not in ("trust_changed", "memory_forgotten"):
        return ()
    event = decode_event(kind, body)
    return event.items if isinstance(event, MemoryForgotten) else (getattr(event, "item", ""),)


def _items(body: Any) -> list[str]:
    """The item a stored entry names (none where its body is not the expected JSON)."""
    try:
        value = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return []
    item = value.get("item") if isinstance(value, dict) else None
    return [item] if isinstance(item, str) else []


def _content(event: MemoryStored, payload: bytes) -> Content:
    """The content a stored entry's payload holds, as its item id was keyed from it."""
    stored = decode_stored_payload(payload)
    if stored.turns is not None:
        return Conversation(turns=stored.turns)
    if event.kind == "document":
        return Document(text=stored.text or "", title=stored.title)
    return Learning(text=stored.text or "")
