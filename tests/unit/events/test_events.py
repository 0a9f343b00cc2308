"""Unit tests for crp_stream.events: edge validation with reasons that name the field, canonical
encoding, round trips with unknown fields, and dead letters (docs/contract.md)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from crp_stream import events
from crp_stream.core.durations import format_duration
from crp_stream.events import Rejected, deadletter, decode_input, encode

DOCS = "crp.documents"
REQUESTS = "crp.window.requests"
T0 = "2025-03-01T12:00:00Z"


def doc(**patch: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "event_id": "ev-1",
        "source": "vendor_docs",
        "source_type": "official",
        "trust": 0.9,
        "document_id": "k8s-networking",
        "modified_at": T0,
        "ttl": "P1Y",
        "embedding_model": "test-model",
        "facts": [
            {"text": "Every Pod gets its own IP address."},
            {"text": "kube-proxy programs iptables rules.", "subject": "kube-proxy", "attribute": "mode"},
            {
                "text": "The API rate limit is 1000 rps.",
                "value": 1000,
                "unit": "rps",
                "embedding": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
            },
        ],
    }
    value.update(patch)
    return value


def request(**patch: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "request_id": "r-1",
        "session_id": "s-1",
        "window": 1,
        "query": {"text": "Write a guide to Kubernetes networking."},
        "sub_queries": [{"id": "sq1", "text": "Pod networking"}, {"id": "sq2", "text": "Services"}],
    }
    value.update(patch)
    return value


def raw(value: Any) -> bytes:
    return json.dumps(value).encode("utf-8")


def reason(topic: str, data: bytes, **kw: Any) -> str:
    with pytest.raises(Rejected) as info:
        decode_input(topic, data, **kw)
    text = info.value.reason
    assert text == str(info.value)
    assert "\n" not in text and len(text) <= 500
    return text


# --- valid input ------------------------------------------------------------------------------------


def test_valid_document_decodes_with_defaults() -> None:
    ev = decode_input(DOCS, raw(doc()))
    assert isinstance(ev, events.DocumentPublished)
    assert ev.type == "DocumentPublished"
    assert ev.facts is not None and ev.facts[0].importance == 1.0
    assert ev.facts[2].value == 1000 and ev.facts[2].embedding == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    assert ev.modified_at == datetime(2025, 3, 1, 12, tzinfo=UTC)


def test_document_with_text_only() -> None:
    value = doc(text="Pods talk to each other. Services load-balance.")
    del value["facts"]
    ev = decode_input(DOCS, raw(value))
    assert isinstance(ev, events.DocumentPublished) and ev.facts is None and ev.text


def test_window_request_defaults() -> None:
    ev = decode_input(REQUESTS, raw(request()))
    assert isinstance(ev, events.WindowRequested)
    assert (ev.fact_budget, ev.max_windows, ev.fanout) == (35, 5, 1)
    assert (ev.policy.graph_retrieval, ev.policy.max_hops, ev.policy.connector_budget) == ("on", 2, 0.30)
    assert ev.policy.min_relevance is None


def test_every_input_topic_decodes_a_sample() -> None:
    samples = {
        "crp.telemetry": {
            "event_id": "t1",
            "source": "field_telemetry",
            "observed_at": T0,
            "subject": "api",
            "attribute": "rate_limit",
            "value": 250,
            "unit": "rps",
        },
        "crp.window.reports": {
            "session_id": "s-1",
            "window": 1,
            "addressed": [{"id": "sq1", "depth": 0.6}],
            "output_text": "Pods get IPs.",
            "completeness": 0.4,
        },
        "crp.operator.commands": {
            "command_id": "c1",
            "command": "confirm_quarantine",
            "target_id": "q1",
            "actor": "alice",
        },
    }
    for topic, value in samples.items():
        ev = decode_input(topic, raw(value))
        assert ev.type == events.TOPICS[topic].model.__name__


def test_type_present_and_matching_is_accepted() -> None:
    assert isinstance(decode_input(DOCS, raw(doc(type="DocumentPublished"))), events.DocumentPublished)


def test_time_offsets_normalised_to_utc() -> None:
    ev = decode_input(DOCS, raw(doc(modified_at="2025-03-01T14:00:00.123456789+02:00")))
    assert isinstance(ev, events.DocumentPublished)
    assert ev.modified_at == datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert b'"modified_at":"2025-03-01T12:00:00.123456Z"' in encode(ev)


# --- bad input: each gets a one-line reason naming the field -----------------------------------------


def test_invalid_json() -> None:
    assert reason(DOCS, b"") == "invalid JSON: Expecting value at line 1 column 1"
    assert reason(DOCS, b'{"event_id": "e",}').startswith("invalid JSON: Expecting property name")


def test_invalid_utf8() -> None:
    data = b'{"event_id": "e\xff\xfe"}'
    assert data.index(b"\xff") == 15
    assert reason(DOCS, data) == "invalid UTF-8 at byte 15"


def test_value_not_an_object() -> None:
    assert reason(DOCS, b"[1, 2]") == "value is a JSON array, expected an object"
    assert reason(DOCS, b"42") == "value is a JSON number, expected an object"


def test_missing_required_field() -> None:
    value = doc()
    del value["event_id"]
    assert reason(DOCS, raw(value)) == "event_id: missing required field"


def test_missing_nested_required_field() -> None:
    value = doc()
    del value["facts"][1]["text"]
    assert reason(DOCS, raw(value)) == "facts[1].text: missing required field"


def test_wrong_type() -> None:
    assert reason(DOCS, raw(doc(trust="high"))) == "trust: expected a number, got string 'high'"
    assert reason(REQUESTS, raw(request(window="2"))) == "window: expected an integer, got string '2'"
    assert reason(DOCS, raw(doc(facts={"text": "x"}))) == "facts: expected an array, got object with 1 keys"


def test_out_of_range() -> None:
    assert reason(DOCS, raw(doc(trust=1.5))) == "trust: 1.5 is above the maximum 1.0"
    value = doc()
    value["facts"][0]["importance"] = -0.1
    assert reason(DOCS, raw(value)) == "facts[0].importance: -0.1 is below the minimum 0.0"


def test_unknown_source_type() -> None:
    assert reason(DOCS, raw(doc(source_type="blog"))) == (
        "source_type: 'blog' is not one of regulatory, official, version_specific, news, community, "
        "unverified, user, telemetry"
    )


def test_unparseable_time() -> None:
    assert reason(DOCS, raw(doc(modified_at="yesterday"))).startswith(
        "modified_at: 'yesterday' is not an RFC 3339 time"
    )
    assert reason(DOCS, raw(doc(modified_at="2025-13-01T00:00:00Z"))).startswith(
        "modified_at: '2025-13-01T00:00:00Z' is not a valid time"
    )
    assert reason(DOCS, raw(doc(modified_at=1700000000))).startswith(
        "modified_at: expected an RFC 3339 time string, got number 1700000000"
    )


def test_naive_time() -> None:
    assert reason(DOCS, raw(doc(modified_at="2025-03-01T12:00:00"))).startswith(
        "modified_at: '2025-03-01T12:00:00' has no zone"
    )


def test_naive_datetime_rejected_in_python() -> None:
    with pytest.raises(ValueError, match="no zone"):
        events.FactStatusChanged(fact_id="f", status="stale", reason="r", at=datetime(2025, 1, 1))


def test_canonical_time_fast_path_is_the_full_path() -> None:
    """``parse_time`` reads the canonical form (every output's times) in one call; for any input it
    gives the full path's value, or its reason (an impossible date in canonical form included)."""
    from crp_stream.events.common import format_time, parse_time, parse_time_full

    samples: list[object] = [
        "2025-03-01T12:00:00.000000Z",
        "2026-01-01T00:00:05.123456Z",
        "0001-01-01T00:00:00.000000Z",
        "9999-12-31T23:59:59.999999Z",
        "2024-02-29T00:00:00.000000Z",  # a leap day
        "2025-02-29T00:00:00.000000Z",  # not a leap year
        "2025-02-31T00:00:00.000000Z",
        "2025-13-01T00:00:00.000000Z",
        "2025-00-10T00:00:00.000000Z",
        "0000-01-01T00:00:00.000000Z",
        "2025-01-01T24:00:00.000000Z",
        "2025-01-01T23:60:00.000000Z",
        "2025-01-01T23:59:60.000000Z",  # a leap second: refused
        "2025-01-01t12:00:00.000000Z",
        "2025-01-01 12:00:00.000000Z",
        "2025-01-01T12:00:00.000000z",
        "2025-01-01T12:00:00.00000Z",
        "2025-01-01T12:00:00.0000000Z",
        "2025-01-01T12:00:00.000000+00:00",
        "2025-01-01T12:00:00.000000",
        "2025-01-01T12:00:00.00000\u0663Z".encode().decode("unicode_escape"),  # an Arabic-Indic digit
        "2025-W01-1T12:00:00.000000Z",  # an ISO week date: fromisoformat's, not RFC 3339
        "+2025-01-01T12:00:00.00000Z",
        " 2025-01-01T12:00:00.00000Z",
        "2025-01-01T12:00:00Z",
        "2025-01-01T12:00:00.5+01:30",
        "yesterday",
        "",
        1700000000,
        None,
        datetime(2025, 1, 1, tzinfo=UTC),
        datetime(2025, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
        datetime(2025, 1, 1),
    ]
    samples += [format_time(datetime(2000, 1, 1, tzinfo=UTC) + timedelta(seconds=s * 7919.123457)) for s in range(200)]
    for value in samples:
        try:
            want: object = parse_time_full(value)
        except ValueError as exc:
            with pytest.raises(ValueError) as got:
                parse_time(value)
            assert str(got.value) == str(exc), value
            continue
        for _ in range(2):  # the second read comes from the memo of recent texts
            got_value = parse_time(value)
            assert got_value == want and got_value.tzinfo is want.tzinfo is UTC, value  # type: ignore[attr-defined]
    from crp_stream.events.common import _RECENT, _RECENT_MAX

    assert 0 < len(_RECENT) <= _RECENT_MAX  # bounded (230 texts read)


def test_only_fields_that_may_hold_containers_are_searched_for_nonfinite_numbers() -> None:
    """``extras_nonfinite`` skips fields whose (strict) type admits only scalars."""
    from crp_stream.events.reasons import container_fields

    assert container_fields(events.FactRecorded) == ()
    assert container_fields(events.FactStatusChanged) == ()
    assert container_fields(events.DocumentPublished) == ("facts",)
    assert container_fields(events.AuditRecorded) == ("details",)
    assert set(container_fields(events.WindowRequested)) == {"query", "sub_queries", "policy"}
    assert container_fields(events.EnvelopeAssembled) == ("partition", "facts", "notes", "headers")


def test_bad_duration() -> None:
    assert reason(DOCS, raw(doc(ttl="30 days"))).startswith("ttl: '30 days' is not an ISO 8601 duration")
    value = doc()
    value["facts"][0]["ttl"] = "PT"
    assert reason(DOCS, raw(value)).startswith("facts[0].ttl: 'PT' is not an ISO 8601 duration")


def test_negative_ttl() -> None:
    assert reason(DOCS, raw(doc(ttl="-P30D"))) == "ttl: negative duration '-P30D' is not allowed"


def test_nan_in_vector() -> None:
    value = doc()
    value["facts"][2]["embedding"][5] = float("nan")
    data = json.dumps(value).encode()  # Python writes the non-standard literal NaN
    assert b"NaN" in data
    assert reason(DOCS, data) == "facts[2].embedding[5]: value is NaN"


def test_inf_in_vector() -> None:
    value = doc()
    value["facts"][2]["embedding"][1] = float("-inf")
    assert reason(DOCS, json.dumps(value).encode()) == "facts[2].embedding[1]: value is infinite"


def test_overflowing_number_in_vector() -> None:
    data = raw(doc()).replace(b"0.4,", b"1e999,")
    assert reason(DOCS, data) == "facts[2].embedding[3]: value is infinite"


def test_nan_in_query_vector() -> None:
    value = request(embedding_model="m", query={"text": "q", "embedding": [0.5, float("nan")]})
    assert reason(REQUESTS, json.dumps(value).encode()) == "query.embedding[1]: value is NaN"


def test_nonfinite_in_unknown_field() -> None:
    data = raw(doc(x_extra={"scores": [1.0, 2.0]})).replace(b"2.0]", b"1e999]")
    assert reason(DOCS, data) == "x_extra.scores[1]: value is infinite"
    assert reason(DOCS, json.dumps(doc(x_extra=float("nan"))).encode()) == "x_extra: value is NaN"


def test_vector_of_wrong_shape() -> None:
    value = doc()
    value["facts"][2]["embedding"] = []
    assert reason(DOCS, raw(value)) == "facts[2].embedding: array is empty, expected at least 1"
    value["facts"][2]["embedding"] = [0.1] * 4097
    assert reason(DOCS, raw(value)) == "facts[2].embedding: 4,097 items, over the limit of 4,096"
    value["facts"][2]["embedding"] = [0.1, "x"]
    assert reason(DOCS, raw(value)) == "facts[2].embedding[1]: expected a number, got string 'x'"


def test_vector_without_model() -> None:
    value = doc()
    del value["embedding_model"]
    assert reason(DOCS, raw(value)) == "embedding_model: required when a vector is given (facts[2].embedding)"


def test_over_size_limit() -> None:
    data = raw(doc(text="x" * 2_000_000))
    assert reason(DOCS, data) == f"record is {len(data):,} bytes, over the 1,048,576-byte limit"
    assert reason(DOCS, raw(doc()), max_bytes=100).endswith("over the 100-byte limit")


def test_empty_fact_list() -> None:
    assert reason(DOCS, raw(doc(facts=[]))) == "facts: list is empty; give at least one fact, or text"


def test_too_long_fact_list() -> None:
    facts = [{"text": f"fact {i}"} for i in range(1001)]
    assert reason(DOCS, raw(doc(facts=facts))) == "facts: 1,001 facts, over the limit of 1,000"
    assert reason(DOCS, raw(doc(facts=facts[:11])), max_facts=10) == "facts: 11 facts, over the limit of 10"
    ev = decode_input(DOCS, raw(doc(facts=facts)), max_bytes=10**7, max_facts=2000)
    assert isinstance(ev, events.DocumentPublished) and ev.facts is not None and len(ev.facts) == 1001


def test_neither_facts_nor_text() -> None:
    value = doc()
    del value["facts"]
    assert reason(DOCS, raw(value)) == "facts: one of facts or text is required"
    value["text"] = "   "
    assert reason(DOCS, raw(value)) == "text: must not be blank"


def test_deep_nesting() -> None:
    deep = b'{"event_id": "e", "x": ' + b"[" * 40 + b"]" * 40 + b"}"
    assert reason(DOCS, deep) == "nesting too deep: more than 32 levels of arrays and objects"
    assert reason(DOCS, b"[" * 200_000).startswith("nesting too deep")
    assert reason(DOCS, b"[" * 500 + b"]" * 500).startswith("nesting too deep")
    ok = raw(doc(x={"a": [[[[1]]]]}))
    assert isinstance(decode_input(DOCS, ok), events.DocumentPublished)


def test_type_mismatch() -> None:
    assert reason(DOCS, raw(doc(type="TelemetryObserved"))) == (
        "type: 'TelemetryObserved' does not match topic crp.documents (expects DocumentPublished)"
    )
    assert reason(DOCS, raw(doc(type=5))) == "type: expected a string, got number 5"


def test_output_topic_requires_type() -> None:
    value = {"fact_id": "f1", "status": "stale", "reason": "newer value", "at": T0}
    assert reason("crp.facts", raw(value)) == (
        "type: missing required field (topic crp.facts carries FactRecorded or FactStatusChanged)"
    )
    ev = decode_input("crp.facts", raw({**value, "type": "FactStatusChanged"}))
    assert isinstance(ev, events.FactStatusChanged)


def test_unknown_topic() -> None:
    assert reason("crp.unknown", raw({})) == "topic: unknown topic 'crp.unknown'"


def test_hostile_huge_string_is_not_echoed() -> None:
    value = doc(event_id="A" * 100_000)
    text = reason(DOCS, raw(value), max_bytes=10**7)
    assert text == "event_id: string of 100,000 characters is over the limit of 256"
    long_enum = reason(DOCS, raw(doc(source_type="B" * 10_000)))
    assert long_enum.count("B") <= 60


def test_text_length_limit() -> None:
    value = doc()
    value["facts"][0]["text"] = "x" * 65_537
    expected = "facts[0].text: string of 65,537 characters is over the limit of 65,536"
    assert reason(DOCS, raw(value)) == expected


def test_lone_surrogate() -> None:
    text = reason(DOCS, b'{"event_id": "\\ud800"}')
    assert text.startswith("invalid JSON: a string holds a lone surrogate")


def test_more_errors_are_counted() -> None:
    value = doc()
    del value["event_id"]
    del value["source"]
    assert reason(DOCS, raw(value)) == "event_id: missing required field (and 1 more error)"


# --- window requests and reports -------------------------------------------------


def test_window_one_needs_sub_queries() -> None:
    value = request()
    del value["sub_queries"]
    assert reason(REQUESTS, raw(value)) == "sub_queries: required on window 1 (the task decomposition)"
    assert isinstance(decode_input(REQUESTS, raw({**value, "window": 2})), events.WindowRequested)


def test_fact_budget_bounds() -> None:
    assert reason(REQUESTS, raw(request(fact_budget=0))) == "fact_budget: 0 is below the minimum 1"
    huge = reason(REQUESTS, raw(request(fact_budget=10**9)))
    assert huge == "fact_budget: 1000000000 is above the maximum 1000"


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({"max_hops": 4}, "policy.max_hops: 4 is above the maximum 3"),
        ({"max_hops": 0}, "policy.max_hops: 0 is below the minimum 1"),
        ({"connector_budget": 0.6}, "policy.connector_budget: 0.6 is above the maximum 0.5"),
        ({"min_relevance": 1.2}, "policy.min_relevance: 1.2 is above the maximum 1.0"),
        ({"graph_retrieval": "maybe"}, "policy.graph_retrieval: 'maybe' is not one of on, off"),
    ],
)
def test_policy_out_of_range(policy: dict[str, Any], expected: str) -> None:
    assert reason(REQUESTS, raw(request(policy=policy))) == expected


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("max_windows", 21, "max_windows: 21 is above the maximum 20"),
        ("fanout", 17, "fanout: 17 is above the maximum 16"),
        ("window", 0, "window: 0 is below the minimum 1"),
    ],
)
def test_request_bounds(field: str, value: int, expected: str) -> None:
    assert reason(REQUESTS, raw(request(**{field: value}))) == expected


