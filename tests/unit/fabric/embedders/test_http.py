"""``openai:BASE_URL#MODEL`` against a real HTTP endpoint on loopback (tests/support/embed_server.py),
which serves the default model's vectors."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from crp_stream import redaction
from crp_stream.config import ConfigError
from crp_stream.fabric.embedders.http import (
    EmbedderUnavailable,
    HttpOptions,
    OpenAIEmbedder,
    parse_openai_spec,
    retry_after_s,
)
from crp_stream.fabric.embedders.port import EmbedderError, make_embedder
from crp_stream.runtime.transient import is_transient
from crp_stream.testing import Pipeline
from tests.support.embed_server import EmbedServer, default_model

TEXTS = [
    "The billing API allows 1000 requests per second.",
    "kube-proxy programs iptables rules for Services.",
    "Paris is the capital of France.",
    "",
    "A much longer sentence about CoreDNS, which resolves the cluster's Service names to ClusterIPs.",
]
T0 = 1_790_000_000_000_000


def _embedder(server: EmbedServer, **opts: float) -> tuple[OpenAIEmbedder, list[float]]:
    slept: list[float] = []
    options = HttpOptions(**{"backoff": 0.01, **opts})  # type: ignore[arg-type]
    emb = OpenAIEmbedder(server.url, server.model, options, api_key=server.token, sleep=slept.append)
    return emb, slept


def test_the_vectors_are_the_endpoints_model(embed_server: EmbedServer) -> None:
    emb, _ = _embedder(embed_server)
    got = emb.embed(TEXTS)
    want = default_model().embed(TEXTS)
    assert got.dtype == np.float32 and got.shape == (5, 384)
    assert np.array_equal(got, want)  # bit for bit: float32 -> JSON -> float32 is exact
    assert emb.model_id == "openai:all-minilm" and emb.dim == 384
    emb.close()


def test_requests_are_batched(embed_server: EmbedServer) -> None:
    emb, _ = _embedder(embed_server, batch=2, concurrency=3)
    texts = [f"fact number {i} about rate limits" for i in range(7)]
    got = emb.embed(texts)
    assert sorted(embed_server.batches) == [1, 2, 2, 2]
    assert np.array_equal(got, default_model().embed(texts))  # the parts come back in order
    emb.close()


@pytest.mark.parametrize("statuses", [[429, 429], [503, 500, 502]])
def test_429_and_5xx_are_retried_with_backoff(embed_server: EmbedServer, statuses: list[int]) -> None:
    embed_server.fail_first = list(statuses)
    emb, slept = _embedder(embed_server)
    got = emb.embed(TEXTS[:2])
    assert np.array_equal(got, default_model().embed(TEXTS[:2]))
    assert embed_server.statuses == [*statuses, 200]
    assert slept == [0.01 * 2**i for i in range(len(statuses))]  # exponential
    emb.close()


def test_retry_after_is_honoured(embed_server: EmbedServer) -> None:
    embed_server.fail_first, embed_server.retry_after = [429], "3"
    emb, slept = _embedder(embed_server)
    emb.embed(["x"])
    assert slept == [3.0]
    assert retry_after_s("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert retry_after_s("soon") is None
    emb.close()


def test_an_endpoint_failing_mid_run_is_transient(embed_server: EmbedServer) -> None:
    emb, slept = _embedder(embed_server, retries=2)
    assert emb.dim == 384  # started fine
    embed_server.fail_first = [503, 503, 503]
    with pytest.raises(EmbedderUnavailable, match=r"HTTP 503.*after 3 attempts") as exc:
        emb.embed(["x"])
    assert is_transient(exc.value)
    assert len(slept) == 2
    emb.close()


def test_a_wrong_key_is_one_clear_line_at_start_and_never_shown(
    embed_server: EmbedServer, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-wrong-key-987654321"
    emb = OpenAIEmbedder(embed_server.url, embed_server.model, api_key=secret)
    with caplog.at_level(logging.DEBUG), pytest.raises(ConfigError) as exc:
        _ = emb.dim
    msg = str(exc.value)
    assert "refused the key" in msg and "HTTP 401" in msg and "CRP_EMBEDDER_API_KEY" in msg
    assert "\n" not in msg and secret not in msg and secret not in caplog.text
    assert redaction.redact(f"Authorization: Bearer {secret}") == "Authorization: Bearer ***"
    assert embed_server.statuses == [401]  # not retried
    emb.close()


def test_an_unreachable_endpoint_or_unknown_model_is_a_config_error(embed_server: EmbedServer) -> None:
    down = OpenAIEmbedder("http://127.0.0.1:9/v1", "m", HttpOptions(retries=1, backoff=0.0, timeout=2.0))
    with pytest.raises(ConfigError, match=r"embedder openai:m at http://127.0.0.1:9/v1/embeddings: unreachable"):
        _ = down.dim
    down.close()
    other = OpenAIEmbedder(embed_server.url, "no-such-model", api_key=embed_server.token)
    with pytest.raises(ConfigError, match=r"HTTP 404.*no-such-model"):
        other.load()
    other.close()


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openai:http://h/v1", "needs BASE_URL#MODEL"),
        ("openai:#m", "needs BASE_URL#MODEL"),
        ("openai:ftp://h/v1#m", "must start with http"),
        ("openai:http://h/v1#two words", "must not contain spaces"),
    ],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(EmbedderError, match=message):
        make_embedder(spec)


def test_the_spec_and_settings_reach_the_embedder() -> None:
    assert parse_openai_spec("openai:http://127.0.0.1:8080/v1/#all-minilm") == (
        "http://127.0.0.1:8080/v1",
        "all-minilm",
    )
    emb = make_embedder("openai:https://api.example/v1#text-embedding-3-small", HttpOptions(batch=8))
    assert isinstance(emb, OpenAIEmbedder) and emb.options.batch == 8
    assert emb.model_id == "openai:text-embedding-3-small" and emb.url == "https://api.example/v1/embeddings"
    emb.close()


def test_a_pipeline_ingests_and_serves_through_the_endpoint(
    embed_server: EmbedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRP_EMBEDDER_API_KEY", embed_server.token or "")
    spec = f"openai:{embed_server.url}#{embed_server.model}"
    with Pipeline.fresh(tmp_path, embedder=spec, embedder_batch=3) as p:
        doc = {
            "event_id": "d1",
            "source": "vendor_docs",
            "source_type": "official",
            "text": "The billing API allows 1000 requests per second. Paris is the capital of France. "
            "kube-proxy programs iptables rules for Services. CoreDNS resolves Service names.",
        }
        p.publish("crp.documents", "vendor_docs", doc, ts_us=T0)
        facts = p.out("crp.facts")
        assert len(facts) >= 3
        with p.uow() as uow:
            assert uow.repo.get_meta("embedding_model") == "openai:all-minilm"
            assert uow.repo.get_meta("embedding_dim") == "384"
        request = {
            "request_id": "r1",
            "session_id": "s",
            "window": 1,
            "query": {"text": "What is the billing API's rate limit?"},
            "sub_queries": [{"id": "q1", "text": "billing API rate limit", "label": "Q1"}],
        }
        p.publish("crp.window.requests", "s", request, ts_us=T0 + 1_000_000)
        (env,) = [e for e in p.out("crp.envelopes") if not e.get("closing")]
        texts = [f["text"] for f in env["facts"]]
        assert any("1000 requests per second" in t for t in texts)
        assert p.out("crp.deadletter") == []
    assert max(embed_server.batches) <= 3  # embedder_batch reached the requests


def test_the_request_settings_load_and_the_key_counts_as_a_secret() -> None:
    from crp_stream.config import load_settings
    from crp_stream.fabric.fabric import http_options

    env = {"CRP_EMBEDDER_BATCH": "8", "CRP_EMBEDDER_CONCURRENCY": "2", "CRP_EMBEDDER_TIMEOUT": "5.5"}
    assert http_options(load_settings(env=env)) == HttpOptions(batch=8, concurrency=2, timeout=5.5, retries=5)
    with pytest.raises(ConfigError, match="CRP_EMBEDDER_CONCURRENCY"):
        load_settings(env={"CRP_EMBEDDER_CONCURRENCY": "0"})
    assert "sk-live-abcdef" in redaction.secrets_in(None, {"CRP_EMBEDDER_API_KEY": "sk-live-abcdef"})
