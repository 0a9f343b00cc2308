"""The congruence scenario runner: one replay file through the embedded runtime and through Kafka, and
the normalisation that compares them (used by tests/congruence and the Kafka barrier tests)."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from crp_stream.config import Settings, parse_pairs
from crp_stream.processors import all_handlers
from crp_stream.processors.base import dt_to_us
from crp_stream.runtime.embedded import open_fabric
from crp_stream.runtime.embedded.log import EmbeddedLog
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime
from tests.support.kafka import (
    INPUTS_BY_GROUP,
    OUTPUT_TOPICS,
    JavaProducer,
    Kafka,
    WorkerProcess,
    db_offsets,
    unique_prefix,
    wait_quiescent,
)
from tests.support.services import fresh_postgres_url

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "tests" / "congruence"
SCENARIOS = [*sorted((HERE / "scenarios").glob("*.jsonl")), REPO / "ops" / "sample" / "sample.jsonl"]
TRUST = (
    "vendor_docs=0.9,kubernetes_docs=0.9,etcd_docs=0.9,field_telemetry=0.4,community_notes=0.2,"
    "cilium_blog=0.5,legacy_wiki=0.1"
)
EMBEDDER = "hashing"
COMPARED = (
    "crp.envelopes",
    "crp.audit",
    "crp.refresh.requests",
    "crp.quarantine.candidates",
    "crp.facts",
    "crp.deadletter",
)
# Scenarios whose arbiter outputs depend on the order in which facts of two partitions reach the
# arbiter (ingest runs ahead across partitions in fetch order; docs/kafka.md, "Limits"): there the
# envelopes (what must agree) and the dead letters are compared, not the intermediate verdicts.
ARBITER_ORDER_SENSITIVE = ("mixed_large",)
ENVELOPES_ONLY = ("crp.envelopes", "crp.deadletter")
# audits whose id derives from the input record's position (no event id of its own in the cause)
POSITION_DERIVED = ("EVENT_REJECTED", "CONTRADICTION_RESOLVED", "CONTRADICTION_UNRESOLVED")
TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})")

Out = tuple[int, str, str | None, bytes]  # (input step, contract topic, key, value)
Input = tuple[str, str | None, int, bytes]


def resolve(raw: bytes, outputs: list[Out]) -> bytes:
    """``$candidate:SOURCE`` / ``$refresh:SOURCE`` -> the id this run's arbiter filed for SOURCE."""
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    target = value.get("target_id") if isinstance(value, dict) else None
    if not isinstance(target, str) or not target.startswith(("$candidate:", "$refresh:")):
        return raw
    kind, source = target[1:].split(":", 1)
    topic, field = (
        ("crp.quarantine.candidates", "candidate_id") if kind == "candidate" else ("crp.refresh.requests", "request_id")
    )
    ids = [json.loads(v)[field] for _, t, _, v in outputs if t == topic and json.loads(v)["source"] == source]
    assert ids, f"the scenario expects a {topic} record for {source} before this command"
    value["target_id"] = ids[0]
    return json.dumps(value, separators=(",", ":")).encode()


def run_kafka(
    records: list[Input], tmp: Path, *, qdrant: str | None = None, workers: int = 1
) -> tuple[list[Out], list[int], list[Input]]:
    """Produce the inputs with the Java producer, unpaced: everything up to and including a window
    request at once (the request races the inputs before it), then wait for that request's answer, as
    a generator waits for its envelope before it writes, reports and asks for the next window.

    ``workers`` worker processes in one consumer group share the fabric: one PostgreSQL database and
    the vector store ``qdrant`` (a Qdrant server spec; default: each worker its own qdrant-edge index,
    a projection of the facts)."""
    prefix = unique_prefix("cg")
    database = fresh_postgres_url()
    kafka = Kafka(prefix)
    # a generous barrier: on a loaded 2-core test machine ingest of 160 records takes longer than 2 s
    env = {"CRP_TRUST": TRUST, "CRP_BARRIER_WAIT": "120"}
    names = ["w"] if workers == 1 else [f"w{i}" for i in range(workers)]
    group = [
        WorkerProcess(tmp, prefix, database, name=name, qdrant=qdrant, embedder=EMBEDDER, env=env).start()
        for name in names
    ]
    producer: JavaProducer | None = None
    stamps: list[int] = []
    try:
        for worker in group:
            worker.wait_ready()
        if workers > 1:
            _wait_split(group)
        kafka.tap(OUTPUT_TOPICS)
        producer = JavaProducer(distinct_ms=True)
        sent_records: list[Input] = []
        for i, (topic, key, ts, raw) in enumerate(records):
            raw = _resolve_now(kafka, raw)
            sent_records.append((topic, key, ts, raw))
            producer.send(kafka.physical(topic), key, raw)
            if topic == "crp.window.requests" or i == len(records) - 1:
                sent = producer.flush()
                stamps += [ts * 1000 for _p, _o, ts in sent]
                if topic == "crp.window.requests":
                    part, offset, _ = sent[-1]
                    _wait_applied(database, "retrieval", topic, part, offset)
        assert len(set(stamps)) == len(stamps) == len(records)
        wait_quiescent(kafka, database, timeout=300.0)
        outputs = [(0, r.topic, r.key, r.value) for r in kafka.snapshot()]
        for worker in group:
            assert worker.health()["status"] == "ok"  # type: ignore[index]
            assert worker.metric("crp_barrier_timeouts_total") == 0, worker.log_tail()
    finally:
        if producer is not None:
            producer.close()
        for worker in group:
            worker.stop()
        kafka.close()
    return outputs, stamps, sent_records


