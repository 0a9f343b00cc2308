"""PostgreSQL round trips per record on the Kafka worker's one-record path (window requests, reports).

Counts, not timings: the same on a loaded machine and a quiet one. A retrieval ``KafkaWorker`` applies
window requests (and optionally reports) through ``_apply_sync``, exactly as its agent does, without a
broker; an ingest worker first fills the fabric with documents. Every round trip psycopg makes is
counted: each statement a cursor executes, the ``BEGIN`` psycopg sends before a transaction's first
statement, and each commit and rollback. Self-contained (only ``crp_stream``), so another checkout can
be measured with ``PYTHONPATH=<checkout> python ops/bench/kafka_round_trips.py``.

    .venv/bin/python -m ops.bench.kafka_round_trips --postgres URL [--facts 500] [--requests 20] [--show]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import inspect
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import create_engine, text

MODEL = "bench-384"
DIM = 384
TOPICS = 16
LOG_APPEND_TIME = 1


class RoundTrips:
    """Counts psycopg's round trips by the first words of each statement."""

    def __init__(self) -> None:
        self.by_kind: collections.Counter[str] = collections.Counter()
        self.on = False

    def note(self, kind: str) -> None:
        if self.on:
            self.by_kind[kind] += 1

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())


def _head(query: Any) -> str:
    sql = query if isinstance(query, str) else getattr(query, "as_string", lambda *_: str(query))(None)
    words = " ".join(str(sql).split())
    if words.upper().startswith("WITH"):
        return words[:60]
    return " ".join(words.split()[:4])[:60]


@contextmanager
def counting() -> Iterator[RoundTrips]:
    trips = RoundTrips()
    idle = psycopg.pq.TransactionStatus.IDLE
    saved = {
        (psycopg.Cursor, "execute"): psycopg.Cursor.execute,
        (psycopg.Cursor, "executemany"): psycopg.Cursor.executemany,
        (psycopg.Connection, "commit"): psycopg.Connection.commit,
        (psycopg.Connection, "rollback"): psycopg.Connection.rollback,
    }

    def statement(name: str) -> Any:
        real = saved[(psycopg.Cursor, name)]

        def wrapped(cur: Any, query: Any, *args: Any, **kw: Any) -> Any:
            conn = cur.connection
            if not conn.autocommit and conn.pgconn.transaction_status == idle:
                trips.note("BEGIN")
            trips.note(_head(query) + (" [many]" if name == "executemany" else ""))
            return real(cur, query, *args, **kw)

        return wrapped

    def ending(name: str) -> Any:
        real = saved[(psycopg.Connection, name)]

        def wrapped(conn: Any) -> Any:
            if conn.pgconn.transaction_status != idle:
                trips.note(name.upper())
            return real(conn)

        return wrapped

    psycopg.Cursor.execute = statement("execute")  # type: ignore[method-assign]
    psycopg.Cursor.executemany = statement("executemany")  # type: ignore[method-assign]
    psycopg.Connection.commit = ending("commit")  # type: ignore[method-assign]
    psycopg.Connection.rollback = ending("rollback")  # type: ignore[method-assign]
    try:
        yield trips
    finally:
        for (cls, name), fn in saved.items():
            setattr(cls, name, fn)


class Message:  # the fields of a faust message the worker reads
    def __init__(self, topic: str, partition: int, offset: int, key: bytes, value: bytes, ts: float):
        self.topic, self.partition, self.offset, self.key, self.value = topic, partition, offset, key, value
        self.timestamp, self.timestamp_type, self.headers, self.generation_id = ts, LOG_APPEND_TIME, (), 1


def _vec(rng: np.random.Generator, centroids: np.ndarray, topic: int, noise: float) -> list[float]:
    v = centroids[topic] + rng.normal(size=DIM) * noise / np.sqrt(DIM)
    return [round(float(x), 6) for x in v / np.linalg.norm(v)]


def _reset(url: str) -> None:
    eng = create_engine(url)
    with eng.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    eng.dispose()


def _postgres_cpu_s(url: str) -> float:
    """CPU seconds of the server's backends connected to the database (same host: /proc)."""
    eng = create_engine(url)
    try:
        with eng.connect() as conn:
            pids = [
                r[0]
                for r in conn.execute(
                    text(
                        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                        " AND pid <> pg_backend_pid()"
                    )
                )
            ]
    finally:
        eng.dispose()
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total / os.sysconf("SC_CLK_TCK")


