"""The retrieval worker, driven through the real embedded runtime (``replay_records``).

Synthetic vectors (see ``retrieval_harness``) make every relevance, coverage score and edge exact,
so expected scores are computed here from the same vectors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream.core import ngram
from tests.support.retrieval import (
    DAY_US,
    DIM,
    MODEL,
    T0,
    Q,
    Rec,
    Run,
    by_text,
    doc,
    fact,
    from_gram,
    iso,
    record_of,
    rel_vec,
    report,
    request,
    run,
    session_row,
    sub,
    unit,
)

# --- window 1: CDR score, the relevance gate, excluded facts -----------------------------------------

W1_FACTS = [  # (text, relevance, importance)
    ("Alpha routers forward packets between subnets quickly", 0.92, 1.0),
    ("Bravo switches learn hardware addresses from frames", 0.81, 0.5),
    ("Charlie firewalls drop unsolicited inbound connections", 0.70, 0.8),
    ("Delta proxies terminate client sessions near users", 0.60, 1.0),
    ("Echo caches keep recently fetched objects in memory", 0.50, 1.0),
    ("Foxtrot printers queue jobs for the office floor", 0.30, 1.0),
]


def _w1_records() -> list[Rec]:
    facts = [fact(t, rel_vec(r, (i + 1, 1.0)), importance=imp) for i, (t, r, imp) in enumerate(W1_FACTS)]
    return [
        doc("d1", facts),
    ]


def test_window_one_score_is_importance_times_relevance_and_gate_applies(tmp_path: Path) -> None:
    recs = [*_w1_records(), request(1, T0 + 1, subs=[sub("a", Q)], fact_budget=10, policy={"graph_retrieval": "off"})]
    out = run(recs, tmp_path)
    assert out.dead == []
    env = out.envelope(1)
    facts = by_text(env)
    # min_relevance 0.55 (the seed default for a model without calibration): 0.50 and 0.30 are out
    assert set(facts) == {t for t, r, _ in W1_FACTS if r >= 0.55}
    for text, rel, imp in W1_FACTS:
        if rel >= 0.55:
            f = facts[text]
            assert f["relevance"] == pytest.approx(rel, abs=1e-5)
            assert f["score"] == pytest.approx(imp * rel, abs=1e-5)
            assert f["novelty"] == 1.0 and f["recency"] == 1.0 and f["role"] == "anchor" and f["support"] == 1
    h = env["headers"]
    assert h["CRP-Context-Coverage-Depth"] == 0
    # SPEC-024 §8.1: the minimum of CDR_score / relevance: window 1's novelty is 1.0, so the ratio is
    # the importance, and Bravo's 0.5 is the least
    assert h["CRP-Context-Coverage-Score"] == pytest.approx(0.5, abs=1e-6)
    assert h["CRP-Context-Continuation-Status"] == "in-progress" == env["status"]
    assert h["CRP-Context-Connectors-Included"] == "0/4"
    assert env["residual_anchor"] == "Remaining sections to complete: A"
    # primacy-recency sandwich: best first, second best last
    scores = sorted((f["score"] for f in env["facts"]), reverse=True)
    assert env["facts"][0]["score"] == scores[0] and env["facts"][-1]["score"] == scores[1]


def test_policy_min_relevance_overrides_the_gate_per_window(tmp_path: Path) -> None:
    recs = [
        *_w1_records(),
        request(
            1,
            T0 + 1,
            session="low",
            subs=[sub("a", Q)],
            fact_budget=10,
            policy={"graph_retrieval": "off", "min_relevance": 0.45},
        ),
        request(
            1,
            T0 + 2,
            session="high",
            subs=[sub("a", Q)],
            fact_budget=10,
            policy={"graph_retrieval": "off", "min_relevance": 0.75},
        ),
    ]
    out = run(recs, tmp_path)
    low = next(e for e in out.envelopes if e["session_id"] == "low")
    high = next(e for e in out.envelopes if e["session_id"] == "high")
    assert set(by_text(low)) == {t for t, r, _ in W1_FACTS if r >= 0.45}
    assert set(by_text(high)) == {t for t, r, _ in W1_FACTS if r >= 0.75}


def test_settings_min_relevance_is_the_deployment_default(tmp_path: Path) -> None:
    recs = [*_w1_records(), request(1, T0 + 1, subs=[sub("a", Q)], fact_budget=10, policy={"graph_retrieval": "off"})]
    out = run(recs, tmp_path, min_relevance=0.65)
    assert set(by_text(out.envelope(1))) == {t for t, r, _ in W1_FACTS if r >= 0.65}


def test_superseded_facts_never_reach_an_envelope(tmp_path: Path) -> None:
    old = "Routers in version one forward packets slowly"
    new = "Routers in version two forward packets quickly"
    recs = [
        doc(
            "v1",
            [fact(old, rel_vec(0.9, (1, 1.0))), fact("Stable sentence about subnets", rel_vec(0.8, (2, 1.0)))],
            document_id="guide",
        ),
        doc(
            "v2",
            [fact(new, rel_vec(0.88, (3, 1.0))), fact("Stable sentence about subnets", rel_vec(0.8, (2, 1.0)))],
            ts=T0 + 1,
            document_id="guide",
        ),
        request(1, T0 + 2, subs=[sub("a", Q)], fact_budget=10),
    ]
    out = run(recs, tmp_path)
    texts = set(by_text(out.envelope(1)))
    assert new in texts and old not in texts
    assert any(v.get("status") == "superseded" for v in out.values("crp.facts"))


def test_quarantined_facts_never_reach_an_envelope(tmp_path: Path) -> None:
    """Auto-quarantine of a poisoning candidate (older low-trust records contradicting a fresher
    trusted one): the quarantined readings are the most relevant facts, and still stay out."""
    t_low, t_vendor = T0 - 30 * DAY_US, T0 - 5 * DAY_US
    poison = rel_vec(0.95, (1, 1.0))
    trusted = rel_vec(0.90, (1, 0.3), (2, 1.0))

    def tele(eid: str) -> Rec:
        return record_of(
            "crp.telemetry",
            "field_telemetry",
            t_low,
            {
                "event_id": eid,
                "source": "field_telemetry",
                "observed_at": iso(t_low),
                "subject": "upstream api",
                "attribute": "rate limit",
                "value": "250",
                "unit": "rps",
                "embedding_model": MODEL,
                "embedding": [float(x) for x in poison],
            },
        )

    claim = {"subject": "upstream api", "attribute": "rate limit", "unit": "rps"}
    recs = [
        tele("bad-1"),
        tele("bad-2"),
        doc(
            "cn-bad",
            [fact("The upstream api rate limit is 250 rps.", poison, value="250", **claim)],
            t_low,
            source="community_notes",
            source_type="community",
        ),
        doc(
            "vendor-1",
            [fact("The upstream api rate limit is 1000 rps.", trusted, value="1000", **claim)],
            t_vendor,
            source="vendor_docs",
        ),
        request(1, T0, subs=[sub("a", Q)], fact_budget=10),
    ]
    trust = {"vendor_docs": 0.9, "field_telemetry": 0.4, "community_notes": 0.2}
    out = run(recs, tmp_path, auto_quarantine=True, trust=trust)
    quarantined = {v["fact_id"] for v in out.values("crp.facts") if v.get("status") == "quarantined"}
    assert len(quarantined) == 3, "the scenario must quarantine the two readings and the community note"
    env = out.envelope(1)
    assert {f["fact_id"] for f in env["facts"]} & quarantined == set()
    assert [f["source"] for f in env["facts"]] == ["vendor_docs"]


# --- multi-window session ----------------------------------------------------------------------------

SUBS = {k: unit({0: 0.6, k: 0.8}) for k in (1, 2, 3, 4)}
# two facts per sub-query k: 0.5 along axis k, the rest on a private axis; relevance falls with k
MW_FACTS = {
    "f1a": (1, 0.85, "Pods receive addresses from the node range during scheduling today"),
    "f1b": (1, 0.80, "Every container shares the network namespace of its enclosing pod"),
    "f2a": (2, 0.78, "Services select their backends through label queries kept by controllers"),
    "f2b": (2, 0.76, "Cluster DNS answers lookups for service names inside each namespace"),
    "f3a": (3, 0.70, "Ingress controllers route external HTTP traffic toward internal services"),
    "f3b": (3, 0.68, "Gateway resources split listener ownership from application routing rules"),
    "f4a": (4, 0.66, "Network policies restrict which workloads may open connections to others"),
    "f4b": (4, 0.64, "Enforcement of those policies depends on the installed network plugin"),
}


def mw_vec(name: str) -> np.ndarray:
    k, r, _ = MW_FACTS[name]
    private = 10 + list(MW_FACTS).index(name)
    return np.asarray(rel_vec(r, (k, 0.5), (private, 1.0)))


def _mw_docs() -> list[Rec]:
    return [doc("mw", [fact(t, mw_vec(n)) for n, (_k, _r, t) in MW_FACTS.items()])]


def _mw_subs() -> list[dict[str, Any]]:
    return [sub(f"s{k}", SUBS[k], label=f"Section {k}") for k in (1, 2, 3, 4)]


def expected_scores(
    coverage: list[tuple[int, float]], residual: list[int], output_text: str
) -> dict[str, dict[str, float]]:
    """SPEC-024 §7.1 (+ SPEC-027 §3.3 with recency 1), computed here from the very same vectors."""
    blacklist = ngram.update_ngram_blacklist(frozenset(), output_text)
    out = {}
    for name, (_k, _r, text) in MW_FACTS.items():
        v = mw_vec(name)
        rel = float(v @ Q)
        if coverage:
            w = np.array([d for _, d in coverage])
            cov = float(np.array([v @ SUBS[k] for k, _ in coverage]) @ w / w.sum())
        else:
            cov = 0.0
        pull = max((float(v @ SUBS[k]) for k in residual), default=0.0) if coverage else 0.0
        nov = max(1.0 - min(max(cov, 0.0), 0.8), 0.2)
        pen = min(0.8, 0.15 * ngram.ngram_overlap(text, blacklist))
        out[text] = {
            "relevance": rel,
            "novelty": nov,
            "pull": pull,
            "penalty": pen,
            "score": max(rel, pull) * nov * (1 - pen),
            "ratio": max(rel, pull) * nov * (1 - pen) / max(rel, 0.30),  # SPEC-024 §6: CDR_score / relevance
        }
    return out


def test_multi_window_session_novelty_residual_pull_anchor_depth_and_ngram_guard(tmp_path: Path) -> None:
    f2a_text = MW_FACTS["f2a"][2]
    w1_output = f"Section one is done. {f2a_text}. More words follow here."
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4, policy={"graph_retrieval": "off"}),
        report(1, T0 + 2, [("s1", 0.9)], output_text=w1_output),
        request(2, T0 + 3, fact_budget=8, policy={"graph_retrieval": "off"}),
        report(2, T0 + 4, [("s2", 0.7), ("s3", 0.4)], output_text="Sections two and three."),
        request(3, T0 + 5, fact_budget=8, policy={"graph_retrieval": "off"}),
    ]
    out = run(recs, tmp_path)
    assert out.dead == []
    w1, w2, w3 = out.envelope(1), out.envelope(2), out.envelope(3)

    # window 1: top 4 by relevance (sub-queries 1 and 2), all fresh
    assert set(by_text(w1)) == {MW_FACTS[n][2] for n in ("f1a", "f1b", "f2a", "f2b")}
    assert w1["residual_anchor"] == "Remaining sections to complete: Section 1, Section 2, Section 3, Section 4"

    # window 2: coverage {s1 @ 0.9}; every fact's score is exactly the SPEC-024 formula
    exp = expected_scores([(1, 0.9)], [2, 3, 4], w1_output)
    got = by_text(w2)
    assert set(got) == set(exp)
    for text, e in exp.items():
        assert got[text]["novelty"] == pytest.approx(e["novelty"], abs=1e-5), text
        assert got[text]["score"] == pytest.approx(e["score"], abs=1e-5), text
    covered = [MW_FACTS[n][2] for n in ("f1a", "f1b")]
    for text in covered:
        assert got[text]["novelty"] == pytest.approx(0.2, abs=1e-6)  # the floor, never below
        assert got[text]["score"] < got[text]["relevance"]
    # residual pull: uncovered sub-query facts now outrank the covered ones they trailed in window 1
    uncovered = [MW_FACTS[n][2] for n in ("f3a", "f3b", "f4a", "f4b")]
    assert min(got[t]["score"] for t in uncovered) > max(got[t]["score"] for t in covered)
    assert all(exp[t]["pull"] > exp[t]["relevance"] for t in uncovered)
    # the 6-gram guard: f2a's text was written in window 1
    assert exp[f2a_text]["penalty"] > 0 and got[f2a_text]["score"] < got[MW_FACTS["f2b"][2]]["score"]
    h2 = w2["headers"]
    assert h2["CRP-Context-NGram-Guard-Activations"] == 1
    assert h2["CRP-Context-Coverage-Depth"] == 1
    assert h2["CRP-Context-Coverage-Score"] == pytest.approx(min(e["ratio"] for e in exp.values()), abs=1e-5)
    assert w2["residual_anchor"] == "Remaining sections to complete: Section 2, Section 3, Section 4"

    # window 3: three coverage entries, one section left
    assert w3["headers"]["CRP-Context-Coverage-Depth"] == 3
    assert w3["residual_anchor"] == "Remaining sections to complete: Section 4"
    exp3 = expected_scores([(1, 0.9), (2, 0.7), (3, 0.4)], [4], w1_output + " Sections two and three.")
    got3 = by_text(w3)
    for text, e in exp3.items():
        assert got3[text]["score"] == pytest.approx(e["score"], abs=1e-5), text
    assert out.envelope(3)["status"] == "in-progress"


def test_session_survives_a_restart(tmp_path: Path) -> None:
    first = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4, policy={"graph_retrieval": "off"}),
        report(1, T0 + 2, [("s1", 0.9)], output_text="Section one."),
    ]
    second = [request(2, T0 + 3, fact_budget=8, policy={"graph_retrieval": "off"})]
    run(first, tmp_path / "restarted")
    after = run(second, tmp_path / "restarted")  # a new runtime on the same data directory
    assert after.dead == []
    continued = after.envelope(2)
    assert continued["headers"]["CRP-Context-Coverage-Depth"] == 1
    assert continued["residual_anchor"] == "Remaining sections to complete: Section 2, Section 3, Section 4"
    assert by_text(continued)[MW_FACTS["f1a"][2]]["novelty"] == pytest.approx(0.2, abs=1e-6)
    # the same as one uninterrupted run
    straight = run(first + second, tmp_path / "straight")
    assert continued == straight.envelope(2)


def test_same_records_give_identical_output_lines(tmp_path: Path) -> None:
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=5),
        report(1, T0 + 2, [("s1", 0.9), ("s2", 0.4)], output_text=f"{MW_FACTS['f3a'][2]} and more"),
        request(2, T0 + 3, fact_budget=5, fanout=2),
    ]
    a = run(recs, tmp_path / "a").lines
    b = run(recs, tmp_path / "b").lines
    assert a == b
    assert sum(1 for line in a if '"crp.envelopes"' in line) == 3


# --- CDGR ----------------------------------------------------------------------------------------------

CHAIN_NAMES = ["q", "A", "B", "C", "D", "F1", "F2"]
CHAIN_GRAM = [
    #  q     A     B     C     D     F1    F2
    [1.00, 0.80, 0.40, 0.40, 0.80, 0.60, 0.58],  # q
    [0.80, 1.00, 0.70, 0.30, 0.40, 0.48, 0.464],  # A
    [0.40, 0.70, 1.00, 0.70, 0.30, 0.24, 0.232],  # B
    [0.40, 0.30, 0.70, 1.00, 0.70, 0.24, 0.232],  # C
    [0.80, 0.40, 0.30, 0.70, 1.00, 0.48, 0.464],  # D
    [0.60, 0.48, 0.24, 0.24, 0.48, 1.00, 0.348],  # F1
    [0.58, 0.464, 0.232, 0.232, 0.464, 0.348, 1.00],  # F2
]
CHAIN_TEXT = {
    "A": "Pods receive new addresses when rescheduled after a node restart",
    "B": "Services use label selectors to track the endpoints of pods",
    "C": "The proxy on each node rewrites forwarding rules when endpoints change",
    "D": "Stale resolver caches delay the propagation of endpoint changes",
    "F1": "Container images are pulled from the registry on first use",
    "F2": "Resource quotas cap the total memory requested in a namespace",
}


def _chain_records(policy: dict[str, Any], gram: list[list[float]] = CHAIN_GRAM) -> list[Rec]:
    vec = from_gram(CHAIN_NAMES, gram)
    # A and D share importance and relevance; A gets a hair more importance so the order is fixed
    facts = [fact(CHAIN_TEXT[n], vec[n], importance=1.0 if n == "A" else 0.99) for n in CHAIN_TEXT]
    # one document per fact: the graph is the similarity edges alone (no adjacency between them)
    return [
        *(doc(f"chain-{n}", [f]) for n, f in zip(CHAIN_TEXT, facts, strict=True)),
        request(1, T0 + 1, query=vec["q"], subs=[sub("why", vec["q"])], fact_budget=4, policy=policy),
    ]


def test_cdgr_includes_below_gate_connectors_between_the_anchors_they_bridge(tmp_path: Path) -> None:
    out = run(_chain_records({"connector_budget": 0.5}), tmp_path, edge_threshold=0.6)
    env = out.envelope(1)
    ids = {f["text"]: f["fact_id"] for f in env["facts"]}
    order = [next(n for n, t in CHAIN_TEXT.items() if t == f["text"]) for f in env["facts"]]
    assert order == ["A", "B", "C", "D"]  # anchor -> connector -> connector -> anchor
    roles = {n: f["role"] for n, f in zip(order, env["facts"], strict=True)}
    assert roles == {"A": "anchor", "B": "connector", "C": "connector", "D": "anchor"}
    for n in ("B", "C"):
        f = env["facts"][order.index(n)]
        assert f["relevance"] == pytest.approx(0.40, abs=1e-5)  # below the 0.55 gate
        assert sorted(f["bridges"]) == sorted([ids[CHAIN_TEXT["A"]], ids[CHAIN_TEXT["D"]]])
        # SPEC-025 §2.5: bridge value (1 pair x 0.7) x novelty x recency x max(relevance, 0.30)
        assert f["score"] == pytest.approx(0.7 * 1.0 * 1.0 * 0.40, abs=1e-5)
        assert f["via"] == "similarity"
    # seeds A, D first; then the connectors, whose scores are equal: the smaller fact id first
    first, second = sorted(("B", "C"), key=lambda n: ids[CHAIN_TEXT[n]])
    want = {"A": 1, "D": 2, first: 3, second: 4}
    assert [f["rank"] for f in env["facts"]] == [want[n] for n in order]
    h = env["headers"]
    assert h["CRP-Context-Connectors-Included"] == "2/4"
    assert h["CRP-Context-Bridge-Score"] == pytest.approx(0.7, abs=1e-5)  # 1 pair x 0.7 edge strength
    assert h["CRP-Context-Graph-Hops"] == 1  # B and C are one edge from an anchor; a 2nd hop found nothing new
    assert h["CRP-Context-Mode"] == "cdgr"


def test_hard_expired_fact_never_enters_as_a_connector(tmp_path: Path) -> None:
    """CRP_EXPIRE_AFTER_TTLS: B (a connector of the chain A-B-C-D) is past 1 x its TTL. The vector search
    never returns it; with slots no anchor fills, the graph walk brought it in anyway (assembly's
    ``_append_outside``). No expired fact may enter."""
    vec = from_gram(CHAIN_NAMES, CHAIN_GRAM)
    old = doc(
        "chain-b", [fact(CHAIN_TEXT["B"], vec["B"], importance=0.99)], ttl="P1D", modified_at=iso(T0 - 10 * DAY_US)
    )
    recs = [
        old,  # one document per fact: no adjacency edges, only the similarity chain
        *(
            doc(f"chain-{n}", [fact(CHAIN_TEXT[n], vec[n], importance=1.0 if n == "A" else 0.99)])
            for n in ("A", "C", "D")
        ),
        request(
            1, T0 + 1, query=vec["q"], subs=[sub("why", vec["q"])], fact_budget=4, policy={"connector_budget": 0.5}
        ),
    ]
    kept = by_text(run(recs, tmp_path / "kept", edge_threshold=0.6).envelope(1))
    assert kept[CHAIN_TEXT["B"]]["role"] == "connector"  # stale (recency 0.3) but not hidden without expiry
    env = run(recs, tmp_path / "expired", edge_threshold=0.6, expire_after_ttls=1.0).envelope(1)
    assert CHAIN_TEXT["B"] not in by_text(env)
    assert {CHAIN_TEXT["A"], CHAIN_TEXT["D"]} <= set(by_text(env))


@pytest.mark.parametrize("direct", [False, True])
def test_a_connector_without_bridge_value_stays_out_and_its_slot_goes_back_to_cdr(tmp_path: Path, direct: bool) -> None:
    """SPEC-025 §2.2/§2.4-§2.6: the two seeds stay, the two connector slots are reserved for
    connectors with a bridge value. With a direct A-D similarity edge, B and C bridge nothing (the
    pair is already linked): they score zero and stay out, and the slots go back to CDR's next
    anchors, so the envelope is CDR's (§6)."""
    gram = [row[:] for row in CHAIN_GRAM]
    if direct:
        gram[1][4] = gram[4][1] = 0.65  # A-D is now a similarity edge
        gram[1][3] = gram[3][1] = gram[2][4] = gram[4][2] = 0.5  # (still no A-C or B-D edge)
    off = run(
        _chain_records({"graph_retrieval": "off", "connector_budget": 0.5}, gram), tmp_path / "off", edge_threshold=0.6
    ).envelope(1)
    on = run(_chain_records({"connector_budget": 0.5}, gram), tmp_path / "on", edge_threshold=0.6).envelope(1)
    roles = {f["text"]: f["role"] for f in on["facts"]}
    if direct:
        assert set(roles) == set(by_text(off)) == {CHAIN_TEXT[n] for n in ("A", "D", "F1", "F2")}
        assert set(roles.values()) == {"anchor"}
        assert on["headers"]["CRP-Context-Connectors-Included"] == "0/4"
    else:
        assert roles == {CHAIN_TEXT["A"]: "anchor", CHAIN_TEXT["B"]: "connector", CHAIN_TEXT["C"]: "connector"} | {
            CHAIN_TEXT["D"]: "anchor"
        }
        assert on["headers"]["CRP-Context-Connectors-Included"] == "2/4"


