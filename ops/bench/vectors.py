"""Benchmark of the vector port: filtered top-50 query latency, qdrant-edge vs qdrant-client local mode.

    .venv/bin/python -m ops.bench.vectors                   # 20k and 100k points, 384-d
    .venv/bin/python -m ops.bench.vectors --points 5000     # quick

Both backends go through the same port code (``VectorIndex.search``: status not quarantined/expired/
superseded AND unexpired at ``now``), on the same random L2-normalised vectors and payloads: a third of
the points carry a non-active status, half expire, a quarter of those before ``now``. qdrant-client's
local mode is the baseline, measured in the same run; it is slow, so it gets fewer queries
(``--baseline-queries``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.port import VectorIndex, VectorItem
from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex

NOW = 1_700_000_000.0
STATUSES = ("stale", "quarantined", "superseded", "expired")
K = 50


def make_items(n: int, dim: int, seed: int) -> list[VectorItem]:
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    status = rng.integers(0, 12, n)  # 0..3 -> a non-active status, else active
    expiry = rng.uniform(-0.5, 1.5, n)  # < 0: expired at NOW; > 1: never expires
    items = []
    for i in range(n):
        s = STATUSES[status[i]] if status[i] < len(STATUSES) else "active"
        exp = None if expiry[i] > 1.0 else NOW + float(expiry[i]) * 86_400
        items.append(VectorItem(f"fact-{i:07d}", vectors[i], s, exp, f"source-{i % 7}"))
    return items


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def run(name: str, index: VectorIndex, items: list[VectorItem], queries: np.ndarray, edges: bool) -> dict[str, float]:
    t0 = time.perf_counter()
    for start in range(0, len(items), 2000):
        index.upsert(items[start : start + 2000])
    index.flush()
    load = time.perf_counter() - t0
    index.search(queries[0], K, NOW)  # warm-up, not timed
    lat = []
    for q in queries:
        t = time.perf_counter()
        hits = index.search(q, K, NOW)
        lat.append(time.perf_counter() - t)
        assert len(hits) == K
    p50, p99 = statistics.median(lat) * 1e3, percentile(lat, 99) * 1e3
    print(
        f"  {name:<22} upsert {len(items) / load:>9,.0f} pts/s   "
        f"filtered top-{K}: p50 {p50:8.2f} ms  p99 {p99:8.2f} ms  ({len(lat)} queries)",
        flush=True,
    )
    if edges:
        # The ingest path: similarity-edge neighbours (K=20, cosine >= 0.60), one by one vs batched.
        news = items[: len(queries)]  # as at ingest: a fact's own vector, the fact itself excluded
        t = time.perf_counter()
        single = [index.neighbours(it.vector, 20, 0.6, it.fact_id) for it in news]
        one = (time.perf_counter() - t) / len(news) * 1e3
        t = time.perf_counter()
        batch = index.neighbours_many([it.vector for it in news], 20, 0.6, [it.fact_id for it in news])
        many = (time.perf_counter() - t) / len(news) * 1e3
        assert batch == single
        print(f"  {'':<22} edge neighbours: {one:.2f} ms/query one by one, {many:.2f} ms/query batched", flush=True)
    return {"p50": p50, "p99": p99}


def bench(n: int, dim: int, queries: int, baseline_queries: int, skip_baseline: bool) -> None:
    items = make_items(n, dim, seed=n)
    rng = np.random.default_rng(1)
    qs = rng.standard_normal((max(queries, baseline_queries) + 1, dim)).astype(np.float32)
    print(f"{n:,} points, {dim}-d:", flush=True)
    with tempfile.TemporaryDirectory(prefix="crp-bench-vectors-") as tmp:
        backends: list[tuple[str, Callable[[], VectorIndex], int, bool]] = [
            ("qdrant-edge (exact)", lambda: EdgeVectorIndex(Path(tmp) / "edge"), queries, True),
        ]
        if not skip_baseline:
            backends.append(
                ("qdrant-client local", lambda: QdrantVectorIndex(location=":memory:"), baseline_queries, False)
            )
        results = {}
        for name, open_index, count, edges in backends:
            with open_index() as index:
                results[name] = run(name, index, items, qs[:count], edges)
    if len(results) == 2:
        edge, local = results["qdrant-edge (exact)"], results["qdrant-client local"]
        print(
            f"  ratio local/edge: p50 {local['p50'] / edge['p50']:.1f}x  p99 {local['p99'] / edge['p99']:.1f}x",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=200, help="timed queries on qdrant-edge")
    parser.add_argument("--baseline-queries", type=int, default=20, help="timed queries on the local mode")
    parser.add_argument("--no-baseline", action="store_true", help="skip qdrant-client local mode")
    args = parser.parse_args()
    # The baseline is local mode on purpose; its advice to use a server above 20k points is the point.
    warnings.filterwarnings("ignore", message="Local mode is not recommended", category=UserWarning)
    for n in args.points:
        bench(n, args.dim, args.queries, args.baseline_queries, args.no_baseline)


if __name__ == "__main__":
    main()
