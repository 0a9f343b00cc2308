"""Render docs/asyncapi.yaml, an AsyncAPI 3.0 description of every topic, from ``events.TOPICS``.

Generated with schemas/v1 and docs/contract.md by ``python -m crp_stream.schemas_gen``, never edited by
hand; tests/unit/test_asyncapi.py proves the checked-in file is current and valid. Each message's
payload is a ``$ref`` to its JSON Schema in schemas/v1 (the one source of the fields); the document adds
what those schemas cannot say: the channels, the record key, who sends and who receives, and the headers.
"""

from __future__ import annotations

from typing import Any

from crp_stream.events import EVENT_MODELS, TOPICS
from crp_stream.events.topics import DEADLETTER, DEFAULT_PREFIX, DOCUMENTS, TELEMETRY

ASYNCAPI_VERSION = "3.0.0"
CONTRACT_VERSION = "1.0.0"  # the event contract of schemas/v1
SCHEMA_DIR = "../schemas/v1"  # relative to docs/asyncapi.yaml
SCHEMA_FORMAT = "application/schema+json;version=draft-07"  # the JSON Schema dialect AsyncAPI 3.0 names
KAFKA_BINDING = "0.5.0"
SIGNED_TOPICS = (DOCUMENTS, TELEMETRY)

DESCRIPTION = f"""\
The topics of crp-stream, an event-sourced stream processor for a living knowledge fabric (CRP SPEC-024,
SPEC-025, SPEC-027). Every record is JSON (UTF-8) with a string key; every value carries `type`, the
event's name (an input may omit it: the topic implies it). Topic names are defaults: `CRP_TOPIC_PREFIX`
replaces `crp.`. The ingestion epoch of a fact is the record's log-append time (topics are created with
`message.timestamp.type=LogAppendTime`); no payload field can set it. A record that does not validate
goes to `{DEADLETTER}` with a reason naming the field. The field-level contract: docs/contract.md;
the schemas: schemas/v1 (JSON Schema 2020-12, `$ref`'d here).
"""

HEADERS: dict[str, dict[str, Any]] = {
    "crp-id": {
        "type": "string",
        "description": "The record's id, derived from its cause (never random): a redelivered input "
        "re-emits the same id, so a consumer can drop duplicates. Set on every output.",
    },
    "crp-signature": {
        "type": "string",
        "pattern": "^[0-9a-f]{64}$",
        "description": "Hex HMAC-SHA256 of the record's raw value bytes under the source's signing key "
        "(docs/security.md). Proves `source` when signing keys are configured; otherwise ignored.",
    },
    "traceparent": {
        "type": "string",
        "description": "W3C Trace Context. On an input, optional; with tracing on (`CRP_TRACING`, the otel "
        "extra) every output carries its input's trace id and the span of the batch that handled it "
        "(docs/deployment.md).",
    },
    "tracestate": {
        "type": "string",
        "description": "W3C Trace Context vendor state, carried beside a valid traceparent.",
    },
}
TRACE_HEADERS = ["traceparent", "tracestate"]


def _id(topic: str) -> str:
    """A channel / operation id: the topic name in camel case (``crp.window.requests`` -> ``windowRequests``)."""
    parts = topic.removeprefix(DEFAULT_PREFIX).split(".")
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


def _headers(topic: str, is_input: bool) -> dict[str, Any]:
    names = (["crp-signature"] if topic in SIGNED_TOPICS else [] if is_input else ["crp-id"]) + TRACE_HEADERS
    return {"type": "object", "properties": {n: dict(HEADERS[n]) for n in names}}  # copies: no YAML anchors


def document() -> dict[str, Any]:
    """The AsyncAPI document as plain data (key order is the output order)."""
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for name, spec in TOPICS.items():
        cid = _id(name)
        direction = (
            "input: producers send, crp-stream receives"
            if spec.is_input
            else "output: crp-stream sends, consumers receive"
        )
        channels[cid] = {
            "address": name,
            "title": name,
            "description": f"{direction}. Key: {spec.key}.",
            "messages": {m: {"$ref": f"#/components/messages/{m}"} for m in spec.names},
        }
        operations[("receive" if spec.is_input else "send") + cid[0].upper() + cid[1:]] = {
            "action": "receive" if spec.is_input else "send",
            "channel": {"$ref": f"#/channels/{cid}"},
            "summary": f"crp-stream {'consumes' if spec.is_input else 'publishes'} {name}",
            "messages": [{"$ref": f"#/channels/{cid}/messages/{m}"} for m in spec.names],
        }
        for m in spec.names:
            doc = " ".join(str(EVENT_MODELS[m].__doc__ or "").split())
            messages[m] = {  # each event travels on one topic
                "name": m,
                "title": m,
                "summary": doc.split(": ", 1)[-1] if doc else m,
                "contentType": "application/json",
                "headers": _headers(name, spec.is_input),
                "payload": {"schemaFormat": SCHEMA_FORMAT, "schema": {"$ref": f"{SCHEMA_DIR}/{m}.json"}},
                "bindings": {
                    "kafka": {"key": {"type": "string", "description": spec.key}, "bindingVersion": KAFKA_BINDING}
                },
            }
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": "crp-stream topics",
            "version": CONTRACT_VERSION,
            "description": " ".join(DESCRIPTION.split()),
            "license": {"name": "Apache-2.0"},
        },
        "defaultContentType": "application/json",
        "servers": {
            "kafka": {
                "host": "localhost:9092",
                "protocol": "kafka",
                "description": "Apache Kafka (crp-stream worker --broker kafka://HOST:PORT); the embedded "
                "runtime keeps the same topics, keys and offsets in one SQLite log.",
            },
        },
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages},
    }


def render() -> str:
    """The exact file text (YAML, keys in document order, wide lines)."""
    import yaml  # a dev dependency: only the generator and its test need it

    header = (
        "# Generated by `python -m crp_stream.schemas_gen` from crp_stream/events (topics, models).\n"
        "# Do not edit by hand: tests/unit/test_asyncapi.py checks it.\n"
    )
    body: str = yaml.safe_dump(document(), sort_keys=False, width=120, allow_unicode=True)
    return header + body
