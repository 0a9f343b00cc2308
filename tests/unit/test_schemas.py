"""The checked-in JSON Schemas (schemas/v1) equal the models' schemas, and both accept and reject the
same sample events: the checked-in schemas and the models agree."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from crp_stream import events, schemas_gen

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas" / "v1"
T0 = "2025-03-01T12:00:00Z"

SAMPLES: dict[str, dict[str, Any]] = {
    "DocumentPublished": {
        "type": "DocumentPublished",
        "event_id": "ev-1",
        "source": "vendor_docs",
        "source_type": "official",
        "trust": 0.9,
        "modified_at": T0,
        "ttl": "P1Y",
        "embedding_model": "m",
        "facts": [
            {
                "text": "Pods get IPs.",
                "importance": 0.8,
                "value": 1000,
                "unit": "rps",
                "embedding": [0.5, 0.5],
                "ttl": "P30D",
                "x_extra": True,
            }
        ],
    },
    "TelemetryObserved": {
        "event_id": "t-1",
        "source": "field_telemetry",
        "observed_at": "2025-03-01T12:00:00.5+01:00",
        "subject": "api",
        "attribute": "rate_limit",
        "value": 250,
        "unit": "rps",
    },
    "WindowRequested": {
        "request_id": "r-1",
        "session_id": "s-1",
        "window": 1,
        "query": {"text": "Kubernetes networking"},
        "sub_queries": [{"id": "sq1", "text": "Pod networking", "expected_words": 300}],
        "fact_budget": 20,
        "fanout": 2,
        "policy": {"graph_retrieval": "off", "max_hops": 3, "connector_budget": 0.2, "min_relevance": 0.4},
    },
    "WindowReported": {
        "session_id": "s-1",
        "window": 1,
        "branch": 0,
        "addressed": [{"id": "sq1", "depth": 0.7}],
        "output_text": "Pods get their own IPs.",
        "completeness": 0.5,
        "safety_budget": 0.9,
    },
    "OperatorCommand": {
        "command_id": "c-1",
        "command": "resolve_refresh",
        "target_id": "rr-1",
        "actor": "alice",
        "reason": "vendor docs updated",
    },
    "FactRecorded": {
        "type": "FactRecorded",
        "fact_id": "f-1",
        "source": "vendor_docs",
        "source_type": "official",
        "trust": 0.9,
        "epoch": T0,
        "modified_at": T0,
        "ttl": "none",
        "text": "Pods get IPs.",
        "importance": 1.0,
        "subject": "pod",
        "attribute": "ip",
        "value": "unique",
        "status": "active",
        "origin_event_id": "ev-1",
    },
    "FactStatusChanged": {
        "type": "FactStatusChanged",
        "fact_id": "f-1",
        "status": "stale",
        "reason": "newer value",
        "at": T0,
        "cause_id": "a-1",
    },
    "EnvelopeAssembled": {
        "type": "EnvelopeAssembled",
        "request_id": "r-1",
        "session_id": "s-1",
        "window": 1,
        "status": "in-progress",
        "partition": ["sq1"],
        "facts": [
            {
                "fact_id": "f-1",
                "text": "Pods get IPs.",
                "role": "anchor",
                "score": 0.8,
                "relevance": 0.7,
                "novelty": 1.0,
                "recency": 1.0,
                "authority": 0.9,
                "source": "vendor_docs",
                "source_type": "official",
                "epoch": T0,
                "modified_at": T0,
                "support": 1,
                "bridges": ["f-2"],
            }
        ],
        "notes": ["NOTE: conflicting values"],
        "residual_anchor": "Remaining sections to complete: Services",
        "headers": {"CRP-Context-Coverage-Score": 0.5, "CRP-Context-Connectors-Included": "1/7"},
    },
    "AuditRecorded": {
        "type": "AuditRecorded",
        "event_id": "a-1",
        "audit_type": "CONTRADICTION_RESOLVED",
        "at": T0,
        "details": {"kept": "f-1", "suppressed": "f-2", "pattern": "NUMBER_CHANGED"},
    },
    "RefreshRequested": {
        "type": "RefreshRequested",
        "request_id": "rr-1",
        "source": "vendor_docs",
        "subject": "api",
        "attribute": "rate_limit",
        "stale_value": 1000,
        "observed_value": 250,
        "evidence": ["f-1", "f-2"],
        "high_trust_epoch": T0,
        "divergent_epoch": "2025-03-14T00:00:00Z",
        "corroborating_partitions": 1,
        "requested_at": "2025-03-15T00:00:00Z",
    },
    "QuarantineCandidate": {
        "type": "QuarantineCandidate",
        "candidate_id": "q-1",
        "source": "community_notes",
        "fact_ids": ["f-9"],
        "subject": "api",
        "attribute": "rate_limit",
        "value": 5,
        "reason": "divergent without corroboration",
    },
    "EventRejected": {
        "type": "EventRejected",
        "topic": "crp.documents",
        "key": "vendor_docs",
        "raw": '{"event_id": ',
        "reason": "invalid JSON: Expecting value at line 1 column 14",
        "at": T0,
    },
}

# One required field and one enum field (when the event has one) per event.
REQUIRED = {
    "DocumentPublished": "event_id",
    "TelemetryObserved": "observed_at",
    "WindowRequested": "query",
    "WindowReported": "completeness",
    "OperatorCommand": "actor",
    "FactRecorded": "origin_event_id",
    "FactStatusChanged": "at",
    "EnvelopeAssembled": "headers",
    "AuditRecorded": "audit_type",
    "RefreshRequested": "evidence",
    "QuarantineCandidate": "fact_ids",
    "EventRejected": "raw",
}
ENUMS = {
    "DocumentPublished": ("source_type", "blog"),
    "OperatorCommand": ("command", "drop_table"),
    "FactRecorded": ("status", "deleted"),
    "FactStatusChanged": ("status", "gone"),
    "EnvelopeAssembled": ("status", "done"),
    "AuditRecorded": ("audit_type", "SOMETHING"),
}


@functools.cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def pydantic_accepts(name: str, value: dict[str, Any]) -> bool:
    try:
        events.EVENT_MODELS[name].model_validate(value)
    except ValidationError:
        return False
    return True


def test_samples_cover_every_event() -> None:
    assert set(SAMPLES) == set(events.EVENT_MODELS) == set(REQUIRED)


def test_checked_in_schemas_equal_regenerated() -> None:
    on_disk = {p.stem for p in SCHEMA_DIR.glob("*.json")}
    assert on_disk == set(events.EVENT_MODELS)
    for name in events.EVENT_MODELS:
        assert (SCHEMA_DIR / f"{name}.json").read_text(encoding="utf-8") == schemas_gen.render(name), (
            f"schemas/v1/{name}.json is stale: run python -m crp_stream.schemas_gen"
        )
    assert schemas_gen.stale(SCHEMA_DIR) == []


def test_generator_writes_the_same_files(tmp_path: Path) -> None:
    assert schemas_gen.main(["--out", str(tmp_path)]) == 0
    for name in events.EVENT_MODELS:
        assert (tmp_path / f"{name}.json").read_bytes() == (SCHEMA_DIR / f"{name}.json").read_bytes()
    assert schemas_gen.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "FactRecorded.json").write_text("{}", encoding="utf-8")
    assert schemas_gen.main(["--out", str(tmp_path), "--check"]) == 1


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_schema_has_id_and_draft(name: str) -> None:
    schema = validator(name).schema
    assert schema["$id"] == f"https://crp-stream/schemas/v1/{name}.json"
    assert schema["additionalProperties"] is True  # unknown fields are kept, not rejected
    is_input = any(spec.is_input and name in spec.names for spec in events.TOPICS.values())
    assert ("type" in schema["required"]) == (not is_input)  # only inputs may omit type


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_valid_sample_passes_both(name: str) -> None:
    sample = SAMPLES[name]
    assert not list(validator(name).iter_errors(sample))
    assert pydantic_accepts(name, sample)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_encoded_event_passes_schema(name: str) -> None:
    event = events.EVENT_MODELS[name].model_validate(SAMPLES[name])
    encoded = json.loads(events.encode(event))
    assert not list(validator(name).iter_errors(encoded))
    assert events.EVENT_MODELS[name].model_validate(encoded) == event


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_missing_required_field_fails_both(name: str) -> None:
    sample = copy.deepcopy(SAMPLES[name])
    del sample[REQUIRED[name]]
    assert list(validator(name).iter_errors(sample))
    assert not pydantic_accepts(name, sample)


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_wrong_enum_fails_both(name: str) -> None:
    field, bad = ENUMS[name]
    sample = {**SAMPLES[name], field: bad}
    assert list(validator(name).iter_errors(sample))
    assert not pydantic_accepts(name, sample)


@pytest.mark.parametrize(
    ("name", "patch"),
    [
        ("DocumentPublished", {"trust": 1.5}),
        ("DocumentPublished", {"trust": "high"}),
        ("DocumentPublished", {"modified_at": "2025-03-01T12:00:00"}),
        ("DocumentPublished", {"modified_at": "yesterday"}),
        ("DocumentPublished", {"ttl": "-P30D"}),
        ("DocumentPublished", {"ttl": "30 days"}),
        ("DocumentPublished", {"facts": []}),
        ("DocumentPublished", {"event_id": "x" * 257}),
        ("DocumentPublished", {"type": "TelemetryObserved"}),
        ("WindowRequested", {"fact_budget": 0}),
        ("WindowRequested", {"fact_budget": 1001}),
        ("WindowRequested", {"policy": {"max_hops": 4}}),
        ("WindowRequested", {"policy": {"connector_budget": 0.6}}),
        ("WindowRequested", {"policy": {"graph_retrieval": "maybe"}}),
        ("WindowRequested", {"window": 0}),
        ("WindowReported", {"addressed": [{"id": "sq1", "depth": 2}]}),
        ("TelemetryObserved", {"value": True}),
        ("EnvelopeAssembled", {"headers": {"CRP-Context-Mode": ["x"]}}),
    ],
)
def test_other_invalid_values_fail_both(name: str, patch: dict[str, Any]) -> None:
    sample = {**SAMPLES[name], **patch}
    assert list(validator(name).iter_errors(sample))
    assert not pydantic_accepts(name, sample)


def test_output_without_type_fails_schema_and_decode() -> None:
    sample = {k: v for k, v in SAMPLES["FactStatusChanged"].items() if k != "type"}
    assert list(validator("FactStatusChanged").iter_errors(sample))
    with pytest.raises(events.Rejected, match="type: missing required field"):
        events.decode_input("crp.facts", json.dumps(sample).encode())


def test_input_without_type_passes_both() -> None:
    sample = {k: v for k, v in SAMPLES["DocumentPublished"].items() if k != "type"}
    assert not list(validator("DocumentPublished").iter_errors(sample))
    decoded = events.decode_input("crp.documents", json.dumps(sample).encode())
    assert isinstance(decoded, events.DocumentPublished)


def test_contract_doc_is_generated_from_the_models() -> None:
    """docs/contract.md is rendered from the models; an added field shows up there once regenerated."""
    from crp_stream import contract_doc

    assert schemas_gen.CONTRACT_DOC.read_text(encoding="utf-8") == contract_doc.render(), (
        "docs/contract.md is stale: run python -m crp_stream.schemas_gen"
    )
    text = contract_doc.render()
    for name in events.EVENT_MODELS:
        assert f"## {name}" in text
    for topic in events.TOPICS:
        assert f"`{topic}`" in text
