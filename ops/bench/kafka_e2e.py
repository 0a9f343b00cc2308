"""End-to-end latency and ingest rate of the Kafka runtime on a real broker and PostgreSQL.

    . ops/env.sh        # CRP_TEST_KAFKA, CRP_TEST_POSTGRES_URL (ops/kafka start, ops/postgres start)
    .venv/bin/python ops/bench/kafka_e2e.py --facts 10000 --rates 5,50,200 --workers 1,2 --duration 15

1. Ingest: ``--facts`` facts (documents of ``--facts-per-doc`` facts with precomputed 384-d vectors,
   clustered by topic) are produced to ``crp.documents`` and one worker (``--groups ingest``) writes
   them to PostgreSQL and its embedded Qdrant: facts/s from the first record produced to the last
   fact committed.
2. Latency: ``--workers`` retrieval workers (``--groups retrieval``; each starts on a copy of the ingest
   worker's edge index, qdrant-edge being per process: a faster start than loading every vector from
   PostgreSQL, which a worker on an empty index does, ``runtime/kafka/projection.py``) serve window
   requests produced open-loop at each ``--rates`` value for ``--duration`` seconds (new sessions,
   3 sub-queries each, keys spread over the partitions). Latency = envelope consumed - request
   produced, on this machine's clock. The workers' ``crp_envelope_assembly_seconds`` histogram gives
   the in-process assembly time of the same requests, so the broker's (and the runtime's) share is
   the difference. ``--profile DIR``: each retrieval worker's fabric thread under cProfile
   (``CRP_PROFILE``), written to ``DIR/<worker>.pstats`` when it stops (warm-up requests included).

With ``--preload direct`` step 1 is replaced by writing the same facts straight into PostgreSQL and
the edge index (``ops/bench/preload.py``: the rows and edges ingest would leave), so that 100k facts
take minutes; the latency runs are unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from sqlalchemy import create_engine, text

if TYPE_CHECKING:
    from crp_stream.config import Settings

REPO = Path(__file__).resolve().parents[2]
MODEL = "bench-384"
DIM = 384
TOPICS = 64


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))] if s else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Vectors:
    """Facts around TOPICS centroids (cos ~0.8 to theirs); queries close to a centroid."""

    def __init__(self, seed: int = 7):
        self.rng = np.random.default_rng(seed)
        c = self.rng.normal(size=(TOPICS, DIM))
        self.centroids = c / np.linalg.norm(c, axis=1, keepdims=True)

    def near(self, topic: int, noise: float) -> list[float]:
        v = self.centroids[topic] + self.rng.normal(size=DIM) * noise / np.sqrt(DIM)
        return [round(float(x), 6) for x in v / np.linalg.norm(v)]


def window_request(vecs: Vectors, tag: str, i: int) -> dict[str, Any]:
    """Request ``i`` of a run: a new session, its query and 3 sub-queries near topic ``i % TOPICS``."""
    topic = i % TOPICS
    return {
        "request_id": f"{tag}-r{i}",
        "session_id": f"{tag}-s{i}",
        "window": 1,
        "embedding_model": MODEL,
        "query": {"text": f"question about topic {topic}", "embedding": vecs.near(topic, 0.3)},
        "sub_queries": [
            {"id": f"q{j}", "text": f"part {j} of topic {topic}", "embedding": vecs.near(topic, 0.4)} for j in range(3)
        ],
        "fact_budget": 12,
    }


class Worker:
    def __init__(
        self, name: str, args: argparse.Namespace, prefix: str, database: str, qdrant: str, groups: str, logdir: Path
    ):
        self.name, self.port = name, free_port()
        self.ready_timeout: float = args.ready_timeout
        self.log = open(logdir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRP_")}
        env["CRP_TOPIC_PREFIX"] = prefix
        env.update({f"CRP_{name.upper()}": value for name, value in getattr(args, "setting", None) or ()})
        if args.profile and groups == "retrieval":  # the fabric thread's cProfile (runtime/kafka/profiling.py)
            args.profile.mkdir(parents=True, exist_ok=True)
            env["CRP_PROFILE"] = str(args.profile / f"{name}.pstats")
            env["CRP_PROFILE_CLOCK"] = args.profile_clock
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "crp_stream",
                "worker",
                "--broker",
                args.broker,
                "--database",
                database,
                "--qdrant",
                qdrant,
                "--embedder",
                f"precomputed:{MODEL}",
                "--groups",
                groups,
                "--partitions",
                str(args.partitions),
                "--metrics-port",
                str(self.port),
                "--data",
                str(logdir / f"data-{name}"),
                "--log-level",
                "WARNING",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(REPO),
            # --worker-nice: the worker's CPU priority against the broker, database and this client
            preexec_fn=(lambda: os.nice(args.worker_nice)) if args.worker_nice else None,
        )

    def process_cpu(self) -> float:
        """CPU seconds (user + system) the worker process has used so far (Linux /proc)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            return bytes(r.read())

    def health(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.get("/health")))
        except (OSError, ValueError):
            return {}

    def wait_ready(self, timeout: float | None = None) -> list[str]:
        # at 100k a retrieval worker builds its ANN cache and preloads the graph and the fact cache first
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"worker {self.name} exited with {self.proc.returncode}")
            h = self.health()
            if h.get("status") == "ok" and h.get("assigned"):
                return list(h["assigned"])
            time.sleep(0.3)
        raise SystemExit(f"worker {self.name} not ready after {timeout}s")

    def buckets(self, name: str = "crp_envelope_assembly_seconds", label: str = "") -> dict[float, float]:
        """Cumulative buckets of one histogram (key -1.0: its sum)."""
        out: dict[float, float] = {}
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith(name + "_bucket{") and label in line:
                le = line.split('le="', 1)[1].split('"', 1)[0]
                out[float("inf") if le == "+Inf" else float(le)] = float(line.rsplit(" ", 1)[1])
            elif line.startswith(name + "_sum") and label in line:
                out[-1.0] = float(line.rsplit(" ", 1)[1])
        return out

    def counter(self, name: str, label: str = "") -> float:
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith(name + "_total") and label in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def histogram_stats(before: dict[float, float], after: dict[float, float]) -> dict[str, float]:
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    total_sum = delta.pop(-1.0, 0.0)
    bounds = sorted(delta)
    count = delta[float("inf")] if bounds else 0.0

    def quantile(q: float) -> float:  # like PromQL histogram_quantile: linear within the bucket
        rank, prev_b, prev_c = q * count, 0.0, 0.0
        for b in bounds:
            if delta[b] >= rank:
                if b == float("inf"):
                    return prev_b
                return prev_b + (b - prev_b) * ((rank - prev_c) / max(delta[b] - prev_c, 1e-9))
            prev_b, prev_c = b, delta[b]
        return float("nan")

    return {
        "count": count,
        "mean_ms": 1000 * total_sum / count if count else float("nan"),
        "p50_ms": 1000 * quantile(0.5),
        "p99_ms": 1000 * quantile(0.99),
    }