def test_graph_retrieval_off_gives_no_connectors(tmp_path: Path) -> None:
    out = run(_chain_records({"graph_retrieval": "off", "connector_budget": 0.5}), tmp_path, edge_threshold=0.6)
    env = out.envelope(1)
    assert {f["role"] for f in env["facts"]} == {"anchor"}
    assert set(by_text(env)) == {CHAIN_TEXT[n] for n in ("A", "D", "F1", "F2")}
    assert env["headers"]["CRP-Context-Connectors-Included"] == "0/4"
    assert env["headers"]["CRP-Context-Mode"] == "cdr"


def test_edgeless_fabric_degrades_to_cdr_and_fills_the_budget_with_anchors(tmp_path: Path) -> None:
    out = run(_chain_records({"connector_budget": 0.5}), tmp_path, edge_threshold=0.99)
    env = out.envelope(1)
    assert [f["role"] for f in env["facts"]] == ["anchor"] * 4
    assert set(by_text(env)) == {CHAIN_TEXT[n] for n in ("A", "D", "F1", "F2")}
    assert env["headers"]["CRP-Context-Connectors-Included"] == "0/4"


# --- contradictions --------------------------------------------------------------------------------------


def _conflict_records(old_modified: int, new_modified: int) -> list[Rec]:
    x = rel_vec(0.95, (1, 0.30), (2, 1.0))
    y = rel_vec(0.94, (1, 0.30), (3, 1.0))
    fillers = [
        fact(f"Filler sentence number {w} about unrelated storage topics", rel_vec(r, (4 + i, 1.0)))
        for i, (w, r) in enumerate([("one", 0.80), ("two", 0.75), ("three", 0.70)])
    ]
    return [
        doc(
            "etcd-v3",
            [fact("The etcd default client port is 2379.", x)],
            source="etcd_v3_docs",
            modified_at=iso(new_modified),
        ),
        doc(
            "etcd-v2",
            [fact("The etcd default client port is 4001.", y)],
            source="etcd_v2_docs",
            modified_at=iso(old_modified),
        ),
        doc("fill", fillers, source="storage_docs"),
        request(1, T0 + 1, subs=[sub("a", Q)], fact_budget=3, policy={"graph_retrieval": "off"}),
    ]


