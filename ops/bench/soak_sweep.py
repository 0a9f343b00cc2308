"""``soak.py --sweep``: the largest fabric and the most concurrent sessions held with envelope p99 < 25 ms.

For each fabric size (the clustered 384-d corpus of retrieval_speed.py, built once and cached), the
embedded runtime first serves every session of a pool of 64 once (warm caches, as in a worker that
has run a while), then closed-loop sessions drawn from the pool, their vectors nudged per session:
each of S clients requests window 1 of a session, and when the envelope is out sends its report
and, after a think time (``--think`` s, uniform 0.5-1.5x; the generator writing the window), the
next window's request; after ``--windows`` windows it starts a new session. With ``--ingest-rate F``
the same thread also appends documents of 5 facts (precomputed vectors near the corpus' facts, new
texts) at F facts/s, open loop, so every envelope waits for the ingest appended before its request
(the event-time contract). Latency is from the
request's append to the log to the envelope's commit: queueing behind the other sessions' records
included. S doubles until the p99 over ``--envelopes`` envelopes (after a warm-up of 30) reaches
``--target``. After each level, flat top-K (``vectors.search(query, k=budget)``, the index's kept
results dropped) is timed 200 times on the same index, idle, as the baseline of the ratios.
"""

from __future__ import annotations

import argparse
import heapq
import os
import queue
import random
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from crp_stream.config import Settings, load_settings
from crp_stream.fabric.fabric import Fabric
from crp_stream.runtime import heap, threads
from crp_stream.runtime.embedded import open_runtime
from crp_stream.runtime.embedded.log import Append, EmbeddedLog, LogRecord
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime, system_clock
from ops.bench._common import percentile, vec
from ops.bench.retrieval_speed import MODEL, Corpus, Session, make_sessions, prepared

WARMUP = 30
DOC_FACTS = 5  # facts per document of the concurrent ingest (--ingest-rate)


@dataclass
class Level:
    sessions: int
    latencies: list[float] = field(default_factory=list)
    started: float = 0.0
    ended: float = 0.0
    facts: int = 0  # facts appended by the concurrent ingest during the level
    begun: float = 0.0  # the clients' start (the ingest's rate is over the whole level)


