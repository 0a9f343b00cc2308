"""SPEC-027's worked examples and seed 002's incident, through the real pipeline (``Pipeline``).

- SPEC-027 §1.1: two fan-out branches over one Coverage Set both see topic C as novel; pre-partitioned
  coverage scopes (§1.3-§1.6) give them disjoint sub-queries and disjoint facts, and fan-in merges
  their coverage.
- SPEC-027 §2.1-§2.4: "etcd default client port is 2379" (official docs, current) against "... is
  4001" (legacy docs, stale): the current fact is kept, the stale one suppressed and audited.
- SPEC-027 §2.5: the same contradiction with equal authority: both kept, with the NOTE.
- SPEC-027 §3.2/§3.5: the recency factor by age and source-type TTL.
- Seed 002: the rate-limit incident (vendor 1000 rps stale, telemetry 47 of 50 at 250 rps, community
  250 rps): STALE_HIGH_TRUST, a refresh request, no quarantine, 250 rps served.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream.config import Settings
from crp_stream.testing import Pipeline
from tests.support import arbiter as drift
from tests.support.retrieval import DAY_US, DIM, MODEL, T0, Q, fact, iso, rel_vec, unit

YEAR_US = 365 * DAY_US


def _pipeline(tmp_path: Path, **kw: Any) -> Pipeline:
    return Pipeline(Settings(data_dir=tmp_path, embedder=f"precomputed:{MODEL}", **kw))


def _doc(event_id: str, facts: list[dict[str, Any]], *, source: str = "docs", **kw: Any) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "source": source,
        "source_type": kw.pop("source_type", "official"),
        "embedding_model": MODEL,
        "facts": facts,
        **kw,
    }


def _request(window: int, *, session: str = "s", **kw: Any) -> dict[str, Any]:
    return {
        "request_id": f"{session}-{window}",
        "session_id": session,
        "window": window,
        "query": {"text": "the task", "embedding": [float(x) for x in Q]},
        "embedding_model": MODEL,
        **kw,
    }


# --- SPEC-027 §1.1: the fan-out race, removed by disjoint coverage partitions -----------------------

TOPICS = "ABCDEF"


def _topic_sub(k: int) -> dict[str, Any]:
    return {
        "id": TOPICS[k],
        "text": f"topic {TOPICS[k]}",
        "label": f"Topic {TOPICS[k]}",
        "embedding": [float(x) for x in unit({0: 0.6, 1 + k: 0.8})],
    }


def test_fan_out_branches_never_pick_the_same_novel_fact(tmp_path: Path) -> None:
    facts = [
        fact(f"Topic {TOPICS[k]} fact {j} covers its own ground", rel_vec(r, (1 + k, 0.6), (10 + 2 * k + j, 1.0)))
        for k in range(6)
        for j, r in enumerate((0.72, 0.70))
    ]
    with _pipeline(tmp_path) as p:
        p.publish("crp.documents", "docs", _doc("topics", facts), ts_us=T0)
        # window 1 covers topics A and B (Time T0 of §1.1: Coverage Set = {A, B})
        subs = [_topic_sub(k) for k in range(6)]
        p.publish("crp.window.requests", "s", _request(1, sub_queries=subs, fact_budget=4), ts_us=T0 + 1)
        addressed = [{"id": "A", "depth": 0.9}, {"id": "B", "depth": 0.9}]
        report = {"session_id": "s", "window": 1, "addressed": addressed, "output_text": ""}
        p.publish("crp.window.reports", "s", {**report, "completeness": 0.3}, ts_us=T0 + 2)
        # window 2 fans out to two branches (T1 of §1.1: both read the same Coverage Set)
        p.publish("crp.window.requests", "s", _request(2, fact_budget=4, fanout=2), ts_us=T0 + 3)
        b0, b1 = sorted((e for e in p.out("crp.envelopes") if e["window"] == 2), key=lambda e: e["branch"])
        # §1.3: disjoint partitions of the residual C-F, one immutable snapshot of the Coverage Set
        assert set(b0["partition"]).isdisjoint(b1["partition"])
        assert set(b0["partition"]) | set(b1["partition"]) == set("CDEF")
        assert b0["headers"]["CRP-Context-Coverage-Depth"] == b1["headers"]["CRP-Context-Coverage-Depth"] == 2
        assert b0["headers"]["CRP-Context-Coverage-Partitions"] == 2
        # no fact in two branches, and each branch keeps to its own topics: no duplicate content
        ids = [{f["fact_id"] for f in e["facts"]} for e in (b0, b1)]
        assert ids[0] and ids[1] and ids[0].isdisjoint(ids[1])
        for env in (b0, b1):
            assert {f["text"].split()[1] for f in env["facts"]} <= set(env["partition"])
        # §1.6 fan-in: both branches' coverage additions merge once both have reported
        for env in (b0, b1):
            addressed = [{"id": t, "depth": 0.9} for t in env["partition"]]
            branch_report = {
                "session_id": "s",
                "window": 2,
                "branch": env["branch"],
                "addressed": addressed,
                "output_text": "",
            }
            p.publish("crp.window.reports", "s", {**branch_report, "completeness": 0.5}, ts_us=T0 + 4 + env["branch"])
        p.publish("crp.window.requests", "s", _request(3, fact_budget=4), ts_us=T0 + 10)
        (w3,) = [e for e in p.out("crp.envelopes") if e["window"] == 3]
    assert w3["headers"]["CRP-Context-Coverage-Depth"] == 6
    assert w3["residual_anchor"] == "Remaining sections to complete: "


# --- SPEC-027 §2.1-§2.5: contradiction detection and authority arbitration ---------------------------

CURRENT = "The etcd default client port is 2379."
LEGACY = "The etcd default client port is 4001."


def _etcd(tmp_path: Path, legacy_type: str, legacy_age_us: int, current_age_us: int) -> tuple[dict[str, Any], Any]:
    near = [rel_vec(0.95, (1, 0.30), (2, 1.0)), rel_vec(0.94, (1, 0.30), (3, 1.0))]  # cosine > 0.85
    fillers = [fact(f"Filler sentence {w} about storage", rel_vec(0.7, (4 + i, 1.0))) for i, w in enumerate("ab")]
    with _pipeline(tmp_path) as p:
        p.publish(
            "crp.documents",
            "etcd_v3_docs",
            _doc("v3", [fact(CURRENT, near[0])], source="etcd_v3_docs", modified_at=iso(T0 - current_age_us)),
            ts_us=T0,
        )
        p.publish(
            "crp.documents",
            "etcd_v2_docs",
            _doc(
                "v2",
                [fact(LEGACY, near[1])],
                source="etcd_v2_docs",
                source_type=legacy_type,
                modified_at=iso(T0 - legacy_age_us),
            ),
            ts_us=T0,
        )
        p.publish("crp.documents", "storage", _doc("fill", fillers, source="storage"), ts_us=T0)
        sub = {"id": "ports", "text": "etcd ports", "embedding": [float(x) for x in Q]}
        # a budget that takes every candidate: CDR retrieves both ports (§2.1), arbitration decides
        request = _request(1, sub_queries=[sub], fact_budget=4, policy={"graph_retrieval": "off"})
        p.publish("crp.window.requests", "s", request, ts_us=T0 + 1)
        (env,) = p.out("crp.envelopes")
        return env, [a for a in p.out("crp.audit") if a["audit_type"].startswith("CONTRADICTION")]


def test_the_current_etcd_port_beats_the_stale_legacy_one(tmp_path: Path) -> None:
    env, audits = _etcd(tmp_path, "community", legacy_age_us=2 * YEAR_US, current_age_us=30 * DAY_US)
    texts = [f["text"] for f in env["facts"]]
    assert CURRENT in texts and LEGACY not in texts
    assert len(texts) == 3  # the two fillers and the kept port
    assert env["headers"]["CRP-Context-Conflicts-Resolved"] == "1"
    [audit] = audits
    d = audit["details"]
    assert audit["audit_type"] == "CONTRADICTION_RESOLVED" and d["pattern"] == "NUMBER_CHANGED"
    kept = next(f for f in env["facts"] if f["text"] == CURRENT)
    assert d["kept"] == kept["fact_id"]
    # authority = source authority (SPEC-009's weight x the partition's trust) x recency x importance:
    # official 0.80 x 0.8 x 1.0 against community 0.75 x 0.3 x 0.30 (two years old, past its 90-day TTL)
    assert d["authority_kept"] == pytest.approx(0.80 * 0.8, abs=1e-6)
    assert d["authority_suppressed"] == pytest.approx(0.75 * 0.3 * 0.30, abs=1e-6)


def test_an_authority_tie_keeps_both_facts_with_the_note(tmp_path: Path) -> None:
    env, audits = _etcd(tmp_path, "official", legacy_age_us=30 * DAY_US, current_age_us=30 * DAY_US)
    texts = {f["text"] for f in env["facts"]}
    assert {CURRENT, LEGACY} <= texts
    [note] = env["notes"]
    assert note.startswith("NOTE: The following two facts conflict and could not be automatically\narbitrated.")
    assert CURRENT in note and LEGACY in note
    assert env["headers"]["CRP-Context-Conflicts-Resolved"] == "1; unresolved=1"
    assert [a["audit_type"] for a in audits] == ["CONTRADICTION_UNRESOLVED"]


# --- SPEC-027 §3.2 / §3.5: the recency factor --------------------------------------------------------


def test_recency_decays_over_the_second_half_of_each_source_types_ttl(tmp_path: Path) -> None:
    cases = [  # (source type, age, recency factor)
        ("official", YEAR_US // 4, 1.0),  # first half of its 1-year TTL: fully fresh
        ("official", 3 * YEAR_US // 4, 1.0 - 0.7 * 0.5),  # halfway down the second half
        ("official", 2 * YEAR_US, 0.30),  # past its TTL: the stale floor, never excluded
        ("news", 20 * DAY_US, 1.0 - 0.7 * (5 / 15)),  # 30-day TTL
        ("user", 10 * YEAR_US, 1.0),  # no expiry
    ]
    with _pipeline(tmp_path) as p:
        for i, (source_type, age, _want) in enumerate(cases):
            v = np.zeros(DIM)
            v[0], v[1 + i] = 0.9, math.sqrt(1 - 0.81)
            text = f"Fact {i} of source type {source_type}"
            doc = _doc(f"d{i}", [fact(text, v)], source=f"src{i}", source_type=source_type, modified_at=iso(T0 - age))
            p.publish("crp.documents", f"src{i}", doc, ts_us=T0)
        sub = {"id": "q", "text": "the task", "embedding": [float(x) for x in Q]}
        p.publish(
            "crp.window.requests",
            "s",
            _request(1, sub_queries=[sub], fact_budget=5, policy={"graph_retrieval": "off"}),
            ts_us=T0,
        )
        (env,) = p.out("crp.envelopes")
    got = {f["text"]: f["recency"] for f in env["facts"]}
    for i, (source_type, _age, want) in enumerate(cases):
        assert got[f"Fact {i} of source type {source_type}"] == pytest.approx(want, abs=1e-6)
    assert env["headers"]["CRP-Context-Recency-Penalised"] == 3


# --- seed 002: the incident ---------------------------------------------------------------------------


def test_the_rate_limit_incident_is_drift_and_250_rps_is_served(tmp_path: Path) -> None:
    with drift.Pipeline(tmp_path) as p:
        p.feed(drift.seed_incident())
        claim = p.claim()
        assert claim is not None and claim["verdict"] == "STALE_HIGH_TRUST"
        [refresh] = p.out("crp.refresh.requests")
        assert refresh["source"] == "vendor_docs"
        assert (refresh["stale_value"], refresh["observed_value"]) == ("1000 rps", "250 rps")
        assert refresh["corroborating_partitions"] == 1  # community_notes, later than the vendor
        # the telemetry is never quarantined: no candidate, every record still active
        assert p.out("crp.quarantine.candidates") == [] and p.audits("POISONING_CANDIDATE") == []
        assert set(p.statuses("field_telemetry").values()) == {"active"}
        assert set(p.statuses("vendor_docs").values()) == {"stale"}
        request = {
            "request_id": "r1",
            "session_id": "s1",
            "window": 1,
            "query": {"text": "What is the rate limit of the upstream api?"},
            "sub_queries": [{"id": "q1", "text": "upstream api rate limit"}],
        }
        p.feed([drift.rec("crp.window.requests", request, drift.NOW_US + 1, key="s1")])
        (env,) = p.out("crp.envelopes")
    texts = [f["text"] for f in env["facts"]]
    assert any("250 rps" in t for t in texts) and not any("1000" in t for t in texts)
