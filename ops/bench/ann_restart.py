"""Start-up of the ANN cache: built from the vector store against read back from its snapshot.

    .venv/bin/python -m ops.bench.ann_restart                       # the envelope bench's 100k fabric
    .venv/bin/python -m ops.bench.ann_restart --data PATH           # any fabric's data directory

The fabric is copied to a scratch directory and its snapshot removed. Then, in the same run: open,
``vectors.ann()`` (scan + HNSW build + save), close; open again, ``vectors.ann()`` (scan + read back +
check every slot against the store), close. The ratio is build over read-back, same run. The first
pass's searches are compared with the second's on 200 of the store's own vectors.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as crp_stream/__init__.py does; before numpy loads

import argparse
import shutil
import sys
import time
from pathlib import Path

from crp_stream.config import Settings
from crp_stream.runtime.embedded import open_fabric
from ops.bench._common import CACHE_DIR, scratch

NOW = 4_000_000_000.0  # after every generated fact, before none expires


def default_data() -> Path | None:
    built = sorted(CACHE_DIR.glob("speed-fabric-100000-*-direct-*"), key=lambda p: p.stat().st_mtime)
    return built[-1] if built else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=None, help="a fabric's data directory (default: the 100k bench's)")
    ap.add_argument("--embedder", default="precomputed:bench")
    a = ap.parse_args()
    data = a.data or default_data()
    if data is None or not (data / "vectors").is_dir():
        sys.exit(f"error: no fabric at {data}: run ops.bench.retrieval_speed --sizes 100000 first, or pass --data")
    with scratch("crp-bench-ann-restart-") as tmp:
        shutil.copytree(data, tmp, dirs_exist_ok=True)
        shutil.rmtree(tmp / "vectors.ann", ignore_errors=True)
        settings = Settings(data_dir=tmp, embedder=a.embedder, ann_min_points=1)
        took: list[tuple[float, float]] = []
        answers = []
        for _ in range(2):
            fabric = open_fabric(settings)
            t, c = time.perf_counter(), time.process_time()
            ann = fabric.vectors.ann()
            took.append((time.perf_counter() - t, time.process_time() - c))
            if ann is None:
                sys.exit("error: the ANN cache is off for this fabric")
            added = ann.added
            ids = [f for f in ann.slot_names() if f is not None]
            probe = fabric.vectors.stored_vectors(ids[:: max(1, len(ids) // 200)][:200])
            answers.append([fabric.vectors.search(v, 10, NOW) for v in probe.values()])
            fabric.close()
            print(
                f"  {'built' if len(took) == 1 else 'read back'}: {took[-1][0]:.1f} s wall, {took[-1][1]:.1f} s CPU; "
                f"{len(ann):,} points, {added:,} added to the graph; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        size = sum(p.stat().st_size for p in (tmp / "vectors.ann").iterdir()) / 2**20
        print(
            f"snapshot {size:,.0f} MiB; build / read back: {took[0][0] / took[1][0]:.1f}x wall, "
            f"{took[0][1] / took[1][1]:.1f}x CPU; the same answers to 200 searches: {answers[0] == answers[1]}"
        )


if __name__ == "__main__":
    main()
