"""Ingest throughput: facts/s through the real pipeline with precomputed 384-d vectors.

For each backend (SQLite, and PostgreSQL when --postgres URL is given) and size, publish documents of
--facts-per-doc facts to the embedded log and run the embedded runtime until idle (ingest + arbiter +
every other handler, similarity edges included). The baseline, measured in the same run, is the bare
storage cost of the same facts: one bulk SQL insert plus one qdrant-edge upsert, no pipeline.
Also times one batch of the default embedder.

- ``--in-fabric N``: before the timed ingest, N facts of the same clusters are written straight into
  the fabric (``ops/bench/preload.py``: rows, vectors, the ingest rule's edges), so the timed documents
  land in a fabric of N facts (e.g. 100k). The baseline inserts the
  same timed facts into a fabric of N facts written the same way. ``--preload-cache DIR`` keeps that
  fabric (SQLite) and copies it on later runs.
- ``--texts template`` (default): every fact reads "fact N of the benchmark corpus": any two
  neighbours differ in one number, so every pair is a near-copy the arbiter's token alignment must
  read (the worst case for it). ``--texts varied``: distinct sentences of 8-16 words drawn from a
  fixed vocabulary (seeded), which share no template, as most real sentences.

- ``--qdrant URL``: every backend also with its vectors on that Qdrant server (``ops/qdrant start``;
  ``http://HOST:6333`` or ``grpc://HOST:6334``) beside the embedded qdrant-edge, pipeline and baseline
  alike, each on a new collection dropped afterwards (``--preload-cache`` serves qdrant-edge only).

    .venv/bin/python -m ops.bench.ingest --sizes 10000 100000 [--postgres postgresql+psycopg://...]
    .venv/bin/python -m ops.bench.ingest --sizes 10000 --in-fabric 100000 --texts varied
    .venv/bin/python -m ops.bench.ingest --sizes 10000 --qdrant http://127.0.0.1:6333

``--repeats R``: R pipeline and baseline runs, alternating (a load spike hits both); the medians are
printed, with the range of the runs' rates and ratios (on the 2-core development machine, runs of one
commit spread by about ±10%).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from crp_stream.config import Settings
from crp_stream.fabric.vectors.port import VectorItem
from crp_stream.processors.batch_edges import batch_neighbours
from crp_stream.runtime.embedded import open_fabric, open_runtime
from crp_stream.runtime.embedded.log import Append
from ops.bench._common import drop_collection, server_collection
from ops.bench.preload import Corpus, write_direct

DIM = 384
MODEL = "bench-384"


def clustered(n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors around ``max(8, n // 200)`` centres, and the centre of each."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(8, n // 200), DIM))
    label = rng.integers(0, len(centres), n)
    v = centres[label] + 0.6 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32), label


_VOCAB = tuple(
    " ".join(
        (
            "river city council school engine market garden museum station bridge valley tower harbour library",
            "festival company village forest island temple theatre airport province stadium castle railway",
            "factory orchestra hospital mountain lake canal palace church university airline newspaper",
            "founded built opened hosted joined reported moved played designed elected named produced",
            "north south eastern western old new small large ancient modern famous local national regional",
            "in on at by for with from after before during near since",
        )
    ).split()
)


def fact_texts(n: int, kind: str, start: int = 0, seed: int = 11) -> list[str]:
    """The facts' texts (``--texts``): one template with a number, or varied sentences."""
    if kind == "template":
        return [f"fact {start + i} of the benchmark corpus" for i in range(n)]
    rng = np.random.default_rng(seed + start)
    lengths = rng.integers(8, 17, n)
    words = rng.integers(0, len(_VOCAB), int(lengths.sum()))
    out, pos = [], 0
    for i, k in enumerate(lengths.tolist()):
        out.append(" ".join(_VOCAB[w] for w in words[pos : pos + k]).capitalize() + f" ({start + i}).")
        pos += k
    return out


def documents(vecs: np.ndarray, per_doc: int, texts: list[str], prefix: str = "doc-") -> list[bytes]:
    out = []
    for d in range(0, len(vecs), per_doc):
        facts = [
            {"text": texts[d + i], "embedding": [round(float(x), 6) for x in v]}
            for i, v in enumerate(vecs[d : d + per_doc])
        ]
        out.append(
            json.dumps(
                {
                    "event_id": f"bench-{d}",
                    "source": f"src-{d % 7}",
                    "source_type": "official",
                    "document_id": f"{prefix}{d}",
                    "embedding_model": MODEL,
                    "facts": facts,
                }
            ).encode()
        )
    return out


