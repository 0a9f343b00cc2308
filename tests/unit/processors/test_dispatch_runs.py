"""``apply_records`` over a run equals ``apply_record`` one by one: same outputs, same dedup and dead letters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crp_stream.config import Settings
from crp_stream.processors.arbiter import ArbiterHandler
from crp_stream.processors.base import AnyHandler, Output, Record
from crp_stream.processors.dispatch import apply_record, apply_records
from crp_stream.processors.ingest import IngestHandler
from crp_stream.runtime.embedded import open_fabric

T0 = 1_790_000_000_000_000


def _doc(event_id: str, text: str, source: str = "wiki") -> bytes:
    body: dict[str, Any] = {"event_id": event_id, "source": source, "source_type": "official", "text": text}
    return json.dumps(body).encode()


RUN = [
    _doc("d1", "The bridge opened in 1901. It spans the river Avon."),
    _doc("d1", "The bridge opened in 1901. It spans the river Avon."),  # a producer's retry: nothing again
    _doc("d2", "The bridge opened in 1902. It spans the river Avon.", source="forum"),
    b'{"event_id": "d3", "source": ',  # malformed
    _doc("d1", "The bridge opened in 1877."),  # an id reused for other content: dead-lettered
    _doc("d4", "The bridge opened in 1901. It spans the river Avon.", source="blog"),
]


def _records(values: list[bytes]) -> list[Record]:
    return [Record("crp.documents", 0, i, "k", v, T0 + i) for i, v in enumerate(values)]


def _apply(tmp: Path, batched: bool) -> tuple[list[Output], list[Output]]:
    """Ingest the run, then hand its crp.facts outputs to the arbiter (a run, or one by one)."""
    fabric = open_fabric(Settings(data_dir=tmp, embedder="hashing"))
    ingest, arbiter = IngestHandler(), ArbiterHandler()
    handlers: list[AnyHandler] = [ingest, arbiter]
    for h in handlers:
        h.bind(fabric)
    try:
        with fabric.unit_of_work() as uow:
            recs = _records(RUN)
            if batched:
                ingested = apply_records(ingest, recs, uow)
            else:
                ingested = [o for r in recs for o in apply_record(ingest, r, uow)]
        facts = [
            Record("crp.facts", 0, i, o.key, o.value, T0 + 100, (("crp-id", o.record_id.encode()),))
            for i, o in enumerate(x for x in ingested if x.topic == "crp.facts")
        ]
        facts.append(Record("crp.facts", 0, len(facts), facts[0].key, facts[0].value, T0 + 101, facts[0].headers))
        with fabric.unit_of_work() as uow:
            if batched:
                judged = apply_records(arbiter, facts, uow)
            else:
                judged = [o for r in facts for o in apply_record(arbiter, r, uow)]
        return ingested, judged
    finally:
        fabric.close()


def test_a_run_gives_the_outputs_of_one_record_at_a_time(tmp_path: Path) -> None:
    one_by_one = _apply(tmp_path / "a", batched=False)
    as_a_run = _apply(tmp_path / "b", batched=True)
    assert as_a_run == one_by_one
    ingested, judged = as_a_run
    dead = [json.loads(o.value)["reason"] for o in ingested if o.topic == "crp.deadletter"]
    assert len(dead) == 2 and any("already used for different content" in r for r in dead)
    assert sum(o.topic == "crp.facts" for o in ingested) == 6  # d1, d2 and d4, two sentences each
    assert any(o.topic == "crp.audit" for o in judged)  # the arbiter acted on the run


def test_idempotency_key_reads_fields_and_extras_as_getattr_did() -> None:
    """A producer's id is a field of its event, or an unknown field kept as an extra (a FactRecorded
    carrying ``event_id``); the key is what ``getattr(event, attr, None)`` gave."""
    from crp_stream import events
    from crp_stream.processors.dispatch import idempotency_key

    record = Record("crp.documents", 0, 7, "wiki", b"{}", T0)
    doc = events.decode_input("crp.documents", _doc("d9", "The bridge opened in 1901."))
    assert idempotency_key(doc, record) == "event_id:d9"
    fact = {"type": "FactRecorded", "fact_id": "f1", "source": "s", "source_type": "official", "trust": 0.5,
            "epoch": "2026-01-01T00:00:00Z", "modified_at": "2026-01-01T00:00:00Z", "ttl": "none", "text": "t",
            "importance": 1.0, "status": "active", "origin_event_id": "o"}  # fmt: skip
    plain = events.decode_input("crp.facts", json.dumps(fact).encode())
    assert idempotency_key(plain, record).startswith("record:")
    extra = events.decode_input("crp.facts", json.dumps({**fact, "request_id": "r5"}).encode())
    assert idempotency_key(extra, record) == "request_id:r5" == f"request_id:{extra.request_id}"


def test_an_emitters_cause_is_derived_when_first_read() -> None:
    from crp_stream.core.ids import derive_id
    from crp_stream.processors.base import Emitter

    out = Emitter(cause_of=("arbiter", "c1"))
    assert out.cause == derive_id("arbiter", "c1")
    rid = out.emit("crp.facts", "k", b"{}")
    assert rid == derive_id(derive_id("arbiter", "c1"), "0", "crp.facts")
    assert Emitter(cause="x").cause == "x"
    with pytest.raises(TypeError):
        Emitter()
    with pytest.raises(TypeError):
        Emitter(cause="x", cause_of=("a",))


@pytest.mark.parametrize(
    ("text", "dead"),
    [
        ("a\\u0000b", True),  # an escaped NUL: refused at the edge
        ("a\\\\u0000b", False),  # an escaped backslash, then the text "u0000"
        ("au0000b", False),  # no backslash at all
    ],
)
def test_a_nul_escape_is_dead_lettered_and_nothing_else(tmp_path: Path, text: str, dead: bool) -> None:
    raw = ('{"event_id": "d1", "source": "wiki", "source_type": "official", "text": "' + text + '"}').encode()
    fabric = open_fabric(Settings(data_dir=tmp_path, embedder="hashing"))
    ingest = IngestHandler()
    ingest.bind(fabric)
    try:
        with fabric.unit_of_work() as uow:
            outs = apply_record(ingest, Record("crp.documents", 0, 0, "k", raw, T0), uow)
    finally:
        fabric.close()
    reasons = [json.loads(o.value)["reason"] for o in outs if o.topic == "crp.deadletter"]
    assert any("NUL" in r for r in reasons) == dead
