"""The Kafka log forgets: a sealed document's text never reaches the broker's files in plaintext,
``forget`` destroys its key, and ``rebuild --yes`` from the topics brings nothing back. A plain
document of another tenant in the same run is the control: its sentence IS found in the broker's
files, so the byte search could fail."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from sqlalchemy import text

from crp_stream import cli
from crp_stream.fabric.sealing import Sealer, open_fact_text
from crp_stream.fabric.sql import db as fabric_db
from tests.support.crash import DIM, MODEL
from tests.support.kafka import Kafka, broker, servers, unique_prefix
from tests.support.kafka_pipelines import Pacer, Pipeline

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]

SEALED_SECRET = "Erika Mustermann's badge number is 4711."
PLAIN_SENTENCE = "Max Mustermann's locker number is 2358."


def vec(*axes: float) -> list[float]:
    v = np.zeros(DIM)
    v[: len(axes)] = axes
    return [float(x) for x in v / np.linalg.norm(v)]


def document(tenant: str, event_id: str, sentence: str) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "event_id": event_id,
        "source": "hr",
        "source_type": "official",
        "document_id": "person-17",
        "title": "Badge register",
        "embedding_model": MODEL,
        "facts": [
            {"text": sentence, "embedding": vec(1.0, 0.1)},
            {
                "text": "The badge office allows 40 visitors a day.",
                "subject": "badge office",
                "attribute": "visitors",
                "value": "40",
                "embedding": vec(1.0, 0.2),
            },
        ],
    }


def rows(db: Any, sql: str) -> list[Any]:
    with db.connect() as conn:
        return list(conn.execute(text(sql)))


def broker_log_dirs() -> list[Path]:
    """Where the test broker keeps its partitions, as the broker itself reports (``log.dirs``)."""

    async def go() -> str:
        admin = AIOKafkaAdminClient(bootstrap_servers=servers())
        await admin.start()
        try:
            meta = await admin.describe_cluster()
            node = str(meta["brokers"][0]["node_id"])
            res = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, node)])
            conf = {str(e[0]): e[1] for e in res[0].resources[0][4]}
            found = conf.get("log.dirs") or conf.get("log.dir")  # log.dirs wins, as in the broker
            if found:
                return str(found)
        finally:
            await admin.close()
        raise AssertionError("the broker reports no log.dirs")

    dirs = [Path(d) for d in asyncio.run(go()).split(",")]
    assert all(d.is_dir() for d in dirs), f"the test broker's log dirs {dirs} are not on this machine"
    return dirs


def files_holding(needle: bytes, prefixes: list[str]) -> list[str]:
    """Every file of the broker's partitions of these topic prefixes that holds ``needle``."""
    found = []
    for d in broker_log_dirs():
        for part in d.iterdir():
            if part.is_dir() and part.name.startswith(tuple(prefixes)):
                found += [str(f) for f in part.iterdir() if f.is_file() and needle in f.read_bytes()]
    return found


def test_sealed_documents_leave_no_plaintext_on_the_broker_and_forget_for_good(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    feed = Kafka(unique_prefix("in"))
    live = Pipeline("sealed", tmp_path, feed.prefix)
    pacer = Pacer(feed, [live])
    db = live._engine
    prefixes = [feed.prefix, live.prefix]
    try:
        fabric_db.upgrade(db)  # the producer issues keys in the workers' database
        sealed = Sealer(db).seal(document("acme", "e1", SEALED_SECRET))
        assert SEALED_SECRET not in json.dumps(sealed) and "Badge register" not in json.dumps(sealed)
        live.create_topics()
        live.worker.start()
        pacer.feed_all(
            [
                ("crp.documents", "hr", 0, json.dumps(sealed).encode()),
                ("crp.documents", "hr", 0, json.dumps(document("globex", "e2", PLAIN_SENTENCE)).encode()),
            ]
        )
        # the worker opened the sealed record: its facts are in the fabric, in plaintext, for retrieval
        assert rows(db, "SELECT tenant, text FROM facts WHERE text LIKE '%badge number%'") == [("acme", SEALED_SECRET)]
        assert rows(db, "SELECT tenant, COUNT(*) FROM facts GROUP BY tenant ORDER BY tenant") == [
            ("acme", 2),
            ("globex", 2),
        ]
        recorded = [r.json for r in live.kafka.snapshot("crp.facts")]
        acme = [r for r in recorded if r.get("tenant") == "acme"]
        assert len(acme) == 2 and all("text" not in r for r in acme)
        key = rows(db, "SELECT key FROM sealing_keys")[0][0]
        assert SEALED_SECRET in [open_fact_text(r["sealed"], bytes(key)) for r in acme]
        assert [r["text"] for r in recorded if r.get("tenant") == "globex" and "locker" in r["text"]] == [
            PLAIN_SENTENCE
        ]

        # the control proves the search reads the partitions; the sealed sentence is in none of them
        assert files_holding(PLAIN_SENTENCE.encode(), prefixes)
        assert files_holding(SEALED_SECRET.encode(), prefixes) == []

        pacer.feed_all(
            [
                (
                    "crp.operator.commands",
                    "acme",
                    0,
                    json.dumps(
                        {
                            "tenant": "acme",
                            "command_id": "forget-acme",
                            "command": "forget",
                            "target_id": "document:person-17",
                            "actor": "dpo",
                        }
                    ).encode(),
                )
            ]
        )
        assert rows(db, "SELECT tenant, COUNT(*) FROM facts GROUP BY tenant") == [("globex", 2)]
        assert rows(db, "SELECT tenant, key IS NULL FROM sealing_keys") == [("acme", True)]
        audit = rows(db, "SELECT details FROM audit_log WHERE audit_type = 'FACTS_FORGOTTEN'")
        assert len(audit) == 1 and json.loads(audit[0][0])["sealing_keys"] == 1 and "Mustermann" not in audit[0][0]
        assert live.worker.stop() == 0

        monkeypatch.setenv("CRP_TOPIC_PREFIX", live.prefix)
        monkeypatch.setenv("CRP_INPUT_TOPIC_PREFIX", feed.prefix)
        args = ["rebuild", "--yes", "--broker", broker(), "--database", live.db, "--qdrant", live.worker.qdrant]
        args += ["--embedder", f"precomputed:{MODEL}", "--data", str(tmp_path / "rebuild")]
        assert cli.main(args) == 0, capsys.readouterr().err
        assert rows(db, "SELECT tenant, COUNT(*) FROM facts GROUP BY tenant") == [("globex", 2)]
        assert rows(db, "SELECT COUNT(*) FROM facts WHERE tenant = 'acme'") == [(0,)]
        # a record sealed under a destroyed key is forgotten, not rejected: no dead letter repeats it
        assert [r.json["reason"] for r in live.kafka.snapshot("crp.deadletter")] == []
        # the key stays destroyed across the rebuild; the broker still holds only ciphertext
        assert rows(db, "SELECT tenant, key IS NULL FROM sealing_keys") == [("acme", True)]
        assert files_holding(SEALED_SECRET.encode(), prefixes) == []
    finally:
        pacer.stopping.set()
        live.close()
        feed.close()