def test_duplicate_sub_query_ids() -> None:
    subs = [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]
    assert reason(REQUESTS, raw(request(sub_queries=subs))) == "sub_queries[1].id: duplicate id 'a'"


def test_report_depth_out_of_range() -> None:
    value = {
        "session_id": "s",
        "window": 1,
        "addressed": [{"id": "sq1", "depth": 1.5}],
        "output_text": "",
        "completeness": 0.5,
    }
    assert reason("crp.window.reports", raw(value)) == "addressed[0].depth: 1.5 is above the maximum 1.0"


def test_operator_command_enum() -> None:
    value = {"command_id": "c", "command": "delete_everything", "target_id": "t", "actor": "a"}
    assert reason("crp.operator.commands", raw(value)) == (
        "command: 'delete_everything' is not one of resolve_refresh, acknowledge_refresh, reject_refresh, "
        "confirm_quarantine, release_quarantine, forget"
    )


# --- round trips and canonical encoding -----------------------------------------------------------------


def test_round_trip_keeps_unknown_fields() -> None:
    value = doc(x_producer={"version": 3, "tags": ["a", None]}, x_null=None)
    value["facts"][0]["x_confidence"] = 0.75
    value["facts"][1]["x_note"] = None
    ev = decode_input(DOCS, raw(value))
    assert ev.model_extra == {"x_producer": {"version": 3, "tags": ["a", None]}, "x_null": None}
    out = json.loads(encode(ev))
    assert out["x_producer"] == {"version": 3, "tags": ["a", None]} and out["x_null"] is None
    assert out["facts"][0]["x_confidence"] == 0.75 and out["facts"][1]["x_note"] is None
    again = decode_input(DOCS, encode(ev))
    assert again == ev
    assert encode(again) == encode(ev)


