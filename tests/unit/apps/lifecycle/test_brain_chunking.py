"""The brain's chunking: every character in exactly one chunk, the budget kept, ids stable.

Property tests over generated markdown, text and code (headings, fences,
paragraphs, blank runs, long lines), and examples of the structure rules.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.apps.lifecycle import chunk_id, chunk_text, kind_of
from memseal.ledger.errors import InvalidRequest

_LINES = st.one_of(
    st.text(alphabet="abc XYZ.,é漢\t", min_size=0, max_size=90),
    st.sampled_from(["", "", "# Title", "## Part two", "### x", "```", "```py", "~~~", "    code"]),
    st.text(alphabet="word ", min_size=150, max_size=400),  # longer than small budgets
)
_DOCS = st.lists(_LINES, max_size=60).map("\n".join) | st.text(max_size=800)
_KINDS = st.sampled_from(["markdown", "text", "code"])
_BUDGETS = st.integers(min_value=64, max_value=600)


@given(text=_DOCS, kind=_KINDS, budget=_BUDGETS)
def test_every_character_is_in_exactly_one_chunk_in_order(
    text: str, kind: str, budget: int
) -> None:
    chunks = chunk_text(text, source="brain:s", doc="d.md", kind=kind, budget=budget)  # type: ignore[arg-type]
    if not text.strip():
        assert chunks == []
        return
    assert "".join(c.text for c in chunks) == text
    position = 0
    for chunk in chunks:
        assert chunk.start == position and chunk.end > chunk.start
        assert text[chunk.start : chunk.end] == chunk.text
        position = chunk.end
    assert position == len(text)
    assert "".join(c.text for c in chunks).encode() == text.encode()


@given(text=_DOCS, kind=_KINDS, budget=_BUDGETS)
def test_every_chunk_stores_within_the_budget_and_never_blank(
    text: str, kind: str, budget: int
) -> None:
    for chunk in chunk_text(text, source="s", doc="d", kind=kind, budget=budget):  # type: ignore[arg-type]
        # What a store keeps is the stripped text: that is what the budget bounds.
        assert 0 < len(chunk.text.strip()) <= budget


@given(text=_DOCS, kind=_KINDS, budget=_BUDGETS)
def test_ids_are_stable_and_follow_source_document_and_text(
    text: str, kind: str, budget: int
) -> None:
    first = chunk_text(text, source="s", doc="d", kind=kind, budget=budget)  # type: ignore[arg-type]
    again = chunk_text(text, source="s", doc="d", kind=kind, budget=budget)  # type: ignore[arg-type]
    assert [c.id for c in first] == [c.id for c in again]
    assert all(c.id == chunk_id("s", "d", c.text) for c in first)
    elsewhere = chunk_text(text, source="s2", doc="d", kind=kind, budget=budget)  # type: ignore[arg-type]
    assert not {c.id for c in first} & {c.id for c in elsewhere}


@given(
    sections=st.lists(
        st.text(alphabet="abcdef \n", min_size=1, max_size=300), min_size=2, max_size=6
    ),
    which=st.integers(min_value=0),
)
def test_an_edit_in_one_section_leaves_the_other_sections_chunks_alone(
    sections: list[str], which: int
) -> None:
    doc = "".join(f"# Section {i}\n\n{body}\n\n" for i, body in enumerate(sections))
    edited_at = which % len(sections)
    changed = list(sections)
    changed[edited_at] = changed[edited_at] + " EDIT"
    after = "".join(f"# Section {i}\n\n{body}\n\n" for i, body in enumerate(changed))
    before_ids = {c.id for c in chunk_text(doc, source="s", doc="d", kind="markdown", budget=200)}
    after_chunks = chunk_text(after, source="s", doc="d", kind="markdown", budget=200)
    new = [c for c in after_chunks if c.id not in before_ids]
    assert new, "the edited section must give at least one new chunk"
    # Only chunks inside the edited section are new.
    heads = [after.rfind("# Section", 0, c.start + len("# Section")) for c in new]
    assert {after[h : after.index("\n", h)] for h in heads} == {f"# Section {edited_at}"}


def test_a_heading_starts_a_chunk_and_a_fence_is_kept_whole() -> None:
    doc = "intro\n\n# One\n\ntext\n\n```\na\n\n# not a heading\nb\n```\n\n# Two\n\nend\n"
    chunks = chunk_text(doc, source="s", doc="d", kind="markdown", budget=500)
    texts = [c.text for c in chunks]
    assert texts[0] == "intro\n\n"
    assert texts[1].startswith("# One") and "# not a heading" in texts[1]
    assert texts[2] == "# Two\n\nend\n"


def test_paragraphs_pack_within_the_budget_and_a_long_line_is_cut() -> None:
    paragraphs = "\n\n".join(["p" * 50] * 6)
    chunks = chunk_text(paragraphs, source="s", doc="d", kind="text", budget=120)
    assert [len(c.text.strip()) <= 120 for c in chunks] == [True] * len(chunks)
    assert len(chunks) == 3  # two 50-character paragraphs (and their blank line) a chunk
    long = chunk_text("x" * 250, source="s", doc="d", kind="code", budget=100)
    assert [len(c.text) for c in long] == [100, 100, 50]


def test_bad_budget_and_kind_are_refused_naming_the_field() -> None:
    with pytest.raises(InvalidRequest, match="`budget`"):
        chunk_text("x", source="s", doc="d", budget=10)
    with pytest.raises(InvalidRequest, match="`kind`"):
        chunk_text("x", source="s", doc="d", kind="pdf")  # type: ignore[arg-type]


def test_kind_of_reads_the_suffix() -> None:
    assert kind_of("README.md") == "markdown"
    assert kind_of("notes.txt") == "text"
    assert kind_of("main.py") == "code"
    assert kind_of("picture.png") is None
    assert kind_of(".md") is None
