"""Write a large fabric straight through the fabric's ports (rows, vectors, similarity and adjacency
edges), for benchmarks that need 100k+ facts in minutes rather than hours of ingest.

The result is what ingest would leave for the same documents published in order: the same derived
fact ids, the same rows, and the ingest rule's edges (each fact: its top ``edge_k`` neighbours with
cosine >= ``edge_threshold`` among the facts present when its document arrived; consecutive facts of
a document joined by adjacency edges). Neighbours are searched within each ``group`` only (a topic of
a clustered corpus, whose cross-group cosines never reach the threshold), so the cost stays linear
in the number of groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from crp_stream.core.ids import derive_id
from crp_stream.fabric.fabric import Fabric
from crp_stream.fabric.vectors.port import VectorItem
from ops.bench._common import T0_US


@dataclass
class Corpus:
    vecs: np.ndarray  # (n, dim) float32 unit rows
    texts: Sequence[str]
    group: np.ndarray  # (n,) neighbour-search group of each fact
    docs: Sequence[np.ndarray]  # fact indices of each document, in publication order


def fact_ids(corpus: Corpus, source: str) -> list[str]:
    ids = [""] * len(corpus.texts)
    for d, members in enumerate(corpus.docs):
        for pos, i in enumerate(members):
            ids[i] = derive_id("fact", source, f"doc-{d}", str(pos), str(i))
    return ids


def similarity_edges(corpus: Corpus, ids: Sequence[str], edge_k: int, threshold: float) -> list[tuple[str, str, float]]:
    doc_of = np.empty(len(ids), dtype=np.int64)
    for d, members in enumerate(corpus.docs):
        doc_of[members] = d
    edges: list[tuple[str, str, float]] = []
    for g in np.unique(corpus.group):
        members = np.flatnonzero(corpus.group == g)
        members = members[np.argsort(doc_of[members], kind="stable")]
        sims = corpus.vecs[members] @ corpus.vecs[members].T
        docs = doc_of[members]
        for a in range(len(members)):
            ok = (docs <= docs[a]) & (sims[a] >= threshold)
            ok[a] = False
            cand = np.flatnonzero(ok)
            if cand.size == 0:
                continue
            scores = np.round(sims[a, cand].astype(np.float64), 6)
            top = np.argsort(-scores, kind="stable")[:edge_k]
            edges.extend((ids[members[a]], ids[members[cand[j]]], float(scores[j])) for j in top)
    return edges


def write_direct(
    fabric: Fabric, corpus: Corpus, model: str, *, source: str = "bench", chunk: int = 5_000, similarity: bool = True
) -> int:
    """Fill ``fabric`` with ``corpus``; returns the number of similarity edges written (none without
    ``similarity``: adjacency edges only)."""
    th = fabric.thresholds()
    ids = fact_ids(corpus, source)
    rows: list[dict[str, Any]] = []
    items: list[VectorItem] = []
    for d, members in enumerate(corpus.docs):
        ts = T0_US + (d + 1) * 1_000
        for pos, i in enumerate(members):
            rows.append(
                {
                    "fact_id": ids[i],
                    "source": source,
                    "source_type": "official",
                    "trust": 0.8,
                    "importance": 1.0,
                    "epoch_us": ts,
                    "modified_at_us": ts,
                    "ttl_s": 365 * 86_400.0,
                    "expires_at_us": None,
                    "text": corpus.texts[i],
                    "subject": None,
                    "attribute": None,
                    "value": None,
                    "unit": None,
                    "claim_key": None,
                    "status": "active",
                    "content_hash": derive_id(corpus.texts[i]),
                    "document_id": f"doc-{d}",
                    "position": pos,
                    "origin_event_id": f"doc-{d}",
                    "kind": "document",
                    "extra": None,
                }
            )
            items.append(VectorItem(ids[i], corpus.vecs[i], "active", None, source))
    edges = similarity_edges(corpus, ids, th.edge_k, th.edge_threshold) if similarity else []
    adjacency = [(a["fact_id"], b["fact_id"], 1.0) for a, b in pairwise(rows) if a["document_id"] == b["document_id"]]
    with fabric.unit_of_work() as uow:
        fabric.check_model(uow, model, corpus.vecs.shape[1])
        for s in range(0, len(rows), chunk):
            uow.repo.insert_facts(rows[s : s + chunk])
        for s in range(0, len(items), chunk):
            uow.vectors.upsert(items[s : s + chunk])
            if fabric.stores_vectors:  # what other workers' own indexes load (runtime/kafka/projection.py)
                uow.repo.insert_fact_vectors(items[s : s + chunk])
        for s in range(0, len(edges), 4 * chunk):
            uow.repo.add_edges(edges[s : s + 4 * chunk])
        # the ingest rule's degree bound (SPEC-025 §1.3): each fact keeps its K strongest edges, as in
        # a fabric that was ingested (both directions written, each fact's surplus pruned)
        for s in range(0, len(ids), chunk):
            uow.repo.prune_similarity(ids[s : s + chunk], th.edge_k)
        for s in range(0, len(adjacency), 4 * chunk):
            uow.repo.add_edges(adjacency[s : s + 4 * chunk], kind="adjacency")
        uow.repo.touch_source(source, "official", 0.8, T0_US)
    fabric.vectors.flush()
    journal = getattr(fabric.vectors, "journal", None)
    if journal is not None:  # committed: nothing for the next start-up's reconcile to undo
        journal.clear()
    return len(edges)