def test_round_trip_every_topic() -> None:
    values = {
        DOCS: doc(),
        REQUESTS: request(embedding_model="m", query={"text": "q", "embedding": [1.0, 0.0]}),
        "crp.telemetry": {
            "event_id": "t1",
            "source": "tel",
            "observed_at": T0,
            "subject": "api",
            "attribute": "rate_limit",
            "value": "250",
        },
    }
    for topic, value in values.items():
        ev = decode_input(topic, raw(value))
        assert decode_input(topic, encode(ev)) == ev


def test_encode_is_canonical() -> None:
    ev = decode_input(DOCS, raw(doc(source="sö😀rce", x_float=1e-05, x_big=1e16)))
    data = encode(ev)
    text = data.decode("utf-8")
    assert ", " not in text and ": " not in text
    assert "sö😀rce" in text  # ensure_ascii=False, UTF-8
    assert '"x_float":1e-05' in text and '"x_big":1e+16' in text  # Python repr
    parsed = json.loads(text)
    assert list(parsed) == sorted(parsed)
    assert list(parsed["facts"][2]) == sorted(parsed["facts"][2])
    assert "document_id" in parsed and "subject" not in parsed["facts"][0]  # unset optionals omitted
    assert parsed["type"] == "DocumentPublished"  # always written


