"""``neighbour_pool``: the ANN cache's edge candidates as arrays, the same pool as ``neighbours_many``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.pool import neighbour_pool
from crp_stream.fabric.vectors.port import VectorItem
from tests.unit.fabric.vectors.test_ann import clustered


def _pools(index: EdgeVectorIndex, queries: np.ndarray, k: int, floor: float, own: list[str]) -> tuple[list, list]:
    got = neighbour_pool(index, queries, k, floor, own)
    assert got is not None
    ids, vectors, qa, nb = got
    stored = index.stored_vectors(ids)
    assert all(vectors[i].tobytes() == stored[f].tobytes() for i, f in enumerate(ids))  # as stored
    arrays = [[ids[b] for a, b in zip(qa.tolist(), nb.tolist(), strict=True) if a == q] for q in range(len(queries))]
    lists = [[f for f, _w in hits] for hits in index.neighbours_many(queries, k, floor, own)]
    return arrays, lists


def test_the_pool_is_neighbours_many_with_ties_statuses_and_a_query_excluded(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "edge")
    vecs = clustered(3000)
    vecs[100:140] = vecs[99]  # 41 copies of one vector: a tie past any fetch at the k-th place
    index.upsert([VectorItem(f"f{i:05d}", v, "active") for i, v in enumerate(vecs)])
    index.set_status([f"f{i:05d}" for i in range(0, 3000, 7)], "quarantined")
    index.set_status([f"f{i:05d}" for i in range(3, 3000, 11)], "stale")  # kept: only quarantine is left out
    index.enable_ann(1000, 10_000)
    queries = np.concatenate([clustered(60, seed=5), vecs[[99, 120, 5, 6]]])
    own = [f"q{i}" for i in range(60)] + ["f00099", "f00120", "f00005", "f00006"]  # the last ones are in it
    arrays, lists = _pools(index, queries, 20, 0.3, own)
    assert arrays == lists
    assert sum(map(len, arrays)) > 60 * 10  # the pools are not empty
    assert "f00099" not in arrays[60] and "f00120" not in arrays[61]
    quarantined = {f"f{i:05d}" for i in set(range(0, 3000, 7)) - set(range(3, 3000, 11))}
    assert not any(set(p) & quarantined for p in arrays)


def test_no_pool_without_the_ann_cache(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "edge")
    index.upsert([VectorItem(f"f{i}", v, "active") for i, v in enumerate(clustered(50))])
    assert neighbour_pool(index, clustered(2, seed=1), 5, 0.0, ["a", "b"]) is None  # exact search serves
