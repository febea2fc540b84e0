"""The brain's ingest: chunks per second, and what a one-character edit costs to re-ingest.

Run: ``.venv/bin/python benchmarks/brain.py [--chunks 1000] [--docs 20] [--embedder]``

On real files in a temporary folder (WAL, synchronous=FULL): a corpus of
``--docs`` markdown files whose sections make ``--chunks`` chunks in all is
ingested into one brain node (every chunk a recorded, signed ``memory_store``
behind its ``memory_tool_call``), then

(a) **ingest**: chunks per second of the first ingest;
(b) **unchanged re-ingest**: time, and the entries it appended (only its
    recorded reads: one listing page per 50 chunks of a document);
(c) **one-character edit**: one character replaced in one section of one
    document, the folder re-ingested: time, and the entries by kind; only
    the changed chunk is stored (one ``memory_stored``) and its old version
    forgotten (one ``memory_forgotten``).

``--embedder`` embeds each chunk with the default offline model (semantic and
hybrid search); without it the memory serves exact search only, and the
figure is the ledger's and the tools' cost alone.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path

import memseal
from memseal.apps.lifecycle import Brain
from memseal.tools import ToolScope

SCOPE = ToolScope.placed_at("team:bench/brain:corpus")
BUDGET = 400


def _corpus(folder: Path, docs: int, chunks: int) -> list[Path]:
    per_doc = chunks // docs
    paths = []
    for d in range(docs):
        sections = [
            f"## Section {d}.{s}\n\nParagraph {s} of document {d} says something about topic "
            f"{(d * 31 + s) % 97}, with enough words to look like prose a person wrote.\n\n"
            for s in range(per_doc)
        ]
        path = folder / f"doc{d:03}.md"
        path.write_text("".join(sections), encoding="utf-8")
        paths.append(path)
    return paths


async def _kinds(memory: memseal.Memory, start: int) -> Counter[str]:
    size = await memory.ledger.size()
    return Counter([(await memory.ledger.read(seq)).entry().kind for seq in range(start, size)])


async def main(chunks: int, docs: int, embedder: bool) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        corpus = root / "corpus"
        corpus.mkdir()
        paths = _corpus(corpus, docs, chunks)
        async with memseal.open(
            root / "data", embedder="default" if embedder else None, checkpoint_interval=None
        ) as memory:
            brain = Brain(memory, SCOPE, budget=BUDGET)
            started = time.perf_counter()
            first = await brain.ingest(corpus)
            took = time.perf_counter() - started
            assert first.stored == first.chunks == chunks, first
            print(
                f"(a) ingest: {first.chunks:,} chunks in {first.documents} documents, "
                f"{took:.2f} s, {first.chunks / took:,.0f} chunks/s"
            )

            before = await memory.ledger.size()
            started = time.perf_counter()
            again = await brain.ingest(corpus)
            took = time.perf_counter() - started
            kinds = await _kinds(memory, before)
            assert again.stored == again.forgotten == 0
            print(
                f"(b) unchanged re-ingest: {took:.3f} s, {sum(kinds.values())} entries "
                f"appended ({dict(sorted(kinds.items()))}), 0 chunks written"
            )

            target = paths[len(paths) // 2]
            text = target.read_text(encoding="utf-8")
            at = text.index("something")
            target.write_text(text[:at] + "S" + text[at + 1 :], encoding="utf-8")
            before = await memory.ledger.size()
            started = time.perf_counter()
            edited = await brain.ingest(corpus)
            took = time.perf_counter() - started
            kinds = await _kinds(memory, before)
            assert (edited.stored, edited.forgotten) == (1, 1), edited
            assert kinds["memory_stored"] == 1 and kinds["memory_forgotten"] == 1, kinds
            print(
                f"(c) 1-character edit in a {chunks:,}-chunk corpus: re-ingest {took:.3f} s, "
                f"{edited.stored} chunk stored, {edited.forgotten} forgotten, entries "
                f"{dict(sorted(kinds.items()))}"
            )
            await memory.verify()
            print("verified")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000)
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--embedder", action="store_true", help="embed with the default model")
    options = parser.parse_args()
    asyncio.run(main(options.chunks, options.docs, options.embedder))
