"""A server that lies about a semantic read's scores cannot get a proof of it past verify-read.

The run of tests/read_proof_support.py is recorded while the tools layer lies:
every hit of the semantic fetch gets the score 9.99. Cosine scores depend on no
other text and no store, so neither withheld out-of-reach texts (the default
proof) nor a proof whose unsigned ``ranked_by`` hint is rewritten may excuse
them: verify-read must fail on the score.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import msgspec
import pytest
from read_proof_support import SEMANTIC, edit, prove, record

from memseal.replay.evidence.read_proof import ReadProofError, verify_read
from memseal.tools import MemoryTools

LIE = 9.99


def _lying(monkeypatch: pytest.MonkeyPatch) -> None:
    original = MemoryTools.prepare

    async def prepare(self: MemoryTools, name: str, arguments: Any) -> Any:
        prepared = await original(self, name, arguments)
        if name == "memory_fetch" and dict(arguments).get("mode") == "semantic":
            result = msgspec.to_builtins(prepared.result)
            for hit in result["hits"]:
                hit["score"] = LIE
            return dataclasses.replace(prepared, result=result)
        return prepared

    monkeypatch.setattr(MemoryTools, "prepare", prepare)


@pytest.fixture(scope="module")
def lied(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, bytes]:
    folder: Path = tmp_path_factory.mktemp("lie") / "data"
    with pytest.MonkeyPatch.context() as patch:
        _lying(patch)
        recorded = asyncio.run(record(folder))
    hits = recorded.results[SEMANTIC]["hits"]
    assert hits and {hit["score"] for hit in hits} == {LIE}, "the recording did not lie"
    return recorded.vkey, asyncio.run(prove(folder, SEMANTIC))


def test_a_default_proof_of_lying_semantic_scores_fails_on_the_score(
    lied: tuple[str, bytes],
) -> None:
    vkey, proof = lied
    with pytest.raises(ReadProofError) as failed:
        asyncio.run(verify_read(proof, vkey))
    assert failed.value.step == "result"
    assert "score" in str(failed.value)


def test_a_rewritten_ranked_by_hint_does_not_switch_the_score_check_off(
    lied: tuple[str, bytes],
) -> None:
    vkey, proof = lied
    with pytest.raises(ReadProofError) as failed:
        asyncio.run(verify_read(edit(proof, ranked_by="postgresql"), vkey))
    assert "score" in str(failed.value)
