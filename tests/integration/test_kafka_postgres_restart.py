"""A real PostgreSQL restart while the Kafka worker has a record to process: the worker keeps
running (same process), logs the transient error and its backoff, and loses nothing: its projections
and outputs equal those of a reference worker fed the same inputs on the shared server.

The tested worker's database is a dedicated cluster (``ops/postgres`` on a free port, see
``test_postgres_restart.py``); inputs are paced one at a time (``tests/support/kafka_pipelines.py``), and the
input published during the outage is settled by the reference while the tested worker retries it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.crash import Input, build_scenario
from tests.support.kafka import Kafka, unique_prefix
from tests.support.kafka_pipelines import Clock, Pacer, Pipeline, compare
from tests.support.services import Cluster

pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.heavy]

SEED = 7
OUTAGE_AT = 40
INPUTS = 70


def retries(log_path: Path) -> list[str]:
    lines = [
        json.loads(line)["msg"] for line in log_path.read_text(errors="replace").splitlines() if line.startswith("{")
    ]
    return [str(m) for m in lines if "transient error" in str(m)]


def test_postgres_restart_with_a_record_in_hand_loses_nothing(cluster: tuple[Cluster, str], tmp_path: Path) -> None:
    pg, url = cluster
    phase_a: list[Input] = []
    build_scenario(SEED, lambda inputs: (phase_a.extend(inputs), ([], []))[1])
    inputs = phase_a[:INPUTS]
    step = next(k for k in range(OUTAGE_AT, INPUTS) if inputs[k][0] == "crp.documents")
    feed = Kafka(unique_prefix("in"))
    ref = Pipeline("ref", tmp_path, feed.prefix)
    live = Pipeline("live", tmp_path, feed.prefix, db=url)
    pacer = Pacer(feed, [ref, live])
    try:
        for p in (ref, live):
            p.create_topics()
            p.worker.start()
        assert live.worker.proc is not None
        pid = live.worker.proc.pid
        pacer.feed_all(inputs[:step])
        assert not retries(live.worker.log_path)

        pg.stop()
        pacer.publish(inputs[step])  # a document: ingest needs the database
        pacer.wait_settled([ref])
        deadline = time.monotonic() + 120
        while len(retries(live.worker.log_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = retries(live.worker.log_path)
        assert len(seen) >= 2 and "OperationalError" in seen[0], live.worker.log_tail()
        assert live.worker.alive() and not live.settled(pacer.ends)  # nothing acknowledged while down
        pg.start()
        pacer.wait_settled()
        pacer.feed_all(inputs[step + 1 :])
        assert live.worker.alive() and live.worker.proc.pid == pid  # kept running: never restarted
        assert ref.worker.stop() == 0 and live.worker.stop() == 0
        for p in (ref, live):
            assert p.settled(pacer.ends) and not p.pending_outbox(), p.name

        clock = Clock(pacer.stamps)
        expected, actual = ref.snapshot(clock), live.snapshot(clock)
        assert expected["facts"] and expected["outputs"]["crp.facts"]
        problems = compare(expected, actual)
        assert not problems, "\n".join(problems[:40])
    finally:
        pacer.stopping.set()
        for p in (ref, live):
            p.close()
        feed.close()
