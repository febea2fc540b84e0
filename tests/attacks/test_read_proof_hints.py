"""Attacks on a read proof's unsigned hints: ``embedders`` and ``ranked_by``.

Neither hint is signed, so an edit gets past every signature and hash. What
keeps one from changing what a verification claims: an ``embedders`` hint
steers the re-derivation only of a read that searched vectors, where a
wrong one re-derives another result; it must name one embedder or none (a
folder's vectors are one embedder's), so an id nothing re-derives with is
refused; and for a read that searched no vectors nothing it says is used or
reported. The ok line claims a PostgreSQL ranking only for a read that
ranked text. The session is tests/read_proof_support.py's, on a real folder.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest
from read_proof_support import FETCH, LIST, SEMANTIC, edit, prove, record

from memseal.engine import HashingEmbedder
from memseal.replay.evidence.read_proof import ReadProofError, VerifiedRead, verify_read

HASHING = HashingEmbedder().id
OTHER_HASHING = HashingEmbedder(128).id


class Session(msgspec.Struct, kw_only=True):
    vkey: str
    proofs: dict[int, bytes]  # by step, every text disclosed (so each is byte for byte)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    async def make() -> Session:
        recorded = await record(tmp_path_factory.mktemp("hints") / "data")
        proofs = {
            step: await prove(recorded.folder, step, disclose="all")
            for step in (FETCH, LIST, SEMANTIC)
        }
        return Session(vkey=recorded.vkey, proofs=proofs)

    return asyncio.run(make())


def verified(data: bytes, vkey: str) -> VerifiedRead:
    return asyncio.run(verify_read(data, vkey))


def test_the_untouched_semantic_proof_names_the_embedder_it_searched_with(
    session: Session,
) -> None:
    read = verified(session.proofs[SEMANTIC], session.vkey)
    assert (read.how, read.embedder) == ("byte for byte", HASHING)
    assert f"re-derived with embedder {HASHING} (the proof's hint)" in read.line()


@pytest.mark.parametrize(
    "hint",
    [(HASHING, "made-up/embedder"), ("made-up/embedder", HASHING), (HASHING, HASHING), ("",)],
)
@pytest.mark.parametrize("step", [SEMANTIC, LIST])
def test_an_embedders_hint_no_writer_makes_is_refused(
    session: Session, step: int, hint: tuple[str, ...]
) -> None:
    # A second id beside the one searched with verified byte for byte: a claim about the
    # folder that no re-derivation checked.
    with pytest.raises(ReadProofError) as failed:
        verified(edit(session.proofs[step], embedders=hint), session.vkey)
    assert (failed.value.step, failed.value.field) == ("format", "embedders"), failed.value
    assert "[embedders]" in str(failed.value)


@pytest.mark.parametrize("hint", [(), (OTHER_HASHING,), ("made-up/embedder",)])
def test_another_embedder_named_for_a_semantic_read_fails(
    session: Session, hint: tuple[str, ...]
) -> None:
    with pytest.raises(ReadProofError) as failed:
        verified(edit(session.proofs[SEMANTIC], embedders=hint), session.vkey)
    assert failed.value.step == "result", failed.value


@pytest.mark.parametrize("step", [FETCH, LIST])
@pytest.mark.parametrize("hint", [(), (OTHER_HASHING,), ("made-up/embedder",)])
def test_an_edited_hint_on_a_read_that_searched_no_vectors_changes_no_claim(
    session: Session, step: int, hint: tuple[str, ...]
) -> None:
    # An exact fetch and a list search no vectors: the hint steers nothing, so the
    # verification neither uses nor reports it, and an edit changes nothing it says.
    untouched = verified(session.proofs[step], session.vkey)
    edited = verified(edit(session.proofs[step], embedders=hint), session.vkey)
    assert untouched.embedder is None and edited.embedder is None
    assert edited.how == "byte for byte"
    assert edited.line() == untouched.line()
    assert "embedder" not in edited.line()


@pytest.mark.parametrize("step", [SEMANTIC, LIST])
def test_ranked_by_postgresql_on_a_read_that_ranked_no_text_claims_no_ranking(
    session: Session, step: int
) -> None:
    untouched = verified(session.proofs[step], session.vkey)
    edited = verified(edit(session.proofs[step], ranked_by="postgresql"), session.vkey)
    assert "PostgreSQL" not in edited.line() and "ts_rank" not in edited.line()
    assert edited.line() == untouched.line()


def test_ranked_by_postgresql_on_a_full_text_read_is_re_ranked_and_fails(
    session: Session,
) -> None:
    # The hint does steer a full-text read: ts_rank gives other scores than the
    # recorded BM25 ones, so the edit is refused rather than claimed.
    with pytest.raises(ReadProofError) as failed:
        verified(edit(session.proofs[FETCH], ranked_by="postgresql"), session.vkey)
    assert failed.value.step == "result" and "score" in str(failed.value)
