"""Envelope assembly latency, in process (no broker), against flat top-K from the same index.

    .venv/bin/python -m ops.bench.retrieval_speed                        # 10k and 100k facts, 200 requests
    .venv/bin/python -m ops.bench.retrieval_speed --sizes 2000 --requests 50   # quick
    .venv/bin/python -m ops.bench.retrieval_speed --sizes 100000 --profile     # + cProfile of CDGR
    .venv/bin/python -m ops.bench.retrieval_speed --qdrant http://127.0.0.1:6333   # vectors on a server

The fabric holds clustered random 384-d unit vectors: topics of 500 facts, each made of 10 sub-topics
of ~50 facts (same sub-topic cosine ~0.67, same topic ~0.42, other topics ~0), in documents of 50
facts. It is built with ``--embedder precomputed:bench`` (no calibration, so the seeds' thresholds
apply: relevance gate 0.55, edges 0.60, contradictions 0.85):

- ``--ingest runtime``: every document goes through the embedded runtime (ingest + arbiter handlers),
  as it ships. Default up to 20k facts.
- ``--ingest direct``: rows, vectors and similarity edges written straight through the fabric's
  ``Repository`` and ``VectorIndex`` (the ingest path runs one exact neighbour query per fact, too
  slow for 100k in minutes). Edges follow the ingest rule (each fact: its top ``edge_k`` facts with
  cosine >= ``edge_threshold`` among the facts present when its document arrived), computed with numpy
  within each topic (cross-topic cosines never reach the threshold). Default above 20k facts.
- ``--ingest direct-nosim``: the same without similarity edges (adjacency edges only): the 1M-fact
  fabric, whose ~40M similarity edge rows did not finish writing in 65 min here; CDGR then walks adjacency only.

Then ``--requests`` window requests (sessions of 5 windows: query near a topic, ``--sub-queries``
sub-queries near three of its sub-topics, ``fact_budget`` 35; a report between windows addresses one
sub-query and quotes 5 envelope facts, so later windows carry coverage and an n-gram blacklist) run
through ``dispatch.apply_record`` in a unit of work (the commit is not timed), once with
``graph_retrieval: off`` (CDR) and once ``on`` (CDGR, max_hops 2) with the fabric's graph cache warm
from earlier requests (as in a long-running worker), and once more ``on`` with the cache cleared
before each request (every edge read from the store: the first request after another process
ingested). Interleaved with every request, in the same run: flat top-K =
``vectors.search(query, k=fact_budget)``, and flat top-K plus fetching the facts' rows.

``--qdrant URL`` (``http://HOST:6333`` or ``grpc://HOST:6334``, e.g. ``ops/qdrant start``): the same
built fabric with its vectors copied into a new collection of that Qdrant server (dropped afterwards),
so every vector read goes to the server (the in-process ANN cache serves qdrant-edge only).

Ratios and added milliseconds are against flat top-K measured in the same run. The machine is shared:
compare the ratios of one run rather than absolute figures across runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as crp_stream/__init__.py does; before numpy loads

import argparse
import cProfile
import io
import pstats
import re
import shutil
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crp_stream import events
from crp_stream.config import Settings, load_settings
from crp_stream.core import cdgr, graph_rank
from crp_stream.fabric.caches.fact_cache import FactCache
from crp_stream.fabric.caches.graph import GraphCache
from crp_stream.fabric.fabric import Fabric
from crp_stream.fabric.sql.repository import Repository
from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.port import VectorIndex
from crp_stream.fabric.vectors.qdrant import QdrantVectorIndex
from crp_stream.processors import assembly, envelope, graph_select, retrieval
from crp_stream.processors.base import Record
from crp_stream.processors.dispatch import apply_record
from crp_stream.processors.retrieval import RetrievalHandler
from crp_stream.runtime import heap, threads
from crp_stream.runtime.embedded import open_fabric
from ops.bench import preload
from ops.bench._common import CACHE_DIR, T0_US, Pipeline, code_version, on_server, percentile, scratch, vec
from ops.bench.preload import write_direct

MODEL = "bench"
# what the requests are timed with: wall time, or (``--clock cpu``) this process's CPU time, which a
# loaded machine inflates far less (no waiting for a core), to compare two commits under load
CLOCK: list[Callable[[], float]] = [time.perf_counter]
CORPUS_VERSION = 2  # bump when make_corpus or the build changes: cached built fabrics are keyed by it
DIM = 384
TOPIC_SIZE = 500
SUBTOPICS = 10
DOC_FACTS = 50
ALPHA, BETA = 0.65, 0.50  # weights of the topic and sub-topic directions; noise weight varies per fact
_VOCABULARY = (
    "latency cache shard replica quorum leader follower lease token bucket window budget "
    "index vector graph edge anchor bridge fabric stream offset commit snapshot ledger "
    "policy tenant region zone node pod service gateway proxy route header cookie session "
    "schema table column tuple batch queue topic partition consumer producer broker"
)
WORDS = _VOCABULARY.split()


# --- the corpus ------------------------------------------------------------------------------------


@dataclass
class Corpus:
    vecs: np.ndarray  # (n, DIM) float32, unit rows
    topic: np.ndarray  # (n,) topic of each fact
    sub: np.ndarray  # (n,) sub-topic (0..SUBTOPICS-1) of each fact
    texts: list[str]
    docs: list[np.ndarray]  # fact indices of each document, in publication order
    topic_dirs: np.ndarray
    sub_dirs: np.ndarray  # (topics, SUBTOPICS, DIM)


def unit_rows(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)


def make_corpus(n: int, seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    topics = max(1, n // TOPIC_SIZE)
    topic_dirs = unit_rows(rng.standard_normal((topics, DIM)))
    sub_dirs = unit_rows(rng.standard_normal((topics, SUBTOPICS, DIM)))
    topic = np.arange(n) % topics
    sub = (np.arange(n) // topics) % SUBTOPICS
    gamma = np.sqrt(rng.uniform(0.20, 0.45, n))[:, None]
    noise = unit_rows(rng.standard_normal((n, DIM)))
    vecs = unit_rows(ALPHA * topic_dirs[topic] + BETA * sub_dirs[topic, sub] + gamma * noise)
    words = rng.integers(0, len(WORDS), (n, 8))
    texts = [
        f"Topic {topic[i]} area {sub[i]}: record {i} says the {' '.join(WORDS[w] for w in words[i])}." for i in range(n)
    ]
    # Documents of DOC_FACTS facts of one topic (sub-topics mixed), published in random topic order.
    docs: list[np.ndarray] = []
    for t in range(topics):
        members = rng.permutation(np.flatnonzero(topic == t))
        docs.extend(members[i : i + DOC_FACTS] for i in range(0, len(members), DOC_FACTS))
    order = rng.permutation(len(docs))
    return Corpus(vecs, topic, sub, texts, [docs[i] for i in order], topic_dirs, sub_dirs)


# --- building the fabric ---------------------------------------------------------------------------


def build_runtime(corpus: Corpus, workdir: Path) -> Fabric:
    pipe = Pipeline(workdir, embedder=f"precomputed:{MODEL}")
    for d, members in enumerate(corpus.docs):
        doc = {
            "event_id": f"doc-{d}",
            "source": "bench",
            "source_type": "official",
            "document_id": f"doc-{d}",
            "embedding_model": MODEL,
            "facts": [{"text": corpus.texts[i], "embedding": vec(corpus.vecs[i])} for i in members],
        }
        pipe.publish("crp.documents", "bench", doc)
    pipe.log.close()
    return pipe.fabric


def build_direct(corpus: Corpus, workdir: Path, similarity: bool = True) -> Fabric:
    """Rows, vectors and edges written straight through the fabric's ports (``ops/bench/preload.py``),
    neighbours searched within each topic (cross-topic cosines never reach the threshold)."""
    fabric = open_fabric(Settings(data_dir=workdir, embedder=f"precomputed:{MODEL}"))
    write_direct(
        fabric, preload.Corpus(corpus.vecs, corpus.texts, corpus.topic, corpus.docs), MODEL, similarity=similarity
    )
    return fabric


# --- timing ----------------------------------------------------------------------------------------


class Stages:
    """Wall time per pipeline stage, by wrapping module attributes around each timed request."""

    TARGETS: tuple[tuple[Any, str, str], ...] = (
        (assembly, "gather", "gather"),
        (VectorIndex, "search_many", "  top-K probes (vectors.search_many)"),
        (VectorIndex, "search_union", "  top-K probes (vectors.search_union)"),
        (FactCache, "columns", "  candidate rows and vectors (fact cache)"),
        (Repository, "fact_statuses", "    fact statuses (SQL)"),
        (Repository, "fact_rows", "    rows of cache misses (SQL)"),
        (EdgeVectorIndex, "get_vectors", "    vectors of cache misses"),
        (QdrantVectorIndex, "get_vectors", "    vectors of cache misses (Qdrant server)"),
        (assembly, "_extend", "  CDR scoring (_extend)"),
        (assembly, "collapse_duplicates", "collapse duplicates"),
        (graph_select, "choose", "CDGR selection (graph_select.choose)"),
        (graph_select, "walk", "  typed-graph walk + bridge values"),
        (Repository, "edge_rows", "    graph edges of cache misses (SQL)"),
        (graph_rank, "walk_levels", "    walk levels (max_hops)"),
        (cdgr, "bridge_values_edges", "    bridge values (every reached fact)"),
        (assembly, "_append_outside", "  reached facts outside the candidates"),
        (cdgr, "connector_score", "  connector scores (SPEC-025 §2.5)"),
        (assembly, "_arbitrate", "conflict arbitration"),
        (envelope, "build", "envelope build"),
        (events, "encode", "envelope encode"),
        (retrieval, "envelope_bytes", "envelope encode (envelope_bytes)"),
        (RetrievalHandler, "_save", "session state save"),
    )

    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self._targets = [(o, n, lbl) for o, n, lbl in self.TARGETS if hasattr(o, n)]  # the code moves

    @contextmanager
    def active(self) -> Iterator[None]:
        saved = []
        for owner, name, label in self._targets:
            fn = owner.__dict__.get(name, getattr(owner, name))
            saved.append((owner, name, fn))
            setattr(owner, name, self._wrap(getattr(owner, name), label))
        try:
            yield
        finally:
            for owner, name, fn in saved:
                setattr(owner, name, fn)

    def _wrap(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        total = self.total

        def timed(*args: Any, **kw: Any) -> Any:
            t = CLOCK[0]()
            try:
                return fn(*args, **kw)
            finally:
                total[label] += CLOCK[0]() - t

        return timed


@dataclass
class Session:
    topic: int
    subs: list[int]
    query: np.ndarray
    sub_vecs: list[np.ndarray]


def make_sessions(corpus: Corpus, count: int, n_sub: int, seed: int) -> list[Session]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        t = int(rng.integers(0, corpus.topic_dirs.shape[0]))
        subs = [int(s) for s in rng.choice(SUBTOPICS, size=min(n_sub, SUBTOPICS), replace=False)]
        q = unit_rows(corpus.topic_dirs[t] + 0.3 * unit_rows(rng.standard_normal(DIM)))
        sv = [
            unit_rows(
                ALPHA * corpus.topic_dirs[t] + BETA * corpus.sub_dirs[t, s] + 0.2 * unit_rows(rng.standard_normal(DIM))
            )
            for s in subs
        ]
        out.append(Session(t, subs, q, sv))
    return out


class Runner:
    def __init__(self, fabric: Fabric, budget: int, vary_query: bool = False):
        self.fabric = fabric
        self.budget = budget
        self.vary_query = vary_query
        self.cold_graph = GraphCache()
        self.handler = RetrievalHandler()
        self.handler.bind(fabric)
        self.offset = 0
        self.now = T0_US + 10**9  # well after the corpus
        self.lat: dict[str, list[float]] = defaultdict(list)
        self.facts_out: dict[str, list[int]] = defaultdict(list)
        self.connectors: dict[str, list[int]] = defaultdict(list)
        self.dump: Any = None  # a file: every envelope as it was emitted (to compare two commits)

    def _record(self, topic: str, key: str, value: dict[str, Any]) -> Record:
        import json

        self.offset += 1
        self.now += 1_000
        return Record(topic, 0, self.offset, key, json.dumps(value, separators=(",", ":")).encode(), self.now)

    def query(self, s: Session, window: int) -> np.ndarray:
        """The session's query; with ``vary_query`` nudged per window (a query never searched before,
        where the index keeps recent results: only the Residual Set probes repeat)."""
        if not self.vary_query:
            return s.query
        rng = np.random.default_rng([s.topic, *s.subs, window])
        return s.query + 0.01 * rng.standard_normal(s.query.shape[0]).astype(np.float32)

    def kept(self) -> list[dict[Any, Any]]:
        """The index's kept query results: the exact path's (vectors.edge) and the ANN cache's."""
        ann = getattr(self.fabric.vectors, "_ann", None)
        found = [getattr(self.fabric.vectors, "_results", None), getattr(ann, "kept", None)]
        return [k for k in found if k is not None]

    def forget_results(self) -> None:
        """Drop the index's kept query results: the baseline is the engine's top-K."""
        for results in self.kept():
            results.clear()

    def flat(self, q: np.ndarray) -> None:
        now_s = self.now / 1e6
        saved = [(results, dict(results)) for results in self.kept()]  # survive the baseline's searches
        with self.fabric.unit_of_work() as uow:
            self.forget_results()
            t = CLOCK[0]()
            hits = uow.vectors.search(q, self.budget, now_s)
            self.lat["flat top-K"].append(CLOCK[0]() - t)
            self.forget_results()
            t = CLOCK[0]()
            hits = uow.vectors.search(q, self.budget, now_s)
            uow.repo.facts_by_ids([h[0] for h in hits])
            self.lat["flat top-K + rows"].append(CLOCK[0]() - t)
        self.forget_results()
        for results, kept in saved:
            results.update(kept)

    def session(
        self, label: str, s: Session, sid: str, graph: bool, stages: Stages, windows: int = 5, cold: bool = False
    ) -> None:
        warm = self.fabric.graph
        if cold:  # a cache of its own, so the warm passes keep theirs
            self.fabric.graph = self.cold_graph
        try:
            self._session(label, s, sid, graph, stages, windows, cold)
        finally:
            self.fabric.graph = warm

    def _session(self, label: str, s: Session, sid: str, graph: bool, stages: Stages, windows: int, cold: bool) -> None:
        import json

        subs = [
            {"id": f"sq{j}", "text": f"area {s.subs[j]} of topic {s.topic}", "embedding": vec(v)}
            for j, v in enumerate(s.sub_vecs)
        ]
        self.forget_results()  # the passes reuse a session's vectors; a new session would bring new ones
        for w in range(1, windows + 1):
            req: dict[str, Any] = {
                "request_id": f"{sid}-w{w}",
                "session_id": sid,
                "window": w,
                "query": {"text": f"Explain topic {s.topic}", "embedding": vec(self.query(s, w))},
                "fact_budget": self.budget,
                "max_windows": windows,
                "embedding_model": MODEL,
                "policy": {"graph_retrieval": "on" if graph else "off"},
            }
            if w == 1:
                req["sub_queries"] = subs
            self.flat(self.query(s, w))
            if cold:  # as right after an ingest in another process: every edge read from the store
                self.cold_graph.clear()
                self.forget_results()
            rec = self._record("crp.window.requests", sid, req)
            with self.fabric.unit_of_work() as uow, stages.active():
                t = CLOCK[0]()
                outs = apply_record(self.handler, rec, uow, unwritten=True)  # as the embedded runtime on SQLite
                self.lat[label].append(CLOCK[0]() - t)
            env = next((json.loads(o.value) for o in outs if o.topic == "crp.envelopes"), None)
            if self.dump is not None:
                for o in outs:
                    self.dump.write(f"{label}\t{o.topic}\t{o.value.decode()}\n")
            if env is None:
                raise RuntimeError(f"{sid} window {w}: no envelope: {[o.value[:300] for o in outs]}")
            self.facts_out[label].append(len(env["facts"]))
            self.connectors[label].append(sum(f["role"] == "connector" for f in env["facts"]))
            addressed = [{"id": f"sq{w - 1}", "depth": 0.8}] if w - 1 < len(subs) else []
            rep = {
                "session_id": sid,
                "window": w,
                "addressed": addressed,
                "output_text": " ".join(f["text"] for f in env["facts"][:5]),
                "completeness": min(1.0, w / max(1, len(subs))),
            }
            with self.fabric.unit_of_work() as uow:
                done = apply_record(self.handler, self._record("crp.window.reports", sid, rep), uow)
            if self.dump is not None:
                for o in done:
                    self.dump.write(f"{label}\t{o.topic}\t{o.value.decode()}\n")
            if any(o.topic == "crp.envelopes" and json.loads(o.value).get("closing") for o in done):
                return  # the report ended the session (SPEC-024 §6): no further window is accepted


