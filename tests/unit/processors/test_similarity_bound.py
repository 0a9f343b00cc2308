"""The K bound's shortcuts in ``processors.similarity`` against the plain rule (SPEC-025 §1.3)."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core.edges import edges_past_k_ranked
from crp_stream.fabric.caches.graph import GraphCache
from crp_stream.processors.similarity import _codes, _member, _past_k


def _batch(rng: np.random.Generator, n_facts: int, k: int) -> tuple[np.ndarray, ...]:
    """Stored rows grouped by fact (0 to k + 2 each: some facts past K), new rows to other neighbours;
    weights on a coarse grid, so that ties with a fact's weakest edge are common."""
    st_fact, st_dst, st_w, n_fact, n_dst, n_w = [], [], [], [], [], []
    for f in range(n_facts):
        nbs = rng.permutation(60)
        n_st = int(rng.integers(0, k + 3))
        n_new = int(rng.integers(0, 4))
        for d in sorted(nbs[:n_st].tolist()):
            st_fact.append(f)
            st_dst.append(d)
            st_w.append(float(rng.integers(0, 6)) / 5)
        for d in nbs[n_st : n_st + n_new].tolist():
            n_fact.append(f)
            n_dst.append(d)
            n_w.append(float(rng.integers(0, 6)) / 5)
    order = rng.permutation(len(n_fact))  # new rows come in any order
    i64, f64 = np.int64, np.float64
    return (
        np.asarray(st_fact, dtype=i64),
        np.asarray(st_dst, dtype=i64),
        np.asarray(st_w, dtype=f64),
        np.asarray(n_fact, dtype=i64)[order],
        np.asarray(n_dst, dtype=i64)[order],
        np.asarray(n_w, dtype=f64)[order],
    )


@pytest.mark.parametrize("k", [0, 1, 3, 5])
@pytest.mark.parametrize("seed", range(6))
def test_past_k_drops_what_the_plain_rule_drops(k: int, seed: int) -> None:
    st_fact, st_dst, st_w, n_fact, n_dst, n_w = _batch(np.random.default_rng(seed), 40, k)
    drop_st, drop_n = _past_k(st_fact, st_dst, st_w, n_fact, n_dst, n_w, 40, k)
    plain = np.zeros(st_fact.shape[0] + n_fact.shape[0], dtype=bool)
    plain[
        edges_past_k_ranked(
            np.concatenate([st_fact, n_fact]), np.concatenate([st_dst, n_dst]), np.concatenate([st_w, n_w]), k
        )
    ] = True
    assert drop_st.tolist() == plain[: st_fact.shape[0]].tolist()
    assert drop_n.tolist() == plain[st_fact.shape[0] :].tolist()
    kept = np.bincount(np.concatenate([st_fact[~drop_st], n_fact[~drop_n]]), minlength=40)
    assert int(kept.max()) <= k


def test_member_is_isin_for_sorted_and_unsorted_tables() -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 50, 200)
    table = np.unique(rng.integers(0, 50, 30))
    assert _member(keys, table).tolist() == np.isin(keys, table).tolist()
    shuffled = rng.permutation(table)
    assert _member(keys, shuffled).tolist() == np.isin(keys, shuffled).tolist()
    assert not _member(keys, table[:0]).any()


def test_codes_follow_the_ids_byte_order() -> None:
    graph = GraphCache()
    ids = ["f9", "a1", "f10", "b", "a10", "zz"]
    ints = np.asarray(graph.index(ids), dtype=np.int64)
    code, width = _codes(graph, (ints[:3], ints[3:]))
    assert width == len(ids)
    assert [ids[i] for i in np.argsort(code[ints])] == sorted(ids)
