"""Congruence: one scenario through the embedded runtime (SQLite, qdrant-edge) and through the Kafka
runtime (real broker, real PostgreSQL, qdrant-edge) gives the same outputs.

How the two runs are made comparable, and what is normalised:

- Time. On Kafka the broker stamps every record (LogAppendTime), so the scenario's ``ts`` cannot be
  used there. The Kafka run goes first; the broker's stamp of each input record is recorded, and the
  embedded run appends the same inputs with those stamps as their log-append times. So every epoch,
  recency and verdict sees the same times in both runs and those fields must be equal as they are.
  What still differs is the time of records the pipeline writes itself (``FactRecorded`` on
  ``crp.facts`` is appended a few ms after the document on Kafka, at the document's time in the
  embedded log), which shows up in ``at``/``requested_at`` of what the arbiter emits. Every time at
  or after the first input's stamp is therefore replaced by the input step it falls in (``<t3>``:
  at or after input 3's stamp, before input 4's). Earlier times (producers' ``modified_at``,
  ``observed_at``) are compared as they are.
- Steps. Each input is published after the previous one's consequences are complete (every handler
  group has committed everything on its input topics and the tap has read every output), as
  ``crp-stream replay`` runs the embedded log until idle after each record. Without this, what the
  arbiter sees at each evaluation would depend on timing. Outputs are compared per input step.
- Order. Kafka orders records per partition only, so within one step the outputs are compared as a
  multiset of (step, topic, key, value).
- Ids. Ids derived from content (facts, verdicts, candidates, refresh requests, the arbiter's and the
  operator's audits) must be equal. Some ids derive from the input record's position, (topic,
  partition, offset), which differs between the 1-partition embedded log and a 4-partition topic:
  the ``event_id`` of ``EVENT_REJECTED`` (and its ``details.offset``) and of the retrieval worker's
  ``CONTRADICTION_RESOLVED`` / ``CONTRADICTION_UNRESOLVED`` audits are normalised; every other
  field of those records is compared.
- Operator commands name targets the arbiter filed; the scenario writes ``$candidate:SOURCE`` or
  ``$refresh:SOURCE`` and each run substitutes the id from its own outputs so far.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from crp_stream.config import Settings, parse_pairs
from crp_stream.processors import all_handlers
from crp_stream.processors.base import dt_to_us
from crp_stream.replay_format import read_replay
from crp_stream.runtime.embedded import open_fabric
from crp_stream.runtime.embedded.log import EmbeddedLog
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime
from tests.support.kafka import OUTPUT_TOPICS, Kafka, WorkerProcess, unique_prefix, wait_quiescent
from tests.support.services import fresh_postgres_url

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCENARIOS = [*sorted((HERE / "scenarios").glob("*.jsonl")), REPO / "ops" / "sample" / "sample.jsonl"]
TRUST = ("vendor_docs=0.9,kubernetes_docs=0.9,etcd_docs=0.9,field_telemetry=0.4,community_notes=0.2,"
         "cilium_blog=0.5,legacy_wiki=0.1")
EMBEDDER = "hashing"
COMPARED = ("crp.envelopes", "crp.audit", "crp.refresh.requests", "crp.quarantine.candidates", "crp.facts",
            "crp.deadletter")
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
    topic, field = (("crp.quarantine.candidates", "candidate_id") if kind == "candidate"
                    else ("crp.refresh.requests", "request_id"))
    ids = [json.loads(v)[field] for _, t, _, v in outputs if t == topic and json.loads(v)["source"] == source]
    assert ids, f"the scenario expects a {topic} record for {source} before this command"
    value["target_id"] = ids[0]
    return json.dumps(value, separators=(",", ":")).encode()


def run_kafka(records: list[Input], tmp: Path) -> tuple[list[Out], list[int]]:
    prefix = unique_prefix("cg")
    database = fresh_postgres_url()
    kafka = Kafka(prefix)
    worker = WorkerProcess(tmp, prefix, database, embedder=EMBEDDER, env={"CRP_TRUST": TRUST}).start()
    outputs: list[Out] = []
    stamps: list[int] = []
    try:
        worker.wait_ready()
        kafka.tap(OUTPUT_TOPICS)
        seen: set[tuple[str, int, int]] = set()
        for step, (topic, key, _ts, raw) in enumerate(records):
            _, _, stamp_ms = kafka.produce(topic, key, resolve(raw, outputs))
            stamps.append(stamp_ms * 1000)
            wait_quiescent(kafka, database)
            for r in kafka.snapshot():
                if (r.topic, r.partition, r.offset) not in seen:
                    seen.add((r.topic, r.partition, r.offset))
                    outputs.append((step, r.topic, r.key, r.value))
        assert worker.health()["status"] == "ok"
    finally:
        worker.stop()
        kafka.close()
    return outputs, stamps


def run_embedded(records: list[Input], stamps: list[int], tmp: Path) -> list[Out]:
    settings = Settings(data_dir=tmp / "embedded", embedder=EMBEDDER,
                        trust={k: float(v) for k, v in parse_pairs("trust", TRUST).items()})
    now = {"ts": 0, "step": 0}
    fabric = open_fabric(settings)
    log_ = EmbeddedLog(settings.log_path, lambda: now["ts"])
    outputs: list[Out] = []

    def collect(rec: Any) -> None:
        outputs.append((now["step"], settings.base_topic(rec.topic), rec.key, rec.value))

    rt = EmbeddedRuntime(fabric, log_, all_handlers(), on_output=collect)
    try:
        for step, ((topic, key, _ts, raw), stamp) in enumerate(zip(records, stamps, strict=True)):
            now.update(ts=stamp, step=step)
            rt.publish(topic, key, resolve(raw, outputs), ts_us=stamp)
            rt.run_until_idle()
    finally:
        fabric.close()
        log_.close()
    return outputs


def normalise(out: Out, stamps: list[int]) -> tuple[int, str, str | None, str]:
    step, topic, key, raw = out

    def when(match: re.Match[str]) -> str:
        us = dt_to_us(datetime.fromisoformat(match.group(0).replace("Z", "+00:00")))
        if us < stamps[0]:
            return match.group(0)
        return f"<t{bisect.bisect_right(stamps, us) - 1}>"

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
        return step, topic, key, raw.decode("utf-8", "replace")
    if topic == "crp.audit" and value.get("audit_type") in POSITION_DERIVED:
        value = {**value, "event_id": "<position-derived>"}
        if "offset" in value.get("details", {}):
            value["details"] = {**value["details"], "offset": "<offset>"}
    return step, topic, key, json.dumps(walk(value), sort_keys=True, separators=(",", ":"))


@pytest.mark.kafka
@pytest.mark.postgres
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_embedded_and_kafka_runtimes_emit_the_same_records(scenario: Path, tmp_path: Path) -> None:
    records = read_replay(scenario)
    kafka_out, stamps = run_kafka(records, tmp_path)
    assert stamps == sorted(stamps)
    embedded_out = run_embedded(records, stamps, tmp_path)

    def bag(outs: list[Out]) -> Counter[tuple[int, str, str | None, str]]:
        return Counter(normalise(o, stamps) for o in outs if o[1] in COMPARED)

    k_bag, e_bag = bag(kafka_out), bag(embedded_out)
    only_kafka = sorted((k_bag - e_bag).elements())
    only_embedded = sorted((e_bag - k_bag).elements())
    assert not only_kafka and not only_embedded, _diff(only_kafka, only_embedded)
    # the scenario exercises what the comparison is about
    topics = Counter(o[1] for o in kafka_out)
    assert topics["crp.envelopes"] and topics["crp.audit"] and topics["crp.deadletter"]
    if scenario.parent.name == "scenarios":
        envelopes = [json.loads(v) for _, t, _, v in kafka_out if t == "crp.envelopes"]
        assert sum(len(e["facts"]) for e in envelopes) >= 5, "the envelopes must carry facts to compare"
        assert topics["crp.refresh.requests"] and topics["crp.quarantine.candidates"]
        types = Counter(json.loads(v)["audit_type"] for _, t, _, v in kafka_out if t == "crp.audit")
        for t in ("STALE_HIGH_TRUST", "POISONING_CANDIDATE", "DRIFT_UNDETERMINED", "FACT_QUARANTINED",
                  "REFRESH_RESOLVED", "EVENT_REJECTED", "CONTRADICTION_RESOLVED"):
            assert types[t], f"the scenario no longer produces {t}: {dict(types)}"


def _diff(only_kafka: list[Any], only_embedded: list[Any]) -> str:
    lines = [f"{len(only_kafka)} records only on Kafka, {len(only_embedded)} only embedded"]
    for name, items in (("kafka", only_kafka), ("embedded", only_embedded)):
        for step, topic, key, value in items[:12]:
            lines.append(f"  {name} step {step} {topic} key={key}: {value[:600]}")
    return "\n".join(lines)


def test_scenarios_are_replay_files() -> None:
    for path in SCENARIOS:
        assert read_replay(path), path
