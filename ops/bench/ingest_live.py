"""Ingest with live embedding: what the pipeline adds on top of the model.

    .venv/bin/python -m ops.bench.ingest_live --paragraphs 600

Real text: the paragraphs of the HotpotQA dev questions in ``../shared/datasets/hotpotqa`` (one
titled document per paragraph, one fact per sentence, as ``retrieval_quality`` publishes them),
without vectors, so ingest embeds them with the default embedder (int8 ONNX MiniLM).

- **model alone** (the baseline, same run): the default embedder called on exactly what ingest
  embeds ("title: sentence"), one call per micro-batch of documents, as ingest calls it.
- **pipeline**: the same documents appended to the embedded log and run until idle through every
  handler (ingest, similarity edges, arbiter...), SQLite + qdrant-edge.

Overhead = pipeline time / model time - 1 (the aim: at most 10%). The two passes alternate
``--repeats`` times and the medians are printed, so a load spike hits both.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import statistics
import time
from pathlib import Path

from crp_stream.config import Settings
from crp_stream.fabric.embedders.port import make_embedder
from crp_stream.processors.doc_graph import embedding_text
from crp_stream.runtime.embedded import open_runtime
from crp_stream.runtime.embedded.log import Append
from ops.bench._common import DEFAULT_DATASETS, code_version, scratch

Doc = tuple[str, list[str]]


def paragraphs(datasets: Path, limit: int) -> list[Doc]:
    seen: set[str] = set()
    out: list[Doc] = []
    path = datasets / "hotpotqa" / "hotpotqa_dev_distractor_hard_100.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for title, sents in json.loads(line)["context"]:
            texts = [s.strip() for s in sents if s.strip()]
            if title in seen or not texts:
                continue
            seen.add(title)
            out.append((title, texts))
            if len(out) >= limit:
                return out
    return out


def model_alone(docs: list[Doc]) -> float:
    emb = make_embedder("default")
    emb.embed(["warm up"])  # the model loads outside the timing, as in a running worker
    per = Settings().batch_size  # one call per micro-batch of documents, as ingest calls it
    t0 = time.perf_counter()
    for i in range(0, len(docs), per):
        emb.embed([embedding_text(title, s) for title, texts in docs[i : i + per] for s in texts])
    return time.perf_counter() - t0


def pipeline(docs: list[Doc]) -> float:
    with scratch("crp-bench-live-") as tmp:
        clock = [1_790_000_000_000_000]

        def tick() -> int:
            clock[0] += 1000
            return clock[0]

        rt = open_runtime(Settings(data_dir=tmp, embedder="default"), clock=tick)
        rt.fabric.embedder.embed(["warm up"])
        raws = [
            json.dumps(
                {
                    "event_id": f"live-{d}",
                    "source": f"src-{d % 5}",
                    "source_type": "official",
                    "document_id": f"doc-{d}",
                    "title": title,
                    "facts": [{"text": s} for s in texts],
                }
            ).encode()
            for d, (title, texts) in enumerate(docs)
        ]
        rt.log.append([Append(rt.fabric.settings.topic("crp.documents"), "k", raw) for raw in raws])
        t0 = time.perf_counter()
        rt.run_until_idle()
        took = time.perf_counter() - t0
        with rt.fabric.unit_of_work() as uow:
            stored = sum(c for _s, _st, c in uow.repo.fact_counts())
        rt.fabric.close()
        rt.log.close()
    want = sum(len(t) for _, t in docs)
    if stored != want:
        raise SystemExit(f"stored {stored} facts of {want}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paragraphs", type=int, default=600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    a = ap.parse_args()
    docs = paragraphs(a.datasets, a.paragraphs)
    n = sum(len(t) for _, t in docs)
    print(f"crp-stream {code_version()}; {len(docs)} documents, {n} sentences; load {os.getloadavg()[0]:.1f}")
    model: list[float] = []
    pipe: list[float] = []
    for r in range(a.repeats):
        model.append(model_alone(docs))
        pipe.append(pipeline(docs))
        print(f"  repeat {r + 1}: model {model[-1]:.2f} s, pipeline {pipe[-1]:.2f} s", flush=True)
    m, p = statistics.median(model), statistics.median(pipe)
    print(f"model alone: {n / m:,.0f} sentences/s (median {m:.2f} s)")
    print(f"pipeline:    {n / p:,.0f} facts/s (median {p:.2f} s)")
    print(f"overhead over the model: {100 * (p / m - 1):+.0f}% (aim: <= +10%); load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