def test_encode_is_deterministic_for_equal_events() -> None:
    a = doc()
    b = dict(reversed(list(doc(modified_at="2025-03-01T07:00:00-05:00", trust=0.9).items())))
    ev_a, ev_b = decode_input(DOCS, raw(a)), decode_input(DOCS, raw(b))
    assert ev_a == ev_b
    assert encode(ev_a) == encode(ev_b)
    assert encode(ev_a) == encode(decode_input(DOCS, raw(a)))


def test_encode_python_built_output() -> None:
    epoch = datetime(2025, 3, 1, 12, tzinfo=timezone(timedelta(hours=1)))
    fact = events.FactRecorded(
        fact_id="f1",
        source="vendor_docs",
        source_type="official",
        trust=0.9,
        epoch=epoch,
        modified_at=epoch,
        ttl=format_duration(182.5 * 86_400),
        text="Pods get IPs.",
        importance=1.0,
        status="active",
        origin_event_id="ev-1",
        subject=None,
    )
    data = encode(fact)
    assert data == (
        b'{"epoch":"2025-03-01T11:00:00.000000Z","fact_id":"f1","importance":1.0,'
        b'"modified_at":"2025-03-01T11:00:00.000000Z","origin_event_id":"ev-1","source":"vendor_docs",'
        b'"source_type":"official","status":"active","text":"Pods get IPs.","trust":0.9,"ttl":"P182DT12H",'
        b'"type":"FactRecorded"}'
    )
    assert decode_input("crp.facts", data) == fact