def report_size(n: int, runner: Runner, stages: dict[str, Stages], passes: list[str]) -> None:
    ms = {k: [x * 1e3 for x in v] for k, v in runner.lat.items()}
    flat = ms["flat top-K"]
    f50, f99 = statistics.median(flat), percentile(flat, 99)
    print(f"\n{n:,} facts, fact_budget {runner.budget}, {len(flat)} flat queries (p50 {f50:.2f} ms, p99 {f99:.2f} ms):")
    print(
        f"  {'':<34}{'p50 ms':>9}{'p99 ms':>9}{'mean':>9}{'p50/flat':>10}{'p99/flat':>10}{'+p50 ms':>9}"
        f"{'+p99 ms':>9}{'facts':>7}{'conn':>6}"
    )
    for name in ["flat top-K", "flat top-K + rows", *passes]:
        xs = ms[name]
        p50, p99 = statistics.median(xs), percentile(xs, 99)
        facts = (
            f"{statistics.mean(runner.facts_out[name]):7.1f}{statistics.mean(runner.connectors[name]):6.1f}"
            if name in runner.facts_out
            else ""
        )
        print(
            f"  {name:<34}{p50:9.2f}{p99:9.2f}{statistics.mean(xs):9.2f}{p50 / f50:10.1f}{p99 / f99:10.1f}"
            f"{p50 - f50:9.2f}{p99 - f99:9.2f}{facts}"
        )
    for name in passes:
        total = sum(runner.lat[name])
        count = len(runner.lat[name])
        print(f"  where '{name}' spends its time (mean ms per request, share):")
        for label, v in stages[name].total.items():
            print(f"    {label:<36}{1e3 * v / count:9.2f} ms {100 * v / total:5.0f}%")


