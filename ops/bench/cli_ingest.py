"""Ingest as a new user runs it: ``crp-stream publish`` then ``crp-stream run --until-idle``.

``--facts`` precomputed 384-d facts (varied sentences, clustered vectors) in documents of
``--facts-per-doc`` are written to a JSON Lines file; the two commands run as subprocesses on a new
embedded data directory (the durable log, SQLite, qdrant-edge), each timed from its start to its exit
(interpreter start-up included, as a user sees it). The baseline, measured in the same run, is the bare
storage cost of the same facts (``ops.bench.ingest.run_baseline``: one bulk SQL insert and one
qdrant-edge upsert).

    .venv/bin/python -m ops.bench.cli_ingest --facts 20000 --facts-per-doc 100
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from crp_stream.config import Settings
from ops.bench._common import scratch
from ops.bench.ingest import MODEL, clustered, documents, fact_texts, run_baseline

CLI = Path(sys.executable).with_name("crp-stream")


def timed(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([str(CLI), *args], env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"crp-stream {args[0]} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=20_000)
    ap.add_argument("--facts-per-doc", type=int, default=100)
    args = ap.parse_args()
    vecs, _label = clustered(args.facts)
    texts = fact_texts(args.facts, "varied")
    print(f"{args.facts:,} precomputed facts in documents of {args.facts_per_doc}; load {os.getloadavg()[0]:.1f}")
    with scratch("cli-ingest-") as tmp:
        inputs = tmp / "documents.jsonl"
        inputs.write_bytes(b"\n".join(documents(vecs, args.facts_per_doc, texts)) + b"\n")
        data = tmp / "data"
        env = {**os.environ, "CRP_DATA": str(data), "CRP_EMBEDDER": f"precomputed:{MODEL}"}
        for key in ("CRP_DATABASE_URL", "CRP_QDRANT", "CRP_BROKER", "CRP_CONFIG"):
            env.pop(key, None)
        publish = timed(["publish", "crp.documents", str(inputs)], env)
        run = timed(["run", "--until-idle"], env)
        base = run_baseline(Settings(data_dir=tmp / "bare", embedder=f"precomputed:{MODEL}"), vecs)
    total = publish + run
    print(f"publish {publish:.1f} s, run --until-idle {run:.1f} s: {args.facts / total:,.0f} facts/s")
    print(f"baseline (bare insert of the same rows and vectors): {base:.2f} s; ratio {total / base:.1f}x")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