class Clients:
    """The producer thread: S clients, each one session at a time, requests after a think time."""

    def __init__(
        self,
        args: argparse.Namespace,
        path: Path,
        pool: list[Session],
        count: int,
        wake: threading.Event,
        tag: str,
        corpus: Corpus | None = None,
    ):
        self.args, self.pool, self.count, self.wake, self.tag = args, pool, count, wake, tag
        self.corpus = corpus if args.ingest_rate > 0 else None
        self.docs = 0  # documents appended
        self.log = EmbeddedLog(path, system_clock)
        self.rng = random.Random(count)
        self.sent: dict[str, float] = {}
        self.follow: queue.Queue[tuple[str, int, str]] = queue.Queue()  # (session, window, output text)
        self.stop = threading.Event()
        self.opened = 0
        self.client_of: dict[str, int] = {}

    def _think(self) -> float:
        return self.args.think * self.rng.uniform(0.5, 1.5)

    def _append(self, topic: str, key: str, value: dict[str, Any]) -> None:
        if topic == "crp.window.requests":
            self.sent[value["request_id"]] = time.monotonic()
        # msgspec: the clients share the worker's GIL, and json.dumps of a request's 1,536 floats held it
        # ~1 ms (the same values; only the text of a float may differ, e.g. 1e-5 for 1e-05)
        self.log.append([Append(topic, key, msgspec.json.encode(value))])
        self.wake.set()

    def _vectors(self, sid: str) -> tuple[Session, np.ndarray, list[np.ndarray]]:
        """A pool session's vectors, nudged per session: a new session brings vectors never queried
        before (the index keeps recent query results), near the same facts (caches as in steady state)."""
        n = int(sid.rsplit("-", 1)[1])
        s = self.pool[n % len(self.pool)]
        rng = np.random.default_rng(n)
        nudge = [0.01 * rng.standard_normal(s.query.shape[0]).astype(np.float32) for _ in range(1 + len(s.sub_vecs))]
        return s, s.query + nudge[0], [v + d for v, d in zip(s.sub_vecs, nudge[1:], strict=True)]

    def _request(self, sid: str, window: int) -> None:
        s, query, subs = self._vectors(sid)
        value: dict[str, Any] = {
            "request_id": f"{sid}-w{window}",
            "session_id": sid,
            "window": window,
            "query": {"text": f"Explain topic {s.topic}", "embedding": vec(query)},
            "fact_budget": self.args.budget,
            "max_windows": self.args.windows,
            "embedding_model": MODEL,
        }
        if window == 1:
            value["sub_queries"] = [
                {"id": f"sq{j}", "text": f"area {s.subs[j]} of topic {s.topic}", "embedding": vec(v)}
                for j, v in enumerate(subs)
            ]
        self._append("crp.window.requests", sid, value)

    def _new_session(self, client: int) -> None:
        self.opened += 1
        sid = f"{self.tag}-c{client}-{self.opened}"
        self.client_of[sid] = client
        self._request(sid, 1)

    def _follow_up(self, item: tuple[str, int, str], due: list[tuple[float, int, str, int]]) -> None:
        """An envelope is out: report the window now, schedule the next request after a think time."""
        sid, window, text = item
        if window == 0:  # the request was rejected: a new session
            heapq.heappush(due, (time.monotonic() + self._think(), self.client_of[sid], "", 1))
            return
        n_sub = len(self.pool[0].subs)
        addressed = [{"id": f"sq{window - 1}", "depth": 0.8}] if window - 1 < n_sub else []
        self._append(
            "crp.window.reports",
            sid,
            {
                "session_id": sid,
                "window": window,
                "addressed": addressed,
                "output_text": text,
                "completeness": min(1.0, window / max(1, n_sub)),
            },
        )
        nxt = window + 1 if window < self.args.windows else 1
        heapq.heappush(due, (time.monotonic() + self._think(), self.client_of[sid], sid if nxt > 1 else "", nxt))

    def _document(self) -> None:
        """One document of ``DOC_FACTS`` new facts, each near a corpus fact (same topic), vectors given."""
        assert self.corpus is not None
        rng = np.random.default_rng(10_000_000 + self.docs)
        picks = rng.integers(0, self.corpus.vecs.shape[0], DOC_FACTS)
        near = self.corpus.vecs[picks] + 0.15 * rng.standard_normal((DOC_FACTS, self.corpus.vecs.shape[1]))
        near /= np.linalg.norm(near, axis=1, keepdims=True)
        d = self.docs
        self.docs += 1
        self._append(
            "crp.documents",
            f"live-{d % 3}",
            {
                "event_id": f"{self.tag}-doc-{d}",
                "source": f"live-{d % 3}",
                "source_type": "official",
                "document_id": f"{self.tag}-doc-{d}",
                "embedding_model": MODEL,
                "facts": [
                    {"text": f"Live statement {d}-{i} on topic {int(self.corpus.topic[j])}", "embedding": vec(v)}
                    for i, (j, v) in enumerate(zip(picks.tolist(), near, strict=True))
                ],
            },
        )

    def run(self) -> None:
        due: list[tuple[float, int, str, int]] = []  # (time, client, session or "", next window)
        now = time.monotonic()
        for c in range(self.count):
            heapq.heappush(due, (now + self.rng.uniform(0, self.args.think), c, "", 1))
        every = DOC_FACTS / self.args.ingest_rate if self.corpus is not None else float("inf")
        next_doc = now + every
        while not self.stop.is_set():
            # Blocked (not polling) until an envelope is out or a request is due: a polling thread would
            # take the GIL from the worker every few hundred microseconds and slow what is measured.
            first = min(due[0][0] if due else float("inf"), next_doc)
            wait = min(max(first - time.monotonic(), 0.0), 0.05)
            try:
                item: tuple[str, int, str] | None = self.follow.get(timeout=wait) if wait > 0 else None
            except queue.Empty:
                item = None
            while item is not None:
                self._follow_up(item, due)
                try:
                    item = self.follow.get_nowait()
                except queue.Empty:
                    item = None
            now = time.monotonic()
            while next_doc <= now:  # open loop: a late document is appended now, the next on schedule
                self._document()
                next_doc += every
            while due and due[0][0] <= now:
                _t, client, sid, window = heapq.heappop(due)
                if sid:
                    self._request(sid, window)
                else:
                    self._new_session(client)
        self.log.close()


def run_level(
    rt: EmbeddedRuntime,
    settings: Settings,
    pool: list[Session],
    args: argparse.Namespace,
    count: int,
    envelopes: int,
    tag: str,
    corpus: Corpus | None = None,
) -> Level:
    wake = threading.Event()
    clients = Clients(args, settings.log_path, pool, count, wake, tag, corpus)
    level = Level(count)
    seen = 0

    def on_output(rec: LogRecord) -> None:
        nonlocal seen
        if rec.topic == settings.topic("crp.deadletter") and rec.key in clients.client_of:
            clients.follow.put((rec.key, 0, ""))  # a rejected request: that client starts a new session
            return
        if rec.topic != settings.topic("crp.envelopes"):
            return
        env = msgspec.json.decode(rec.value)  # on the worker's thread: 4x faster than json.loads
        t = clients.sent.pop(env["request_id"], None)
        if t is None:
            return
        seen += 1
        if seen == WARMUP + 1:
            level.started = time.monotonic()
        if seen > WARMUP:
            level.latencies.append((time.monotonic() - t) * 1000)
        clients.follow.put((env["session_id"], int(env["window"]), " ".join(f["text"] for f in env["facts"][:5])))

    rt.on_output = on_output
    producer = threading.Thread(target=clients.run, daemon=True)
    level.begun = time.monotonic()
    producer.start()
    while len(level.latencies) < envelopes:
        if rt.run_until_idle(max_records=50) == 0:
            wake.wait(0.002)
            wake.clear()
    level.ended = time.monotonic()
    level.facts = clients.docs * DOC_FACTS
    clients.stop.set()
    producer.join()
    rt.run_until_idle()  # the last reports and requests in flight; their envelopes are not counted
    rt.on_output = None
    return level


