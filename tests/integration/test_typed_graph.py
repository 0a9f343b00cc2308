"""The fabric's typed graph through the real runtime.

- Similarity lists are kept at the K nearest per fact (SPEC-025 §1.3).
- The walk goes as deep as asked (max-hops 1-3) and CRP-Context-Graph-Hops reports the depth
  actually walked (SPEC-025 §5.1).
- Documents keep their structure: adjacency edges, mention edges (either publication order), the
  title in the embedded text, and ``via`` on the envelope facts.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream.config import Settings
from crp_stream.fabric.fabric import Fabric
from crp_stream.testing import replay as replay_records
from tests.support.retrieval import DIM, T0, doc, fact, from_gram, rel_vec, request, run, settings, sub


def _edges(tmp_path: Path, **kw: Any) -> list[tuple[str, str, float, str]]:
    s = replace(settings(**kw), data_dir=tmp_path, database_url=None, qdrant=None, broker=None)
    fabric = Fabric(s)
    try:
        with fabric.unit_of_work() as uow:
            ids = uow.repo.fact_ids()
            return sorted(uow.repo.edge_rows(ids))
    finally:
        fabric.close()


def _fact_ids_by_text(out: Any) -> dict[str, str]:
    return {v["text"]: v["fact_id"] for v in out.values("crp.facts") if v.get("type") == "FactRecorded"}


# --- K nearest per fact ------------------------------------------------------------------------------


def test_each_fact_keeps_at_most_its_k_nearest_similarity_edges(tmp_path: Path) -> None:
    """A new fact links to its K nearest and they to it; a fact that thereby passes K drops its
    farthest. So no list grows past K, and each list is the nearest of the pairs ever proposed:
    exactly the K nearest for a fact ingested after them (the last one here)."""
    rng = np.random.default_rng(11)
    centre = rng.standard_normal(DIM)
    vecs = [centre + 0.6 * rng.standard_normal(DIM) for _ in range(30)]
    vecs = [v / np.linalg.norm(v) for v in vecs]
    texts = [f"Fact number {i} of the cluster" for i in range(30)]
    records = [doc(f"d{i}", [fact(t, v)], ts=T0 + i) for i, (t, v) in enumerate(zip(texts, vecs, strict=True))]
    k = 5
    out = run(records, tmp_path, edge_k=k, edge_threshold=0.0)
    ids = _fact_ids_by_text(out)
    name = {ids[t]: i for i, t in enumerate(texts)}
    sims = np.asarray(vecs) @ np.asarray(vecs).T
    lists: dict[int, list[int]] = {i: [] for i in range(30)}
    for src, dst, w, kind in _edges(tmp_path, edge_k=k, edge_threshold=0.0):
        assert kind == "similarity"
        assert w == pytest.approx(sims[name[src], name[dst]], abs=1e-5)
        lists[name[src]].append(name[dst])
    assert max(len(x) for x in lists.values()) == k  # never more (before: up to 29 here)
    assert all(len(x) == k for x in lists.values())  # and never fewer: 30 facts all above the threshold
    last = 29
    assert sorted(lists[last]) == sorted(sorted(range(last), key=lambda j: -sims[last, j])[:k])
    for i, nbrs in lists.items():  # a kept neighbour is never farther than one the fact was offered and dropped
        assert min(sims[i, j] for j in nbrs) >= max(
            (sims[i, j] for j in range(30) if i in lists[j] and j not in nbrs), default=-1.0
        )


# --- the depth walked ---------------------------------------------------------------------------------

CHAIN = ["q", "A", "B", "C", "D"]
GRAM = [
    #  q     A     B     C     D
    [1.00, 0.80, 0.35, 0.35, 0.35],  # q
    [0.80, 1.00, 0.70, 0.40, 0.30],  # A
    [0.35, 0.70, 1.00, 0.70, 0.40],  # B
    [0.35, 0.40, 0.70, 1.00, 0.70],  # C
    [0.35, 0.30, 0.40, 0.70, 1.00],  # D
]
TEXT = {"A": "Anchor fact alpha", "B": "Link fact bravo", "C": "Link fact charlie", "D": "Far fact delta"}


@pytest.mark.parametrize(("max_hops", "walked"), [(1, 1), (2, 2), (3, 3)])
def test_the_walk_goes_max_hops_deep_and_reports_the_depth_walked(tmp_path: Path, max_hops: int, walked: int) -> None:
    """Only A passes the relevance gate: the walk from it goes as deep as asked, but with one anchor
    there is no pair to bridge (SPEC-025 §2.4), so B, C and D score zero and stay out (§2.5)."""
    vec = from_gram(CHAIN, GRAM)
    records = [doc(f"chain-{n}", [fact(TEXT[n], vec[n])]) for n in "ABCD"]
    records.append(
        request(
            1,
            T0 + 1,
            query=vec["q"],
            subs=[sub("why", vec["q"])],
            fact_budget=4,
            policy={"connector_budget": 0.5, "max_hops": max_hops},
        )
    )
    env = run(records, tmp_path, edge_threshold=0.6).envelope(1)
    assert [f["text"] for f in env["facts"]] == [TEXT["A"]]
    assert env["headers"]["CRP-Context-Graph-Hops"] == walked
    assert env["headers"]["CRP-Context-Connectors-Included"] == "0/1"


def test_hops_is_the_depth_walked_not_the_depth_asked(tmp_path: Path) -> None:
    vec = from_gram(CHAIN, GRAM)
    records = [doc(f"chain-{n}", [fact(TEXT[n], vec[n])]) for n in "AB"]  # nothing past B
    records.append(
        request(
            1,
            T0 + 1,
            query=vec["q"],
            subs=[sub("why", vec["q"])],
            fact_budget=4,
            policy={"connector_budget": 0.5, "max_hops": 3},
        )
    )
    env = run(records, tmp_path, edge_threshold=0.6).envelope(1)
    assert env["headers"]["CRP-Context-Graph-Hops"] == 1


# --- documents keep their structure ------------------------------------------------------------------


def test_adjacency_and_mention_edges_in_either_order(tmp_path: Path) -> None:
    v = [rel_vec(0.1, (1 + i, 1.0)) for i in range(6)]  # orthogonal: no similarity edge at all
    before = doc("engine", [fact("Babbage designed the engine with ada lovelace in mind.", v[0])], ts=T0)
    titled = doc(
        "ada",
        [
            fact("She was born in 1815.", v[1]),
            fact("She wrote the first program.", v[2]),
            fact("She died in 1852.", v[3]),
        ],
        ts=T0 + 1,
        document_id="ada",
        title="Ada Lovelace (mathematician)",
        section="Biography",
    )
    after = doc(
        "notes",
        [fact("Menabrea's paper was translated by Ada Lovelace.", v[4]), fact("Nothing about her here.", v[5])],
        ts=T0 + 2,
    )
    out = run([before, titled, after], tmp_path, edge_threshold=0.9)
    ids = _fact_ids_by_text(out)
    kinds: dict[tuple[str, str], str] = {}
    for s, d, _w, k in _edges(tmp_path, edge_threshold=0.9):
        assert (s, d) not in kinds  # orthogonal facts: no pair is also a similarity edge here
        kinds[(s, d)] = k
    lead = ids["She was born in 1815."]
    assert kinds[(lead, ids["She wrote the first program."])] == "adjacency"
    assert kinds[(ids["She wrote the first program."], ids["She died in 1852."])] == "adjacency"
    assert (lead, ids["She died in 1852."]) not in kinds  # only consecutive facts
    # named before the titled document arrived (lowercase: names are matched case-insensitively) and after
    assert kinds[(ids["Babbage designed the engine with ada lovelace in mind."], lead)] == "mention"
    assert kinds[(lead, ids["Menabrea's paper was translated by Ada Lovelace."])] == "mention"
    assert not any(ids["Nothing about her here."] in (s, d) and k == "mention" for (s, d), k in kinds.items())


def test_a_title_is_named_alike_before_and_after_it_arrives(tmp_path: Path) -> None:
    """``names_title`` decides in both directions: a text that names a title with its words apart
    from other words only by a dash (not a space) links to the document whichever came first, and a
    text holding the title's letters inside other words does not."""
    v = [rel_vec(0.1, (1 + i, 1.0)) for i in range(5)]
    dashed = "Menabrea's paper was read by Ada—Lovelace."
    inside = "The badalovelaced prose is not a name."
    before = doc("early", [fact(dashed, v[0]), fact(inside, v[1])], ts=T0)
    titled = doc(
        "ada", [fact("She wrote the first program.", v[2])], ts=T0 + 1, document_id="ada", title="Ada Lovelace"
    )
    after = doc("late", [fact("A letter to Ada—Lovelace survives.", v[3])], ts=T0 + 2)
    out = run([before, titled, after], tmp_path, edge_threshold=0.9)
    ids = _fact_ids_by_text(out)
    lead = ids["She wrote the first program."]
    mentions = {(s, d) for s, d, _w, k in _edges(tmp_path, edge_threshold=0.9) if k == "mention"}
    assert (ids[dashed], lead) in mentions  # found under the title's words when the title came
    assert (ids["A letter to Ada—Lovelace survives."], lead) in mentions  # found by its spans, as before
    assert not any(ids[inside] in pair for pair in mentions)


def test_a_titled_document_is_embedded_as_title_colon_sentence(tmp_path: Path) -> None:
    s = Settings(embedder="hashing:64", data_dir=tmp_path)
    value = {
        "event_id": "e1",
        "source": "docs",
        "source_type": "official",
        "document_id": "d1",
        "title": "Ada Lovelace",
        "facts": [{"text": "She wrote the first program."}],
    }
    lines = replay_records([("crp.documents", "docs", T0, json.dumps(value).encode())], s, tmp_path / "w")
    fid = next(json.loads(line)["value"]["fact_id"] for line in lines if '"FactRecorded"' in line)
    fabric = Fabric(replace(s, data_dir=tmp_path / "w"))
    try:
        with fabric.unit_of_work() as uow:
            got = np.asarray(uow.vectors.get_vectors([fid])[fid])
            assert (
                uow.repo.get_meta(
                    "embedding_text",
                )
                is not None
            )
        want = fabric.embedder.embed(["Ada Lovelace: She wrote the first program."])[0]
        plain = fabric.embedder.embed(["She wrote the first program."])[0]
    finally:
        fabric.close()
    assert float(got @ want) == pytest.approx(1.0, abs=1e-5)
    assert float(got @ plain) < 0.99
