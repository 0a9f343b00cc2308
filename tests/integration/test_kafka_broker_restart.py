"""The Kafka broker stops and starts again while a worker has work in flight: the worker keeps
running (same process), says that the broker is unreachable and that it retries with backoff, reports
``degraded`` on ``/health`` meanwhile, and loses nothing and applies nothing twice: its projections and
outputs equal those of a reference worker fed the same inputs.

A dedicated broker (``ops/kafka`` on free ports, its own run directory) so that the shared one is not
disturbed. Both workers read the same input topics, one input at a time (``tests/support/kafka_pipelines.py``).
To put the outage in the middle of a record's work, not between two inputs, the tested worker is
frozen (SIGSTOP) while the reference settles the input, then thawed until it has committed something
of it, frozen again while the broker stops, and thawed against a broker that is gone. The reference is
idle during the outage: it has nothing in flight.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.crash import Input, build_scenario
from tests.support.kafka import Kafka, unique_prefix
from tests.support.kafka_pipelines import Clock, Pacer, Pipeline, compare
from tests.support.services import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.heavy]

SEED = 7
OUTAGE_AT = 60  # first input the outage may land in
INPUTS = 100


@pytest.fixture
def broker_ops(private_broker: Callable[[str], None]) -> Callable[[str], None]:
    """This test's own broker, started."""
    private_broker("start")
    return private_broker


def log_lines(path: Path) -> list[str]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            out.append(str(json.loads(line)["msg"]))
    return out


def test_broker_restart_mid_stream_worker_keeps_running_and_loses_nothing(
    tmp_path: Path, broker_ops: Callable[[str], None]
) -> None:
    phase_a: list[Input] = []
    build_scenario(SEED, lambda inputs: (phase_a.extend(inputs), ([], []))[1])
    inputs = phase_a[:INPUTS]
    feed = Kafka(unique_prefix("in"))
    ref = Pipeline("ref", tmp_path, feed.prefix)
    live = Pipeline("live", tmp_path, feed.prefix)
    pacer = Pacer(feed, [ref, live])
    pid = 0
    try:
        for p in (ref, live):
            p.create_topics()
            p.worker.start()
        assert live.worker.proc is not None
        pid = live.worker.proc.pid
        pacer.feed_all(inputs[:OUTAGE_AT])

        step = OUTAGE_AT
        while True:  # until the freeze catches the worker with work in flight on a document
            assert step < OUTAGE_AT + 20, "the worker settled every input before it could be frozen"
            if inputs[step][0] != "crp.documents":
                pacer.feed_all([inputs[step]])
                step += 1
                continue
            os.kill(pid, signal.SIGSTOP)
            pacer.publish(inputs[step])
            pacer.wait_settled([ref])
            before = live.progress()
            os.kill(pid, signal.SIGCONT)
            if step % 2 == 0:  # just after its first commit of the input ...
                # polled every 2 ms: the worker finishes a document within tens of ms
                wait_until("the worker's first commit of the input", lambda n=before: live.progress() > n, 120.0, 0.002)
            else:  # ... or a moment into the work (the barrier may hold its commits back)
                time.sleep(0.002 * (step - OUTAGE_AT + 1))
            os.kill(pid, signal.SIGSTOP)
            wait_until("the tap reading what the frozen worker produced", live.caught_up, 120.0, 0.002)
            if not live.settled(pacer.ends):
                break
            os.kill(pid, signal.SIGCONT)
            step += 1
        broker_ops("stop")
        os.kill(pid, signal.SIGCONT)

        def retried() -> bool:
            health = live.worker.health() or {}
            lines = [m for m in log_lines(live.worker.log_path) if "still unreachable" in m]
            return health.get("status") == "degraded" and "unreachable" in str(health.get("broker")) and len(lines) >= 3

        wait_until("degraded health and three retries in the log", retried, 120.0, 0.002)
        broker_ops("start")
        pacer.wait_settled()
        pacer.feed_all(inputs[step + 1 :])
        wait_until("health ok again", lambda: (live.worker.health() or {}).get("status") == "ok", 120.0, 0.002)
        assert live.worker.alive() and live.worker.proc.pid == pid  # kept running: never restarted
        assert ref.worker.stop() == 0 and live.worker.stop() == 0

        lines = log_lines(live.worker.log_path)
        down = [m for m in lines if "unreachable (" in m and "still" not in m]
        assert down and "checking again in 0.5 s" in down[0], down
        waits = [float(m.rsplit("next check in ", 1)[1].split()[0]) for m in lines if "still unreachable" in m]
        assert waits[:3] == [1.0, 2.0, 4.0] and waits == sorted(waits), waits  # exponential backoff
        assert any("reachable again after" in m for m in lines)
        for p in (ref, live):
            assert p.settled(pacer.ends) and not p.pending_outbox(), p.name

        clock = Clock(pacer.stamps)
        expected, actual = ref.snapshot(clock), live.snapshot(clock)
        assert expected["facts"] and expected["outputs"]["crp.facts"] and expected["audit_log"]
        problems = compare(expected, actual)
        assert not problems, "\n".join(problems[:40])
    finally:
        pacer.stopping.set()
        if pid and live.worker.alive():
            os.kill(pid, signal.SIGCONT)
        for p in (ref, live):
            p.close()
        feed.close()