def test_int_given_for_float_is_stored_as_float() -> None:
    ev = decode_input(DOCS, raw(doc(trust=1)))
    assert isinstance(ev, events.DocumentPublished) and isinstance(ev.trust, float)
    assert b'"trust":1.0' in encode(ev)


def test_encode_refuses_nonfinite_extras_built_in_python() -> None:
    nan = float("nan")
    audit = events.AuditRecorded(event_id="a", audit_type="EVENT_REJECTED", at=T0, details={"x": nan})
    with pytest.raises(ValueError):
        encode(audit)


# --- dead letters ---------------------------------------------------------------------------------------


def test_deadletter_keeps_utf8_text() -> None:
    at = datetime(2025, 3, 1, tzinfo=UTC)
    rec = deadletter(DOCS, "vendor_docs", b'{"event_id": ', "invalid JSON: x", at)
    assert isinstance(rec, events.EventRejected)
    assert (rec.topic, rec.key, rec.raw, rec.reason, rec.at) == (
        DOCS,
        "vendor_docs",
        '{"event_id": ',
        "invalid JSON: x",
        at,
    )
    data = encode(rec)
    assert decode_input("crp.deadletter", data) == rec
    assert json.loads(data)["type"] == "EventRejected"


def test_deadletter_base64_for_non_utf8() -> None:
    original = b'{"a": "\xff"}'
    rec = deadletter(DOCS, None, original, "invalid UTF-8 at byte 7", datetime(2025, 3, 1, tzinfo=UTC))
    assert rec.raw == "base64:" + base64.b64encode(original).decode()
    assert events.raw_bytes(rec.raw) == original
    assert "key" not in json.loads(encode(rec))


