"""Envelopes per second: window requests served as micro-batches against one by one, in one run.

    .venv/bin/python -m ops.bench.retrieval_batch                          # 10k facts, batches of 16
    .venv/bin/python -m ops.bench.retrieval_batch --size 2000 --sessions 16 --windows 2   # quick
    .venv/bin/python -m ops.bench.retrieval_batch --batch 64 --graph off
    .venv/bin/python -m ops.bench.retrieval_batch --qdrant http://127.0.0.1:6333   # vectors on a server

The fabric is ``retrieval_speed``'s (clustered random vectors, built once per commit and cached).
``--sessions`` sessions run ``--windows`` windows each, wave by wave: every session's window ``w``,
then every session's report of it. Each wave is served twice, by two sets of sessions with the same
queries at the same times: one request per unit of work (``dispatch.apply_record``), and
``--batch`` requests per unit of work (``dispatch.apply_each``: ``RetrievalHandler.handle_batch``).
The index's kept search results are dropped before each pass of a wave, so neither finds the
other's; an untimed first window of every session fills the graph and fact caches, and the passes
alternate which goes first. Both passes must serve the same facts; the ratio of their envelopes per second is the
figure to read (the machine may be shared: compare ratios of one run, not absolute figures).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as crp_stream/__init__.py does; before numpy loads

import argparse
import json
import time
from typing import Any

from crp_stream.config import Settings, load_settings
from crp_stream.fabric.fabric import Fabric
from crp_stream.processors.base import Output, Record
from crp_stream.processors.dispatch import apply_each, apply_record
from crp_stream.processors.retrieval import RetrievalHandler
from crp_stream.runtime import heap, threads
from crp_stream.runtime.embedded import open_fabric
from ops.bench._common import T0_US, code_version, on_server, vec
from ops.bench.retrieval_speed import MODEL, Session, make_sessions, prepared


def _forget_kept(fabric: Fabric) -> None:
    """Drop the index's kept query results (exact and ANN): each pass searches for itself."""
    ann = getattr(fabric.vectors, "_ann", None)
    for kept in (getattr(fabric.vectors, "_results", None), getattr(ann, "kept", None)):
        if kept is not None:
            kept.clear()


class Waves:
    """One set of sessions, served wave by wave, one request or ``batch`` requests per unit of work."""

    def __init__(self, fabric: Fabric, sessions: list[Session], prefix: str, batch: int, budget: int, graph: str):
        self.fabric, self.sessions, self.prefix = fabric, sessions, prefix
        self.batch, self.budget, self.graph = batch, budget, graph
        self.handler = RetrievalHandler()
        self.handler.bind(fabric)
        self.offset = 0
        self.seconds = 0.0
        self.served = 0
        self.envelopes: dict[tuple[int, int], dict[str, Any]] = {}  # (session, window) -> envelope

    def _record(self, topic: str, key: str, ts: int, value: dict[str, Any]) -> Record:
        self.offset += 1
        return Record(topic, 0, self.offset, key, json.dumps(value, separators=(",", ":")).encode(), ts)

    def request(self, i: int, s: Session, w: int, windows: int) -> Record:
        req: dict[str, Any] = {
            "request_id": f"{self.prefix}{i}-w{w}",
            "session_id": f"{self.prefix}{i}",
            "window": w,
            "query": {"text": f"Explain topic {s.topic}", "embedding": vec(s.query)},
            "fact_budget": self.budget,
            "max_windows": windows,
            "embedding_model": MODEL,
            "policy": {"graph_retrieval": self.graph},
        }
        if w == 1:
            req["sub_queries"] = [
                {"id": f"sq{j}", "text": f"area {s.subs[j]} of topic {s.topic}", "embedding": vec(v)}
                for j, v in enumerate(s.sub_vecs)
            ]
        return self._record("crp.window.requests", req["session_id"], T0_US + 10**9 * (w + 1) + 1_000 * i, req)

    def wave(self, w: int, windows: int) -> None:
        """Window ``w`` of every session (timed), then its reports (not timed)."""
        live = [(i, s) for i, s in enumerate(self.sessions) if (i, w - 1) in self.envelopes or w == 1]
        records = [self.request(i, s, w, windows) for i, s in live]
        _forget_kept(self.fabric)
        outs: list[list[Output]] = []
        t = time.perf_counter()
        for start in range(0, len(records), self.batch):
            part = records[start : start + self.batch]
            with self.fabric.unit_of_work() as uow:
                if self.batch == 1:
                    outs.append(apply_record(self.handler, part[0], uow))
                else:
                    outs.extend(apply_each(self.handler, part, uow))
        self.seconds += time.perf_counter() - t
        reports = []
        for (i, _s), each in zip(live, outs, strict=True):
            env = next((json.loads(o.value) for o in each if o.topic == "crp.envelopes"), None)
            if env is None or env.get("closing"):
                continue
            self.served += 1
            self.envelopes[(i, w)] = env
            rep = {
                "session_id": f"{self.prefix}{i}",
                "window": w,
                "addressed": [{"id": f"sq{w - 1}", "depth": 0.8}] if w - 1 < len(self.sessions[i].subs) else [],
                "output_text": " ".join(f["text"] for f in env["facts"][:5]),
                "completeness": 0.2,
            }
            reports.append(
                self._record("crp.window.reports", rep["session_id"], T0_US + 10**9 * (w + 1) + 500_000, rep)
            )
        with self.fabric.unit_of_work() as uow:
            for r in reports:
                apply_record(self.handler, r, uow)