def test_number_changed_keeps_the_fresher_source_audits_and_refills(tmp_path: Path) -> None:
    out = run(_conflict_records(T0 - 200 * DAY_US, T0 - 10 * DAY_US), tmp_path)
    env = out.envelope(1)
    texts = set(by_text(env))
    assert "The etcd default client port is 2379." in texts
    assert "The etcd default client port is 4001." not in texts
    # the freed slot went to the next candidate: the budget is still full
    assert len(env["facts"]) == 3
    assert texts == {
        "The etcd default client port is 2379.",
        "Filler sentence number one about unrelated storage topics",
        "Filler sentence number two about unrelated storage topics",
    }
    assert env["headers"]["CRP-Context-Conflicts-Resolved"] == "1"
    assert env["headers"]["CRP-Context-Recency-Penalised"] >= 1
    [audit] = out.audits("CONTRADICTION_RESOLVED")
    d = audit["details"]
    kept = by_text(env)["The etcd default client port is 2379."]["fact_id"]
    assert d["kept"] == kept and d["suppressed"] != kept
    assert d["pattern"] == "NUMBER_CHANGED"
    assert d["authority_kept"] > d["authority_suppressed"] > 0
    assert d["session_id"] == "s" and d["window"] == 1
    assert out.audits("CONTRADICTION_UNRESOLVED") == [] and env["notes"] == []