def preload(settings: Settings, corpus: Corpus | None, cache: Path | None = None, source: str = "bench") -> None:
    """Write ``corpus`` straight into the fabric (then close it: the timed run opens it as a restarted
    worker would, caches built from what is there). With ``cache`` (SQLite only), a fabric written
    once is copied from there instead: at 100k the direct write takes minutes, the copy seconds."""
    if corpus is None:
        return
    if cache is not None and settings.database_url is None and settings.qdrant is None:
        if not cache.exists():
            tmp = cache.with_name(cache.name + ".partial")
            shutil.rmtree(tmp, ignore_errors=True)
            preload(replace(settings, data_dir=tmp), corpus, source=source)
            tmp.rename(cache)
        shutil.copytree(cache, settings.data_dir, dirs_exist_ok=True)
        return
    fabric = open_fabric(settings)
    try:
        write_direct(fabric, corpus, MODEL, source=source)
    finally:
        fabric.close()


def run_pipeline(settings: Settings, docs: list[bytes], n: int, before: int = 0) -> float:
    clock = [1_790_000_000_000_000]

    def tick() -> int:
        clock[0] += 1000
        return clock[0]

    rt = open_runtime(settings, clock=tick)
    fabric, log = rt.fabric, rt.log
    log.append([Append(settings.topic("crp.documents"), "k", raw) for raw in docs])
    t0 = time.perf_counter()
    rt.run_until_idle()
    elapsed = time.perf_counter() - t0
    with fabric.unit_of_work() as uow:
        stored = sum(c for _s, _st, c in uow.repo.fact_counts())
    assert stored == n + before, f"stored {stored} of {n} + {before}"
    fabric.close()
    log.close()
    return elapsed


def _bare_rows(n: int) -> list[dict[str, object]]:
    """The fact rows of the bare insert: the columns ingest writes, nothing derived."""
    return [
        {
            "fact_id": f"f{i}",
            "source": "s",
            "source_type": "official",
            "trust": 0.8,
            "importance": 1.0,
            "epoch_us": 1,
            "modified_at_us": 1,
            "ttl_s": None,
            "expires_at_us": None,
            "text": f"fact {i}",
            "subject": None,
            "attribute": None,
            "value": None,
            "unit": None,
            "claim_key": None,
            "status": "active",
            "content_hash": "h",
            "document_id": "d",
            "position": i,
            "origin_event_id": "e",
            "kind": "document",
            "extra": None,
        }
        for i in range(n)
    ]


def run_baseline(settings: Settings, vecs: np.ndarray) -> float:
    fabric = open_fabric(settings)
    rows = _bare_rows(len(vecs))
    items = [
        VectorItem(fact_id=f"f{i}", vector=v, status="active", expires_at=None, source="s") for i, v in enumerate(vecs)
    ]
    t0 = time.perf_counter()
    fabric.vectors.ensure(DIM)
    for i in range(0, len(items), 1000):
        fabric.vectors.upsert(items[i : i + 1000])
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts(rows)  # type: ignore[arg-type]
    fabric.vectors.flush()
    elapsed = time.perf_counter() - t0
    fabric.close()
    return elapsed


FLOOR_PARTS = ("k-NN", "vectors", "rows", "edges", "commit")


