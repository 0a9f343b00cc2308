"""Ingest's similarity edges (SPEC-025 §1.3) kept under the K bound, and the graph cache it leaves.

The ingest ranks the touched facts' edges from the graph cache and writes only what survives; the
reference is the plain rule on the stored table (insert every edge both ways, then
``Repository.prune_similarity``). Both must leave the same rows, and every entry the cache holds
must equal a fresh load of the store, in the store's order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crp_stream.config import Settings
from crp_stream.fabric.caches.graph import GraphCache
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors import ingest
from crp_stream.testing import Pipeline
from tests.support.services import fresh_postgres_url

T0 = 1_790_000_000 * 1_000_000
DIM = 16


def _docs(n_docs: int, per_doc: int, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, DIM))
    out = []
    for d in range(n_docs):
        v = centres[rng.integers(0, 3, per_doc)] + 0.4 * rng.normal(size=(per_doc, DIM))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        facts = [
            {"text": f"statement {d}-{i} about topic {i % 3}", "embedding": [float(x) for x in row]}
            for i, row in enumerate(v)
        ]
        out.append(
            {
                "event_id": f"e{d}",
                "source": f"s{d % 3}",
                "source_type": "official",
                "document_id": f"doc{d}",
                "embedding_model": "m-16",
                "facts": facts,
            }
        )
    return out


def _edges(p: Pipeline) -> list[tuple[str, str, float, str]]:
    with p.uow() as uow:
        ids = uow.repo.fact_ids()
        return sorted(uow.repo.edge_rows(ids))


def _plain(uow: UnitOfWork, edges: list[tuple[str, str, float]], k: int) -> set[str]:
    """The rule as written: every edge in both directions, then prune each touched fact on the table."""
    uow.repo.add_edges(edges)
    uow.repo.prune_similarity({x for a, b, _w in edges for x in (a, b)}, k)
    return set()


def _run(workdir: Path, batch_size: int, postgres: bool) -> Pipeline:
    url = fresh_postgres_url() if postgres else None
    settings = Settings(data_dir=workdir, embedder="precomputed:m-16", edge_k=4, edge_threshold=0.2, database_url=url)
    p = Pipeline(settings, batch_size=batch_size)
    for i, d in enumerate(_docs(12, 15, seed=4)):
        p.publish("crp.documents", str(d["source"]), d, ts_us=T0 + i)
    return p


@pytest.mark.parametrize(("batch_size", "postgres"), [(1, False), (200, False), (200, True)])
def test_ingest_keeps_k_edges_as_the_rule_and_leaves_a_current_graph_cache(
    tmp_path: Path, batch_size: int, postgres: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _run(tmp_path / "p", batch_size, postgres) as p:
        got = _edges(p)
        cache = p.fabric.graph
        with p.uow() as uow:
            ids = uow.repo.fact_ids()
            fresh = GraphCache()
            held = [f for f in ids if f in cache]  # the facts a later document touched
            assert len(held) > len(ids) // 4
            for f, (nb, w, kind) in zip(held, fresh.rows(uow.repo, fresh.index(held)), strict=True):
                c_nb, c_w, c_kind = cache.rows(uow.repo, cache.index([f]))[0]
                assert [cache.names[j] for j in c_nb.tolist()] == [fresh.names[j] for j in nb.tolist()]
                assert c_w.tolist() == w.tolist() and c_kind.tolist() == kind.tolist()
    per_src: dict[str, int] = {}
    for s, _d, _w, kind in got:
        if kind == "similarity":
            per_src[s] = per_src.get(s, 0) + 1
    assert per_src and max(per_src.values()) == 4  # the bound binds, and holds
    monkeypatch.setattr(ingest, "write_similarity_edges", _plain)
    with _run(tmp_path / "ref", batch_size, postgres) as ref:
        assert _edges(ref) == got