def test_same_subject_and_attribute_conflict_whatever_their_cosine(tmp_path: Path) -> None:
    """Two differently worded facts (cosine 0.64, far below 0.85) give the same claim two values."""
    claim = {"subject": "etcd", "attribute": "client port"}
    new = fact("Etcd serves its clients on port 2379 in current releases", rel_vec(0.8, (1, 1.0)), value=2379, **claim)
    old = fact(
        "Older installations reached the key value store through 4001",
        rel_vec(0.8, (2, 0.3), (3, 1.0)),
        value=4001,
        **claim,
    )
    recs = [
        doc("new", [new], source="etcd_v3_docs", modified_at=iso(T0 - 10 * DAY_US)),
        doc("old", [old], source="etcd_v2_docs", modified_at=iso(T0 - 250 * DAY_US)),
        request(1, T0 + 1, subs=[sub("a", Q)], fact_budget=5, policy={"graph_retrieval": "off"}),
    ]
    out = run(recs, tmp_path)
    env = out.envelope(1)
    assert [f["text"] for f in env["facts"]] == [new["text"]]
    [audit] = out.audits("CONTRADICTION_RESOLVED")
    assert audit["details"]["pattern"] == "NUMBER_CHANGED" and audit["details"]["kept"] == env["facts"][0]["fact_id"]