def test_deadletter_prefix_is_never_ambiguous() -> None:
    original = b"base64:aGVsbG8="
    rec = deadletter(DOCS, "k", original, "r", datetime(2025, 3, 1, tzinfo=UTC))
    assert rec.raw != original.decode()
    assert events.raw_bytes(rec.raw) == original


def test_deadletter_of_oversized_record_keeps_everything() -> None:
    original = b"x" * 2_000_000
    reason_text = "a very long reason\nwith lines " * 1000
    rec = deadletter(DOCS, "k", original, reason_text, datetime(2025, 3, 1, tzinfo=UTC))
    assert events.raw_bytes(rec.raw) == original
    assert "\n" not in rec.reason and len(rec.reason) <= 500


def test_deadletter_flow_from_a_rejection() -> None:
    data = raw(doc(source_type="blog"))
    with pytest.raises(Rejected) as info:
        decode_input(DOCS, data)
    rec = deadletter(DOCS, "vendor_docs", data, info.value.reason, datetime(2025, 3, 1, tzinfo=UTC))
    assert rec.reason.startswith("source_type: 'blog'")
    assert events.raw_bytes(rec.raw) == data


# --- topics ---------------------------------------------------------------------------------------------


def test_topics_cover_the_contract() -> None:
    assert set(events.TOPICS) == {
        "crp.documents",
        "crp.telemetry",
        "crp.window.requests",
        "crp.window.reports",
        "crp.operator.commands",
        "crp.facts",
        "crp.envelopes",
        "crp.audit",
        "crp.refresh.requests",
        "crp.quarantine.candidates",
        "crp.deadletter",
    }
    assert events.TOPICS["crp.documents"].model is events.DocumentPublished
    assert events.TOPICS["crp.facts"].models == (events.FactRecorded, events.FactStatusChanged)
    assert set(events.INPUT_TOPICS) == {
        "crp.documents",
        "crp.telemetry",
        "crp.window.requests",
        "crp.window.reports",
        "crp.operator.commands",
    }
    named = {m.__name__ for spec in events.TOPICS.values() for m in spec.models}
    assert named == set(events.EVENT_MODELS)


def test_topic_name_prefix() -> None:
    assert events.topic_name("documents") == "crp.documents"
    assert events.topic_name("crp.documents", "acme.crp.") == "acme.crp.documents"
    assert events.topic_name("window.requests", "") == "window.requests"
    ev = decode_input("acme.documents", raw(doc()), prefix="acme.")
    assert isinstance(ev, events.DocumentPublished)
    assert reason("acme.documents", raw(doc())) == "topic: unknown topic 'acme.documents'"


def test_expected_words_is_a_count_and_the_earlier_list_form_still_decodes() -> None:
    raw = (
        b'{"request_id":"r","session_id":"s","window":1,"query":{"text":"q"},"sub_queries":['
        b'{"id":"a","text":"t","expected_words":["pod","ip"]},{"id":"b","text":"u","expected_words":300}]}'
    )
    ev = events.decode_input("crp.window.requests", raw)
    assert isinstance(ev, events.WindowRequested) and ev.sub_queries is not None
    assert [s.expected_words for s in ev.sub_queries] == [["pod", "ip"], 300]
    with pytest.raises(events.Rejected, match="expected_words"):
        events.decode_input("crp.window.requests", raw.replace(b"300", b"0"))
