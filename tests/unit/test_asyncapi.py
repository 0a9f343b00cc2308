"""docs/asyncapi.yaml: current (regenerating it gives the checked-in bytes) and a valid AsyncAPI 3.0 document
(the official 3.0.0 JSON Schema of @asyncapi/specs, vendored in tests/data/asyncapi), covering every topic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from crp_stream import asyncapi_doc, schemas_gen
from crp_stream.events import EVENT_MODELS, TOPICS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "asyncapi.yaml"
META = ROOT / "tests" / "data" / "asyncapi" / "asyncapi-3.0.0.schema.json"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(DOC.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(META.read_text(encoding="utf-8")))


def test_regenerating_gives_the_checked_in_file() -> None:
    assert DOC.read_text(encoding="utf-8") == asyncapi_doc.render(), "run: python -m crp_stream.schemas_gen"
    assert "docs/asyncapi.yaml" not in schemas_gen.stale()


def test_the_document_validates_against_the_asyncapi_3_0_schema(
    doc: dict[str, Any], validator: jsonschema.Draft7Validator
) -> None:
    assert doc["asyncapi"] == "3.0.0"
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(doc)]
    assert errors == []


@pytest.mark.parametrize("breakage", ["address", "action", "ref"])
def test_the_validator_rejects_a_broken_document(
    doc: dict[str, Any], validator: jsonschema.Draft7Validator, breakage: str
) -> None:
    bad = json.loads(json.dumps(doc))
    if breakage == "address":
        bad["channels"]["facts"]["address"] = 5
    elif breakage == "action":
        bad["operations"]["sendFacts"]["action"] = "publish"  # AsyncAPI 2's verb: not in 3.0
    else:
        bad["channels"]["facts"]["messages"]["FactRecorded"] = {"$ref": 7}
    assert list(validator.iter_errors(bad))


def test_every_topic_is_a_channel_with_its_key_messages_and_headers(doc: dict[str, Any]) -> None:
    by_address = {c["address"]: c for c in doc["channels"].values()}
    assert set(by_address) == set(TOPICS)
    messages = doc["components"]["messages"]
    assert set(messages) == set(EVENT_MODELS)
    for name, spec in TOPICS.items():
        assert set(by_address[name]["messages"]) == set(spec.names)
        for m in spec.names:
            msg = messages[m]
            assert msg["bindings"]["kafka"]["key"]["description"] == spec.key
            ref = msg["payload"]["schema"]["$ref"]
            schema = json.loads((DOC.parent / ref).read_text(encoding="utf-8"))  # the ref resolves
            assert schema["title"] == m
            headers = set(msg["headers"]["properties"])
            assert ("crp-id" in headers) == (not spec.is_input)
            assert ("crp-signature" in headers) == (name in ("crp.documents", "crp.telemetry"))
    actions = {op["channel"]["$ref"].rsplit("/", 1)[1]: op["action"] for op in doc["operations"].values()}
    assert {doc["channels"][c]["address"]: a for c, a in actions.items()} == {
        n: "receive" if s.is_input else "send" for n, s in TOPICS.items()
    }
