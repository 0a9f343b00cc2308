"""Tenants and forgetting on Kafka + PostgreSQL: two tenants' near-identical facts never meet, and a
``forget`` applied by the operator worker leaves zero rows, also after ``rebuild --yes`` replays the
topics (the command is replayed after the documents it forgets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from crp_stream import cli
from tests.support.crash import DIM, MODEL
from tests.support.kafka import Kafka, broker, unique_prefix
from tests.support.kafka_pipelines import Pacer, Pipeline

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

SECRET = "Erika Mustermann's badge number is 4711."


def vec(*axes: float) -> list[float]:
    v = np.zeros(DIM)
    v[: len(axes)] = axes
    return [float(x) for x in v / np.linalg.norm(v)]


def document(tenant: str, event_id: str, value: str) -> tuple[str, str, int, bytes]:
    doc: dict[str, Any] = {
        "tenant": tenant,
        "event_id": event_id,
        "source": "hr",
        "source_type": "official",
        "document_id": "person-17",
        "embedding_model": MODEL,
        "facts": [
            {"text": SECRET, "embedding": vec(1.0, 0.1)},
            {
                "text": f"The badge office allows {value} visitors a day.",
                "subject": "badge office",
                "attribute": "visitors",
                "value": value,
                "embedding": vec(1.0, 0.2),
            },
        ],
    }
    return "crp.documents", "hr", 0, json.dumps(doc).encode()


def forget(tenant: str) -> tuple[str, str, int, bytes]:
    cmd = {
        "tenant": tenant,
        "command_id": f"forget-{tenant}",
        "command": "forget",
        "target_id": "document:person-17",
        "actor": "dpo",
    }
    return "crp.operator.commands", tenant, 0, json.dumps(cmd).encode()


def rows(db: Any, sql: str) -> list[Any]:
    with db.connect() as conn:
        return list(conn.execute(text(sql)))


def test_tenants_and_forget_on_kafka_and_postgres(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = Kafka(unique_prefix("in"))
    live = Pipeline("tenants", tmp_path, feed.prefix)
    pacer = Pacer(feed, [live])
    db = live._engine
    try:
        live.create_topics()
        live.worker.start()
        pacer.feed_all([document("acme", "e1", "40"), document("globex", "e2", "90")])
        tenant_of = dict(rows(db, "SELECT fact_id, tenant FROM facts"))
        assert sorted(tenant_of.values()) == ["acme", "acme", "globex", "globex"]
        edges = rows(db, "SELECT src, dst FROM edges")
        assert edges and [e for e in edges if tenant_of[e[0]] != tenant_of[e[1]]] == []
        keys = rows(db, "SELECT claim_key, tenant FROM facts WHERE claim_key IS NOT NULL")
        assert sorted(keys) == [("acme|badge office|visitors", "acme"), ("globex|badge office|visitors", "globex")]

        stored = {f for (f,) in rows(db, "SELECT fact_id FROM fact_vectors")}  # the workers' projection
        assert {f for f, tenant in tenant_of.items() if tenant == "acme"} <= stored

        pacer.feed_all([forget("acme")])
        assert rows(db, "SELECT tenant, COUNT(*) FROM facts GROUP BY tenant") == [("globex", 2)]
        left = {f for (f,) in rows(db, "SELECT fact_id FROM fact_vectors")}
        assert left == {f for f, tenant in tenant_of.items() if tenant == "globex"}
        worded = {f for (f,) in rows(db, "SELECT DISTINCT fact_id FROM fact_words")}  # the words of their texts
        assert worded and worded <= left
        audit = rows(db, "SELECT details FROM audit_log WHERE audit_type = 'FACTS_FORGOTTEN'")
        assert len(audit) == 1 and json.loads(audit[0][0])["facts"] == 2 and "Mustermann" not in audit[0][0]
        assert [e for e in rows(db, "SELECT src, dst FROM edges") if "acme" in (tenant_of[e[0]], tenant_of[e[1]])] == []
        assert live.worker.stop() == 0

        monkeypatch.setenv("CRP_TOPIC_PREFIX", live.prefix)
        monkeypatch.setenv("CRP_INPUT_TOPIC_PREFIX", feed.prefix)
        args = ["rebuild", "--yes", "--broker", broker(), "--database", live.db, "--qdrant", live.worker.qdrant]
        args += ["--embedder", f"precomputed:{MODEL}", "--data", str(tmp_path / "rebuild")]
        assert cli.main(args) == 0, capsys.readouterr().err
        assert rows(db, "SELECT tenant, COUNT(*) FROM facts GROUP BY tenant") == [("globex", 2)]
        assert rows(db, "SELECT COUNT(*) FROM facts WHERE text LIKE '%Mustermann%' AND tenant = 'acme'") == [(0,)]
    finally:
        pacer.stopping.set()
        live.close()
        feed.close()
