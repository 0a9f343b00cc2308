"""The Kafka bench's window requests assembled in process, on the same fabric: what the worker adds.

    . ops/env.sh        # CRP_TEST_POSTGRES_URL (ops/postgres start); CRP_TEST_KAFKA for --kafka-rate
    .venv/bin/python -m ops.bench.worker_gap --facts 100000 --requests 300
    .venv/bin/python -m ops.bench.worker_gap --facts 100000 --requests 300 --kafka-rate 100

``ops.bench.kafka_e2e`` measures a Kafka worker serving window requests (new sessions, 3 sub-queries,
``fact_budget`` 12) over its own clustered corpus (64 topics: at 100k facts, 1,560 facts a topic, every
one of them above the relevance gate of a query near its topic). ``ops.bench.retrieval_speed``
measures assembly in process over another corpus (topics of 500 facts, 10 sub-topics). Their figures
differ by corpus as well as by runtime. This bench takes the corpus out of the comparison: the same
facts (``kafka_e2e.preload_direct``) and the same request sequence, assembled

1. in process on PostgreSQL, one transaction per request (``dispatch.apply_record``), as the
   embedded runtime does;
2. in process on PostgreSQL, micro-batches of ``--batch`` requests in one transaction
   (``apply_records``), as the Kafka worker's fabric thread does;
3. in process on SQLite (the same corpus written again), one transaction per request;
4. with ``--kafka-rate R``: by one Kafka worker on the PostgreSQL fabric, R requests/s offered
   (``kafka_e2e.run_case``), with its fabric thread's wall and CPU time per request.

Every pass stamps its requests at this machine's clock, as the Kafka worker's log-append times are:
the facts (written at ``T0_US``) are as old in every pass. Each in-process pass reports wall p50/p99
and CPU per request (``time.process_time``) after ``--warmup`` requests. The fabric is opened and
warmed as a worker does (``open_fabric``, ``warm``, ``heap.settle``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as crp_stream/__init__.py does; before numpy loads

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ops.bench import kafka_e2e


def _passes(fabric: Any, vecs: kafka_e2e.Vectors, args: argparse.Namespace, tag: str, batch: int) -> dict[str, Any]:
    """``args.requests`` requests through the retrieval handler, ``batch`` to a transaction."""
    from crp_stream.processors.base import Record
    from crp_stream.processors.dispatch import apply_records
    from crp_stream.processors.retrieval import RetrievalHandler

    handler = RetrievalHandler()
    handler.bind(fabric)
    wall: list[float] = []
    cpu: list[float] = []
    served = 0
    # stamped at this machine's time, as the Kafka pass's log-append times are: the facts (written at
    # T0_US) are as old in both, and recency decides how many connectors CDGR reads
    now = int(time.time() * 1_000_000)
    for start in range(0, args.requests, batch):
        records = []
        for i in range(start, min(args.requests, start + batch)):
            now += 1_000
            req = kafka_e2e.window_request(vecs, tag, i)
            value = json.dumps(req, separators=(",", ":")).encode()
            records.append(Record("crp.window.requests", 0, i, str(req["session_id"]), value, now))
        t, c = time.perf_counter(), time.process_time()
        with fabric.unit_of_work() as uow:
            outs = apply_records(handler, records, uow, unwritten=batch == 1)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        served += sum(1 for o in outs if o.topic == "crp.envelopes")
        if start >= args.warmup:
            wall.extend([dt / len(records)] * len(records))
            cpu.extend([dc / len(records)] * len(records))
    if served != args.requests:
        raise SystemExit(f"error: {served} envelopes for {args.requests} requests ({tag})")
    ordered = sorted(wall)
    return {
        "batch": batch,
        "requests": len(wall),
        "wall_p50_ms": round(1000 * statistics.median(wall), 2),
        "wall_p99_ms": round(1000 * ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))], 2),
        "cpu_mean_ms": round(1000 * statistics.fmean(cpu), 2),
        "load_avg": round(os.getloadavg()[0], 2),
    }


def in_process(database: str | None, tmp: Path, args: argparse.Namespace, batches: list[int]) -> list[dict[str, Any]]:
    """Preload the corpus into ``database`` (None: SQLite) and run the request passes on a warm fabric."""
    from crp_stream.config import load_settings
    from crp_stream.runtime import heap, threads
    from crp_stream.runtime.embedded import open_fabric

    print(f"preload: {kafka_e2e.preload_direct(args, database, tmp, kafka_e2e.Vectors())}", flush=True)
    edge = tmp / "served"
    shutil.copytree(tmp / "v0", edge)
    fabric = open_fabric(kafka_e2e.fabric_settings(tmp, database, edge))
    try:
        t = time.perf_counter()
        fabric.warm()
        threads.limit_blas(load_settings({}).blas_threads)  # as `crp-stream run` does
        heap.settle()
        print(f"warm in {time.perf_counter() - t:.1f} s", flush=True)
        out = []
        for k, batch in enumerate(batches):
            # the preload's rng state, then the requests: the same sequence whatever the store
            vecs = kafka_e2e.Vectors()
            kafka_e2e.corpus_vectors(args.facts, vecs)
            run = _passes(fabric, vecs, args, f"p{k}", batch)
            run["store"] = "postgresql" if database else "sqlite"
            print(json.dumps(run), flush=True)
            out.append(run)
        return out
    finally:
        fabric.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--postgres", default=os.environ.get("CRP_TEST_POSTGRES_URL"), help="URL of any database")
    p.add_argument("--broker", default=os.environ.get("CRP_TEST_KAFKA", "127.0.0.1:9092"))
    p.add_argument("--facts", type=int, default=100_000)
    p.add_argument("--facts-per-doc", type=int, default=50)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30, help="requests of each pass left out of the figures")
    p.add_argument("--batch", type=int, default=16, help="requests per transaction in the batched pass")
    p.add_argument("--no-sqlite", action="store_true", help="skip the SQLite pass")
    p.add_argument("--kafka-rate", type=float, help="also run one Kafka worker at this rate (requests/s)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of the Kafka run")
    args = p.parse_args()
    if not args.postgres:
        raise SystemExit("error: --postgres (or CRP_TEST_POSTGRES_URL) is required")
    if args.requests <= args.warmup:
        raise SystemExit("error: --requests must exceed --warmup")
    stamp = time.strftime("%Y%m%d%H%M%S")
    database = kafka_e2e.fresh_database(args.postgres, f"crp_bench_{stamp}")
    results: dict[str, Any] = {"facts": args.facts, "runs": []}
    try:
        with tempfile.TemporaryDirectory(prefix="crp-bench-gap-") as tmp_:
            tmp = Path(tmp_)
            results["runs"] += in_process(database, tmp / "pg", args, [1, args.batch])
            if args.kafka_rate:
                servers = args.broker.removeprefix("kafka://")
                kafka_args = argparse.Namespace(  # kafka_e2e's defaults; its warm-up is in seconds
                    **{**vars(args), "servers": servers, "broker": f"kafka://{servers}", "warmup": 3.0},
                    partitions=4,
                    drain=30.0,
                    ready_timeout=600.0,
                    profile=None,
                )
                run = kafka_e2e.run_case(
                    kafka_args, f"gap{stamp}.", database, tmp / "pg", kafka_e2e.Vectors(), 1, args.kafka_rate
                )
                print(json.dumps(run), flush=True)
                results["kafka"] = run
            if not args.no_sqlite:
                results["runs"] += in_process(None, tmp / "lite", args, [1])
    finally:
        kafka_e2e.drop_database(args.postgres, f"crp_bench_{stamp}")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
