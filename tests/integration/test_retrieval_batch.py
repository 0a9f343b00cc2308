"""Window requests served as one micro-batch give the bytes they give served one by one.

The same records go through the embedded runtime twice: published and run one at a time, and
published together then run as one batch (the retrieval handler's ``handle_batch``). Every output
(envelopes, audit events, dead letters) must match in order, key and bytes: with exact search and
through the ANN cache, with two windows of one session in the batch, a malformed record and a
rejected request among them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream.fabric.vectors.ann import AnnCache
from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.testing import ManualClock, Pipeline
from tests.support.retrieval import DIM, T0, Q, Rec, doc, fact, report, request, settings, sub, unit

SECOND = 1_000_000


def _facts(rng: np.random.Generator, n: int, offset: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        v = rng.normal(size=DIM)
        v[0] += 2.5  # most near the question, so the gate passes many
        out.append(fact(f"Statement {offset + i} about widget {(offset + i) % 7} and part {i}", v / np.linalg.norm(v)))
    return out


def _documents() -> list[Rec]:
    rng = np.random.default_rng(7)
    docs = [doc(f"d{i}", _facts(rng, 12, 12 * i), ts=T0 + i * SECOND, source=f"src{i}") for i in range(5)]
    # a document that expires while the batch's requests are made (the searches' times differ)
    docs.append(doc("short", _facts(rng, 4, 100), ts=T0 + 6 * SECOND, source="short", ttl="PT30S"))
    return docs


def _requests() -> list[Rec]:
    t = T0 + 20 * SECOND
    subs = [sub("a", unit({0: 1.0, 3: 0.4})), sub("b", unit({0: 1.0, 5: 0.6})), sub("c", unit({0: 0.8, 9: 0.6}))]
    return [
        request(1, t, session="s1", subs=subs, fact_budget=6),
        request(1, t + 1 * SECOND, session="s2", subs=subs[:2], fact_budget=4, query=unit({0: 1.0, 4: 0.3})),
        ("crp.window.requests", "s9", t + 2 * SECOND, b'{"session_id": "s9", "window": '),  # malformed
        request(1, t + 3 * SECOND, session="s3", subs=subs[1:], fact_budget=5, policy={"graph_retrieval": "off"}),
        report(1, t + 4 * SECOND, [("a", 0.9)], session="s1"),
        request(2, t + 5 * SECOND, session="s1"),  # the second window of a session in the batch
        request(3, t + 6 * SECOND, session="s8"),  # rejected: no such session
        request(1, t + 40 * SECOND, session="s4", subs=subs, fact_budget=3, query=Q),  # after the expiry
        report(1, t + 41 * SECOND, [("b", 0.7)], session="s2"),
        request(2, t + 42 * SECOND, session="s2"),
    ]


def _outputs(p: Pipeline, start: int) -> list[tuple[str, str, bytes]]:
    return [(r.topic, r.key or "", r.value) for r in p.outputs[start:]]


def _serve(tmp_path: Path, batched: bool, **kw: Any) -> list[tuple[str, str, bytes]]:
    with Pipeline(settings(data_dir=tmp_path, **kw), clock=ManualClock()) as p:
        for topic, key, ts, raw in _documents():
            p.publish(topic, key, raw, ts_us=ts)
        start = len(p.outputs)
        if batched:
            for topic, key, ts, raw in _requests():
                p.rt.publish(topic, key, raw, ts_us=p.clock.advance_to(ts))
            p.rt.run_until_idle()
        else:
            for topic, key, ts, raw in _requests():
                p.publish(topic, key, raw, ts_us=ts)
        return _outputs(p, start)


@pytest.mark.parametrize("ann", [False, True], ids=["exact", "ann"])
def test_a_batch_of_requests_gives_the_bytes_of_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ann: bool
) -> None:
    kw: dict[str, Any] = {"ann_min_points": 10} if ann else {}
    calls: list[str] = []
    query_many, search = EdgeVectorIndex._query_many, AnnCache._search

    def counted_query(self: Any, *a: Any, **k: Any) -> Any:
        calls.append("exact")
        return query_many(self, *a, **k)

    def counted_search(self: Any, *a: Any, **k: Any) -> Any:
        calls.append("ann")
        return search(self, *a, **k)

    monkeypatch.setattr(EdgeVectorIndex, "_query_many", counted_query)
    monkeypatch.setattr(AnnCache, "_search", counted_search)
    one = _serve(tmp_path / "one", batched=False, **kw)
    searched_one, calls[:] = len(calls), []
    many = _serve(tmp_path / "many", batched=True, **kw)
    searched_many = len(calls)

    envelopes = [json.loads(v) for t, _k, v in one if t.endswith("crp.envelopes")]
    assert len(envelopes) == 6  # s1 w1, s2 w1, s3 w1, s1 w2, s4 w1, s2 w2
    assert all(e["facts"] for e in envelopes)
    dead = [json.loads(v) for t, _k, v in one if t.endswith("crp.deadletter")]
    assert len(dead) == 2, dead  # the malformed record and the unknown session's window
    assert many == one  # every output, in order, byte for byte
    # the documents' writes search alike in both runs; the requests of a batch search together
    assert 0 < searched_many < searched_one


def test_the_batch_ends_before_a_second_window_of_a_session(tmp_path: Path) -> None:
    from crp_stream.processors.base import BatchItem, Emitter
    from crp_stream.processors.retrieval import RetrievalHandler

    with Pipeline(settings(data_dir=tmp_path), clock=ManualClock()) as p:
        for topic, key, ts, raw in _documents():
            p.publish(topic, key, raw, ts_us=ts)
        from crp_stream import events
        from crp_stream.processors.base import Record

        recs = [_requests()[i] for i in (0, 1, 3, 4)]  # s1, s2, s3, then s1's report
        items = []
        for n, (topic, key, ts, raw) in enumerate(recs):
            ev = events.decode_input(topic, raw)
            items.append(BatchItem(ev, Record(topic, 0, n, key, raw, ts), Emitter("c" + str(n))))
        with p.fabric.unit_of_work() as uow:
            assert RetrievalHandler().handle_batch(items, uow) == 3
        assert all(it.rejection is None for it in items[:3])
        assert [len([o for o in it.out.outputs if o.topic == "crp.envelopes"]) for it in items] == [1, 1, 1, 0]
