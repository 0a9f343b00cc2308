"""``crp-stream run``: every handler on the embedded defaults (log, SQLite, qdrant-edge), no servers."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from crp_stream.cli import progress
from crp_stream.cli.base import add_common, settings_of
from crp_stream.cli.logcmds import print_status, publish_lines
from crp_stream.runtime import heap, threads
from crp_stream.runtime.embedded import open_runtime

# How often an idle ``run`` polls the log: the longest a record waits before it is picked up
# (0.2 s alone broke any envelope latency goal); an empty poll costs ~10 µs.
IDLE_POLL_S = 0.005


def register(sub: Any) -> None:
    r = sub.add_parser("run", help="run all workers on the embedded defaults")
    add_common(r)
    r.add_argument("--until-idle", action="store_true", help="process everything published so far, then exit")
    r.add_argument("--sample", action="store_true", help="publish the bundled sample (ops/sample) first")
    r.set_defaults(handler=run)


def sample_path() -> Path:
    return Path(__file__).resolve().parents[2] / "ops" / "sample" / "sample.jsonl"


def run(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)
    rt = open_runtime(settings)
    log = logging.getLogger("crp_stream.run")
    if ns.sample:
        n = publish_lines(rt.publish, sample_path().read_text(encoding="utf-8"), str(sample_path()))
        log.info("published %d sample records from %s", n, sample_path())
    log.info("embedded run: data=%s model=%s", settings.data_dir, rt.fabric.embedder.model_id)
    threads.limit_blas(settings.blas_threads)  # one thread: a second only spins between small products
    heap.settle()  # the collector: what lives as long as the process frozen, young collections rarer
    backlog = progress.bar("processing the backlog") if ns.until_idle else None
    try:
        while True:
            t0 = time.monotonic()
            n = rt.drain(progress.position(backlog)) if backlog is not None else rt.run_until_idle()
            if n:
                log.info(
                    "processed %d records in %.2fs (%s); dead-lettered %d; outputs %d",
                    n,
                    time.monotonic() - t0,
                    _fmt_counts(rt.stats.processed),
                    rt.stats.deadlettered,
                    rt.stats.outputs,
                )
            if ns.until_idle:
                break
            time.sleep(IDLE_POLL_S)
    finally:
        if backlog is not None:
            backlog.close()
        print_status(rt.fabric, rt.log, settings)
        rt.fabric.close()
    return 0


def _fmt_counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items())) or "none"