def run_floor(settings: Settings, vecs: np.ndarray, per_doc: int, batch: int) -> tuple[float, dict[str, float]]:
    """What SPEC-025 §1.3 and the stores require of ingest and nothing else, in the pipeline's
    micro-batches of ``batch`` facts: each batch's K nearest neighbours (the pipeline's own
    ``batch_neighbours``: one ANN search of the fabric as it stood and one product within the batch),
    the vectors upserted (the embedded index and its ANN cache), the fact rows and the edge rows (both
    directions, none pruned) inserted, one commit. No arbiter, no log, no outputs, no K bound.
    Returns the seconds and their parts (``FLOOR_PARTS``)."""
    fabric = open_fabric(settings)
    fabric.vectors.ensure(DIM)
    fabric.vectors.ann()  # loaded as the pipeline's runtime loads it at start, outside the timing
    th = fabric.thresholds()
    rows = _bare_rows(len(vecs))
    items = [
        VectorItem(fact_id=f"f{i}", vector=v, status="active", expires_at=None, source="s") for i, v in enumerate(vecs)
    ]
    parts = dict.fromkeys(FLOOR_PARTS, 0.0)

    def timed(part: str, t: float) -> float:
        now = time.perf_counter()
        parts[part] += now - t
        return now

    t0 = time.perf_counter()
    for lo in range(0, len(items), batch):
        part = items[lo : lo + batch]
        t = time.perf_counter()
        owner = [i // per_doc for i in range(len(part))]
        edges = batch_neighbours(fabric.vectors, part, owner, th.edge_k, th.edge_threshold)
        t = timed("k-NN", t)
        fabric.vectors.upsert(part)
        t = timed("vectors", t)
        with fabric.unit_of_work() as uow:
            uow.repo.insert_facts(rows[lo : lo + batch])  # type: ignore[arg-type]
            t = timed("rows", t)
            uow.repo.add_directed_edges(sorted({(a, b, w) for a, b, w in edges} | {(b, a, w) for a, b, w in edges}))
            t = timed("edges", t)
        t = timed("commit", t)
    fabric.vectors.flush()
    timed("vectors", t)
    elapsed = time.perf_counter() - t0
    fabric.close()
    return elapsed, parts


def embedder_batch(batch: int) -> tuple[str, float]:
    from crp_stream.fabric.embedders.port import make_embedder

    emb = make_embedder("default")
    texts = [f"Kubernetes networking sentence number {i} about pods, services and DNS." for i in range(batch)]
    emb.embed(texts[:8])  # load the model outside the timing
    t0 = time.perf_counter()
    emb.embed(texts)
    return emb.model_id, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--facts-per-doc", type=int, default=100)
    ap.add_argument("--postgres", help="a PostgreSQL URL to a database the bench may fill")
    ap.add_argument("--embedder-batch", type=int, default=256)
    ap.add_argument("--in-fabric", type=int, default=0, metavar="N", help="facts already in the fabric")
    ap.add_argument("--texts", choices=("template", "varied"), default="template")
    ap.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="pipeline and baseline runs, alternating; medians printed, with the runs' spread",
    )
    ap.add_argument(
        "--preload-cache", type=Path, metavar="DIR", help="keep the --in-fabric fabric here and copy it (SQLite)"
    )
    ap.add_argument(
        "--preload-source",
        default="bench",
        metavar="NAME",
        help="source of the --in-fabric facts; src-0 is one the timed documents publish under, so each of "
        "its documents reads a source of N facts for its earlier facts",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also time the floor: only the k-NN, vectors, fact rows and edge rows ingest must write (SQLite)",
    )
    ap.add_argument(
        "--qdrant",
        metavar="URL",
        help="also run with the vectors on this Qdrant server (http://HOST:6333 or grpc://HOST:6334)",
    )
    args = ap.parse_args()
    databases = [("sqlite", None)] + ([("postgres", args.postgres)] if args.postgres else [])
    stores = [("edge", None)] + ([("qdrant", args.qdrant)] if args.qdrant else [])
    backends = [(f"{d}+{v}", url, server) for d, url in databases for v, server in stores]
    print(
        f"texts: {args.texts}; facts already in the fabric: {args.in_fabric:,} (source {args.preload_source}); "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'backend':<16} {'facts':>8} {'pipeline s':>11} {'facts/s':>9} {'baseline s':>11} {'ratio':>7}")
    for name, url, server in backends:
        for n in args.sizes:
            m = args.in_fabric
            allv, label = clustered(m + n)
            vecs = allv[m:]
            prefix = "doc-" if args.preload_source == "bench" else "new-doc-"  # never one a preloaded doc has
            docs = documents(vecs, args.facts_per_doc, fact_texts(n, args.texts, start=m), prefix)
            corpus = None
            if m:
                per = args.facts_per_doc
                corpus = Corpus(
                    allv[:m],
                    fact_texts(m, args.texts),
                    label[:m],
                    [np.arange(d, min(m, d + per)) for d in range(0, m, per)],
                )
            tag = "" if args.preload_source == "bench" else f"-{args.preload_source}"
            cached = args.preload_cache / f"fabric-{m}-{args.texts}{tag}" if args.preload_cache and m else None
            pipes: list[float] = []
            bases: list[float] = []
            floors: list[tuple[float, dict[str, float]]] = []
            floor_per_doc = args.facts_per_doc if args.floor else None
            for _ in range(args.repeats):  # alternating: a load spike hits both
                t_pipe, t_base, fl = _pair(
                    url, server, corpus, cached, args.preload_source, docs, vecs, n, m, floor_per_doc
                )
                pipes.append(t_pipe)
                bases.append(t_base)
                floors.extend([fl] if fl is not None else [])
            t_pipe, t_base = statistics.median(pipes), statistics.median(bases)
            spread = ""
            if len(pipes) > 1:
                rates = [n / t for t in pipes]
                ratios = [p / b for p, b in zip(pipes, bases, strict=True)]
                spread = f"   runs {min(rates):.0f}-{max(rates):.0f} facts/s, {min(ratios):.1f}-{max(ratios):.1f}x"
            print(
                f"{name:<16} {n:>8} {t_pipe:>11.2f} {n / t_pipe:>9.0f} {t_base:>11.2f} {t_pipe / t_base:>6.1f}x"
                + spread,
                flush=True,
            )
            if floors:
                _print_floor(n, floors, bases)
        print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)
    model, t = embedder_batch(args.embedder_batch)
    print(
        f"embedder {model}: one batch of {args.embedder_batch} sentences in {t * 1000:.0f} ms "
        f"({args.embedder_batch / t:.0f} sentences/s)"
    )


