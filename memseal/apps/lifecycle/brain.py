""":class:`Brain`: documents ingested into one brain node, every step a recorded call.

A brain node (``team:acme/brain:handbook``) holds one source's documents:
files (markdown, text, source code), a folder of them, or text with a
document id. Each document is cut into chunks by its structure
(:mod:`._chunking`) and each chunk stored as a ``document`` item titled with
the document's id and tagged ``brain``, ``doc:<ref>`` and ``chunk:<id>``.

Ingesting a document compares the chunks it has now with the chunks its
document holds in memory (read by their ``doc:`` tag):

* an unchanged document writes nothing: the read is all it records;
* a changed one stores exactly its new chunks and forgets exactly the
  chunks that are gone, each a signed ``memory_stored`` or
  ``memory_forgotten`` entry behind its signed ``memory_tool_call``;
* :meth:`Brain.remove` forgets every chunk of a document.

Every read and write goes through the recorded tools (``memory.tools(scope,
run_id=...)``), one run per ingest, eight documents at a time. Every call is
keyed by what it does (``list:<doc tag>:<page>``, ``store:<chunk id>``,
``forget:<digest of the ids>``), so the order concurrent documents interleave
in never matters, and a host that
resumes an ingest under its run id after a crash gets the memo of every write
already made and never writes one twice; an ingest under a fresh run id reads
the document's chunks again and writes only what is still missing, so a
restarted ingest never writes twice either.

The brain works in its own node alone: reads and forgets are confined to
``Reach.exact(place)`` whatever reach the scope it was given has, so a brain
never forgets an ancestor's memory.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import blake3
import msgspec

from memseal.engine import Reach
from memseal.engine.items import MAX_DOCUMENT_CHARS, MAX_IDS, MAX_TITLE_CHARS
from memseal.ledger.errors import InvalidRequest
from memseal.memory import Memory, RecordedTools
from memseal.tools.scope import ToolScope

from ._chunking import DEFAULT_BUDGET, Chunk, DocKind, chunk_text, kind_of
from ._files import held_folder, read_inside, read_named, walk_folder

__all__ = [
    "BRAIN_TAG",
    "Brain",
    "IngestReport",
    "doc_tag",
]

#: The tag every brain chunk carries.
BRAIN_TAG: Final = "brain"
_LIST_LIMIT: Final = 50
# Writes in flight at once: the store's writer group-commits them.
_BATCH: Final = 64
_DOCS_AT_ONCE: Final = 8
_MAX_FILE_BYTES: Final = 4 * MAX_DOCUMENT_CHARS
# What the engine refuses in stored text (C0 controls but tab, newline, return; DEL).
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

Progress = Callable[[int, int], None]


class IngestReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one ingest or removal did.

    ``chunks`` counts the chunks the documents have now; ``stored`` and
    ``forgotten`` the chunks written and forgotten; ``unchanged`` the
    documents left as they were; ``skipped`` the files not read (not a known
    kind, not UTF-8 text, a link out of the folder, a FIFO or device), each with why.
    """

    run_id: str
    documents: int = 0
    chunks: int = 0
    stored: int = 0
    forgotten: int = 0
    unchanged: int = 0
    skipped: tuple[tuple[str, str], ...] = ()

    def line(self) -> str:
        """One plain line for a terminal."""
        text = (
            f"{self.documents} document(s), {self.chunks} chunk(s): {self.stored} stored, "
            f"{self.forgotten} forgotten, {self.unchanged} document(s) unchanged"
        )
        if self.skipped:
            text += f", {len(self.skipped)} file(s) skipped"
        return f"{text} (run {self.run_id})"


def doc_tag(doc: str) -> str:
    """The tag a document's chunks carry: a short digest of its id (tags are 64 characters
    at most; a document id is a path of any length)."""
    return "doc:" + blake3.blake3(doc.encode("utf-8")).hexdigest(length=12)


def _digest(values: Sequence[str]) -> str:
    return blake3.blake3(msgspec.json.encode(sorted(values))).hexdigest(length=12)


