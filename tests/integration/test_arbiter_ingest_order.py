"""The Kafka limit "arbiter order across partitions" (docs/kafka.md), replayed on the embedded pieces.

The Kafka ingest group applies ``crp.documents`` and ``crp.telemetry`` in fetch order, and the arbiter
applies ``crp.facts`` in the order ingest wrote it, one transaction per record, after the inputs
stamped up to the fact's epoch were ingested. This is the cause of the congruence test's occasional
missing ``DRIFT_UNDETERMINED``: when
community_notes' document is ingested before telemetry stamped earlier, the rate-limit claim goes
straight to STALE_HIGH_TRUST. Fixing the limit (a time-ordered merge of ingest's inputs) turns the
second assertion around.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crp_stream.config import Settings, parse_pairs
from crp_stream.processors import all_handlers
from crp_stream.processors.base import Record
from crp_stream.processors.dispatch import apply_record
from crp_stream.replay_format import read_replay
from crp_stream.runtime.embedded import open_fabric
from crp_stream.runtime.embedded.log import EmbeddedLog
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime
from tests.support.congruence import SCENARIOS, TRUST

T0 = 1_764_000_000_000_000
RATE = "upstream api|rate limit"


def _event_id(raw: bytes) -> str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value.get("event_id") if isinstance(value, dict) else None


def _verdicts(tmp: Path, order: list[str]) -> list[tuple[str, str]]:
    """Ingest the inputs named by ``order`` (their stamps: 1 ms apart in scenario order), then run the
    arbiter over crp.facts as the Kafka worker does; the verdict audits, in emission order."""
    scenario = next(p for p in SCENARIOS if p.stem == "drift_and_retrieval")
    inputs = {}
    for i, (topic, key, _ts, raw) in enumerate(read_replay(scenario)):
        eid = _event_id(raw)
        if topic in ("crp.documents", "crp.telemetry") and eid:
            inputs[eid] = (topic, key, raw, T0 + 1000 * i)
    settings = Settings(
        data_dir=tmp, embedder="hashing", trust={k: float(v) for k, v in parse_pairs("trust", TRUST).items()}
    )
    now = {"ts": 0}
    fabric = open_fabric(settings)
    log = EmbeddedLog(settings.log_path, lambda: now["ts"])
    handlers = all_handlers()
    audits: list[Any] = []
    try:
        ingest = EmbeddedRuntime(fabric, log, [h for h in handlers if h.group == "ingest"])
        for eid in order:
            topic, key, raw, ts = inputs[eid]
            now["ts"] = ts
            ingest.publish(topic, key, raw, ts_us=ts)
            ingest.run_until_idle()
        arbiter = next(h for h in handlers if h.group == "arbiter")
        queue = [ingest._record(r) for r in log.read_after(0, [settings.topic("crp.facts")], limit=1000)]
        offset = len(queue)
        while queue:
            with fabric.unit_of_work() as uow:
                outputs = apply_record(arbiter, queue.pop(0), uow)
            for o in outputs:
                if o.topic == "crp.audit":
                    audits.append(json.loads(o.value))
                elif o.topic == "crp.facts":  # the arbiter's status changes come back after the rest
                    queue.append(Record("crp.facts", 0, offset, o.key, o.value, now["ts"]))
                    offset += 1
    finally:
        fabric.close()
        log.close()
    kinds = ("DRIFT_UNDETERMINED", "STALE_HIGH_TRUST", "POISONING_CANDIDATE")
    return [(a["audit_type"], a["details"]["claim"]) for a in audits if a["audit_type"] in kinds]


STAMP_ORDER = ["c-legacy-1", "c-vendor-1", "c-tele-0", "c-tele-1", "c-tele-2", "c-community-1", "c-cilium-1"]


def test_in_stamp_order_the_rate_limit_claim_passes_through_drift_undetermined(tmp_path: Path) -> None:
    found = _verdicts(tmp_path, STAMP_ORDER)
    assert found.count(("DRIFT_UNDETERMINED", RATE)) == 1 and ("STALE_HIGH_TRUST", RATE) in found
    assert ("DRIFT_UNDETERMINED", "kube-proxy|mode") in found


def test_a_document_ingested_before_earlier_telemetry_skips_it(tmp_path: Path) -> None:
    early = ["c-legacy-1", "c-vendor-1", "c-community-1", "c-tele-0", "c-tele-1", "c-tele-2", "c-cilium-1"]
    found = _verdicts(tmp_path, early)
    assert ("STALE_HIGH_TRUST", RATE) in found
    assert ("DRIFT_UNDETERMINED", RATE) not in found  # the audit the congruence test then misses