def test_tied_contradiction_keeps_both_with_a_note(tmp_path: Path) -> None:
    same = T0 - 10 * DAY_US
    out = run(_conflict_records(same, same), tmp_path)
    env = out.envelope(1)
    texts = set(by_text(env))
    assert {"The etcd default client port is 2379.", "The etcd default client port is 4001."} <= texts
    assert len(env["notes"]) == 1 and env["notes"][0].startswith("NOTE: The following two facts conflict")
    assert "2379" in env["notes"][0] and "4001" in env["notes"][0]
    assert env["headers"]["CRP-Context-Conflicts-Resolved"] == "1; unresolved=1"
    [audit] = out.audits("CONTRADICTION_UNRESOLVED")
    assert audit["details"]["pattern"] == "NUMBER_CHANGED" and audit["details"]["window"] == 1
    assert out.audits("CONTRADICTION_RESOLVED") == []


def test_identical_telemetry_readings_collapse_into_one_entry_with_support(tmp_path: Path) -> None:
    reading = rel_vec(0.9, (1, 1.0))
    recs = [
        record_of(
            "crp.telemetry",
            "probe",
            T0 - 47 + i,
            {
                "event_id": f"r-{i:02d}",
                "source": "probe",
                "observed_at": iso(T0 - 47 + i),
                "subject": "disk",
                "attribute": "latency",
                "value": "12",
                "unit": "ms",
                "embedding_model": MODEL,
                "embedding": [float(x) for x in reading],
            },
        )
        for i in range(47)
    ] + [
        doc(
            "other",
            [
                fact(f"Unrelated storage sentence number {w} here", rel_vec(r, (2 + i, 1.0)))
                for i, (w, r) in enumerate([("one", 0.8), ("two", 0.7), ("three", 0.6)])
            ],
        ),
        request(1, T0 + 1, subs=[sub("a", Q)], fact_budget=4, policy={"graph_retrieval": "off"}),
    ]
    out = run(recs, tmp_path)
    env = out.envelope(1)
    readings = [f for f in env["facts"] if f["source"] == "probe"]
    assert len(readings) == 1 and readings[0]["support"] == 47
    assert len(env["facts"]) == 4  # the copies did not eat the budget
    assert all(f["support"] == 1 for f in env["facts"] if f["source"] != "probe")


# --- fan-out -----------------------------------------------------------------------------------------------

FAN_SUBS = {
    "s1": unit({0: 0.6, 1: 0.8}),
    "s2": unit({0: 0.6, 1: 0.7, 2: 0.39}),
    "s3": unit({0: 0.6, 3: 0.8}),
    "s4": unit({0: 0.6, 3: 0.7, 4: 0.39}),
}


WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def _fan_records(graph: str = "on") -> list[Rec]:
    facts = [
        fact(f"Shared overview sentence {w} about the whole cluster", rel_vec(r, (20 + i, 1.0)))
        for i, (w, r) in enumerate([("one", 0.93), ("two", 0.91)])
    ]
    for k, axis in ((1, 1), (2, 1), (3, 3), (4, 3)):
        for j, r in enumerate((0.75, 0.70)):
            facts.append(
                fact(
                    f"Topic {WORDS[k]} detail {'ab'[j]} covers its own ground",
                    rel_vec(r, (axis, 0.45), (22 + 2 * k + j, 1.0)),
                )
            )
    subs = [sub(s, v, label=s.upper()) for s, v in FAN_SUBS.items()]
    return [
        doc("fan", facts),
        request(1, T0 + 1, subs=subs, fact_budget=5, fanout=2, policy={"graph_retrieval": graph}),
    ]


@pytest.mark.parametrize("graph", ["on", "off"])
def test_fanout_gives_disjoint_partitions_and_facts(tmp_path: Path, graph: str) -> None:
    out = run(_fan_records(graph), tmp_path, edge_threshold=0.6)
    assert out.dead == []
    b0, b1 = out.envelope(1, 0), out.envelope(1, 1)
    assert sorted([sorted(b0["partition"]), sorted(b1["partition"])]) == [["s1", "s2"], ["s3", "s4"]]
    ids0, ids1 = [f["fact_id"] for f in b0["facts"]], [f["fact_id"] for f in b1["facts"]]
    assert ids0 and ids1 and set(ids0).isdisjoint(ids1)
    assert len(set(ids0)) == len(ids0) and len(set(ids1)) == len(ids1)
    for env in (b0, b1):
        assert env["headers"]["CRP-Context-Coverage-Partitions"] == 2
        labels = ", ".join(p.upper() for p in env["partition"])
        assert env["residual_anchor"] == f"Remaining sections to complete: {labels}"
        # each branch keeps to its own partition's topics
        own = {f"s{k}": w for k, w in WORDS.items()}
        topics = {f["text"].split()[1] for f in env["facts"] if f["text"].startswith("Topic")}
        assert topics <= {own[p] for p in env["partition"]}
    # the two shared overview facts, wanted by both branches, each appear exactly once
    shared = [f for env in (b0, b1) for f in env["facts"] if f["text"].startswith("Shared")]
    assert len(shared) == 2


