"""The embedded runtime, caught up with its log, ends a batch after its first run of window requests
and reports: an envelope is committed and published without waiting for the inputs appended after
its request. A backlog of a full batch keeps whole batches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crp_stream.testing import Pipeline

T0 = 1_793_000_000_000_000
MIN = 60_000_000


def document(event_id: str, text: str) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "source": "handbook",
        "source_type": "official",
        "document_id": event_id,
        "facts": [{"text": text}],
    }


def request(request_id: str) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "session_id": f"s-{request_id}",
        "window": 1,
        "query": {"text": "When does the deploy freeze start?"},
        "sub_queries": [{"id": "q1", "text": "deploy freeze start"}],
        "fact_budget": 5,
        "policy": {"min_relevance": 0.0},
    }


def append(p: Pipeline, topic: str, key: str, value: dict[str, Any], ts_us: int) -> None:
    """Appended to the log without running the pipeline."""
    p.rt.publish(topic, key, json.dumps(value).encode(), ts_us=p.clock.advance_to(ts_us))


def outputs(p: Pipeline, topic: str) -> list[dict[str, Any]]:
    return [json.loads(o.value) for o in p.outputs if o.topic == p.settings.topic(topic)]


def test_a_request_is_served_before_the_inputs_appended_after_it(tmp_path: Path) -> None:
    with Pipeline.fresh(tmp_path, embedder="hashing") as p:
        p.publish("crp.documents", "handbook", document("d1", "The deploy freeze starts Friday at noon."), ts_us=T0)
        facts_before = len(outputs(p, "crp.facts"))
        append(p, "crp.window.requests", "s-r1", request("r1"), T0 + MIN)
        append(p, "crp.documents", "handbook", document("d2", "Deploys resume Monday at nine."), T0 + 2 * MIN)
        assert p.rt.run_until_idle(max_records=1) >= 1  # one batch
        assert [e["request_id"] for e in outputs(p, "crp.envelopes")] == ["r1"]
        assert len(outputs(p, "crp.facts")) == facts_before  # d2 is not ingested yet
        p.rt.run_until_idle()
        assert len(outputs(p, "crp.facts")) > facts_before  # then it is, in the next batch


def test_a_full_batch_of_backlog_is_not_cut(tmp_path: Path) -> None:
    with Pipeline.fresh(tmp_path, embedder="hashing", batch_size=2) as p:
        p.publish("crp.documents", "handbook", document("d1", "The deploy freeze starts Friday at noon."), ts_us=T0)
        facts_before = len(outputs(p, "crp.facts"))
        append(p, "crp.window.requests", "s-r1", request("r1"), T0 + MIN)
        append(p, "crp.documents", "handbook", document("d2", "Deploys resume Monday at nine."), T0 + 2 * MIN)
        append(p, "crp.documents", "handbook", document("d3", "Hotfixes need two approvals."), T0 + 3 * MIN)
        p.rt.run_until_idle(max_records=1)  # a full batch of 2: the request and d2 together
        assert [e["request_id"] for e in outputs(p, "crp.envelopes")] == ["r1"]
        assert len(outputs(p, "crp.facts")) > facts_before