async def ingest(args: argparse.Namespace, prefix: str, database: str, vecs: Vectors) -> dict[str, float]:
    producer = AIOKafkaProducer(
        bootstrap_servers=args.servers, acks="all", max_request_size=4 * 1024 * 1024, linger_ms=5
    )
    await producer.start()
    t0 = time.perf_counter()
    sent = 0
    futures = []
    for d in range(0, args.facts, args.facts_per_doc):
        n = min(args.facts_per_doc, args.facts - d)
        facts = []
        for i in range(n):
            topic = (d + i) % TOPICS
            facts.append(
                {
                    "fact_id": str(i),
                    "text": f"Fact {d + i} about topic {topic}: value {(d + i) * 7 % 1000}.",
                    "embedding": vecs.near(topic, 0.8),
                }
            )
        source = f"source-{(d // args.facts_per_doc) % 16}"
        doc = {
            "event_id": f"bench-doc-{d}",
            "source": source,
            "source_type": "official",
            "document_id": f"bench-doc-{d}",
            "embedding_model": MODEL,
            "facts": facts,
        }
        futures.append(await producer.send(f"{prefix}documents", json.dumps(doc).encode(), key=source.encode()))
        sent += n
    await asyncio.gather(*futures)
    produced_s = time.perf_counter() - t0
    await producer.stop()
    engine = create_engine(database)
    try:
        while True:
            with engine.connect() as conn:
                n = int(conn.execute(text("SELECT COUNT(*) FROM facts")).scalar_one())
            if n >= sent:
                break
            await asyncio.sleep(0.5)
    finally:
        engine.dispose()
    total_s = time.perf_counter() - t0
    return {
        "facts": sent,
        "produce_s": round(produced_s, 2),
        "total_s": round(total_s, 2),
        "facts_per_s": round(sent / total_s, 1),
    }