@contextmanager
def prepared(n: int, seed: int, ingest: str, rebuild: bool, reuse: bool = False) -> Iterator[tuple[Path, Corpus, str]]:
    """A scratch copy of the built fabric of ``n`` facts (built once per commit and cached; ``reuse``:
    any commit's build, for runs where ingest is unchanged), its corpus, and how it was obtained."""
    corpus = make_corpus(n, seed)
    mode = ingest if ingest != "auto" else ("runtime" if n <= 20_000 else "direct")
    with scratch("crp-bench-speed-") as tmp:
        head = re.sub(r"\W+", "", code_version().split()[1])  # another commit builds its own fabric
        stem = f"speed-fabric-{n}-{seed}-{mode}-v{CORPUS_VERSION}-"
        cached = CACHE_DIR / (stem + head)
        if reuse and not cached.is_dir():
            built = sorted(
                (p for p in CACHE_DIR.glob(stem + "*") if p.is_dir() and p.suffix != ".tmp"),
                key=lambda p: p.stat().st_mtime,
            )
            cached = built[-1] if built else cached
        if cached.is_dir() and not rebuild:
            shutil.copytree(cached, tmp, dirs_exist_ok=True)
            how = f"reused from {cached} (built by {mode} ingest; --rebuild to rebuild)"
        else:
            cached = CACHE_DIR / (stem + head)
            t = time.perf_counter()
            built_fabric = (
                build_runtime(corpus, tmp)
                if mode == "runtime"
                else build_direct(corpus, tmp, similarity=mode == "direct")
            )
            took = time.perf_counter() - t
            built_fabric.close()
            how = f"built by {mode} ingest in {took:.0f} s ({n / took:,.0f} facts/s)"
            shutil.rmtree(cached, ignore_errors=True)
            shutil.copytree(tmp, cached.with_suffix(".tmp"), dirs_exist_ok=True)
            cached.with_suffix(".tmp").rename(cached)
        yield tmp, corpus, how
        snap = "vectors.ann"  # the ANN cache's snapshot (Settings.ann_snapshot_dir): the next run reads it
        if (tmp / snap).is_dir() and not (cached / snap).is_dir():
            shutil.rmtree(cached / f"{snap}.tmp", ignore_errors=True)
            shutil.copytree(tmp / snap, cached / f"{snap}.tmp")
            (cached / f"{snap}.tmp").rename(cached / snap)


