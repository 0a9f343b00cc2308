"""Each Kafka worker's embedded vector index is a projection of the facts (``runtime/kafka/projection.py``):
a worker started after facts exist loads them from PostgreSQL and serves them, and follows the facts and
status changes another worker records. No Qdrant server: every worker has its own qdrant-edge index.

The two workers run different handler groups (so different consumer groups): one ingests, the other
arbitrates and serves, so every fact it serves was recorded by the other process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from tests.support.kafka import Consumed, Kafka, WorkerProcess, unique_prefix
from tests.support.services import fresh_postgres_url

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]


def document(event_id: str, document_id: str, subject: str, port: int) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "source": "vendor_docs",
        "source_type": "official",
        "document_id": document_id,
        "facts": [
            {
                "text": f"The {subject} client port is {port}.",
                "subject": subject,
                "attribute": "client port",
                "value": str(port),
            }
        ],
    }


def request(n: int, subjects: list[str]) -> dict[str, Any]:
    return {
        "request_id": f"req-proj-{n}",
        "session_id": f"s-proj-{n}",
        "window": 1,
        "query": {"text": "Which client ports?"},
        "sub_queries": [{"id": s, "text": f"{s} client port"} for s in subjects],
        "fact_budget": 8,
    }


def fact_of(recs: list[Consumed], event_id: str) -> str:
    return next(
        r.json["fact_id"]
        for r in recs
        if r.topic == "crp.facts" and r.json.get("type") == "FactRecorded" and r.json["origin_event_id"] == event_id
    )


def served(k: Kafka, n: int) -> set[str]:
    recs = k.wait_for(
        lambda rs: any(r.topic == "crp.envelopes" and r.key == f"s-proj-{n}" for r in rs), what=f"envelope {n}"
    )
    envelope = next(r.json for r in recs if r.topic == "crp.envelopes" and r.key == f"s-proj-{n}")
    return {f["fact_id"] for f in envelope["facts"]}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[SimpleNamespace]:
    prefix = unique_prefix("vp")
    kafka = Kafka(prefix)
    ns = SimpleNamespace(prefix=prefix, db=fresh_postgres_url(), kafka=kafka, tmp=tmp_path, workers=[])
    try:
        yield ns
    finally:
        for w in ns.workers:
            w.stop()
        kafka.close()


def test_a_worker_started_after_facts_exist_loads_them_and_follows_the_other_workers_facts(
    env: SimpleNamespace,
) -> None:
    k = env.kafka
    ingest = WorkerProcess(env.tmp, env.prefix, env.db, name="ingest", groups="ingest").start()
    env.workers.append(ingest)
    ingest.wait_ready()
    k.tap(("crp.facts", "crp.envelopes"))
    k.produce("crp.documents", "vendor_docs", document("etcd-v1", "etcd-ports", "etcd", 2379))
    k.produce("crp.documents", "vendor_docs", document("consul-v1", "consul-ports", "consul", 8500))
    recs = k.wait_for(
        lambda rs: sum(1 for r in rs if r.topic == "crp.facts" and r.json.get("type") == "FactRecorded") == 2,
        what="the first two facts",
    )
    etcd_old, consul = fact_of(recs, "etcd-v1"), fact_of(recs, "consul-v1")

    # started now: its empty index loads the two facts from the database
    serve = WorkerProcess(env.tmp, env.prefix, env.db, name="serve", groups="arbiter,operator,retrieval").start()
    env.workers.append(serve)
    serve.wait_ready()
    assert "vector projection: 2 facts loaded" in serve.log_path.read_text(), serve.log_tail()
    k.produce("crp.window.requests", "s-proj-1", request(1, ["etcd", "consul"]))
    assert {etcd_old, consul} <= served(k, 1)

    # the ingest worker records a new version of one document (a new fact, the old one superseded)
    # and a new fact: the serving worker's index follows both through crp.facts
    k.produce("crp.documents", "vendor_docs", document("etcd-v2", "etcd-ports", "etcd", 2389))
    k.produce("crp.documents", "vendor_docs", document("redis-v1", "redis-ports", "redis", 6379))
    k.produce("crp.window.requests", "s-proj-2", request(2, ["etcd", "consul", "redis"]))
    facts = served(k, 2)
    recs = k.snapshot()
    etcd_new, redis = fact_of(recs, "etcd-v2"), fact_of(recs, "redis-v1")
    assert {etcd_new, consul, redis} <= facts
    assert etcd_old not in facts  # superseded by the other worker: excluded from the search here too
    assert serve.metric("crp_barrier_timeouts_total") == 0, serve.log_tail()
    serve.stop()
    with EdgeVectorIndex(env.tmp / "vectors-serve") as own:
        assert own.count() == 4  # every fact, each once


def test_a_forget_applied_by_one_worker_leaves_no_point_in_the_others_index(env: SimpleNamespace) -> None:
    """The forget is applied by the worker of the operator group; the serving worker's own index drops
    the points through the ``forgotten`` status changes on crp.facts, and its envelopes never carry them."""
    k = env.kafka
    ops = WorkerProcess(env.tmp, env.prefix, env.db, name="ops", groups="ingest,operator").start()
    serve = WorkerProcess(env.tmp, env.prefix, env.db, name="serve", groups="arbiter,retrieval").start()
    env.workers += [ops, serve]
    ops.wait_ready()
    serve.wait_ready()
    k.tap(("crp.facts", "crp.envelopes"))
    k.produce("crp.documents", "vendor_docs", document("etcd-v1", "etcd-ports", "etcd", 2379))
    k.produce("crp.documents", "vendor_docs", document("consul-v1", "consul-ports", "consul", 8500))
    recs = k.wait_for(
        lambda rs: sum(1 for r in rs if r.topic == "crp.facts" and r.json.get("type") == "FactRecorded") == 2,
        what="the two facts",
    )
    etcd, consul = fact_of(recs, "etcd-v1"), fact_of(recs, "consul-v1")
    k.produce("crp.window.requests", "s-proj-1", request(1, ["etcd", "consul"]))
    assert {etcd, consul} <= served(k, 1)

    command = {"command_id": "forget-etcd", "command": "forget", "target_id": "document:etcd-ports", "actor": "dpo"}
    k.produce("crp.operator.commands", "vendor_docs", command)
    k.wait_for(
        lambda rs: any(r.topic == "crp.facts" and r.json.get("status") == "forgotten" for r in rs),
        what="the forgotten status change",
    )
    k.produce("crp.window.requests", "s-proj-2", request(2, ["etcd", "consul"]))
    facts = served(k, 2)
    assert consul in facts and etcd not in facts
    assert serve.metric("crp_barrier_timeouts_total") == 0, serve.log_tail()
    ops.stop()
    serve.stop()
    for name in ("serve", "ops"):
        with EdgeVectorIndex(env.tmp / f"vectors-{name}") as own:
            assert own.get_vectors([etcd, consul]).keys() == {consul}, name