def test_fanout_connector_two_branches_reach_goes_to_one_branch(tmp_path: Path) -> None:
    """X sits below the gate and bridges the anchors of both branches; it is in exactly one envelope."""
    names = ["q", "P0", "P1", "A0", "D0", "A1", "D1", "X"]
    g = np.eye(len(names))

    def put(a: str, b: str, v: float) -> None:
        g[names.index(a), names.index(b)] = g[names.index(b), names.index(a)] = v

    for a in ("A0", "D0", "A1", "D1"):
        put("q", a, 0.65)
        put("X", a, 0.60)
    for a, b in (("A0", "D0"), ("A1", "D1"), ("A0", "A1"), ("A0", "D1"), ("D0", "A1"), ("D0", "D1")):
        put(a, b, 0.55)
    for near, far, anchors in (("P0", "P1", ("A0", "D0")), ("P1", "P0", ("A1", "D1"))):
        for a in anchors:
            put(near, a, 0.80)
            put(far, a, 0.50)
    for a, b, v in (
        ("q", "X", 0.40),
        ("q", "P0", 0.70),
        ("q", "P1", 0.70),
        ("P0", "P1", 0.40),
        ("P0", "X", 0.50),
        ("P1", "X", 0.50),
    ):
        put(a, b, v)
    vec = from_gram(names, g.tolist())
    texts = {
        "A0": "Alpha zero anchors the first branch",
        "D0": "Delta zero anchors the first branch too",
        "A1": "Alpha one anchors the second branch",
        "D1": "Delta one anchors the second branch too",
        "X": "Crossing fact links every anchor of both branches",
    }
    recs = [
        doc("x", [fact(t, vec[n]) for n, t in texts.items()]),
        request(
            1,
            T0 + 1,
            query=vec["q"],
            subs=[sub("p0", vec["P0"]), sub("p1", vec["P1"])],
            fact_budget=3,
            fanout=2,
            policy={"connector_budget": 0.33},
        ),
    ]
    out = run(recs, tmp_path, edge_threshold=0.58)
    envs = [out.envelope(1, 0), out.envelope(1, 1)]
    # the scores of X tie up to float noise, so either branch may own it; exactly one does
    owner = next(b for b, e in enumerate(envs) if any(f["text"] == texts["X"] for f in e["facts"]))
    mine, theirs = envs[owner], envs[1 - owner]
    anchors_of = {0: ("A0", "D0"), 1: ("A1", "D1")}
    assert [f["text"] for f in mine["facts"]][1] == texts["X"] and mine["facts"][1]["role"] == "connector"
    assert {f["text"] for f in mine["facts"]} == {texts[n] for n in (*anchors_of[owner], "X")}
    assert {f["text"] for f in theirs["facts"]} == {texts[n] for n in anchors_of[1 - owner]}
    assert theirs["headers"]["CRP-Context-Connectors-Included"] == "0/2"
    x_id = mine["facts"][1]["fact_id"]
    assert {"fact_id": x_id, "branch": owner, "wanted_by": [0, 1], "score": 0.5} in mine["assignments"]


def test_fanout_reports_merge_at_fan_in(tmp_path: Path) -> None:
    """SPEC-027 §1.5/§1.6: a branch's coverage and residual are merged only once every branch reported,
    and the next window is refused until then."""
    base = _fan_records()
    out = run(base, tmp_path / "probe", edge_threshold=0.6)
    part = {e["branch"]: e["partition"] for e in out.envelopes}
    one = [
        *base,
        report(1, T0 + 2, [(s, 0.8) for s in part[0]], branch=0, output_text="branch zero", completeness=0.95),
    ]
    early = run([*one, request(2, T0 + 3, fact_budget=5)], tmp_path / "one", edge_threshold=0.6)
    [refused] = early.dead  # window 2 before window 1's fan-in
    assert "has not fanned in" in refused["reason"] and "1 of 2" in refused["reason"]
    assert [e["window"] for e in early.envelopes] == [1, 1]
    row = session_row(tmp_path / "one", edge_threshold=0.6)
    assert row is not None and row["window_count"] == 0  # only one of two branches is in
    assert row["state"]["completeness"] == 0.0  # held until fan-in
    assert row["state"]["coverage"] == []  # held until fan-in, like the residual
    assert sorted(row["state"]["residual"]) == ["s1", "s2", "s3", "s4"]
    both = [
        *one,
        report(1, T0 + 3, [(s, 0.8) for s in part[1]], branch=1, output_text="branch one", completeness=0.95),
        report(1, T0 + 4, [("s1", 0.8)], branch=1, output_text="again"),
        request(2, T0 + 5, fact_budget=5),
    ]
    res = run(both, tmp_path / "both", edge_threshold=0.6)
    dead = [d["reason"] for d in res.dead]
    assert len(dead) == 2 and "already" in dead[0]  # a branch reports once
    assert "ended with task-complete at window 1" in dead[1]  # no window after a terminal status
    row = session_row(tmp_path / "both", edge_threshold=0.6)
    assert row is not None and row["window_count"] == 1
    assert row["state"]["completeness"] == pytest.approx(0.95)
    assert len(row["state"]["coverage"]) == 4 and row["state"]["residual"] == []
    closing = res.closing(1)
    assert closing["status"] == "task-complete" and closing["facts"] == []
    assert closing["headers"]["CRP-Context-Coverage-Depth"] == 4
    assert closing["residual_anchor"] == "Remaining sections to complete: "
    assert [e["window"] for e in res.envelopes] == [1, 1, 1]


def test_fanin_completeness_is_weighted_by_partition_and_safety_is_the_lowest(tmp_path: Path) -> None:
    base = _fan_records()
    reports = [
        report(1, T0 + 2, [("s1", 0.8), ("s2", 0.8)], branch=0, completeness=1.0, safety_budget=0.05),
        report(1, T0 + 3, [("s3", 0.8), ("s4", 0.8)], branch=1, completeness=0.8, safety_budget=0.9),
    ]
    run(base + reports, tmp_path, edge_threshold=0.6)
    row = session_row(tmp_path, edge_threshold=0.6)
    assert row is not None
    assert row["state"]["completeness"] == pytest.approx(0.9)
    assert row["state"]["safety_budget"] == pytest.approx(0.05)


def test_fanout_report_without_branch_is_rejected(tmp_path: Path) -> None:
    out = run([*_fan_records(), report(1, T0 + 2, [("s1", 0.8)])], tmp_path, edge_threshold=0.6)
    [dead] = out.dead
    assert "branch" in dead["reason"]


# --- loop exits ----------------------------------------------------------------------------------------------


def test_task_complete_is_carried_by_the_window_that_reaches_it(tmp_path: Path) -> None:
    """SPEC-024 §6 Exit 1: window 1's report completes the task, so window 1 closes with task-complete
    (no facts), and a window 2 request is refused with a reason."""
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4),
        report(1, T0 + 2, [(f"s{k}", 0.9) for k in (1, 2, 3, 4)], completeness=0.95),
        request(2, T0 + 3, fact_budget=4),
    ]
    out = run(recs, tmp_path)
    assert out.envelope(1)["status"] == "in-progress"
    env = out.closing(1)
    assert env["status"] == "task-complete" == env["headers"]["CRP-Context-Continuation-Status"]
    assert env["facts"] == [] and env["request_id"] == out.envelope(1)["request_id"]
    assert env["headers"]["CRP-Quality-Completeness"] == 0.95
    assert env["residual_anchor"] == "Remaining sections to complete: "
    assert [e["window"] for e in out.envelopes] == [1, 1]
    [dead] = out.dead
    assert "ended with task-complete at window 1" in dead["reason"]