async def load(
    args: argparse.Namespace, prefix: str, vecs: Vectors, rate: float, tag: str, duration: float | None = None
) -> dict[str, Any]:
    """Open-loop load: requests at a fixed rate whatever the replies; waits at most ``--drain`` s after."""
    duration = duration or args.duration
    consumer = AIOKafkaConsumer(bootstrap_servers=args.servers, group_id=None, fetch_max_wait_ms=100)
    await consumer.start()
    cluster = await consumer._client.fetch_all_metadata()
    parts = [
        TopicPartition(f"{prefix}envelopes", p)
        for p in sorted(cluster.partitions_for_topic(f"{prefix}envelopes") or ())
    ]
    consumer.assign(parts)
    await consumer.seek_to_end(*parts)
    for tp in parts:
        await consumer.position(tp)
    producer = AIOKafkaProducer(bootstrap_servers=args.servers, acks="all", linger_ms=0)
    await producer.start()
    sent: dict[str, float] = {}
    received: dict[str, float] = {}
    n_total = int(rate * duration)

    # built before the clock starts: the load generator shares the worker's cores, and a request's
    # 1,536 floats rounded and dumped at send time took a fifth of a core at 100 requests/s
    requests = []
    for i in range(n_total):
        req = window_request(vecs, tag, i)
        requests.append((str(req["request_id"]), json.dumps(req).encode(), str(req["session_id"]).encode()))

    async def receive() -> None:
        while len(received) < n_total:
            batch = await consumer.getmany(timeout_ms=50)
            now = time.perf_counter()
            for msgs in batch.values():
                for m in msgs:
                    rid = request_id(m.value)
                    if rid in sent and rid not in received:
                        received[rid] = now

    rx = asyncio.ensure_future(receive())
    topic = f"{prefix}window.requests"
    start, start_unix = time.perf_counter(), time.time()
    for i, (rid, value, key) in enumerate(requests):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        sent[rid] = time.perf_counter()
        await producer.send(topic, value, key=key)
    send_s = time.perf_counter() - start
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(rx, timeout=args.drain)
    await producer.stop()
    await consumer.stop()
    warm = {f"{tag}-r{i}" for i in range(int(rate * args.warmup))}
    lat = [1000 * (received[r] - sent[r]) for r in sent if r in received and r not in warm]
    if getattr(args, "latencies", None) and not tag.startswith("warm"):  # where in the run the slow ones were
        with open(f"{args.latencies}.{tag}", "w") as out:
            out.write(f"# start {start_unix:.3f} (Unix time: to line the run up with other timelines)\n")
            for r, t in sent.items():
                got = f"{1000 * (received[r] - t):.2f}" if r in received else "lost"
                out.write(f"{r}\t{t - start:.4f}\t{got}\n")
    if not lat:  # saturated: every reply came within the warm-up span; report those rather than nothing
        lat = [1000 * (received[r] - sent[r]) for r in sent if r in received]
    span = (max(received.values()) - start) if received else float("nan")
    return {
        "rate": rate,
        "sent": len(sent),
        "received": len(received),
        "achieved_rate": round(len(sent) / send_s, 1),
        "served_per_s": round(len(received) / span, 1) if received else 0.0,
        "mean_ms": round(sum(lat) / len(lat), 2) if lat else float("nan"),
        "p50_ms": round(percentile(lat, 50), 2),
        "p99_ms": round(percentile(lat, 99), 2),
        "max_ms": round(max(lat), 2) if lat else float("nan"),
    }


_REQUEST_ID = b'"request_id":"'


def request_id(envelope: bytes) -> str | None:
    """The ``request_id`` of an envelope's bytes, read without parsing the rest (its facts are most of
    it); the JSON parse where the field is not written as the worker writes it."""
    at = envelope.find(_REQUEST_ID)
    if at >= 0:
        start = at + len(_REQUEST_ID)
        end = envelope.find(b'"', start)
        if end > start and envelope.find(b"\\", start, end) < 0:  # no escape inside: the id as it is
            return envelope[start:end].decode()
    rid = json.loads(envelope).get("request_id")
    return rid if isinstance(rid, str) else None


def _psycopg(server: str) -> str:
    return server if "+psycopg" in server else server.replace("postgresql://", "postgresql+psycopg://", 1)


def fresh_database(server: str, name: str) -> str:
    url = _psycopg(server)
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE template0'))
    admin.dispose()
    return url.rsplit("/", 1)[0] + "/" + name