def measure(
    url: str, facts: int, requests: int, count: bool = True
) -> tuple[list[int], collections.Counter[str], dict[str, float]]:
    """Round trips of each window request after two that warm the caches, and the last one's kinds;
    without ``count``, CPU ms per request instead: this process's and PostgreSQL's backends'."""
    from crp_stream.config import Settings
    from crp_stream.events.topics import ALL_TOPICS
    from crp_stream.runtime.kafka.worker import KafkaWorker

    _reset(url)
    rng = np.random.default_rng(7)
    c = rng.normal(size=(TOPICS, DIM))
    centroids = c / np.linalg.norm(c, axis=1, keepdims=True)
    ts = 1_700_000_000.0
    with tempfile.TemporaryDirectory() as tmp:
        s = Settings(
            data_dir=Path(tmp), database_url=url, embedder=f"precomputed:{MODEL}", broker="kafka://127.0.0.1:1"
        )
        ing = KafkaWorker(s, ("ingest",))
        ing.partitions = {t: 4 for t in ALL_TOPICS}
        h = ing.handlers[0]
        for d in range(0, facts, 50):
            rows = [
                {"fact_id": str(i), "text": f"Fact {d + i} about topic {(d + i) % TOPICS}: value {(d + i) * 7 % 1000}."}
                | {"embedding": _vec(rng, centroids, (d + i) % TOPICS, 0.8)}
                for i in range(min(50, facts - d))
            ]
            doc = {"event_id": f"doc-{d}", "source": f"source-{d % 7}", "source_type": "official"}
            doc |= {"document_id": f"doc-{d}", "embedding_model": MODEL, "facts": rows}
            ts += 0.001
            m = Message("crp.documents", 0, d // 50, b"s", json.dumps(doc).encode(), ts)
            ing._apply_sync(h, ing.record(m), None, m.offset + 1)
        ing.fabric.close()

        ret = KafkaWorker(s, ("retrieval",))
        ret.partitions = {t: 4 for t in ALL_TOPICS}
        h = ret.handlers[0]
        # as the agent's first attempt (``shelter=False`` where the worker has it)
        first_attempt = (False,) if "shelter" in inspect.signature(ret._apply_sync).parameters else ()
        per: list[int] = []
        shown: collections.Counter[str] = collections.Counter()
        cpu: dict[str, float] = {}
        with counting() if count else contextlib.nullcontext(RoundTrips()) as trips:
            for i in range(requests + 2):
                topic = i % TOPICS
                req = {
                    "request_id": f"r{i}",
                    "session_id": f"s{i}",
                    "window": 1,
                    "embedding_model": MODEL,
                    "query": {"text": f"question about topic {topic}", "embedding": _vec(rng, centroids, topic, 0.3)},
                    "sub_queries": [
                        {
                            "id": f"q{j}",
                            "text": f"part {j} of topic {topic}",
                            "embedding": _vec(rng, centroids, topic, 0.4),
                        }
                        for j in range(3)
                    ],
                    "fact_budget": 12,
                }
                ts += 0.001
                m = Message("crp.window.requests", 0, i, f"s{i}".encode(), json.dumps(req).encode(), ts)
                record = ret.record(m)
                trips.by_kind.clear()
                trips.on = i >= 2
                if i == 2 and not count:
                    pg0, t0, w0 = _postgres_cpu_s(url), time.process_time(), time.perf_counter()
                outs, _ = ret._apply_sync(h, record, None, m.offset + 1, *first_attempt)
                assert outs and any(o.topic == "crp.envelopes" for o in outs), outs
                if i >= 2:
                    per.append(trips.total)
                    shown = collections.Counter(trips.by_kind)
        if not count:
            cpu["process_ms"] = 1000 * (time.process_time() - t0) / requests
            cpu["wall_ms"] = 1000 * (time.perf_counter() - w0) / requests
            cpu["postgres_ms"] = 1000 * (_postgres_cpu_s(url) - pg0) / requests
        ret.fabric.close()
    return per, shown, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--postgres", required=True, help="a PostgreSQL URL to a database the bench may empty")
    ap.add_argument("--facts", type=int, default=500)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--show", action="store_true", help="the statements of one request")
    ap.add_argument("--cpu", action="store_true", help="CPU ms per request instead (nothing counted)")
    a = ap.parse_args()
    per, shown, cpu = measure(a.postgres, a.facts, a.requests, count=not a.cpu)
    if a.cpu:
        print(f"{a.facts} facts, {a.requests} window requests: CPU ms per request", end=" ")
        print(f"worker process {cpu['process_ms']:.2f}, PostgreSQL backends {cpu['postgres_ms']:.2f}", end="")
        print(f"; wall ms per request {cpu['wall_ms']:.2f}")
        return
    print(f"{a.facts} facts, {len(per)} window requests (window 1 of a new session, 3 sub-queries)")
    print(f"PostgreSQL round trips per request: min {min(per)}, mean {sum(per) / len(per):.2f}, max {max(per)}")
    if a.show:
        print("the last request's round trips:")
        for kind, n in shown.most_common():
            print(f"  {n:>3}  {kind}")


if __name__ == "__main__":
    main()
