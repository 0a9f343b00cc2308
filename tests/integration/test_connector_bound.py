"""CDGR reads the connectors it can admit, not every fact its walk reached, and admits the same ones.

``graph_select.choose`` reads the reached facts outside the candidate set a few at a time, in the
order of an upper bound of their §2.5 score (``score_bounds``), and stops once no unread fact can
take a slot. Reading every reached fact in one round is the rule itself: both must give the same
envelopes, byte for byte, with the ANN cache (relevance bounds from its stored vectors) and without
it (the bridge value alone bounds the score).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream.fabric.caches.fact_cache import FactCache
from crp_stream.processors import assembly, graph_select
from crp_stream.testing import ManualClock, Pipeline
from tests.support.retrieval import DIM, T0, Rec, doc, fact, request, settings, sub, unit

SECOND = 1_000_000


def _documents() -> list[Rec]:
    """Sixty facts at the question (Q), sixty along each sub-query (A, B) and forty between A and B
    (M): Q, A and B share no similarity edge, M links to A and B. The question's search takes Q and
    the sub-queries' A and B, so M is never a candidate; it bridges A's anchors to B's, closer to the
    question than A's and B's own 2-edge bridges: connectors read from outside the candidates."""
    rng = np.random.default_rng(3)
    centres = {
        "q": unit({0: 1.0}),
        "a": unit({0: 0.4, 1: 0.917}),
        "b": unit({0: 0.4, 2: 0.917}),
        "m": unit({0: 0.55, 1: 0.59, 2: 0.59}),
    }
    docs = []
    for d, name in enumerate("qqqaaabbbmm"):
        facts = []
        for i in range(20):
            v = centres[name] + 0.02 * rng.normal(size=DIM)
            facts.append(fact(f"Statement {name}{d}-{i} about part {(d * 3 + i) % 11}", v / np.linalg.norm(v)))
        docs.append(doc(f"d{d}", facts, ts=T0 + d * SECOND, source=f"src{d % 3}"))
    return docs


def _requests(later: int = 30 * SECOND) -> list[Rec]:
    t = T0 + later
    out = []
    for s in range(6):
        subs = [sub("a", unit({0: 0.4, 1: 0.917})), sub("b", unit({0: 0.4, 2: 0.917 + 0.02 * s}))]
        query = unit({0: 1.0, 3: 0.05 * s})
        out.append(request(1, t + s * SECOND, session=f"s{s}", subs=subs, fact_budget=8 + s, query=query))
    return out


def _serve(tmp_path: Path, later: int = 30 * SECOND, **kw: Any) -> list[tuple[str, str, bytes]]:
    with Pipeline(settings(data_dir=tmp_path, **kw), clock=ManualClock()) as p:
        for topic, key, ts, raw in _documents():
            p.publish(topic, key, raw, ts_us=ts)
        start = len(p.outputs)
        for topic, key, ts, raw in _requests(later):
            p.publish(topic, key, raw, ts_us=ts)
        return [(r.topic, r.key or "", r.value) for r in p.outputs[start:]]


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many facts from outside the candidates each read appends (``assembly._append_outside``)."""
    read: list[int] = []
    append = assembly._append_outside

    def counted(uow: Any, c: Any, fact_ids: list[str]) -> None:
        read.append(len(fact_ids))
        append(uow, c, fact_ids)

    monkeypatch.setattr(assembly, "_append_outside", counted)
    return read


@pytest.mark.parametrize("ann", [False, True], ids=["exact", "ann"])
def test_reading_connectors_by_their_bound_admits_what_reading_all_admits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ann: bool
) -> None:
    kw: dict[str, Any] = {"ann_min_points": 10} if ann else {}
    read = _count_reads(monkeypatch)
    bounded = _serve(tmp_path / "bounded", **kw)
    read_bounded, read[:] = sum(read), []
    # the rule itself: every reached fact that could rank among the C best by its key group is read
    # (in one round), none left out by a score bound
    monkeypatch.setattr(graph_select, "FETCH_PER_SLOT", 10**9)
    monkeypatch.setattr(graph_select, "_TIE_MARGIN", math.inf)
    everything = _serve(tmp_path / "all", **kw)
    read_all = sum(read)

    envelopes = [v for t, _k, v in everything if t.endswith("crp.envelopes")]
    assert len(envelopes) == 6
    assert sum(v.count(b'"role":"connector"') for v in envelopes) > 0  # connectors were admitted
    assert bounded == everything  # every output, byte for byte
    assert read_bounded < read_all  # and the bound left facts unread


# the documents' source type is "official": a TTL of a year, so every recency is at its floor (0.30)
AGED = 2 * 365 * 86_400 * SECOND


def test_on_old_facts_the_bound_takes_each_facts_recency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fabric whose facts all sit at the recency floor, a bound that takes recency as 1 is 3×
    too loose. The bound with each fact's own recency reads fewer facts and admits the same ones as
    reading every reached fact."""
    read = _count_reads(monkeypatch)
    with_recency = _serve(tmp_path / "recency", AGED)
    read_recency, read[:] = sum(read), []

    def nothing_held(self: Any, fact_ids: list[str]) -> tuple[Any, Any, Any]:
        return np.zeros(0, dtype=np.intp), np.zeros(0), np.zeros(0)

    monkeypatch.setattr(FactCache, "aging", nothing_held)  # recency 1 for every unread fact
    without = _serve(tmp_path / "without", AGED)
    read_without, read[:] = sum(read), []
    monkeypatch.setattr(graph_select, "FETCH_PER_SLOT", 10**9)
    monkeypatch.setattr(graph_select, "_TIE_MARGIN", math.inf)
    everything = _serve(tmp_path / "all", AGED)

    envelopes = [v for t, _k, v in everything if t.endswith("crp.envelopes")]
    assert len(envelopes) == 6
    assert sum(v.count(b'"role":"connector"') for v in envelopes) > 0
    assert all(b'"recency":0.3,' in v for v in envelopes)  # aged: every fact at the floor
    assert with_recency == without == everything
    assert read_recency < read_without