def test_task_complete_when_the_residual_holds_only_marginal_items(tmp_path: Path) -> None:
    """SPEC-024 §6 Exit 1 "or contains only marginal items": s4's best fact is below the relevance
    gate, so nothing can address it and completeness 0.95 ends the task; s3 is not marginal."""
    far = unit({20: 1.0})  # orthogonal to every fact
    subs = [*_mw_subs()[:3], sub("s4", far, "Nowhere")]
    base = [*_mw_docs(), request(1, T0 + 1, subs=subs, fact_budget=4)]
    out = run([*base, report(1, T0 + 2, [("s1", 0.9), ("s2", 0.9), ("s3", 0.9)], completeness=0.95)], tmp_path / "a")
    env = out.closing(1)
    assert env["status"] == "task-complete"
    assert env["residual_anchor"] == "Remaining sections to complete: Nowhere"
    out = run([*base, report(1, T0 + 2, [("s1", 0.9), ("s2", 0.9)], completeness=0.95)], tmp_path / "b")
    assert [e.get("closing") for e in out.envelopes] == [None]  # s3 has facts: not marginal, not complete


def test_completeness_without_empty_residual_is_not_task_complete(tmp_path: Path) -> None:
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4),
        report(1, T0 + 2, [("s1", 0.9)], completeness=0.95),
        request(2, T0 + 3, fact_budget=4),
    ]
    out = run(recs, tmp_path)
    assert out.envelope(2)["status"] == "in-progress"
    assert not any(e.get("closing") for e in out.envelopes)


def test_limit_reached_on_the_last_window_and_no_window_after_it(tmp_path: Path) -> None:
    """SPEC-024 §6 Exit 2: the last window's report closes it with limit-reached and the completeness
    that report achieved (0.6, not the previous window's 0.5)."""
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4, max_windows=2),
        report(1, T0 + 2, [("s1", 0.9)]),
        request(2, T0 + 3, fact_budget=4),
        report(2, T0 + 4, [("s2", 0.9)], completeness=0.6),
        request(3, T0 + 5, fact_budget=4),
    ]
    out = run(recs, tmp_path)
    assert out.envelope(1)["status"] == "in-progress"
    assert out.envelope(2)["status"] == "in-progress" and out.envelope(2)["facts"]
    w2 = out.closing(2)
    assert w2["status"] == "limit-reached" == w2["headers"]["CRP-Context-Continuation-Status"]
    assert w2["headers"]["CRP-Quality-Completeness"] == 0.6
    [dead] = out.dead
    assert "ended with limit-reached at window 2" in dead["reason"] and "max_windows" in dead["reason"]
    assert [e["window"] for e in out.envelopes] == [1, 2, 2]


def test_ckf_exhausted_when_only_covered_facts_remain(tmp_path: Path) -> None:
    names = ("f1a", "f1b")
    written = " ".join(MW_FACTS[n][2] + "." for n in names)
    recs = [
        doc("only", [fact(MW_FACTS[n][2], mw_vec(n)) for n in names]),
        request(1, T0 + 1, subs=[sub("s1", SUBS[1], "Section 1")], fact_budget=4),
        report(1, T0 + 2, [("s1", 0.9)], output_text=written, completeness=0.5),
        request(2, T0 + 3, fact_budget=4),
        report(2, T0 + 4, [("s1", 0.9)], completeness=0.5),
        request(3, T0 + 5, fact_budget=4),
    ]
    out = run(recs, tmp_path)
    assert out.envelope(1)["status"] == "in-progress"
    env = out.envelope(2)
    assert env["status"] == "ckf-exhausted"
    h = env["headers"]
    assert h["CRP-Context-Mode"] == "ckf-exhausted" == h["CRP-Context-Continuation-Status"]
    assert h["CRP-Onboarding-Hint"] == "ingest-more-documents-for-continued-quality"
    assert h["CRP-Context-Coverage-Score"] < 0.15
    # the gateway MUST stop: nothing is served, the note says why (SPEC-024 §6 Exit 3)
    assert env["facts"] == [] and out.envelope(1)["facts"] != []
    [note] = env["notes"]
    assert note.startswith("CKF-EXHAUSTED: mean novelty ratio ") and "over the 2 facts" in note
    assert h["CRP-Context-Connectors-Included"] == "0/0" and h["CRP-Context-Conflicts-Resolved"] == "0"
    assert "CRP-Onboarding-Hint" not in out.envelope(1)["headers"]
    assert not any(e.get("closing") for e in out.envelopes)  # window 2 already carried its exit
    [dead] = out.dead
    assert "ended with ckf-exhausted at window 2" in dead["reason"]


def test_safety_budget_depleted_closes_the_window_and_escalates(tmp_path: Path) -> None:
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4),
        report(1, T0 + 2, [("s1", 0.9)], safety_budget=0.05),
        request(2, T0 + 3, fact_budget=4),
    ]
    out = run(recs, tmp_path)
    assert out.envelope(1)["status"] == "in-progress"
    env = out.closing(1)
    assert env["status"] == "safety-budget-depleted" and env["facts"] == []
    [audit] = out.audits("SAFETY_BUDGET_DEPLETED")
    d = audit["details"]
    assert (d["session_id"], d["window"], d["safety_budget"], d["floor"]) == ("s", 1, 0.05, 0.1)
    assert "escalation" in d["action"]
    [dead] = out.dead
    assert "ended with safety-budget-depleted at window 1" in dead["reason"]


def test_window_before_its_predecessor_reported_is_refused(tmp_path: Path) -> None:
    recs = [*_mw_docs(), request(1, T0 + 1, subs=_mw_subs(), fact_budget=4), request(2, T0 + 2, fact_budget=4)]
    out = run(recs, tmp_path)
    [dead] = out.dead
    assert "window 1 of session 's' has not fanned in (0 of 1" in dead["reason"]


def test_depth_from_word_count_and_the_default(tmp_path: Path) -> None:
    """SPEC-024 §3.2: without an explicit depth, depth = words / expected_words (capped at 0.90);
    with neither, 0.5."""
    subs = _mw_subs()
    subs[0]["expected_words"] = 300
    subs[1]["expected_words"] = 300
    rep = record_of(
        "crp.window.reports",
        "s",
        T0 + 2,
        {
            "session_id": "s",
            "window": 1,
            "output_text": "",
            "completeness": 0.5,
            "addressed": [
                {"id": "s1", "words": 60},
                {"id": "s2", "words": 280},
                {"id": "s3"},
                {"id": "s4", "words": 10, "depth": 0.7},
            ],
        },
    )
    run([*_mw_docs(), request(1, T0 + 1, subs=subs, fact_budget=4), rep], tmp_path)
    row = session_row(tmp_path)
    assert row is not None
    depths = {c["id"]: c["depth"] for c in row["state"]["coverage"]}
    assert depths == {"s1": pytest.approx(0.2), "s2": pytest.approx(0.9), "s3": 0.5, "s4": 0.7}


