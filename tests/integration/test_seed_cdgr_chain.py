"""SPEC-025 §1.1 and §4: the Kubernetes chain A -> B -> C -> D, through the real pipeline.

The query is "Why does my pod fail to reach the database after a node restart?"; the chain's facts
have the seed's query similarities (A 0.88, B 0.61, C 0.59, D 0.84) and the seed's graph: B is a
neighbour of A, C of B and D, and A-D has no edge (§4). Six distractors about database pools,
cordoned nodes and probes are more similar to the query than B and C (0.62-0.67) and form three
pairs of their own. Budget 6, connector budget 0.3, max hops 2: the anchors are A, D and the two
best distractors (§2.2), and the two connector slots must hold B and C (§2.4-§2.6), however the
ten facts are laid out in documents: the similarity graph's bridges hold whatever adjacency edges a
layout adds.
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

REL = {
    "A": 0.88,
    "B": 0.61,
    "C": 0.59,
    "D": 0.84,
    "X1": 0.67,
    "X2": 0.64,
    "X3": 0.66,
    "X4": 0.63,
    "X5": 0.65,
    "X6": 0.62,
}
TEXT = {
    "A": "Pods receive new IPs when rescheduled after a node restart.",
    "B": "Services use label selectors to track pod endpoints.",
    "C": "kube-proxy updates iptables rules when endpoints change.",
    "D": "A stale DNS cache can delay endpoint propagation.",
    "X1": "The database connection pool holds at most fifty connections.",
    "X2": "Idle pool connections are closed after ten minutes.",
    "X3": "A cordoned node accepts no new pods.",
    "X4": "Draining a node evicts its pods after cordoning it.",
    "X5": "A readiness probe failure removes the pod from rotation.",
    "X6": "Liveness probes restart a container that stops answering.",
}
QUERY = "Why does my pod fail to reach the database after a node restart?"
ORDER = ["A", "B", "C", "D", "X1", "X2", "X3", "X4", "X5", "X6"]
SHUFFLED = ["X3", "D", "X1", "B", "X5", "A", "X6", "C", "X2", "X4"]  # a fixed permutation
INTERLEAVED = [["X1", "A", "X2"], ["X3", "B"], ["C", "X4", "X5"], ["X6", "D"]]


def _vectors() -> dict[str, np.ndarray]:
    """Query axis 0 at each fact's seed similarity. The chain's remainders lie in one plane at 0, 45,
    100 and 150 degrees: A-B 0.80, B-C 0.73, C-D 0.78 are similarity edges (>= 0.60), A-C 0.45, B-D
    0.40, A-D 0.52 are not. Each distractor pair shares a topic axis (0.79 within a pair, below 0.60
    to everything else)."""
    out = {}
    angle = {"A": 0.0, "B": 45.0, "C": 100.0, "D": 150.0}
    for i, name in enumerate(REL):
        r = REL[name]
        s = math.sqrt(1.0 - r * r)
        v = np.zeros(DIM)
        v[0] = r
        if name in angle:
            a = math.radians(angle[name])
            v[1], v[2] = s * math.cos(a), s * math.sin(a)
        else:
            topic = 3 + (i - 4) // 2  # X1, X2 -> 3; X3, X4 -> 4; X5, X6 -> 5
            v[topic], v[6 + i] = 0.8 * s, 0.6 * s
        out[name] = v
    return out


VEC = _vectors()


def _doc(event_id: str, names: list[str], ts: int, **kw: Any) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "source": "runbooks",
        "source_type": "official",
        "embedding_model": MODEL,
        "modified_at": iso(T0),
        "facts": [fact(TEXT[n], VEC[n]) for n in names],
        **kw,
    }


def _layout(name: str) -> list[dict[str, Any]]:
    if name == "one document, in order":
        return [_doc("runbook", ORDER, T0, title="Runbook: pods after a node restart")]
    if name == "one document, shuffled":
        return [_doc("runbook", SHUFFLED, T0, title="Runbook: pods after a node restart")]
    if name == "one document per fact":
        return [_doc(f"fact-{n}", [n], T0 + i) for i, n in enumerate(ORDER)]
    assert name == "documents interleaved with distractors"
    return [_doc(f"part-{i}", g, T0 + i) for i, g in enumerate(INTERLEAVED)]


LAYOUTS = [
    "one document, in order",
    "one document, shuffled",
    "one document per fact",
    "documents interleaved with distractors",
]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_seed_chain_keeps_its_connectors_in_every_layout(tmp_path: Path, layout: str) -> None:
    with Pipeline(Settings(data_dir=tmp_path, embedder=f"precomputed:{MODEL}")) as p:
        for d in _layout(layout):
            p.publish("crp.documents", "runbooks", d, ts_us=T0 + 10)
        ids = {v["text"]: v["fact_id"] for v in p.out("crp.facts", "FactRecorded")}
        request = {
            "request_id": "r1",
            "session_id": "s",
            "window": 1,
            "query": {"text": QUERY, "embedding": [float(x) for x in Q]},
            "embedding_model": MODEL,
            "sub_queries": [{"id": "why", "text": QUERY, "embedding": [float(x) for x in Q]}],
            "fact_budget": 6,
            "policy": {"graph_retrieval": "on", "connector_budget": 0.3, "max_hops": 2},
        }
        p.publish("crp.window.requests", "s", request, ts_us=T0 + 20)
        (env,) = p.out("crp.envelopes")
    name = {ids[TEXT[n]]: n for n in TEXT}
    facts = {name[f["fact_id"]]: f for f in env["facts"]}
    roles = {n: f["role"] for n, f in facts.items()}
    # §2.2: the top 4 by CDR are A, D, X1, X3; §2.6: the 2 connector slots hold B and C
    assert roles == {"A": "anchor", "D": "anchor", "X1": "anchor", "X3": "anchor", "B": "connector", "C": "connector"}
    assert env["headers"]["CRP-Context-Connectors-Included"] == "2/6"
    # §2.4: each bridges A <-> D (no A-D similarity edge), through its strongest paths of <= 2 edges
    strength = {"B": (0.8028 + 0.7268) / 2, "C": (0.7268 + 0.7767) / 2}
    for n in ("B", "C"):
        assert sorted(facts[n]["bridges"]) == sorted([ids[TEXT["A"]], ids[TEXT["D"]]])
        # §2.5 with SPEC-027 §3.3: bridge x novelty x recency x max(relevance, 0.30)
        assert facts[n]["score"] == pytest.approx(strength[n] * REL[n], abs=2e-4)
        assert facts[n]["via"] == "similarity"
    assert env["headers"]["CRP-Context-Bridge-Score"] == pytest.approx(sum(strength.values()) / 2, abs=2e-4)
    # §2.6: the model reads A -> B -> C, the connectors beside the anchor they leave from
    order = [name[f["fact_id"]] for f in env["facts"]]
    assert order[:3] == ["A", "B", "C"] and order[-1] == "D"