class _Held(msgspec.Struct, frozen=True, kw_only=True):
    """An item a document holds in memory, with the chunk id its tag claims."""

    item: str
    chunk: str | None
    text: str | None  # None: forgotten since (a replayed listing shows a marker)
    truncated: bool

    def says(self, chunk_text: str) -> bool:
        """Whether the item's text is this chunk's text as a store keeps it."""
        if self.text is None:
            return False
        stored = unicodedata.normalize("NFC", chunk_text).strip()
        if self.truncated:
            return stored.startswith(self.text[:-1])
        return self.text == stored


class _Plan(msgspec.Struct, frozen=True, kw_only=True):
    doc: str
    chunks: tuple[Chunk, ...]


class Brain:
    """Documents of one source in one brain node (see the module docstring).

    ``scope`` is the brain's writer scope (its ``place`` is the node the chunks
    go to); ``budget`` the most characters a chunk's stored text holds;
    ``progress(done, total)`` is called as chunks are handled (a CLI passes its
    progress line).
    """

    def __init__(
        self,
        memory: Memory,
        scope: ToolScope,
        *,
        budget: int = DEFAULT_BUDGET,
        progress: Progress | None = None,
    ) -> None:
        if not callable(getattr(memory, "tools", None)):
            raise InvalidRequest("`memory` must be an open memseal memory (memseal.open)")
        if not isinstance(scope, ToolScope):
            raise InvalidRequest("`scope` must be the brain's writer ToolScope")
        if not scope.writes or scope.frozen:
            raise InvalidRequest("`scope` must allow writes: a brain stores its chunks")
        if progress is not None and not callable(progress):
            raise InvalidRequest("`progress` must be a callable taking (done, total) or None")
        chunk_text("x", source="", doc="", budget=budget)  # checks the budget now
        self._memory = memory
        # The brain's own node alone, and every chunk whatever its trust (host code, not a
        # model): a re-ingest must see each chunk it stored to know what changed.
        self._scope = scope.replace(
            reach=Reach.exact(scope.place), floor="stale", default_trust="stale"
        )
        self._budget = budget
        self._progress = progress

    @property
    def scope(self) -> ToolScope:
        """The scope the brain's calls are recorded under (its node, exact reach)."""
        return self._scope

    @property
    def source(self) -> str:
        """The brain node chunks are stored at."""
        return self._scope.place

    # -- ingest -------------------------------------------------------------------------

    async def ingest_text(
        self, text: str, *, source_id: str, kind: DocKind = "text", run_id: str | None = None
    ) -> IngestReport:
        """Ingest ``text`` as document ``source_id`` (re-ingest: only what changed)."""
        doc = _doc_id(source_id)
        if not isinstance(text, str):
            raise InvalidRequest("`text` must be text")
        plan = _Plan(doc=doc, chunks=tuple(self._chunks(text, doc, kind)))
        return await self._run([plan], (), run_id)

    async def ingest(
        self, path: str | Path, *, source_id: str | None = None, run_id: str | None = None
    ) -> IngestReport:
        """Ingest a file (its id: ``source_id``, default its name) or a folder (each file's
        id: its path under the folder, with ``/``; ``source_id`` prefixes them)."""
        where = Path(path)
        if where.is_dir():
            plans, skipped = await asyncio.to_thread(self._read_folder, where, source_id)
            return await self._run(plans, skipped, run_id)
        if not where.is_file():
            raise InvalidRequest(f"`path`: {where} is neither a regular file nor a folder")
        doc = _doc_id(source_id if source_id is not None else where.name)
        kind = kind_of(where.name) or "text"
        try:
            text = await asyncio.to_thread(read_named, where, _MAX_FILE_BYTES)
        except InvalidRequest as exc:
            raise InvalidRequest(f"`path`: {exc}") from None
        return await self._run(
            [_Plan(doc=doc, chunks=tuple(self._chunks(text, doc, kind)))], (), run_id
        )

    async def remove(self, source_id: str, *, run_id: str | None = None) -> IngestReport:
        """Forget every chunk of document ``source_id`` (signed forget entries)."""
        doc = _doc_id(source_id)
        return await self._run([_Plan(doc=doc, chunks=())], (), run_id, removing=True)

    async def remove_all(self, *, run_id: str | None = None) -> IngestReport:
        """Forget every chunk of every document of this brain node (signed forget entries)."""
        tools = self._tools(run_id)
        try:
            result = await tools.call(
                "memory_forget", {"filter": {"tags_any": [BRAIN_TAG]}}, key="forget:all"
            )
        finally:
            await tools.close()
        return IngestReport(
            run_id=str(getattr(tools, "run_id", None) or run_id or ""),
            forgotten=len(result.get("forgotten", ())),
        )

    async def chunks_of(self, source_id: str, *, run_id: str | None = None) -> list[str]:
        """The chunk ids document ``source_id`` holds in memory now (a recorded read)."""
        tools = self._tools(run_id)
        try:
            held = await self._held(tools, _doc_id(source_id))
        finally:
            await tools.close()
        return sorted(found.chunk for found in held if found.chunk is not None)

    # -- the work -----------------------------------------------------------------------

    def _chunks(self, text: str, doc: str, kind: DocKind) -> list[Chunk]:
        if _CONTROL.search(text):
            # Checked before any write: a store would refuse the chunk halfway through.
            raise InvalidRequest(f"document {doc!r} contains a control character")
        try:
            return chunk_text(text, source=self.source, doc=doc, kind=kind, budget=self._budget)
        except InvalidRequest as exc:
            raise InvalidRequest(f"document {doc!r}: {exc}") from None

    def _read_folder(
        self, folder: Path, prefix: str | None
    ) -> tuple[list[_Plan], list[tuple[str, str]]]:
        plans: list[_Plan] = []
        skipped: list[tuple[str, str]] = []
        # The folder is opened once and every walk and read goes from that descriptor: a
        # link is followed only to a file inside it, only regular files are read, and a
        # folder swapped for a link mid-ingest leads nowhere outside (see ._files).
        with held_folder(folder) as held:
            for relative, why in walk_folder(held):
                if why is not None:
                    skipped.append((relative, why))
                    continue
                kind = kind_of(relative.rsplit("/", 1)[-1])
                if kind is None:
                    skipped.append((relative, "not a markdown, text or source file"))
                    continue
                try:
                    doc = _doc_id(relative if prefix is None else f"{prefix}/{relative}")
                    text = read_inside(held, relative, _MAX_FILE_BYTES)
                    chunks = self._chunks(text, doc, kind)
                except InvalidRequest as exc:
                    skipped.append((relative, str(exc)))
                    continue
                plans.append(_Plan(doc=doc, chunks=tuple(chunks)))
        return plans, skipped

    def _tools(self, run_id: str | None) -> RecordedTools:
        chosen = run_id if run_id is not None else f"brain-{secrets.token_hex(8)}"
        return self._memory.tools(self._scope, run_id=chosen, mode="resume", lifecycle="brain")

    async def _held(self, tools: RecordedTools, doc: str) -> list[_Held]:
        """The items document ``doc`` holds now, each with the chunk id its tag claims."""
        held: list[_Held] = []
        tag = doc_tag(doc)
        cursor: str | None = None
        pages = 0
        while True:
            arguments: dict[str, Any] = {"filter": {"tags_any": [tag]}, "limit": _LIST_LIMIT}
            if cursor is not None:
                arguments["cursor"] = cursor
            page = await tools.call("memory_list", arguments, key=f"list:{tag}:{pages}")
            pages += 1
            for item in page.get("items", ()):
                # A digest collision of two document ids would mix their chunks: the title
                # (the document's id) settles it.
                if item.get("title") not in (None, doc[:MAX_TITLE_CHARS]):
                    continue
                claimed = [
                    found[len("chunk:") :]
                    for found in item.get("meta", {}).get("tags", ())
                    if isinstance(found, str) and found.startswith("chunk:")
                ]
                text = item.get("text")
                held.append(
                    _Held(
                        item=item["id"],
                        chunk=claimed[0] if len(claimed) == 1 else None,
                        text=text if isinstance(text, str) else None,
                        truncated=bool(item.get("truncated")),
                    )
                )
            cursor = page.get("next_cursor")
            if not isinstance(cursor, str):
                return held

    async def _run(
        self,
        plans: Sequence[_Plan],
        skipped: Sequence[tuple[str, str]],
        run_id: str | None,
        *,
        removing: bool = False,
    ) -> IngestReport:
        docs = [plan.doc for plan in plans]
        if len(set(docs)) != len(docs):
            raise InvalidRequest("two documents of one ingest have the same id")
        total = sum(len(plan.chunks) for plan in plans)
        done = 0
        stored = forgotten = unchanged = 0
        tools = self._tools(run_id)
        report_run = getattr(tools, "run_id", None) or run_id or ""
        try:
            if self._progress is not None:
                self._progress(0, total)
            # A few documents at once: their writes share the writer's group commits. Every
            # call is keyed, so the order they interleave in never matters to a replay.
            for start in range(0, len(plans), _DOCS_AT_ONCE):
                window = plans[start : start + _DOCS_AT_ONCE]
                for wrote, dropped, same, size in await asyncio.gather(
                    *(self._one(tools, plan, removing) for plan in window)
                ):
                    stored, forgotten, unchanged = (
                        stored + wrote,
                        forgotten + dropped,
                        unchanged + same,
                    )
                    done += size
                if self._progress is not None:
                    self._progress(done, total)
        finally:
            await tools.close()
        return IngestReport(
            run_id=str(report_run),
            documents=len(plans),
            chunks=total,
            stored=stored,
            forgotten=forgotten,
            unchanged=unchanged,
            skipped=tuple(skipped),
        )

    async def _one(
        self, tools: RecordedTools, plan: _Plan, removing: bool
    ) -> tuple[int, int, int, int]:
        """One document: (chunks stored, forgotten, 1 if unchanged, its chunk count)."""
        wanted = {chunk.id: chunk for chunk in plan.chunks}
        kept: set[str] = set()
        gone: list[str] = []
        for found in await self._held(tools, plan.doc):
            # A chunk is held only when its item says what the chunk says: an item in the
            # node with a tag copied onto other text (or two tags, or none) is not the
            # chunk, and goes; the chunk is stored.
            chunk = None if found.chunk is None else wanted.get(found.chunk)
            if chunk is not None and chunk.id not in kept and found.says(chunk.text):
                kept.add(chunk.id)
            else:
                gone.append(found.item)
        new = [chunk for cid, chunk in wanted.items() if cid not in kept]
        gone = sorted(set(gone))
        same = int(not new and not gone and not removing)
        stored = await self._store(tools, plan.doc, new)
        forgotten = await self._forget(tools, gone)
        return stored, forgotten, same, len(plan.chunks)

    async def _store(self, tools: RecordedTools, doc: str, chunks: Sequence[Chunk]) -> int:
        title = doc[:MAX_TITLE_CHARS]
        tag = doc_tag(doc)
        written = 0
        for start in range(0, len(chunks), _BATCH):
            batch = chunks[start : start + _BATCH]
            calls = [
                tools.call(
                    "memory_store",
                    {
                        "document": {"title": title, "text": chunk.text},
                        "tags": [BRAIN_TAG, tag, f"chunk:{chunk.id}"],
                    },
                    key=f"store:{chunk.id}",
                )
                for chunk in batch
            ]
            results = await asyncio.gather(*calls)
            written += sum(1 for result in results if not result.get("replayed"))
        return written

    async def _forget(self, tools: RecordedTools, items: Sequence[str]) -> int:
        forgotten = 0
        for start in range(0, len(items), MAX_IDS):
            ids = list(items[start : start + MAX_IDS])
            result = await tools.call("memory_forget", {"ids": ids}, key=f"forget:{_digest(ids)}")
            forgotten += len(result.get("forgotten", ()))
        return forgotten


def _doc_id(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise InvalidRequest("`source_id` must be printable text naming the document")
    if len(value) > 2_000:
        raise InvalidRequest("`source_id` is longer than 2000 characters")
    return value
