"""Structure-aware chunking of a document, within a chunk budget.

A document is cut into contiguous spans that cover it exactly: every
character belongs to one chunk, in order, so the chunks' texts joined give
the document back (the property tests hold it). Where the cuts fall:

* **markdown**: a heading starts a new chunk; a fenced code block
  (```` ``` ```` or ``~~~``) is one block, never cut at its blank lines or
  read for headings; paragraphs are the blocks between blank lines;
* **text**: paragraphs between blank lines;
* **code**: the blocks between blank lines (a function, a class, a group
  of statements);

then the blocks of one section are packed greedily into chunks of at most
``budget`` characters. A block longer than the budget is cut at line ends,
and a line longer than the budget at the budget. Whitespace alone never
makes a chunk (a store would refuse it): it joins the chunk before it.

A chunk's id is blake3 over the source, the document id and the chunk's
text, so the same text at the same place has the same id whatever moved
around it, and a re-ingest can tell exactly which chunks changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final, Literal

import blake3
import msgspec

from memseal.ledger.errors import InvalidRequest

__all__ = [
    "CODE_SUFFIXES",
    "DEFAULT_BUDGET",
    "MIN_BUDGET",
    "TEXT_SUFFIXES",
    "Chunk",
    "DocKind",
    "chunk_id",
    "chunk_text",
    "kind_of",
]

DocKind = Literal["markdown", "text", "code"]
DOC_KINDS: Final[tuple[str, ...]] = ("markdown", "text", "code")

#: Characters a chunk holds at most by default (about 500 tokens at four a token).
DEFAULT_BUDGET: Final = 2_000
#: Below this a budget would cut prose into fragments too small to mean anything.
MIN_BUDGET: Final = 64
MAX_BUDGET: Final = 100_000

MARKDOWN_SUFFIXES: Final = frozenset({".md", ".markdown", ".mdx"})
TEXT_SUFFIXES: Final = frozenset({".txt", ".rst", ".text", ".adoc", ".org"})
CODE_SUFFIXES: Final = frozenset(
    {
        ".py", ".pyi", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".kt",
        ".c", ".h", ".cc", ".cpp", ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh",
        ".bash", ".sql", ".toml", ".yaml", ".yml", ".json", ".ini", ".cfg", ".html", ".css",
    }
)  # fmt: skip

_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")
_FENCE = re.compile(r"(`{3,}|~{3,})")


class Chunk(msgspec.Struct, frozen=True, kw_only=True):
    """One chunk: its id, its text, and where it lies in the document (character offsets)."""

    id: str
    text: str
    start: int
    end: int


def kind_of(name: str) -> DocKind | None:
    """The document kind a file name's suffix says, or None (not a document we read)."""
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > 0 else ""
    if suffix in MARKDOWN_SUFFIXES:
        return "markdown"
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in CODE_SUFFIXES:
        return "code"
    return None


def chunk_id(source: str, doc: str, text: str) -> str:
    """The stable id of a chunk: blake3 of its source, its document id and its text."""
    data = msgspec.json.encode(["memseal/chunk/v1", source, doc, text])
    return blake3.blake3(data).hexdigest(length=16)


def _lines(text: str) -> Iterator[tuple[int, int]]:
    """Each line's span, its line end included (the last line may have none)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        yield start, end
        start = end


def _blocks(text: str, kind: DocKind) -> Iterator[tuple[int, int, bool]]:
    """The document's blocks, contiguous, as (start, end, starts_a_section).

    A block is a run of non-blank lines with the blank lines after it; in
    markdown a heading line is a block of its own and starts a section, and
    a fenced code block runs to its closing fence.
    """
    begin: int | None = None
    heading = False
    fence: str | None = None
    blank_run = False
    for start, end in _lines(text):
        line = text[start:end]
        stripped = line.strip()
        if kind == "markdown" and fence is not None:
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
            continue
        if kind == "markdown":
            opened = _FENCE.match(line.lstrip(" "))
            if opened is not None and len(line) - len(line.lstrip(" ")) <= 3:
                if begin is not None and (blank_run or heading):
                    yield begin, start, heading
                    begin, heading = None, False
                if begin is None:
                    begin = start
                fence, blank_run = opened.group(1), False
                continue
            if _HEADING.match(line):
                if begin is not None:
                    yield begin, start, heading
                begin, heading, blank_run = start, True, False
                continue
        if not stripped:
            blank_run = begin is not None or blank_run
            if begin is None:
                begin = start  # leading blank lines open the first block
            continue
        if begin is not None and (blank_run or heading):
            yield begin, start, heading
            begin, heading = None, False
        if begin is None:
            begin = start
        blank_run = False
    if begin is not None:
        yield begin, len(text), heading


def _cut(text: str, start: int, end: int, budget: int) -> Iterator[tuple[int, int]]:
    """A span longer than ``budget`` cut at line ends, and a line longer at the budget."""
    piece = start
    for line_start, line_end in _lines(text[start:end]):
        line_start, line_end = start + line_start, start + line_end
        if line_end - piece <= budget:
            continue
        if line_start > piece:
            yield piece, line_start
            piece = line_start
        while line_end - piece > budget:
            yield piece, piece + budget
            piece += budget
    if piece < end:
        yield piece, end


def _spans(text: str, kind: DocKind, budget: int) -> Iterator[tuple[int, int]]:
    """Greedy packing of each section's blocks into spans of at most ``budget``."""
    current: tuple[int, int] | None = None
    for start, end, section in _blocks(text, kind):
        if current is not None and (section or end - current[0] > budget):
            yield current
            current = None
        if end - start > budget:
            yield from _cut(text, start, end, budget)
            continue
        current = (start, end) if current is None else (current[0], end)
    if current is not None:
        yield current


def chunk_text(
    text: str,
    *,
    source: str,
    doc: str,
    kind: DocKind = "text",
    budget: int = DEFAULT_BUDGET,
) -> list[Chunk]:
    """``text`` cut into chunks (see the module docstring); none for a blank document."""
    if not isinstance(text, str):
        raise InvalidRequest(f"`text` must be text, not {type(text).__name__}")
    if kind not in DOC_KINDS:
        raise InvalidRequest(f"`kind` {kind!r} is not one of {', '.join(DOC_KINDS)}")
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise InvalidRequest("`budget` must be a whole number of characters")
    if not MIN_BUDGET <= budget <= MAX_BUDGET:
        raise InvalidRequest(f"`budget` must be {MIN_BUDGET} to {MAX_BUDGET} characters")
    spans: list[tuple[int, int]] = []
    for start, end in _spans(text, kind, budget):
        if spans and not text[start:end].strip():
            # Whitespace alone is no chunk: it stays with the chunk before, over budget only
            # if that one was full (whitespace is all it adds).
            spans[-1] = (spans[-1][0], end)
        elif spans and not text[spans[-1][0] : spans[-1][1]].strip():
            spans[-1] = (spans[-1][0], end)  # leading whitespace joins the first chunk
        else:
            spans.append((start, end))
    if len(spans) == 1 and not text.strip():
        return []
    return [
        Chunk(id=chunk_id(source, doc, text[s:e]), text=text[s:e], start=s, end=e) for s, e in spans
    ]
