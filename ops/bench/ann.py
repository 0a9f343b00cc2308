"""The in-process ANN cache (crp_stream/fabric/vectors/ann.py) against exact search, through the same vector port.

Recall@K of the ANN's filtered top-K against the exact top-K of the same qdrant-edge index, on real
all-MiniLM-L6-v2 vectors (the 2WikiMultiHopQA corpus, as ``retrieval_quality`` embedded it; every
50th vector is a query, the rest the corpus), and latency per query of both, in the same run. With
``--synthetic N`` the corpus is N generated clustered vectors instead (recall and speed at 100k-1M).

    .venv/bin/python -m ops.bench.ann                       # 2Wiki MiniLM vectors, K = 10, 50, 200
    .venv/bin/python -m ops.bench.ann --synthetic 100000 --queries 300
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from crp_stream.fabric.vectors.ann import EXPANSION_EDGES
from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.port import VectorItem
from ops.bench._common import CACHE_DIR, percentile, scratch

NOW = 1_900_000_000.0


def minilm_corpus(every: int) -> tuple[np.ndarray, np.ndarray]:
    path = CACHE_DIR / "2wikimultihopqa.all-MiniLM-L6-v2-onnx-int8.npz"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `python -m ops.bench.retrieval_quality 2wiki` once to embed it")
    vecs = np.load(path)["vecs"].astype(np.float32)
    is_query = np.arange(len(vecs)) % every == 0
    return vecs[~is_query], vecs[is_query]


def synthetic(n: int, queries: int, dim: int = 384, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(16, n // 500), dim))
    pick = rng.integers(0, len(centres), n + queries)
    v = (centres[pick] + 0.7 * rng.normal(size=(n + queries, dim))).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v[:n], v[n:]


def fill(directory: Path, corpus: np.ndarray, stale_every: int) -> EdgeVectorIndex:
    idx = EdgeVectorIndex(directory)
    items = [
        VectorItem(f"f{i:08d}", v, "stale" if stale_every and i % stale_every == 0 else "active")
        for i, v in enumerate(corpus)
    ]
    for start in range(0, len(items), 5000):
        idx.upsert(items[start : start + 5000])
    # a few quarantined points, which the default filter excludes
    idx.set_status([f"f{i:08d}" for i in range(3, len(items), 97)], "quarantined")
    idx.flush()
    return idx


def timed(idx: EdgeVectorIndex, queries: np.ndarray, k: int) -> tuple[list[list[str]], list[float]]:
    hits, lat = [], []
    for q in queries:
        t0 = time.perf_counter()
        found = idx.search(q, k, NOW)
        lat.append((time.perf_counter() - t0) * 1000)
        hits.append([f for f, _ in found])
    return hits, lat


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", type=int, default=0, help="N generated vectors instead of 2Wiki's MiniLM ones")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--k", type=int, nargs="+", default=[10, 50, 200])
    args = ap.parse_args()
    corpus, queries = synthetic(args.synthetic, args.queries) if args.synthetic else minilm_corpus(50)
    queries = queries[: args.queries]
    label = f"synthetic {args.synthetic:,}" if args.synthetic else "2Wiki all-MiniLM-L6-v2"
    print(f"corpus: {label}, {len(corpus):,} vectors, {len(queries)} queries, load {os.getloadavg()[0]:.1f}")
    with scratch("ann-") as tmp:
        exact = fill(tmp / "exact", corpus, 0)
        t0 = time.perf_counter()
        exact.enable_ann(1, 10**9)
        ann_ready = exact.ann()
        build = time.perf_counter() - t0
        assert ann_ready is not None
        print(
            f"ANN build from the index: {build:.1f} s ({len(corpus) / build:,.0f} points/s), "
            f"memory {ann_ready.memory_bytes() / 2**20:.0f} MiB"
        )
        head = ("k", "recall", "exact p50", "exact p99", "ann p50", "ann p99", "speed-up")
        print("{:>5} {:>7} {:>10} {:>10} {:>8} {:>8} {:>9}".format(*head))
        for k in args.k:
            exact._ann, exact._ann_min = None, None  # exact search
            want, lat_exact = timed(exact, queries, k)
            exact._ann, exact._ann_min = ann_ready, 1
            got, lat_ann = timed(exact, queries, k)
            recall = float(np.mean([len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(want, got, strict=True)]))
            pe, pa = percentile(lat_exact, 50), percentile(lat_ann, 50)
            print(
                f"{k:>5} {recall:>7.4f} {pe:>10.2f} {percentile(lat_exact, 99):>10.2f} {pa:>8.2f} "
                f"{percentile(lat_ann, 99):>8.2f} {pe / pa:>8.1f}x",
                flush=True,
            )
        # ingest's similarity edges: K nearest at cos >= the edge threshold, searched with the
        # narrower breadth ingest uses (EXPANSION_EDGES), the whole batch in one call
        for k, floor in ((20, 0.6),):
            exact._ann, exact._ann_min = None, None
            t0 = time.perf_counter()
            want_e = exact.neighbours_many(queries, k, floor)
            te = time.perf_counter() - t0
            exact._ann, exact._ann_min = ann_ready, 1
            t0 = time.perf_counter()
            got_e = exact.neighbours_many(queries, k, floor)
            ta = time.perf_counter() - t0
            pairs = [({f for f, _ in a}, {f for f, _ in b}) for a, b in zip(want_e, got_e, strict=True)]
            recall = sum(len(a & b) for a, b in pairs) / max(1, sum(len(a) for a, _b in pairs))
            print(
                f"edges k {k} cos >= {floor}: recall {recall:.4f} of {sum(len(a) for a, _b in pairs):,} edges; "
                f"exact {te * 1000 / len(queries):.2f} ms/query, ann {ta * 1000 / len(queries):.2f} ms/query "
                f"(breadth {EXPANSION_EDGES}, one call)",
                flush=True,
            )
        exact.close()


if __name__ == "__main__":
    main()
