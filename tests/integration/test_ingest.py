"""Ingestion through the embedded runtime: facts, epochs, TTLs, edges, and every bad-input case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream.config import Settings
from crp_stream.processors.base import rfc3339
from crp_stream.runtime.embedded import open_fabric
from crp_stream.testing import replay as replay_records

DAY_US = 86_400 * 1_000_000
T0 = 1_790_000_000 * 1_000_000  # a fixed log-append time
MODEL = "test-model"


def vec(*xs: float, dim: int = 8) -> list[float]:
    v = np.zeros(dim, dtype=np.float64)
    v[: len(xs)] = xs
    return [float(x) for x in v / np.linalg.norm(v)]


def doc(event_id: str, facts: list[dict[str, Any]], **kw: Any) -> bytes:
    body = {
        "event_id": event_id,
        "source": "vendor_docs",
        "source_type": "official",
        "embedding_model": MODEL,
        "facts": facts,
        **kw,
    }
    return json.dumps(body).encode()


def run(tmp_path: Path, records: list[tuple[str, str | None, int, bytes]], **settings: Any) -> list[dict[str, Any]]:
    settings.setdefault("embedder", f"precomputed:{MODEL}")
    s = Settings(**settings)
    lines = replay_records(records, s, tmp_path / "run")
    return [json.loads(x) for x in lines]


def facts_table(tmp_path: Path) -> list[dict[str, Any]]:
    s = Settings(data_dir=tmp_path / "run", embedder=f"precomputed:{MODEL}")
    fabric = open_fabric(s)
    try:
        with fabric.unit_of_work() as uow:
            return uow.repo.all_facts()
    finally:
        fabric.close()


def of(out: list[dict[str, Any]], topic: str) -> list[dict[str, Any]]:
    return [o["value"] for o in out if o["topic"] == topic]


def test_document_becomes_facts_with_log_epoch_and_default_ttl(tmp_path: Path) -> None:
    raw = doc(
        "e1",
        [
            {
                "text": "The limit is 1000 rps.",
                "embedding": vec(1, 0),
                "subject": "api",
                "attribute": "limit",
                "value": "1000",
                "unit": "rps",
            },
            {"text": "Pods get IPs.", "embedding": vec(0, 1), "importance": 0.5},
        ],
        epoch="1999-01-01T00:00:00Z",
        ingested_at="1999-01-01T00:00:00Z",
    )
    out = run(tmp_path, [("crp.documents", "vendor_docs", T0, raw)])
    recorded = of(out, "crp.facts")
    assert [f["type"] for f in recorded] == ["FactRecorded", "FactRecorded"]
    # the epoch is the log-append time, whatever the payload claims
    assert {f["epoch"] for f in recorded} == {rfc3339(T0)}
    assert recorded[0]["ttl"] == "P365D"  # official: SPEC-027 §3.5
    assert recorded[1]["importance"] == 0.5 and recorded[0]["importance"] == 1.0
    assert recorded[0]["subject"] == "api" and recorded[0]["status"] == "active"
    rows = facts_table(tmp_path)
    assert {r["epoch_us"] for r in rows} == {T0}


def test_same_event_twice_changes_nothing(tmp_path: Path) -> None:
    raw = doc("e1", [{"text": "A fact.", "embedding": vec(1)}])
    out = run(tmp_path, [("crp.documents", "s", T0, raw), ("crp.documents", "s", T0 + 1, raw)])
    assert len(of(out, "crp.facts")) == 1
    assert of(out, "crp.deadletter") == []
    assert len(facts_table(tmp_path)) == 1


def test_duplicate_event_id_with_other_content_is_deadlettered(tmp_path: Path) -> None:
    a = doc("e1", [{"text": "A fact.", "embedding": vec(1)}])
    b = doc("e1", [{"text": "Another fact.", "embedding": vec(0, 1)}])
    out = run(tmp_path, [("crp.documents", "s", T0, a), ("crp.documents", "s", T0 + 1, b)])
    dead = of(out, "crp.deadletter")
    assert len(dead) == 1 and "already used" in dead[0]["reason"] and "first" in dead[0]["reason"]
    assert [r["text"] for r in facts_table(tmp_path)] == ["A fact."]


def test_two_equal_telemetry_observations_are_two_records(tmp_path: Path) -> None:
    def tel(eid: str) -> bytes:
        return json.dumps(
            {
                "event_id": eid,
                "source": "field",
                "observed_at": "2026-11-01T00:00:00Z",
                "subject": "api",
                "attribute": "limit",
                "value": 250,
                "unit": "rps",
                "embedding": vec(1, 1),
                "embedding_model": MODEL,
            }
        ).encode()

    out = run(tmp_path, [("crp.telemetry", "field", T0, tel("t1")), ("crp.telemetry", "field", T0 + 1, tel("t2"))])
    recorded = of(out, "crp.facts")
    assert len({f["fact_id"] for f in recorded if f["type"] == "FactRecorded"}) == 2
    assert all(f["source_type"] == "telemetry" for f in recorded if f["type"] == "FactRecorded")


def test_text_is_split_into_sentence_facts(tmp_path: Path) -> None:
    out = run(
        tmp_path,
        [
            (
                "crp.documents",
                "s",
                T0,
                json.dumps(
                    {"event_id": "e", "source": "s", "source_type": "news", "text": "First sentence. Second one here."}
                ).encode(),
            )
        ],
        embedder="hashing",
    )
    texts = [f["text"] for f in of(out, "crp.facts")]
    assert texts == ["First sentence.", "Second one here."]


def test_changed_sentence_supersedes_the_old_version(tmp_path: Path) -> None:
    v1 = doc("e1", [{"text": "The limit is 1000 rps.", "embedding": vec(1)}], document_id="limits")
    v2 = doc("e2", [{"text": "The limit is 250 rps.", "embedding": vec(1, 0.1)}], document_id="limits")
    out = run(tmp_path, [("crp.documents", "s", T0, v1), ("crp.documents", "s", T0 + DAY_US, v2)])
    changes = [f for f in of(out, "crp.facts") if f["type"] == "FactStatusChanged"]
    assert len(changes) == 1 and changes[0]["status"] == "superseded"
    statuses = {r["text"]: r["status"] for r in facts_table(tmp_path)}
    assert statuses == {"The limit is 1000 rps.": "superseded", "The limit is 250 rps.": "active"}


def test_similarity_edges_are_kept_for_neighbours_above_threshold(tmp_path: Path) -> None:
    raw = doc(
        "e",
        [
            {"text": "a", "embedding": vec(1, 0.1)},
            {"text": "b", "embedding": vec(1, 0.2)},
            {"text": "c", "embedding": vec(0, 0, 1)},
        ],
    )
    run(tmp_path, [("crp.documents", "s", T0, raw)], edge_threshold=0.6)
    fabric = open_fabric(Settings(data_dir=tmp_path / "run", embedder=f"precomputed:{MODEL}"))
    try:
        with fabric.unit_of_work() as uow:
            assert uow.repo.edge_count() == 1
    finally:
        fabric.close()


BAD: list[tuple[str, str, bytes, str]] = [
    ("invalid JSON", "crp.documents", b"{nope", "invalid JSON"),
    ("invalid UTF-8", "crp.documents", b'{"event_id": "\xff"}', "UTF-8"),
    (
        "missing field",
        "crp.documents",
        json.dumps({"source": "s", "source_type": "news", "text": "x."}).encode(),
        "event_id",
    ),
    (
        "wrong type",
        "crp.documents",
        json.dumps({"event_id": 5, "source": "s", "source_type": "news", "text": "x."}).encode(),
        "event_id",
    ),
    (
        "unknown source_type",
        "crp.documents",
        json.dumps({"event_id": "e", "source": "s", "source_type": "blog", "text": "x."}).encode(),
        "source_type",
    ),
    (
        "bad time",
        "crp.documents",
        json.dumps(
            {"event_id": "e", "source": "s", "source_type": "news", "modified_at": "yesterday", "text": "x."}
        ).encode(),
        "modified_at",
    ),
    (
        "bad duration",
        "crp.documents",
        json.dumps({"event_id": "e", "source": "s", "source_type": "news", "ttl": "forever", "text": "x."}).encode(),
        "ttl",
    ),
    (
        "negative ttl",
        "crp.documents",
        json.dumps({"event_id": "e", "source": "s", "source_type": "news", "ttl": "-P1D", "text": "x."}).encode(),
        "ttl",
    ),
    (
        "NaN vector",
        "crp.documents",
        b'{"event_id":"e","source":"s","source_type":"news","embedding_model":"test-model",'
        b'"facts":[{"text":"x","embedding":[NaN,1.0]}]}',
        "facts[0].embedding",
    ),
    (
        "inf vector",
        "crp.documents",
        b'{"event_id":"e","source":"s","source_type":"news","embedding_model":"test-model",'
        b'"facts":[{"text":"x","embedding":[Infinity,1.0]}]}',
        "facts[0].embedding",
    ),
    (
        "empty facts",
        "crp.documents",
        json.dumps({"event_id": "e", "source": "s", "source_type": "news", "facts": []}).encode(),
        "facts",
    ),
    (
        "too many facts",
        "crp.documents",
        json.dumps({"event_id": "e", "source": "s", "source_type": "news", "facts": [{"text": "x"}] * 5}).encode(),
        "facts",
    ),
    (
        "over size",
        "crp.documents",
        json.dumps({"event_id": "e", "source": "s", "source_type": "news", "text": "x" * 5000}).encode(),
        "limit",
    ),
    (
        "other model",
        "crp.documents",
        json.dumps(
            {
                "event_id": "e",
                "source": "s",
                "source_type": "news",
                "embedding_model": "other",
                "facts": [{"text": "x", "embedding": [1.0, 0.0]}],
            }
        ).encode(),
        "embedding_model",
    ),
]


@pytest.mark.parametrize(("name", "topic", "raw", "field"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_deadlettered_and_the_next_record_still_lands(
    tmp_path: Path, name: str, topic: str, raw: bytes, field: str
) -> None:
    good = doc("good", [{"text": "A good fact.", "embedding": vec(1, 0)}])
    out = run(
        tmp_path,
        [(topic, "k", T0, raw), ("crp.documents", "vendor_docs", T0 + 1, good)],
        max_record_bytes=4096,
        max_facts_per_document=3,
    )
    dead = of(out, "crp.deadletter")
    assert len(dead) == 1, name
    assert field in dead[0]["reason"], dead[0]["reason"]
    assert dead[0]["topic"] == topic and dead[0]["key"] == "k"
    assert dead[0]["raw"], "the original bytes are kept"
    assert [f["text"] for f in of(out, "crp.facts")] == ["A good fact."]


def test_wrong_dimension_against_the_fabric_is_rejected(tmp_path: Path) -> None:
    first = doc("e1", [{"text": "a", "embedding": vec(1, dim=8)}])
    second = doc("e2", [{"text": "b", "embedding": vec(1, dim=4)}])
    out = run(tmp_path, [("crp.documents", "s", T0, first), ("crp.documents", "s", T0 + 1, second)])
    dead = of(out, "crp.deadletter")
    assert len(dead) == 1 and "dimension" in dead[0]["reason"]
