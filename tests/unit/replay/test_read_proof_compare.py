"""The read proof's comparison and decoder, on hand-made values: what each one lets through."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from memseal.ledger.errors import VerificationError
from memseal.replay.evidence._read_proof_compare import compare
from memseal.replay.evidence._read_proof_format import (
    FORMAT,
    ReadProof,
    ReadProofError,
    decode_read_proof,
    encode_read_proof,
)

PROOF = ReadProof(
    format=FORMAT,
    run_id="r",
    step=1,
    origin="o",
    embedders=(),
    ranked_by="sqlite",
    checkpoint="",
    latest="",
    consistency=(),
    prefix=(),
    later=(),
)


def cursor(ref: str, seq: int) -> str:
    raw = json.dumps([1, "list", ref, seq, 0], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def run(recorded: Any, derived: Any, *, withheld: int = 0, proof: ReadProof = PROOF) -> str:
    how, why = compare(
        proof, recorded, derived, seq=9, withheld=withheld, embedder=None, tolerance=0.05
    )
    return f"{how}: {why}"


def hits(*pairs: tuple[str, float]) -> dict[str, Any]:
    return {"hits": [{"id": i, "score": s, "text": i} for i, s in pairs]}


def test_equal_values_match_byte_for_byte() -> None:
    assert run(hits(("a", 1.0)), hits(("a", 1.0))) == "byte for byte: "


def test_a_cursor_may_differ_in_its_keyed_ref_only() -> None:
    recorded = {"items": [], "next_cursor": cursor("aaaa", 7)}
    assert "query ref" in run(recorded, {"items": [], "next_cursor": cursor("bbbb", 7)})
    with pytest.raises(ReadProofError) as failed:
        run(recorded, {"items": [], "next_cursor": cursor("bbbb", 6)})  # another page
    assert failed.value.field == "result" and failed.value.seq == 9
    with pytest.raises(ReadProofError):
        run(recorded, {"items": [], "next_cursor": "not-a-cursor"})


def test_scores_are_left_out_only_for_a_stated_reason_and_never_the_order() -> None:
    recorded, rescored = hits(("a", 1.0), ("b", 0.5)), hits(("a", 0.2), ("b", 0.1))
    with pytest.raises(ReadProofError):
        run(recorded, rescored)  # no reason: every byte counts
    assert "scores not compared: 2 stored item(s)" in run(recorded, rescored, withheld=2)
    # A PostgreSQL read is re-ranked with ts_rank itself: its scores always count.
    with pytest.raises(ReadProofError):
        run(recorded, rescored, proof=ReadProof(**{**_fields(), "ranked_by": "postgresql"}))
    with pytest.raises(ReadProofError) as failed:
        run(recorded, hits(("b", 0.5), ("a", 1.0)), withheld=2)
    assert "--disclose all" in str(failed.value) and "recorded order" in str(failed.value)


def test_another_embedder_allows_scores_within_the_tolerance_only() -> None:
    proof = ReadProof(**{**_fields(), "embedders": ("hashing-v1/blake3/w1-c3/dim256",)})
    assert "within 0.05" in run(hits(("a", 0.9)), hits(("a", 0.93)), proof=proof)
    with pytest.raises(ReadProofError, match="not available here"):
        run(hits(("a", 0.9)), hits(("a", 0.7)), proof=proof)


def _fields() -> dict[str, Any]:
    return {f: getattr(PROOF, f) for f in PROOF.__struct_fields__}


def test_the_decoder_names_the_field_and_refuses_a_second_spelling() -> None:
    data = encode_read_proof(PROOF)
    assert decode_read_proof(data) == PROOF
    bad = data.replace(b'"step":1', b'"step":"1"')
    with pytest.raises(VerificationError, match=r"\$\.step") as failed:
        decode_read_proof(bad)
    assert failed.value.step == "format"
    with pytest.raises(VerificationError, match="canonical"):
        decode_read_proof(data.replace(b'"step":1', b'"step": 1'))
    with pytest.raises(VerificationError, match="not a memseal read proof"):
        decode_read_proof(b'{"format":"memseal/bundle@v2"}\n')
    with pytest.raises(VerificationError, match="truncated") as cut:
        decode_read_proof(data[:40])
    assert cut.value.step == "truncated"
    with pytest.raises(VerificationError, match="bytes, not str"):
        decode_read_proof(data.decode())  # type: ignore[arg-type]
