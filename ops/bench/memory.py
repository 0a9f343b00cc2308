"""Resident memory of a serving process at N facts, stage by stage, against a floor measured in the same run.

    .venv/bin/python -m ops.bench.memory --sizes 100000             # ~3 min
    .venv/bin/python -m ops.bench.memory --sizes 1000000 --requests 1000   # the 1M fabric: ~2 min
    .venv/bin/python -m ops.bench.memory --sizes 100000 --bounded cache_facts=10000,cache_graph_nodes=50000

Each measurement runs in a fresh child process, so no figure carries another's memory. The serving child
opens a scratch copy of ``ops.bench.retrieval_speed``'s cached fabric of N facts (build it first with
that bench: ``--sizes N --ingest direct``, or ``direct-nosim`` at 1M), as ``crp-stream run`` and the
Kafka worker do: ``open_fabric``, then ``Fabric.warm`` (ANN cache, graph cache, fact cache), and then
serves ``--requests`` window requests through the retrieval handler (sessions of 5, new query vectors
every window, graph off and on, as ``retrieval_speed --vary-query``). It reports VmRSS (anonymous and
file-backed) and VmHWM after each stage, the largest VmRSS after any session while serving (``max
served``: the process tidies its memory every ``TIDY_EVERY_S``, so serve more than that long; ~1,000
requests at 1M), the caches' sizes, and the requests' latencies, from a process that holds no
generated corpus (``retrieval_speed`` keeps its 1.5 GiB of corpus vectors at 1M) and whose sessions
were made, and their generator's arrays freed, before the fabric opened.

The floor, measured in the same run by another child: the same imports, plus the N x 384 float32
vectors the facts' embeddings take as one array: the least a process that serves N facts from memory holds.
``--bounded`` repeats the serving child with the cache settings given (``Settings`` fields), to show that
the settings bound the memory.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as crp_stream/__init__.py does; before numpy loads

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from ops.bench._common import CACHE_DIR, scratch

DIM = 384
SEED = 7  # retrieval_speed's default: its cached fabrics and sessions


def proc_status() -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, RssShmem (the vector store's files mapped from tmpfs) and VmHWM, in KiB."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
            out[key] = int(rest.split()[0])
    return out


def emit(stage: str, **extra: Any) -> None:
    print(json.dumps({"stage": stage, **proc_status(), **extra}), flush=True)


def cached_fabric(n: int) -> Path:
    """The newest cached fabric of ``n`` facts that retrieval_speed built (any commit's build)."""
    for mode in ("direct", "direct-nosim", "runtime"):
        built = sorted(
            (p for p in CACHE_DIR.glob(f"speed-fabric-{n}-{SEED}-{mode}-v*") if p.is_dir() and p.suffix != ".tmp"),
            key=lambda p: p.stat().st_mtime,
        )
        if built:
            return built[-1]
    raise SystemExit(
        f"error: no cached fabric of {n:,} facts under {CACHE_DIR}; build one with "
        f"`python -m ops.bench.retrieval_speed --sizes {n} --requests 5 --ingest direct` "
        f"(--ingest direct-nosim at 1M)"
    )


# --- children --------------------------------------------------------------------------------------


class _Directions:
    """The topic and sub-topic directions of retrieval_speed's corpus (its rng's first two draws): what
    its sessions need, without generating the N corpus vectors."""

    def __init__(self, n: int, seed: int) -> None:
        from ops.bench.retrieval_speed import SUBTOPICS, TOPIC_SIZE, unit_rows

        rng = np.random.default_rng(seed)
        topics = max(1, n // TOPIC_SIZE)
        self.topic_dirs = unit_rows(rng.standard_normal((topics, DIM)))
        self.sub_dirs = unit_rows(rng.standard_normal((topics, SUBTOPICS, DIM)))


def serve(path: Path, n: int, requests: int, overrides: dict[str, int]) -> None:
    from crp_stream.config import Settings, load_settings
    from crp_stream.fabric.heap_trim import give_back
    from crp_stream.runtime import heap, threads
    from crp_stream.runtime.embedded import open_fabric
    from ops.bench.retrieval_speed import MODEL, Runner, Stages, make_sessions, report_size

    # the bench's own sessions first, and its generator's arrays (~0.16 GiB at 1M) back to the system:
    # they are not the serving process's
    sessions = make_sessions(_Directions(n, SEED), max(1, requests // 5), 3, SEED + 1)  # type: ignore[arg-type]
    give_back()
    emit("imported")
    settings = Settings(data_dir=path, embedder=f"precomputed:{MODEL}", **overrides)  # type: ignore[arg-type]
    fabric = open_fabric(settings)
    emit("opened")
    t = time.perf_counter()
    fabric.warm()
    ann = fabric.vectors.ann()
    emit(
        "warm",
        seconds=round(time.perf_counter() - t, 1),
        ann_mib=round(ann.memory_bytes() / 2**20) if ann is not None else 0,
        graph_facts=len(fabric.graph),
        cached_facts=len(fabric.facts),
    )
    runner = Runner(fabric, 35, vary_query=True)
    threads.limit_blas(load_settings({}).blas_threads)  # as `crp-stream run` does
    heap.settle()  # as `crp-stream run` and the Kafka worker do at start-up
    passes = ["envelope, graph off (CDR)", "envelope, graph on (CDGR)"]
    stages = {p: Stages() for p in passes}
    top: dict[str, int] = {}  # the largest VmRSS after any session, with its parts then
    t = time.perf_counter()
    for i, s in enumerate(sessions):
        runner.session(passes[0], s, f"off-{i}", False, stages[passes[0]])
        runner.session(passes[1], s, f"on-{i}", True, stages[passes[1]])
        now = proc_status()
        if now["VmRSS"] > top.get("VmRSS", 0):
            top = now
    print(json.dumps({"stage": "max served", **top, "seconds": round(time.perf_counter() - t, 1)}), flush=True)
    emit(
        "served",
        requests=sum(len(runner.lat[p]) for p in passes),
        graph_facts=len(fabric.graph),
        cached_facts=len(fabric.facts),
    )
    saved, sys.stdout = sys.stdout, sys.stderr  # the latency table to stderr: stdout is the JSON lines
    try:
        report_size(n, runner, stages, passes)
    finally:
        sys.stdout = saved
    fabric.close()


def floor(n: int) -> None:
    # the same imports as a serving process
    import crp_stream.fabric.fabric
    import crp_stream.runtime.embedded  # noqa: F401
    import ops.bench.retrieval_speed  # noqa: F401

    emit("imported")
    vecs = np.ones((n, DIM), dtype=np.float32)  # written: every page resident
    emit("vectors", bytes=int(vecs.nbytes))


# --- the parent ------------------------------------------------------------------------------------


def child(args: list[str]) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "ops.bench.memory", *args]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(args[:2])} child exited with {proc.returncode}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f}"


def report(title: str, rows: list[dict[str, Any]], floor_kib: int | None) -> None:
    print(f"\n{title}")
    print(f"  {'stage':<10}{'VmRSS MiB':>11}{'anon':>8}{'file':>8}{'shmem':>8}{'peak':>8}{'x floor':>9}  caches")
    for r in rows:
        ratio = f"{r['VmRSS'] / floor_kib:8.2f}x" if floor_kib else f"{'':>9}"
        extra = {k: v for k, v in r.items() if k not in ("stage", "VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM")}
        print(
            f"  {r['stage']:<10}{mib(r['VmRSS']):>11}{mib(r['RssAnon']):>8}{mib(r['RssFile']):>8}"
            f"{mib(r['RssShmem']):>8}{mib(r['VmHWM']):>8}{ratio}  {json.dumps(extra) if extra else ''}",
            flush=True,
        )


def parse_bounded(text: str) -> dict[str, int]:
    out = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep or not value.strip().isdigit():
            raise SystemExit(f"error: --bounded takes name=int pairs (cache_facts=10000,...), got {part!r}")
        out[key.strip()] = int(value)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    ap.add_argument("--requests", type=int, default=50, help="window requests per pass (sessions of 5)")
    ap.add_argument("--bounded", default="", metavar="K=V,...", help="also serve with these cache settings")
    ap.add_argument("--serve-child", nargs=2, metavar=("PATH", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--floor-child", type=int, metavar="N", help=argparse.SUPPRESS)
    ap.add_argument("--overrides", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.floor_child is not None:
        floor(args.floor_child)
        return
    if args.serve_child:
        serve(Path(args.serve_child[0]), int(args.serve_child[1]), args.requests, json.loads(args.overrides))
        return
    bounded = parse_bounded(args.bounded)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    for n in args.sizes:
        source = cached_fabric(n)
        base = child(["--floor-child", str(n)])
        floor_kib = base[-1]["VmRSS"]
        report(f"{n:,} facts: the floor (imports + {n:,} x {DIM} float32 vectors)", base, None)
        runs = [("defaults", {})] + ([("bounded " + args.bounded, bounded)] if bounded else [])
        for label, overrides in runs:
            with scratch("crp-bench-memory-") as tmp:
                shutil.copytree(source, tmp, dirs_exist_ok=True)
                rows = child(
                    [
                        "--serve-child",
                        str(tmp),
                        str(n),
                        "--requests",
                        str(args.requests),
                        "--overrides",
                        json.dumps(overrides),
                    ]
                )
            report(f"{n:,} facts: a serving process, {label} (fabric {source.name})", rows, floor_kib)
        print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