def test_ngram_guard_diagnostic_above_twenty_percent(tmp_path: Path) -> None:
    """SPEC-024 §5.3: when more than 20% of the candidates are n-gram penalised, the envelope says so."""
    written = " ".join(MW_FACTS[n][2] + "." for n in MW_FACTS)
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4),
        report(1, T0 + 2, [("s1", 0.4)], output_text=written),
        request(2, T0 + 3, fact_budget=4),
    ]
    out = run(recs, tmp_path)
    assert not any("NGRAM-GUARD" in n for n in out.envelope(1)["notes"])
    env = out.envelope(2)
    assert env["headers"]["CRP-Context-NGram-Guard-Activations"] > 0
    [note] = [n for n in env["notes"] if n.startswith("NGRAM-GUARD")]
    assert "above 20%" in note and "ingest more documents" in note
    assert env["headers"]["CRP-Onboarding-Hint"] == "ingest-more-documents-for-continued-quality"


# --- bad input -----------------------------------------------------------------------------------------------


def _only_dead(out: Run, *needles: str) -> str:
    assert out.envelopes == [], "a rejected request must produce no envelope"
    [dead] = out.dead
    for n in needles:
        assert n in dead["reason"], dead["reason"]
    return str(dead["reason"])


@pytest.mark.parametrize(
    ("name", "kw", "needles"),
    [
        ("window-1 without sub-queries", {"window": 1, "subs": None}, ("sub_queries",)),
        ("unknown session at window 2", {"window": 2, "subs": None}, ("unknown", "window 1")),
        ("fact budget 0", {"fact_budget": 0}, ("fact_budget",)),
        ("fact budget 5000", {"fact_budget": 5000}, ("fact_budget",)),
        ("max_hops 4", {"policy": {"max_hops": 4}}, ("max_hops",)),
        ("connector_budget 0.7", {"policy": {"connector_budget": 0.7}}, ("connector_budget",)),
        ("min_relevance 1.5", {"policy": {"min_relevance": 1.5}}, ("min_relevance",)),
        ("query of another model", {"model": "other-model"}, ("embedding_model", "other-model")),
        ("query of another dimension", {"query": np.ones(DIM + 3)}, ("dimension",)),
        ("query without a vector", {"query": None}, ("query.embedding",)),
    ],
)
def test_bad_requests_are_dead_lettered_with_a_reason(
    tmp_path: Path, name: str, kw: dict[str, Any], needles: tuple[str, ...]
) -> None:
    kw = dict(kw)
    window = kw.pop("window", 1)
    subs = kw.pop("subs", [sub("a", Q)])
    rq = request(
        window,
        T0 + 1,
        subs=subs,
        **{k: v for k, v in kw.items() if k != "query"},
        **({"query": kw["query"]} if kw.get("query") is not None else {}),
    )
    if "query" in kw and kw["query"] is None:
        value = json.loads(rq[3])
        del value["query"]["embedding"]
        rq = (rq[0], rq[1], rq[2], json.dumps(value).encode())
    _only_dead(run([*_w1_records(), rq], tmp_path), *needles)


def test_window_out_of_order_is_rejected(tmp_path: Path) -> None:
    recs = [*_w1_records(), request(1, T0 + 1, subs=[sub("a", Q)]), request(3, T0 + 2)]
    out = run(recs, tmp_path)
    assert [e["window"] for e in out.envelopes] == [1]
    [dead] = out.dead
    assert "expects window 2, got 3" in dead["reason"]


def test_repeated_window_is_rejected(tmp_path: Path) -> None:
    recs = [*_w1_records(), request(1, T0 + 1, subs=[sub("a", Q)]), request(1, T0 + 2, subs=[sub("a", Q)])]
    out = run(recs, tmp_path)
    assert len(out.envelopes) == 1 and "expects window 2, got 1" in out.dead[0]["reason"]


def test_request_before_any_fact_is_rejected(tmp_path: Path) -> None:
    _only_dead(run([request(1, T0, subs=[sub("a", Q)])], tmp_path), "no facts")


def test_report_for_an_unknown_window_changes_nothing(tmp_path: Path) -> None:
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4),
        report(2, T0 + 2, [("s1", 0.9)], output_text="nothing"),
        request(2, T0 + 3, fact_budget=4),
    ]
    out = run(recs, tmp_path)
    dead, refused = out.dead
    assert "window 2" in dead["reason"] and "never requested" in dead["reason"]
    assert "window 1 of session 's' has not fanned in" in refused["reason"]  # the bad report counted nothing
    row = session_row(tmp_path)
    assert row is not None and row["state"]["coverage"] == [] and len(row["state"]["residual"]) == 4


def test_report_for_an_unknown_session_or_sub_query_is_rejected(tmp_path: Path) -> None:
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4),
        report(1, T0 + 2, [("s1", 0.9)], session="nobody"),
        report(1, T0 + 3, [("zz", 0.9)]),
    ]
    out = run(recs, tmp_path)
    reasons = [d["reason"] for d in out.dead]
    assert len(reasons) == 2 and "nobody" in reasons[0] and "zz" in reasons[1]


def test_report_with_another_embedding_model_is_coverage_update_rejected(tmp_path: Path) -> None:
    bad = report(1, T0 + 2, [("s1", 0.9)], embedding_model="other-model")
    value = json.loads(bad[3])
    value["addressed"][0]["embedding"] = [float(x) for x in SUBS[1]]
    bad = (bad[0], bad[1], bad[2], json.dumps(value).encode())
    recs = [*_mw_docs(), request(1, T0 + 1, subs=_mw_subs(), fact_budget=4), bad, request(2, T0 + 3, fact_budget=4)]
    out = run(recs, tmp_path)
    [rejected] = out.audits("COVERAGE_UPDATE_REJECTED")
    assert "other-model" in rejected["details"]["reason"]
    assert rejected["details"]["session_id"] == "s" and rejected["details"]["window"] == 1
    dead, refused = out.dead
    assert "other-model" in dead["reason"]
    assert "has not fanned in" in refused["reason"]  # the rejected report counted nothing
    row = session_row(tmp_path)
    assert row is not None and row["state"]["coverage"] == []


def test_report_with_its_own_sub_query_vectors_uses_them(tmp_path: Path) -> None:
    good = report(1, T0 + 2, [("s1", 0.9)], embedding_model=MODEL)
    value = json.loads(good[3])
    value["addressed"][0]["embedding"] = [float(x) for x in mw_vec("f4a")]  # the coverage entry is this vector
    good = (good[0], good[1], good[2], json.dumps(value).encode())
    recs = [
        *_mw_docs(),
        request(1, T0 + 1, subs=_mw_subs(), fact_budget=4),
        good,
        request(2, T0 + 3, fact_budget=8, policy={"graph_retrieval": "off"}),
    ]
    out = run(recs, tmp_path)
    assert out.dead == []
    got = by_text(out.envelope(2))
    assert got[MW_FACTS["f4a"][2]]["novelty"] == pytest.approx(0.2, abs=1e-6)