def bench(args: argparse.Namespace) -> None:
    with (
        prepared(args.size, args.seed, "auto", args.rebuild, args.reuse_fabric) as (tmp, corpus, how),
        on_server(
            Settings(data_dir=tmp, embedder=f"precomputed:{MODEL}", ann_min_points=args.ann_min_points),
            args.qdrant,
            f"batch{args.size}",
        ) as settings,
    ):
        fabric = open_fabric(settings)
        fabric.warm()
        search = "ANN cache" if fabric.vectors.ann() is not None else "exact search"
        print(f"{args.size:,} facts ({how}); {search}; load average {os.getloadavg()[0]:.1f}", flush=True)
        sessions = make_sessions(corpus, args.sessions, args.sub_queries, args.seed + 1)
        threads.limit_blas(load_settings({}).blas_threads)  # as `crp-stream run` does
        heap.settle()
        Waves(fabric, sessions, "warm-", args.batch, args.budget, args.graph).wave(1, 1)  # caches filled, untimed
        one = Waves(fabric, sessions, "one-", 1, args.budget, args.graph)
        many = Waves(fabric, sessions, "many-", args.batch, args.budget, args.graph)
        for w in range(1, args.windows + 1):
            first, second = (one, many) if w % 2 else (many, one)  # alternate: neither always runs warm
            first.wave(w, args.windows)
            second.wave(w, args.windows)
        differ = [k for k, e in one.envelopes.items() if _facts(e) != _facts(many.envelopes.get(k))]
        rate_one, rate_many = one.served / one.seconds, many.served / many.seconds
        print(f"  one by one:       {one.served} envelopes, {rate_one:,.1f} envelopes/s")
        print(f"  batches of {args.batch:<4}   {many.served} envelopes, {rate_many:,.1f} envelopes/s")
        print(f"  ratio batched / one by one: {rate_many / rate_one:.2f}")
        if differ or one.served != many.served:
            raise SystemExit(f"batched serving gave other facts than one by one: {differ[:5]}")
        fabric.close()


def _facts(env: dict[str, Any] | None) -> list[str]:
    return [f["fact_id"] for f in env["facts"]] if env else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=10_000, help="facts in the fabric")
    ap.add_argument("--sessions", type=int, default=64, help="sessions per pass")
    ap.add_argument("--windows", type=int, default=3, help="windows per session")
    ap.add_argument("--batch", type=int, default=16, help="requests per unit of work in the batched pass")
    ap.add_argument("--budget", type=int, default=35, help="fact_budget of every request")
    ap.add_argument("--sub-queries", type=int, default=3)
    ap.add_argument("--graph", choices=("on", "off"), default="on", help="graph_retrieval of every request")
    ap.add_argument("--ann-min-points", type=int, default=Settings().ann_min_points)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rebuild", action="store_true", help="rebuild the fabric even if a built copy is cached")
    ap.add_argument("--reuse-fabric", action="store_true", help="reuse any commit's cached build")
    ap.add_argument("--qdrant", metavar="URL", help="the vectors on this Qdrant server (http://H:6333, grpc://H:6334)")
    a = ap.parse_args()
    print(f"crp-stream {code_version()}")
    bench(a)


if __name__ == "__main__":
    main()
