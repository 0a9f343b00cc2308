"""``crp-stream reembed``: another model's vectors and edges built beside the served ones, then one
switch. A session started before finishes on the old model; new sessions use the new one; ``rebuild``
keeps the new model; a reembed stopped half-way leaves the old model serving and resumes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream import cli
from crp_stream.config import Settings
from crp_stream.fabric.embedders.http import API_KEY_ENV
from crp_stream.fabric.embedders.port import make_embedder
from crp_stream.fabric.models import collection_spec
from crp_stream.runtime import reembed as reembed_mod
from crp_stream.testing import Pipeline
from tests.support.embed_server import EmbedServer, default_model
from tests.support.services import fresh_postgres_url

T0 = 1_767_225_600_000_000
OLD, NEW = "hashing", "hashing:256"
TEXTS = [
    "The API allows 1000 requests per second per tenant.",
    "Rate limits reset every minute on the hour boundary.",
    "Tokens expire after thirty days without renewal.",
    "The API allows 1000 requests per second for each tenant account.",
]


def _doc(event_id: str, texts: list[str]) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "source": "vendor_docs",
        "source_type": "official",
        "text": " ".join(texts),
    }


def _request(session: str, window: int, query: str) -> dict[str, Any]:
    value: dict[str, Any] = {
        "request_id": f"{session}-w{window}",
        "session_id": session,
        "window": window,
        "query": {"text": query},
        "fact_budget": 3,
        "policy": {"graph_retrieval": "off", "min_relevance": 0.05},
    }
    if window == 1:
        value["max_windows"] = 3
        value["sub_queries"] = [{"id": "a", "text": query, "label": "A"}]
    return value


def _envelope(p: Pipeline, request_id: str) -> dict[str, Any]:
    (env,) = [e for e in p.out("crp.envelopes") if e.get("request_id") == request_id and not e.get("closing")]
    return env


def _relevance(spec: str, query: str, text: str) -> float:
    emb = make_embedder(spec)
    q, f = emb.embed([query, text])
    return float(np.dot(q, f) / (np.linalg.norm(q) * np.linalg.norm(f)))


def _check_relevance(env: dict[str, Any], spec: str, query: str) -> None:
    """Every fact's relevance is the cosine of ``spec``'s vectors: the envelope searched that model."""
    assert env["facts"], env
    for f in env["facts"]:
        assert f["relevance"] == pytest.approx(_relevance(spec, query, f["text"]), abs=1e-5)


def _active(p: Pipeline) -> tuple[str | None, str | None]:
    with p.uow() as uow:
        return uow.repo.get_meta("embedding_model"), uow.repo.get_meta("embedding_dim")


def _run(settings: Settings, spec: str) -> reembed_mod.ReembedResult:
    return reembed_mod.reembed(settings, spec, None)


def test_switch_old_session_finishes_on_old_model_new_session_on_new(tmp_path: Path) -> None:
    query = "How many requests per second does the API allow?"
    with Pipeline.fresh(tmp_path, embedder=OLD) as p:
        p.publish("crp.documents", "vendor_docs", _doc("d1", TEXTS), ts_us=T0)
        p.publish("crp.window.requests", "old", _request("old", 1, query), ts_us=T0 + 10)
        _check_relevance(_envelope(p, "old-w1"), OLD, query)
        with p.uow() as uow:
            old_edges = uow.repo.edge_count()
        assert _active(p) == ("hashing-384", "384")

        r = _run(p.settings, NEW)  # the pipeline (the running process) stays open meanwhile
        assert r.switched and r.old_model == "hashing-384" and r.new_model == "hashing-256"
        assert r.facts == r.embedded == len(TEXTS)
        assert _active(p) == ("hashing-256", "256")
        with p.uow() as uow:
            assert uow.repo.edge_count() * 2 == r.edges  # the new model's rows replaced the old ones
            assert uow.repo.get_meta("reembed_target") is None
        assert old_edges > 0

        # the old session's next window: the old model embeds it and searches the old vectors
        p.publish("crp.window.reports", "old", _report("old", 1), ts_us=T0 + 20)
        p.publish("crp.window.requests", "old", _request("old", 2, query), ts_us=T0 + 30)
        assert p.out("crp.deadletter") == []
        _check_relevance(_envelope(p, "old-w2"), OLD, query)
        p.publish("crp.window.reports", "old", _report("old", 2), ts_us=T0 + 35)
        # a new session: the new model
        p.publish("crp.window.requests", "new", _request("new", 1, query), ts_us=T0 + 40)
        _check_relevance(_envelope(p, "new-w1"), NEW, query)
        with p.uow() as uow:
            assert uow.repo.get_session("old")["embedding_model"] == "hashing-384"  # type: ignore[index]
            assert uow.repo.get_session("new")["embedding_model"] == "hashing-256"  # type: ignore[index]
        # a document ingested after the switch is embedded by the new model
        p.publish(
            "crp.documents", "vendor_docs", _doc("d2", ["Webhooks retry five times with backoff."]), ts_us=T0 + 50
        )
        assert p.out("crp.deadletter") == []
        assert p.fabric.embedder.model_id == "hashing-256"
        assert p.fabric.vectors.dim == 256

    # retire the old model: its session is rejected with a clear reason, the new one goes on
    assert reembed_mod.finish(Settings(data_dir=tmp_path)) == ["hashing-384"]
    with Pipeline.fresh(tmp_path, embedder=OLD) as p:  # a restart with the old setting follows the switch
        assert p.fabric.embedder.model_id == "hashing-256"
        p.publish("crp.window.requests", "old", _request("old", 3, query), ts_us=T0 + 60)
        (dead,) = p.out("crp.deadletter")
        assert "retired by a reembed" in dead["reason"]
        p.publish("crp.window.reports", "new", _report("new", 1), ts_us=T0 + 70)
        p.publish("crp.window.requests", "new", _request("new", 2, query), ts_us=T0 + 80)
        _check_relevance(_envelope(p, "new-w2"), NEW, query)


def _report(session: str, window: int) -> dict[str, Any]:
    return {"session_id": session, "window": window, "addressed": [], "output_text": "", "completeness": 0.2}


def test_rebuild_after_reembed_keeps_the_new_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d"
    with Pipeline.fresh(data, embedder=OLD) as p:
        p.publish("crp.documents", "vendor_docs", _doc("d1", TEXTS), ts_us=T0)
        ids = _ids(p)
    args = ["--data", str(data)]
    assert cli.main(["reembed", *args, "--embedder", NEW]) == 2  # --yes required
    assert "--yes" in capsys.readouterr().err
    assert cli.main(["reembed", *args, "--embedder", NEW, "--yes", "--from", OLD]) == 0
    assert "switched from hashing-384 to hashing-256" in capsys.readouterr().err
    assert cli.main(["status", *args, "--json"]) == 0
    assert '"embedder": "hashing-256"' in capsys.readouterr().out
    assert cli.main(["rebuild", *args, "--yes"]) == 0
    with Pipeline.fresh(data, embedder=OLD) as p:
        assert p.fabric.embedder.model_id == "hashing-256"
        with p.uow() as uow:
            assert uow.repo.get_meta("embedding_model") == "hashing-256"
        assert _ids(p) == ids  # re-derived from the log with the new model
        assert p.fabric.vectors.dim == 256
        assert set(p.fabric.vectors.get_vectors(ids)) == set(ids)


def _ids(p: Pipeline) -> list[str]:
    with p.uow() as uow:
        return uow.repo.fact_ids()


def test_a_reembed_stopped_half_way_leaves_the_old_model_serving_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with Pipeline.fresh(tmp_path, embedder=OLD) as p:
        p.publish("crp.documents", "vendor_docs", _doc("d1", TEXTS), ts_us=T0)
        n = len(_ids(p))
    assert n > 2
    monkeypatch.setattr(reembed_mod, "CHUNK", 2)
    real_items = reembed_mod._items
    calls: list[int] = []

    def killed_on_second_chunk(*a: Any, **k: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # stopped while embedding: the first chunk's vectors are stored
        return real_items(*a, **k)

    monkeypatch.setattr(reembed_mod, "_items", killed_on_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        _run(Settings(data_dir=tmp_path, embedder=OLD), NEW)
    embedded: list[int] = []

    def counted(rows: Any, vectors: Any) -> Any:
        embedded.append(len(rows))
        return real_items(rows, vectors)

    monkeypatch.setattr(reembed_mod, "_items", counted)
    real = reembed_mod.new_edges
    stored: list[int] = []

    def killed(fabric: Any, vectors: Any, *a: Any) -> Any:
        stored.append(vectors.count())
        raise KeyboardInterrupt  # stopped after every vector was stored, before the switch

    monkeypatch.setattr(reembed_mod, "new_edges", killed)
    with pytest.raises(KeyboardInterrupt):
        _run(Settings(data_dir=tmp_path, embedder=OLD), NEW)
    assert sum(embedded) == n - 2 and stored == [n]  # resumed: the first chunk was not embedded again
    with Pipeline.fresh(tmp_path, embedder=OLD) as p:
        assert _active(p) == ("hashing-384", "384")  # the old model serves
        assert p.fabric.embedder.model_id == "hashing-384"
        with p.uow() as uow:
            assert uow.repo.get_meta("reembed_target") == NEW
    assert cli.main(["status", "--data", str(tmp_path), "--embedder", OLD]) == 0
    assert f"reembed: building {NEW}" in capsys.readouterr().out
    monkeypatch.setattr(reembed_mod, "new_edges", real)
    r = _run(Settings(data_dir=tmp_path, embedder=OLD), NEW)
    assert r.switched and r.facts == n and r.embedded == 0  # every vector was kept from the first run
    edges = r.edges
    # a rerun after the switch catches up, and computes the edges again with the thresholds in force:
    # stored by calibrate --store since (none reaches 0.99 here)
    with Pipeline.fresh(tmp_path, embedder=OLD) as p, p.uow() as uow:
        uow.repo.set_meta("thresholds:hashing-256", '{"edge_threshold": 0.99}')
    r = _run(Settings(data_dir=tmp_path, embedder=OLD), NEW)
    assert not r.switched and r.embedded == 0
    assert (r.edge_threshold, r.threshold_source, r.edges) == (0.99, "stored", 0) and edges > 0


def test_reembed_on_an_empty_fabric_or_a_wrong_old_model_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--data", str(tmp_path)]
    assert cli.main(["reembed", *args, "--embedder", NEW, "--yes"]) == 2
    assert "holds no facts yet" in capsys.readouterr().err
    with Pipeline.fresh(tmp_path, embedder=OLD) as p:
        p.publish("crp.documents", "vendor_docs", _doc("d1", TEXTS), ts_us=T0)
    assert cli.main(["reembed", *args, "--embedder", NEW, "--yes", "--from", "hashing:128"]) == 2
    err = capsys.readouterr().err
    assert "the fabric's model is 'hashing-384'" in err and "Traceback" not in err
    assert cli.main(["reembed", *args, "--embedder", "precomputed:x", "--yes", "--from", OLD]) == 2
    assert "computes no vectors from text" in capsys.readouterr().err
    secret = "openai:https://user:sk-secret@embed.example/v1#m"
    assert cli.main(["reembed", *args, "--embedder", secret, "--yes", "--from", OLD]) == 2
    err = capsys.readouterr().err
    assert "CRP_EMBEDDER_API_KEY" in err and "sk-secret" not in err


def test_each_model_has_its_own_store() -> None:
    assert collection_spec("edge:/d/vectors", "m1", "m1") == "edge:/d/vectors"
    assert collection_spec("edge:/d/vectors", "m1", None) == "edge:/d/vectors"
    other = collection_spec("edge:/d/vectors", "hashing-256", "m1")
    assert other.startswith("edge:/d/vectors-hashing_256_") and other != collection_spec("edge:/d/vectors", "x", "m1")
    server = collection_spec("http://q:6333?collection=facts", "openai:text-3", "m1")
    assert server.startswith("http://q:6333?collection=facts_openai_text_3_")
    assert collection_spec("grpc://q:6334", "m2", "m1").startswith("grpc://q:6334?collection=crp_facts_m2_")


@pytest.mark.postgres
def test_reembed_on_postgresql(tmp_path: Path) -> None:
    url = fresh_postgres_url()
    query = "How many requests per second does the API allow?"
    with Pipeline(Settings(data_dir=tmp_path, database_url=url, embedder=OLD)) as p:
        p.publish("crp.documents", "vendor_docs", _doc("d1", TEXTS), ts_us=T0)
        p.publish("crp.window.requests", "old", _request("old", 1, query), ts_us=T0 + 10)
        r = _run(p.settings, NEW)
        assert r.switched and r.embedded == r.facts
        p.publish("crp.window.reports", "old", _report("old", 1), ts_us=T0 + 20)
        p.publish("crp.window.requests", "old", _request("old", 2, query), ts_us=T0 + 30)
        _check_relevance(_envelope(p, "old-w2"), OLD, query)
        p.publish("crp.window.requests", "new", _request("new", 1, query), ts_us=T0 + 40)
        _check_relevance(_envelope(p, "new-w1"), NEW, query)
        assert _active(p) == ("hashing-256", "256")


def test_reembed_to_an_http_endpoint(
    tmp_path: Path, embed_server: EmbedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """To ``openai:BASE_URL#MODEL`` on a real loopback HTTP server serving the default model's vectors."""
    monkeypatch.setenv(API_KEY_ENV, embed_server.token or "")
    spec = f"openai:{embed_server.url}#{embed_server.model}"
    query = "How many requests per second does the API allow?"
    with Pipeline.fresh(tmp_path, embedder=OLD) as p:
        p.publish("crp.documents", "vendor_docs", _doc("d1", TEXTS), ts_us=T0)
        p.publish("crp.window.requests", "old", _request("old", 1, query), ts_us=T0 + 10)
        r = _run(p.settings, spec)
        assert r.switched and r.new_model == f"openai:{embed_server.model}" and r.embedded == r.facts
        assert sum(embed_server.batches) >= r.facts  # the facts went over HTTP
        with p.uow() as uow:
            assert uow.repo.get_meta("embedder_spec:openai:all-minilm") == spec  # the key is not stored
        p.publish("crp.window.requests", "new", _request("new", 1, query), ts_us=T0 + 20)
        env = _envelope(p, "new-w1")
        model = default_model()
        assert env["facts"]
        for f in env["facts"]:
            q, v = model.embed([query, f["text"]])
            assert f["relevance"] == pytest.approx(float(np.dot(q, v)), abs=1e-4)
        p.publish("crp.window.reports", "old", _report("old", 1), ts_us=T0 + 30)
        p.publish("crp.window.requests", "old", _request("old", 2, query), ts_us=T0 + 40)
        _check_relevance(_envelope(p, "old-w2"), OLD, query)