def flat_baseline(fabric: Fabric, pool: list[Session], budget: int) -> list[float]:
    """The engine's top-K: the index's kept query results (vectors.edge) are dropped before each."""
    out = []
    now = time.time()
    inner = getattr(fabric.vectors, "inner", fabric.vectors)  # the runtime wraps the index
    results = getattr(inner, "_results", {})
    for i in range(200):
        q = pool[i % len(pool)].query
        results.clear()
        t = time.perf_counter()
        fabric.vectors.search(q, budget, now)
        out.append((time.perf_counter() - t) * 1000)
    results.clear()
    return out


def sweep(args: argparse.Namespace) -> int:
    sizes = [int(x) for x in args.sizes.split(",")]
    levels = [int(x) for x in args.sessions.split(",")]
    held: dict[int, int] = {}
    print(
        f"sweep: sessions of {args.windows} windows, think {args.think} s (x0.5-1.5), fact_budget {args.budget}, "
        f"{args.envelopes} envelopes per level after {WARMUP}, target p99 < {args.target} ms; "
        f"concurrent ingest {args.ingest_rate:g} facts/s; "
        f"{os.cpu_count()} cores",
        flush=True,
    )
    print(
        f"{'facts':>7} {'sessions':>8} {'env/s':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'flat p50':>8} "
        f"{'flat p99':>8} {'p50/flat':>8} {'p99/flat':>8} {'ingest/s':>8} {'load':>5}",
        flush=True,
    )
    for n in sizes:
        with prepared(n, 7, "auto", False, args.reuse_fabric) as (tmp, corpus, _how):
            settings = Settings(data_dir=tmp, embedder=f"precomputed:{MODEL}", batch_size=args.batch_size)
            rt = open_runtime(settings)
            fabric, log_ = rt.fabric, rt.log
            rt.run_until_idle()
            threads.limit_blas(load_settings({}).blas_threads)  # as `crp-stream run` does
            heap.settle()  # as `crp-stream run` and the Kafka worker do at start-up
            pool = make_sessions(corpus, 64, 3, 11)
            # Every pool session once: caches hold the working set, as in a worker that has run a while.
            run_level(rt, settings, pool, args, 4, len(pool) * args.windows, f"warm{n}")
            held[n] = 0
            for count in levels:
                lv = run_level(rt, settings, pool, args, count, args.envelopes, f"s{n}-{count}", corpus)
                flat = flat_baseline(fabric, pool, args.budget)
                p50, p99 = statistics.median(lv.latencies), percentile(lv.latencies, 99)
                f50, f99 = statistics.median(flat), percentile(flat, 99)
                rate = len(lv.latencies) / max(lv.ended - lv.started, 1e-9)
                print(
                    f"{n:>7} {count:>8} {rate:>6.1f} {p50:>7.1f} {p99:>7.1f} {max(lv.latencies):>7.1f} {f50:>8.2f} "
                    f"{f99:>8.2f} {p50 / f50:>8.1f} {p99 / f99:>8.1f} "
                    f"{lv.facts / max(lv.ended - lv.begun, 1e-9):>8.0f} {os.getloadavg()[0]:>5.1f}",
                    flush=True,
                )
                if p99 >= args.target:
                    break
                held[n] = count
            for name in ("facts", "graph"):  # (an older crp_stream has no fact cache)
                c = getattr(fabric, name, None)
                if c is not None:
                    print(
                        f"        {name} cache: {len(c):,} facts, hit rate {c.hits / max(1, c.hits + c.misses):.0%}",
                        flush=True,
                    )
            log_.close()
            fabric.close()
    print(
        f"held with envelope p99 < {args.target:.0f} ms: "
        + "; ".join(f"{n:,} facts: {s} sessions" if s else f"{n:,} facts: not even 1 session" for n, s in held.items())
    )
    ok = [n for n, s in held.items() if s]
    print(f"largest fabric held (1 session or more): {max(ok):,} facts" if ok else "no fabric size held")
    return 0