def _pair(
    url: str | None,
    server: str | None,
    corpus: Corpus | None,
    cached: Path | None,
    source: str,
    docs: list[bytes],
    vecs: np.ndarray,
    n: int,
    m: int,
    floor_per_doc: int | None = None,
) -> tuple[float, float, tuple[float, dict[str, float]] | None]:
    """One pipeline run and one baseline run, each on a fresh copy of the preloaded fabric; with
    ``floor_per_doc``, a floor run too (``run_floor``, SQLite and qdrant-edge only)."""
    collections = [server_collection(server, t) for t in ("pipeline", "baseline")] if server else [None] * 2
    floor = None
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b, tempfile.TemporaryDirectory() as c:
        s = Settings(data_dir=Path(a), embedder=f"precomputed:{MODEL}", database_url=url)
        if url:
            _reset_postgres(url)
        try:
            s = replace(s, qdrant=collections[0])
            preload(s, corpus, cached, source)
            t_pipe = run_pipeline(s, docs, n, m)
            if url:
                _reset_postgres(url)
            s = replace(s, data_dir=Path(b), qdrant=collections[1])
            preload(s, corpus, cached, source)
            t_base = run_baseline(s, vecs)
            if floor_per_doc is not None and url is None and server is None:
                s = replace(s, data_dir=Path(c), qdrant=None)
                preload(s, corpus, cached, source)
                batch = min(s.batch_size * floor_per_doc, s.batch_facts)  # the embedded runtime's batch
                floor = run_floor(s, vecs, floor_per_doc, batch)
        finally:
            for spec in filter(None, collections):
                drop_collection(spec)
    return t_pipe, t_base, floor


def _print_floor(n: int, floors: list[tuple[float, dict[str, float]]], bases: list[float]) -> None:
    """The floor's median, its ratio to the bare insert of the same repeat, and its parts."""
    times = [t for t, _p in floors]
    t = statistics.median(times)
    ratios = [f / b for f, b in zip(times, bases, strict=False)]
    parts = {k: statistics.median(p[k] for _t, p in floors) for k in FLOOR_PARTS}
    shown = ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
    print(
        f"{'  floor':<16} {n:>8} {t:>11.2f} {n / t:>9.0f} {'':>11} {statistics.median(ratios):>6.1f}x   ({shown})",
        flush=True,
    )


def _reset_postgres(url: str) -> None:
    from crp_stream.fabric.sql import db

    eng = db.make_engine(url)
    db.downgrade(eng)
    eng.dispose()


if __name__ == "__main__":
    main()