def drop_database(server: str, name: str) -> None:
    admin = create_engine(_psycopg(server), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _setting(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE (a setting of docs/configuration.md), got {text!r}")
    return name, value


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--broker", default=os.environ.get("CRP_TEST_KAFKA", "127.0.0.1:9092"))
    p.add_argument(
        "--postgres",
        default=os.environ.get("CRP_TEST_POSTGRES_URL"),
        help="URL of any database on the server; the bench creates its own database and drops it at the end",
    )
    p.add_argument("--facts", type=int, default=10_000)
    p.add_argument("--ready-timeout", type=float, default=600.0, help="seconds a worker may take to start")
    p.add_argument("--facts-per-doc", type=int, default=50)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--rates", default="5,50,200")
    p.add_argument("--workers", default="1,2")
    p.add_argument("--duration", type=float, default=15.0)
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of each run left out of the percentiles")
    p.add_argument("--drain", type=float, default=30.0, help="seconds to wait for replies after the last request")
    p.add_argument("--out", type=Path, help="write the results as JSON here too")
    p.add_argument(
        "--latencies",
        type=Path,
        metavar="PATH",
        help="write each request's send time (s into the run) and latency (ms) to PATH.<run>, tab-separated",
    )
    p.add_argument(
        "--profile", type=Path, help="cProfile each retrieval worker's fabric thread into DIR/<worker>.pstats"
    )
    p.add_argument("--profile-clock", choices=("wall", "cpu"), default="wall", help="--profile's clock")
    p.add_argument(
        "--preload",
        choices=("kafka", "direct"),
        default="kafka",
        help="fill the fabric through the Kafka ingest worker (measured) or write it directly (large fabrics)",
    )
    p.add_argument(
        "--worker-nice",
        type=int,
        default=0,
        metavar="N",
        help="start the workers at this niceness (negative: ahead of the broker, database and client "
        "that share the host; needs the privilege to raise a priority)",
    )
    p.add_argument(
        "--setting",
        action="append",
        type=_setting,
        default=[],
        metavar="NAME=VALUE",
        help="a setting (docs/configuration.md) of the bench's workers, repeatable: "
        "e.g. --setting barrier_wait=0 to compare with the event-time barrier off",
    )
    args = p.parse_args()
    if not args.postgres:
        raise SystemExit("--postgres (or CRP_TEST_POSTGRES_URL) is required")
    if args.worker_nice < 0 and os.geteuid() != 0:
        raise SystemExit(f"--worker-nice {args.worker_nice}: raising a process's priority needs root")
    args.servers = args.broker.removeprefix("kafka://")
    args.broker = f"kafka://{args.servers}"
    stamp = time.strftime("%Y%m%d%H%M%S")
    prefix = f"bench{stamp}."
    vecs = Vectors()
    results: dict[str, Any] = {"facts": args.facts, "partitions": args.partitions, "cpus": os.cpu_count(), "runs": []}
    database = fresh_database(args.postgres, f"crp_bench_{stamp}")
    try:
        with tempfile.TemporaryDirectory(prefix="crp-bench-kafka-") as tmp_:
            tmp = Path(tmp_)
            if args.preload == "direct":
                results["preload"] = preload_direct(args, database, tmp, vecs)
                print(f"preload: {results['preload']}", flush=True)
            else:
                w0 = Worker("ingest", args, prefix, database, f"edge:{tmp / 'v0'}", "ingest", tmp)
                try:
                    w0.wait_ready()
                    results["ingest"] = asyncio.run(ingest(args, prefix, database, vecs))
                    print(f"ingest: {results['ingest']}", flush=True)
                finally:
                    w0.stop()
            k = 0
            for nw in [int(x) for x in args.workers.split(",")]:
                for rate in [float(x) for x in args.rates.split(",")]:
                    k += 1
                    run = run_case(args, f"bench{stamp}r{k}.", database, tmp, vecs, nw, rate)
                    results["runs"].append(run)
                    print(json.dumps(run), flush=True)
    finally:  # its checkpoints would slow the next bench: up to 1.4 GB at 100k facts
        drop_database(args.postgres, f"crp_bench_{stamp}")
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def corpus_vectors(n: int, vecs: Vectors) -> np.ndarray:
    """The ``n`` facts' unit vectors: fact i near centroid ``i % TOPICS`` (draws from ``vecs.rng``)."""
    group = np.arange(n) % TOPICS
    v = vecs.centroids[group] + vecs.rng.normal(size=(n, DIM)) * 0.8 / np.sqrt(DIM)
    unit: np.ndarray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return unit


def fabric_settings(tmp: Path, database: str | None, edge: Path) -> Settings:
    """The settings of a fabric under ``tmp`` on ``database`` (None: SQLite) and the edge index ``edge``."""
    from crp_stream.config import Settings

    return Settings(
        data_dir=tmp / "preload", database_url=database, qdrant=f"edge:{edge}", embedder=f"precomputed:{MODEL}"
    )


def preload_direct(args: argparse.Namespace, database: str | None, tmp: Path, vecs: Vectors) -> dict[str, Any]:
    """The facts ingest would write for the same documents, written directly (``ops/bench/preload.py``)
    into ``database`` (None: SQLite under ``tmp``) and the edge index ``tmp/v0``."""
    from crp_stream.runtime.embedded import open_fabric
    from ops.bench.preload import Corpus, write_direct

    t0 = time.perf_counter()
    n = args.facts
    group = np.arange(n) % TOPICS
    v = corpus_vectors(n, vecs)
    texts = [f"Fact {i} about topic {group[i]}: value {i * 7 % 1000}." for i in range(n)]
    docs = [np.arange(d, min(n, d + args.facts_per_doc)) for d in range(0, n, args.facts_per_doc)]
    fabric = open_fabric(fabric_settings(tmp, database, tmp / "v0"))
    try:
        edges = write_direct(fabric, Corpus(v, texts, group, docs), MODEL)
    finally:
        fabric.close()
    return {"facts": n, "similarity_edges": edges, "seconds": round(time.perf_counter() - t0, 1)}


def run_case(
    args: argparse.Namespace, prefix: str, database: str, tmp: Path, vecs: Vectors, nw: int, rate: float
) -> dict[str, Any]:
    """One (workers, rate) run on fresh request/envelope topics, so a backlog left by a saturated run
    never delays the next one. The retrieval group's fabric offsets belong to the previous topics
    and are dropped first (they are keyed by topic name, and these topics are new)."""
    engine = create_engine(database)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM consumer_offsets WHERE consumer = 'retrieval'"))
        conn.execute(text("DELETE FROM meta WHERE key LIKE 'outbox:retrieval:%'"))
    engine.dispose()
    workers = []
    for i in range(nw):
        edge = tmp / f"{prefix}v{i}"
        shutil.copytree(tmp / "v0", edge)
        workers.append(Worker(f"{prefix}w{i}", args, prefix, database, f"edge:{edge}", "retrieval", tmp))
    try:
        for w in workers:
            w.wait_ready()
        _wait_split(workers, 2 * args.partitions)
        asyncio.run(load(args, prefix, vecs, min(rate, 5.0), "warm", duration=4.0))
        probes = {
            "assembly": ("crp_envelope_assembly_seconds", ""),
            "wait": ("crp_record_wait_seconds", 'group="retrieval"'),
            "produce": ("crp_produce_seconds", ""),
            "fabric_thread": ("crp_fabric_thread_seconds", 'group="retrieval"'),  # assembly minus queueing
        }
        cpu = ("crp_fabric_thread_cpu_seconds", 'group="retrieval"')
        before = {k: [w.buckets(*v) for w in workers] for k, v in probes.items()}
        cpu_before = sum(w.counter(*cpu) for w in workers)
        proc_before = sum(w.process_cpu() for w in workers)
        run = asyncio.run(load(args, prefix, vecs, rate, f"w{nw}r{int(rate)}"))
        after = {k: [w.buckets(*v) for w in workers] for k, v in probes.items()}
        cpu_s = sum(w.counter(*cpu) for w in workers) - cpu_before
        proc_s = sum(w.process_cpu() for w in workers) - proc_before
        run["workers"] = nw
        for k in probes:
            total_b = {b: sum(x.get(b, 0.0) for x in before[k]) for b in after[k][0]}
            total_a = {b: sum(x.get(b, 0.0) for x in after[k]) for b in after[k][0]}
            run[k] = {n: round(v, 2) for n, v in histogram_stats(total_b, total_a).items()}
        n = run["fabric_thread"]["count"]
        run["fabric_thread"]["cpu_mean_ms"] = round(1000 * cpu_s / n, 2) if n else float("nan")
        # the whole worker process (fabric thread, faust's event loop, the producer): CPU per served request
        served = run["assembly"]["count"]
        run["process_cpu_ms_per_request"] = round(1000 * proc_s / served, 2) if served else float("nan")
        run["fabric_cpu_ms_per_request"] = round(1000 * cpu_s / served, 2) if served else float("nan")
        run["load_avg"] = round(os.getloadavg()[0], 2)
        return run
    finally:
        for w in workers:
            w.stop()
        for i in range(nw):
            shutil.rmtree(tmp / f"{prefix}v{i}", ignore_errors=True)


def _wait_split(workers: list[Worker], total: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assigned = [set(w.health().get("assigned") or ()) for w in workers]
        if sum(len(a) for a in assigned) == total and all(assigned):
            return
        time.sleep(0.3)
    raise SystemExit(f"partitions not split between the workers: {assigned}")


if __name__ == "__main__":
    sys.exit(main())
