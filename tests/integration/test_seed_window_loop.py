"""SPEC-024 §1.1's window table, through the real pipeline.

"Kubernetes networking architecture", the same query every window. Without CDR the HNSW top 5 come
back every window (W1 uses facts 1-2, W2 3-4, W3 5) while the eBPF, BGP, service mesh and federation
facts at similarity 0.65-0.75 never surface. With CDR each window's report moves its sub-queries into
the Coverage Set, so every window receives material it has not seen, the 0.65-0.75 facts surface, and
the loop ends at the hard window limit (§6 Exit 2). The session keeps the backward summary (§4.3)
beside the Residual Task Anchor (§4.2).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream.config import Settings
from crp_stream.testing import Pipeline
from tests.support.retrieval import DIM, MODEL, T0, Q, fact, iso

TABLE = [  # (text, similarity to the query): the seed's HNSW top 5, then the material they bury
    ("Kubernetes uses a flat network model in which every pod gets its own address.", 0.94),
    ("Pod-to-pod communication is direct, without address translation.", 0.91),
    ("kube-proxy manages Service routing on every node.", 0.89),
    ("Network policies control traffic flow between workloads.", 0.87),
    ("CNI plugins implement the network layer of the cluster.", 0.85),
    ("eBPF dataplanes replace iptables chains for service load balancing.", 0.75),
    ("BGP integration advertises pod routes to the physical network.", 0.72),
    ("Service mesh sidecars intercept traffic to add mutual TLS.", 0.69),
    ("Cross-cluster federation connects services across clusters.", 0.66),
]
QUERY = "Kubernetes networking architecture"


def _fact_vec(k: int, rel: float) -> np.ndarray:
    """Similarity ``rel`` to the query (axis 0), the rest on the fact's own topic axis ``k + 1``."""
    v = np.zeros(DIM)
    v[0], v[k + 1] = rel, math.sqrt(1.0 - rel * rel)
    return v


def _sub_vec(k: int) -> list[float]:
    """Sub-query ``k``: half the query, mostly its fact's topic."""
    v = np.zeros(DIM)
    v[0], v[k + 1] = 0.5, math.sqrt(0.75)
    return [float(x) for x in v]


def _request(session: str, window: int) -> dict[str, Any]:
    value: dict[str, Any] = {
        "request_id": f"{session}-w{window}",
        "session_id": session,
        "window": window,
        "query": {"text": QUERY, "embedding": [float(x) for x in Q]},
        "embedding_model": MODEL,
        "fact_budget": 2,
        "policy": {"graph_retrieval": "off"},
    }
    if window == 1:
        value["max_windows"] = 5
        value["sub_queries"] = [
            {"id": f"s{k + 1}", "text": text, "label": f"Topic {k + 1}", "embedding": _sub_vec(k)}
            for k, (text, _rel) in enumerate(TABLE)
        ]
    return value


def _session(p: Pipeline, session: str, index: dict[str, int], covers: bool) -> tuple[list[list[int]], list[str]]:
    """Five windows of one session; each report addresses the sub-queries of the facts its window
    received (``covers``), or none (no coverage ever: relevance ranking, the seed's failure)."""
    served: list[list[int]] = []
    summaries: list[str] = []
    for window in range(1, 6):
        ts = T0 + 100 * window + (50 if covers else 0)
        p.publish("crp.window.requests", session, _request(session, window), ts_us=ts)
        (env,) = [
            e for e in p.out("crp.envelopes") if e["request_id"] == f"{session}-w{window}" and not e.get("closing")
        ]
        assert env["status"] == "in-progress"
        got = sorted(index[f["fact_id"]] for f in env["facts"])
        served.append(got)
        report = {
            "session_id": session,
            "window": window,
            "addressed": [{"id": f"s{k + 1}", "depth": 0.9} for k in got] if covers else [],
            "output_text": "",
            "completeness": 0.1 * window,
        }
        p.publish("crp.window.reports", session, report, ts_us=ts + 5)
        with p.uow() as uow:
            row = uow.repo.get_session(session)
            assert row is not None
            summaries.append(row["state"]["backward_summary"])
    return served, summaries


def test_every_window_gets_fresh_material_and_the_buried_facts_surface(tmp_path: Path) -> None:
    facts = [fact(text, _fact_vec(k, rel)) for k, (text, rel) in enumerate(TABLE)]
    doc = {
        "event_id": "k8s",
        "source": "docs",
        "source_type": "official",
        "embedding_model": MODEL,
        "modified_at": iso(T0),
        "facts": facts,
    }
    with Pipeline(Settings(data_dir=tmp_path, embedder=f"precomputed:{MODEL}")) as p:
        p.publish("crp.documents", "docs", doc, ts_us=T0)
        texts = [t for t, _r in TABLE]
        index = {v["fact_id"]: texts.index(v["text"]) for v in p.out("crp.facts", "FactRecorded")}
        flat, _ = _session(p, "flat", index, covers=False)
        cdr, summaries = _session(p, "cdr", index, covers=True)
        closing = {e["session_id"]: e["status"] for e in p.out("crp.envelopes") if e.get("closing")}
    # the seed's failure: nothing enters the Coverage Set, the query never changes, and the same top
    # facts come back every window; the material at 0.65-0.75 never surfaces
    assert flat == [[0, 1]] * 5
    # with CDR, window 1 is the same (§2.7), then no window repeats a fact until the fabric runs out:
    # windows 1-4 serve 8 distinct facts, the buried eBPF, BGP, mesh and federation facts among them,
    # and window 5 the one fact left (its other slot holds a covered fact at the novelty floor)
    assert cdr[0] == [0, 1]
    first_four = [k for w in cdr[:4] for k in w]
    assert len(set(first_four)) == 8
    assert {5, 6, 7, 8} <= {k for w in cdr for k in w}
    assert (set(range(9)) - set(first_four)) <= set(cdr[4])
    # §6 Exit 2: the fifth report ends each loop at the hard window limit
    assert closing == {"flat": "limit-reached", "cdr": "limit-reached"}
    # §4.3: the backward summary is kept in the session, window by window
    labels = [", ".join(f"Topic {k + 1}" for k in w) for w in cdr]
    assert summaries[0] == f"Previously covered: window 1: {labels[0]}"
    assert summaries[1] == f"Previously covered: window 1: {labels[0]}; window 2: {labels[1]}"
    assert summaries[-1] == "Previously covered: " + "; ".join(f"window {n + 1}: {x}" for n, x in enumerate(labels))


def test_window_one_scores_are_relevance_alone(tmp_path: Path) -> None:
    """SPEC-024 §2.7: with an empty Coverage Set the CDR score is importance x relevance, and the
    Coverage-Score (§8.1, the least CDR_score / relevance) is 1.0 for facts of importance 1."""
    facts = [fact(text, _fact_vec(k, rel)) for k, (text, rel) in enumerate(TABLE)]
    doc = {"event_id": "k8s", "source": "docs", "source_type": "official", "embedding_model": MODEL, "facts": facts}
    with Pipeline(Settings(data_dir=tmp_path, embedder=f"precomputed:{MODEL}")) as p:
        p.publish("crp.documents", "docs", doc, ts_us=T0)
        p.publish("crp.window.requests", "s", _request("s", 1), ts_us=T0 + 10)
        (env,) = p.out("crp.envelopes")
    assert [round(f["score"], 5) for f in sorted(env["facts"], key=lambda f: -f["score"])] == [0.94, 0.91]
    assert env["headers"]["CRP-Context-Coverage-Score"] == pytest.approx(1.0, abs=1e-6)