def _wait_split(group: list[WorkerProcess], timeout: float = 120.0) -> None:
    """Until the workers hold disjoint, non-empty shares of every input partition (the rebalance after
    the last one joined is over)."""
    deadline = time.monotonic() + timeout
    total = group[0].partitions * sum(len(topics) for topics in INPUTS_BY_GROUP.values())
    while True:
        held = [set((w.health() or {}).get("assigned", [])) for w in group]
        every = set().union(*held)
        if all(held) and sum(map(len, held)) == len(every) == total:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"partitions not split between the workers: {held}")
        time.sleep(0.3)


def _resolve_now(kafka: Kafka, raw: bytes) -> bytes:
    """A ``$candidate:``/``$refresh:`` target: the id the Kafka run's arbiter filed (it was filed
    from inputs of an earlier batch, which the previous request's barrier waited for)."""
    if b'"$candidate:' not in raw and b'"$refresh:' not in raw:
        return raw
    kind, source = json.loads(raw)["target_id"][1:].split(":", 1)
    topic = "crp.quarantine.candidates" if kind == "candidate" else "crp.refresh.requests"
    found = kafka.wait_for(
        lambda rs: any(r.topic == topic and r.json.get("source") == source for r in rs),
        timeout=60,
        what=f"the {topic} record for {source}",
    )
    return resolve(raw, [(0, r.topic, r.key, r.value) for r in found])


def _wait_applied(database: str, group: str, topic: str, partition: int, offset: int, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while db_offsets(database).get((group, topic, partition), 0) <= offset:
        if time.monotonic() > deadline:
            pytest.fail(f"{topic}[{partition}]@{offset} not applied by {group} after {timeout}s")
        time.sleep(0.05)


KIND_ORDER = {"crp.operator.commands": 1, "crp.window.requests": 2}  # within one millisecond: last


def broker_order(records: list[Input], stamps: list[int]) -> list[int]:
    """The inputs in the order the Kafka runtime promises to honour: by stamp, requests last within one."""
    return sorted(range(len(records)), key=lambda i: (stamps[i], KIND_ORDER.get(records[i][0], 0), i))


def run_embedded(records: list[Input], stamps: list[int], tmp: Path, embedder: str = EMBEDDER) -> list[Out]:
    settings = Settings(
        data_dir=tmp / "embedded",
        embedder=embedder,
        trust={k: float(v) for k, v in parse_pairs("trust", TRUST).items()},
    )
    now = {"ts": 0, "step": 0}
    fabric = open_fabric(settings)
    log_ = EmbeddedLog(settings.log_path, lambda: now["ts"])
    outputs: list[Out] = []

    def collect(rec: Any) -> None:
        outputs.append((now["step"], settings.base_topic(rec.topic), rec.key, rec.value))

    rt = EmbeddedRuntime(fabric, log_, all_handlers(), on_output=collect)
    try:
        for step in broker_order(records, stamps):
            topic, key, _ts, raw = records[step]
            now.update(ts=stamps[step], step=step)
            rt.publish(topic, key, raw, ts_us=stamps[step])
            rt.run_until_idle()
    finally:
        fabric.close()
        log_.close()
    return outputs


def normalise(out: Out, stamps: list[int]) -> tuple[str, str | None, str]:
    _step, topic, key, raw = out
    rank = {us: i for i, us in enumerate(sorted(set(stamps)))}

    def when(match: re.Match[str]) -> str:
        us = dt_to_us(datetime.fromisoformat(match.group(0).replace("Z", "+00:00")))
        if us < min(stamps):
            return match.group(0)
        if topic == "crp.envelopes":  # an epoch: exactly an input's stamp
            return f"<s{rank[us]}>" if us in rank else f"<not an input stamp: {match.group(0)}>"
        return "<t>"

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return TIME_RE.sub(when, v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    try:
        value = json.loads(raw)
    except ValueError:
        return topic, key, raw.decode("utf-8", "replace")
    if topic == "crp.audit" and value.get("audit_type") in POSITION_DERIVED:
        value = {**value, "event_id": "<position-derived>"}
        if "offset" in value.get("details", {}):
            value["details"] = {**value["details"], "offset": "<offset>"}
    return topic, key, json.dumps(walk(value), sort_keys=True, separators=(",", ":"))