def rss_mib() -> float:
    """Resident memory of this process (fabric, caches, ANN index), from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def bench(
    n: int,
    requests: int,
    budget: int,
    n_sub: int,
    ingest: str,
    cold: bool,
    profile: bool,
    seed: int,
    rebuild: bool,
    reuse: bool,
    vary_query: bool,
    ann_min: int,
    dump: str | None = None,
    qdrant: str | None = None,
) -> None:
    with (
        prepared(n, seed, ingest, rebuild, reuse) as (tmp, corpus, how),
        on_server(
            Settings(data_dir=tmp, embedder=f"precomputed:{MODEL}", ann_min_points=ann_min), qdrant, f"speed{n}"
        ) as settings,
    ):
        fabric = open_fabric(settings)
        t0 = time.perf_counter()
        fabric.warm()  # as both runtimes do at start-up: the ANN cache, the similarity graph
        ann = fabric.vectors.ann()
        took = time.perf_counter() - t0
        print(f"caches filled at start-up in {took:.1f} s: graph cache {len(fabric.graph):,} facts", flush=True)
        if ann is not None:
            print(f"ANN cache ~{ann.memory_bytes() / 2**20:.0f} MiB; candidates come from it", flush=True)
        else:
            print("ANN cache off (fabric below ann_min_points, or vectors on a server): exact search", flush=True)
        with fabric.unit_of_work() as uow:
            edges = uow.repo.edge_count()
        print(
            f"{n:,} facts in {len(corpus.docs)} documents, {edges:,} similarity edges; {how}; "
            f"{fabric.thresholds()}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
            flush=True,
        )
        sessions = make_sessions(corpus, max(1, requests // 5), n_sub, seed + 1)
        runner = Runner(fabric, budget, vary_query)
        if dump:
            runner.dump = open(f"{dump}.{n}", "w")  # noqa: SIM115  # closed after the passes
        threads.limit_blas(load_settings({}).blas_threads)  # as `crp-stream run` does
        heap.settle()  # as `crp-stream run` and the Kafka worker do at start-up
        passes = ["envelope, graph off (CDR)", "envelope, graph on (CDGR)", "envelope, CDGR, cold graph cache"]
        if not cold:
            passes.pop()
        stages = {p: Stages() for p in passes}
        prof = cProfile.Profile() if profile else None
        for i, s in enumerate(sessions):
            runner.session(passes[0], s, f"off-{i}", False, stages[passes[0]])
            if prof:
                prof.enable()
            runner.session(passes[1], s, f"on-{i}", True, stages[passes[1]])
            if prof:
                prof.disable()
            if cold:
                runner.session(passes[2], s, f"cold-{i}", True, stages[passes[2]], cold=True)
        if runner.dump is not None:
            runner.dump.close()
        report_size(n, runner, stages, passes)
        print(f"  load average after: {os.getloadavg()[0]:.1f}; RSS of this process {rss_mib():.0f} MiB")
        g = fabric.graph
        print(
            f"  graph cache after the run: {len(g):,} facts, hit rate {g.hits / max(1, g.hits + g.misses):.0%}, "
            f"{g.loads} SQL loads; fact cache {len(fabric.facts):,} facts, hit rate "
            f"{fabric.facts.hits / max(1, fabric.facts.hits + fabric.facts.misses):.0%}"
        )
        if prof:
            if os.environ.get("CRP_BENCH_PROFILE_OUT"):  # for pstats: callers, callees
                prof.dump_stats(os.environ["CRP_BENCH_PROFILE_OUT"])
            for key in ("cumulative", "tottime"):
                buf = io.StringIO()
                pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(45)
                text = buf.getvalue()
                print(f"\ncProfile of the graph-on pass at {n:,} facts, by {key}:")
                print(text[text.index("   ncalls") :].rstrip())
        fabric.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated fact counts")
    ap.add_argument("--requests", type=int, default=200, help="window requests per pass (sessions of 5)")
    ap.add_argument("--budget", type=int, default=35, help="fact_budget of every request, and flat K")
    ap.add_argument("--sub-queries", type=int, default=3)
    ap.add_argument(
        "--ingest",
        choices=("auto", "runtime", "direct", "direct-nosim"),
        default="auto",
        help="direct-nosim: direct, without similarity edges (adjacency only; for 1M facts, whose ~40M "
        "similarity edge rows did not finish writing in 65 min here)",
    )
    ap.add_argument("--no-cold", action="store_true", help="skip the CDGR pass with a cold graph cache")
    ap.add_argument("--profile", action="store_true", help="cProfile the graph-on pass")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rebuild", action="store_true", help="rebuild the fabric even if a built copy is cached")
    ap.add_argument(
        "--reuse-fabric", action="store_true", help="reuse a fabric another commit built (when ingest is unchanged)"
    )
    ap.add_argument(
        "--vary-query",
        action="store_true",
        help="a new query vector every window (default: the session's query in every window)",
    )
    ap.add_argument(
        "--ann-min-points",
        type=int,
        default=Settings().ann_min_points,
        help="the ANN cache serves fabrics of at least this many facts (a huge value: exact search)",
    )
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="time requests by wall or CPU time")
    ap.add_argument("--dump-envelopes", metavar="PATH", help="write every output record to PATH.<size>")
    ap.add_argument("--qdrant", metavar="URL", help="the vectors on this Qdrant server (http://H:6333, grpc://H:6334)")
    a = ap.parse_args()
    CLOCK[0] = time.process_time if a.clock == "cpu" else time.perf_counter
    print(f"crp-stream {code_version()}; requests timed by {a.clock} clock")
    for n in (int(x) for x in a.sizes.split(",")):
        bench(
            n,
            a.requests,
            a.budget,
            a.sub_queries,
            a.ingest,
            not a.no_cold,
            a.profile,
            a.seed,
            a.rebuild,
            a.reuse_fabric,
            a.vary_query,
            a.ann_min_points,
            a.dump_envelopes,
            a.qdrant,
        )


if __name__ == "__main__":
    main()
