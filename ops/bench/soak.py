"""Soak test of the embedded runtime: sustained mixed traffic, figures each minute;
and ``--sweep``: the largest fabric and the most concurrent sessions held with envelope p99 < 25 ms.

    .venv/bin/python -m ops.bench.soak --minutes 1                  # quick
    .venv/bin/python -m ops.bench.soak --minutes 10 --rate 60 --json soak.json
    .venv/bin/python -m ops.bench.soak --sweep --sizes 1000,2000,5000,10000,20000 --sessions 1,2,4,8,16,32

A producer thread appends to the embedded log at ``--rate`` records/s: documents (``--facts`` facts
each, clustered random ``--dim``-d vectors, ``--embedder precomputed``), telemetry observations on 50
claims, and window requests of new sessions. Each session runs ``--windows`` windows: when a window's
envelope is out, the producer sends its report and the next window's request. The worker (this
process's main thread) drives ``EmbeddedRuntime.run_until_idle`` the way ``crp-stream run`` does,
polling every 5 ms when idle.

Each minute: inputs appended and processed per second, outputs, envelopes and their latency (p50/p99
from the request's append to the envelope's commit, i.e. queueing included), resident memory, facts
in the fabric, sessions open. Fabric on ``--dir`` (default: tmpfs when present, see _common.scratch).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as crp_stream/__init__.py does; before numpy loads

import argparse
import json
import queue
import random
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from crp_stream.config import Settings, load_settings
from crp_stream.runtime import heap, threads
from crp_stream.runtime.embedded import open_runtime
from crp_stream.runtime.embedded.log import Append, EmbeddedLog, LogRecord
from crp_stream.runtime.embedded.runtime import system_clock
from ops.bench._common import code_version, percentile, scratch

MODEL = "soak"


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Traffic:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.rng = np.random.default_rng(7)
        self.py = random.Random(7)
        self.centres = self.rng.standard_normal((40, args.dim))
        self.n = 0

    def vec(self, topic: int, noise: float = 0.6) -> list[float]:
        v = self.centres[topic % len(self.centres)] + noise * self.rng.standard_normal(self.args.dim)
        return [round(float(x), 5) for x in v / np.linalg.norm(v)]

    def document(self) -> tuple[str, str, bytes]:
        self.n += 1
        topic = self.py.randrange(40)
        facts = [
            {
                "text": f"Fact {self.n}.{i} on topic {topic}: component {self.py.randrange(10**6)} holds.",
                "embedding": self.vec(topic),
            }
            for i in range(self.args.facts)
        ]
        value = {
            "event_id": f"doc-{self.n}",
            "source": f"src-{self.n % 5}",
            "source_type": "official",
            "embedding_model": MODEL,
            "document_id": f"d-{self.n % 500}",
            "facts": facts,
        }
        return "crp.documents", value["source"], json.dumps(value).encode()

    def telemetry(self) -> tuple[str, str, bytes]:
        self.n += 1
        claim = self.py.randrange(50)
        value = {
            "event_id": f"tel-{self.n}",
            "source": "field",
            "observed_at": "2026-11-01T00:00:00Z",
            "subject": f"service {claim}",
            "attribute": "rate limit",
            "value": self.py.choice(["250", "300"]),
            "unit": "rps",
            "embedding": self.vec(claim, 0.2),
            "embedding_model": MODEL,
        }
        return "crp.telemetry", "field", json.dumps(value).encode()

    def request(self, session: str, window: int) -> tuple[str, str, bytes]:
        topic = int(session.split("-")[1]) % 40
        value: dict[str, Any] = {
            "request_id": f"{session}-w{window}",
            "session_id": session,
            "window": window,
            "query": {"text": "task", "embedding": self.vec(topic, 0.3)},
            "embedding_model": MODEL,
            "fact_budget": 20,
            "max_windows": self.args.windows,
        }
        if window == 1:
            value["sub_queries"] = [
                {"id": f"q{i}", "text": f"part {i}", "embedding": self.vec(topic + i, 0.3)} for i in range(3)
            ]
        return "crp.window.requests", session, json.dumps(value).encode()

    def report(self, session: str, window: int) -> tuple[str, str, bytes]:
        value = {
            "session_id": session,
            "window": window,
            "addressed": [{"id": f"q{window % 3}", "depth": 0.6}],
            "output_text": f"window {window} of {session} written",
            "completeness": min(1.0, 0.25 * window),
        }
        return "crp.window.reports", session, json.dumps(value).encode()


def produce(
    args: argparse.Namespace,
    path: Path,
    stop: threading.Event,
    follow: queue.Queue[tuple[str, int]],
    sent: dict[str, float],
    counts: dict[str, int],
) -> None:
    log_ = EmbeddedLog(path, system_clock)
    traffic = Traffic(args)
    mix = [("document", args.mix[0]), ("telemetry", args.mix[1]), ("session", args.mix[2])]
    kinds = [k for k, w in mix for _ in range(w)]
    sessions = 0
    interval = 1.0 / args.rate
    next_at = time.monotonic()
    while not stop.is_set():
        items: list[tuple[str, str, bytes]] = []
        try:
            session, window = follow.get_nowait()  # an envelope is out: report it, ask for the next window
            items.append(traffic.report(session, window))
            if window < args.windows:
                items.append(traffic.request(session, window + 1))
        except queue.Empty:
            kind = traffic.py.choice(kinds)
            if kind == "document":
                items.append(traffic.document())
            elif kind == "telemetry":
                items.append(traffic.telemetry())
            else:
                sessions += 1
                items.append(traffic.request(f"s-{sessions}", 1))
        for topic, key, raw in items:
            if topic == "crp.window.requests":
                sent[json.loads(raw)["request_id"]] = time.monotonic()
            log_.append([Append(topic, key, raw)])
            counts["in"] += 1
            next_at += interval
        time.sleep(max(0.0, next_at - time.monotonic()))
    log_.close()


def sweep_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("--sweep (ops/bench/soak_sweep.py)")
    g.add_argument("--sweep", action="store_true", help="find the fabric sizes and sessions held under --target")
    g.add_argument("--sizes", default="1000,2000,5000,10000,20000", help="fabric sizes (facts), 384-d")
    g.add_argument("--sessions", default="1,2,4,8,16,32,64", help="concurrent sessions per level")
    g.add_argument(
        "--think",
        type=float,
        default=0.25,
        help="mean seconds between a window's envelope and the next request (uniform 0.5-1.5x)",
    )
    g.add_argument("--envelopes", type=int, default=300, help="envelopes measured per level")
    g.add_argument("--budget", type=int, default=35, help="fact_budget of every request")
    g.add_argument("--target", type=float, default=25.0, help="envelope p99 to hold, ms")
    g.add_argument("--reuse-fabric", action="store_true", help="reuse a fabric another commit built")
    g.add_argument(
        "--ingest-rate",
        type=float,
        default=0.0,
        metavar="F",
        help="facts/s of documents appended while the sessions run (documents of 5; 0: none)",
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--rate", type=float, default=40.0, help="input records per second")
    p.add_argument("--mix", default="2,4,1", help="weights documents,telemetry,new sessions")
    p.add_argument("--facts", type=int, default=5, help="facts per document")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--windows", type=int, default=4, help="windows per session")
    p.add_argument("--batch-size", type=int, default=200)
    p.add_argument(
        "--preload",
        type=int,
        default=0,
        help="documents ingested before the clock starts (e.g. with --mix 0,0,1: sessions only)",
    )
    p.add_argument("--dir", help="data directory (default: a scratch directory, tmpfs when present)")
    p.add_argument("--json", help="write the per-minute figures here")
    sweep_args(p)
    args = p.parse_args()
    if args.sweep:
        from ops.bench.soak_sweep import sweep

        return sweep(args)
    args.mix = [int(x) for x in args.mix.split(",")]
    if args.dir:
        return run(args, Path(args.dir))
    with scratch("crp-soak-") as tmp:
        return run(args, tmp)


def run(args: argparse.Namespace, data: Path) -> int:
    settings = Settings(data_dir=data, embedder=f"precomputed:{MODEL}", batch_size=args.batch_size)
    sent: dict[str, float] = {}
    latencies: list[float] = []
    follow: queue.Queue[tuple[str, int]] = queue.Queue()
    open_sessions: set[str] = set()
    counts = {"in": 0, "out": 0, "envelopes": 0}

    def on_output(rec: LogRecord) -> None:
        counts["out"] += 1
        if rec.topic == "crp.envelopes":
            env = json.loads(rec.value)
            t = sent.pop(env["request_id"], None)
            if t is not None:
                latencies.append((time.monotonic() - t) * 1000)
            counts["envelopes"] += 1
            session, window = env["session_id"], int(env["window"])
            if env["status"] == "in-progress" and window < args.windows:
                open_sessions.add(session)
                follow.put((session, window))
            else:
                open_sessions.discard(session)

    rt = open_runtime(settings, on_output=on_output)
    fabric, log_ = rt.fabric, rt.log
    threads.limit_blas(load_settings({}).blas_threads)  # as `crp-stream run` does
    heap.settle()  # as `crp-stream run` and the Kafka worker do at start-up
    if args.preload:
        seed = Traffic(args)
        seed.py.seed(99)
        seed.n = 10**9  # ids apart from the producer's
        for _ in range(args.preload):
            log_.append([Append(*seed.document())])
        rt.run_until_idle()
        counts["out"] = 0
    stop = threading.Event()
    producer = threading.Thread(target=produce, args=(args, settings.log_path, stop, follow, sent, counts), daemon=True)
    print(f"soak: {args.minutes} min at {args.rate}/s, mix {args.mix}, {code_version()}", file=sys.stderr)
    producer.start()
    start = time.monotonic()
    minute_start, minute = start, 1
    last = {"in": 0, "out": 0, "processed": 0}
    rows: list[dict[str, Any]] = []
    print(
        f"{'min':>3} {'in/s':>7} {'done/s':>7} {'out/s':>7} {'env':>5} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'rss MB':>7} {'facts':>7} {'open':>5} {'lag':>6}"
    )
    done = False
    while not done:
        if rt.run_until_idle(max_records=args.rate * 5) == 0:
            time.sleep(0.005)
        now = time.monotonic()
        done = now - start >= args.minutes * 60
        if now - minute_start >= 60 or done:
            span = now - minute_start
            processed = sum(rt.stats.processed.values())
            with fabric.unit_of_work() as uow:
                facts = sum(n for _, _, n in uow.repo.fact_counts())
            lag = len(sent)
            row = {
                "minute": minute,
                "in_per_s": (counts["in"] - last["in"]) / span,
                "processed_per_s": (processed - last["processed"]) / span,
                "out_per_s": (counts["out"] - last["out"]) / span,
                "envelopes": len(latencies),
                "p50_ms": percentile(latencies, 50) if latencies else None,
                "p99_ms": percentile(latencies, 99) if latencies else None,
                "rss_mb": rss_mb(),
                "facts": facts,
                "open_sessions": len(open_sessions),
                "waiting": lag,
            }
            rows.append(row)
            print(
                f"{minute:>3} {row['in_per_s']:>7.1f} {row['processed_per_s']:>7.1f} {row['out_per_s']:>7.1f} "
                f"{row['envelopes']:>5} {row['p50_ms'] or 0:>7.1f} {row['p99_ms'] or 0:>7.1f} "
                f"{row['rss_mb']:>7.1f} {facts:>7} {len(open_sessions):>5} {lag:>6}",
                flush=True,
            )
            last = {"in": counts["in"], "out": counts["out"], "processed": processed}
            latencies.clear()
            minute_start, minute = now, minute + 1
    stop.set()
    producer.join()
    fabric.close()
    log_.close()
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "version": code_version(), "minutes": rows}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
