"""Crash equivalence on Kafka: kill -9 the ``crp-stream worker`` process (PostgreSQL, its own
qdrant-edge index) at >= 20 seeded points while the crash scenario streams through it, restart it each
time, and compare with an uninterrupted worker fed the same inputs: every fabric table (facts, sources,
edges, sessions, audit log, refresh requests, quarantine candidates, claims, processed events, consumer
offsets, meta), the vector index (points and status) and every output topic (by derived record id; an
at-least-once duplicate only with the same id and content).

Both workers read the same input topics, paced one input at a time (``tests/support/kafka_pipelines.py`` says
why), each with its own output topics, consumer group and database. The killed worker uses static group
membership (``CRP_INSTANCE_ID``), so a restart takes its partitions back without waiting for the
broker to expire the dead member's session.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.support.crash import Input, KillPlan, build_scenario, run_with_kills
from tests.support.kafka import Kafka, unique_prefix
from tests.support.kafka_pipelines import Clock, Pacer, Pipeline, compare

pytestmark = [pytest.mark.kafka, pytest.mark.postgres, pytest.mark.heavy]

SEED = 6
KILLS = 24  # planned; at least 20 are required, and a kill near the end can find no work left
MIN_KILLS = 20


def test_kafka_worker_kill_9_at_random_points_changes_nothing(tmp_path: Path) -> None:
    feed = Kafka(unique_prefix("in"))
    ref = Pipeline("ref", tmp_path, feed.prefix)
    crash = Pipeline("crash", tmp_path, feed.prefix, instance_id="crash-worker")
    pacer = Pacer(feed, [ref, crash])
    scenario: list[Input] = []
    try:
        for p in (ref, crash):
            p.create_topics()
        ref.worker.start()

        def body() -> None:
            scenario.extend(build_scenario(SEED, pacer.discover(ref)))
            pacer.feed_all(scenario[len(pacer.stamps) :])

        thread = pacer.start(body)

        def expected_total() -> int:
            # the reference runs alongside, so its output rate so far estimates the crash run's total
            steps = len(pacer.stamps)
            rate = ref.progress() / steps if steps >= 20 else 2.0
            return int(rate * (len(scenario) or 200))

        report = run_with_kills(
            crash.worker.args(),
            crash.progress,
            KillPlan(SEED, KILLS),
            expected_total,
            env=crash.worker.environment(),
            until_done=pacer.over.is_set,
            log_path=crash.worker.log_path,  # the pacer's timeout message shows its tail
        )
        thread.join(60)
        if pacer.error is not None:
            raise pacer.error
        assert ref.worker.stop() == 0
        assert report.kills >= MIN_KILLS and report.kills_mid_work >= MIN_KILLS, report.log
        for p in (ref, crash):
            assert p.settled(pacer.ends), f"{p.name} not settled after its worker stopped"
            assert not p.pending_outbox(), p.name

        clock = Clock(pacer.stamps)
        expected, actual = ref.snapshot(clock), crash.snapshot(clock)
        audit_types = Counter(r["audit_type"] for r in expected["audit_log"])
        # the scenario exercises what it claims to: arbiter verdicts, operator decisions, sessions
        assert {"STALE_HIGH_TRUST", "POISONING_CANDIDATE", "FACT_QUARANTINED", "QUARANTINE_RELEASED"} <= set(
            audit_types
        ), audit_types
        assert len(expected["sessions"]) == 4 and expected["outputs"]["crp.envelopes"]
        assert expected["outputs"]["crp.deadletter"] and any(f["status"] == "superseded" for f in expected["facts"])
        problems = compare(expected, actual)
        assert not problems, "\n".join(problems[:40]) + "\n" + "\n".join(report.log)
    finally:
        pacer.stopping.set()
        for p in (ref, crash):
            p.close()
        feed.close()
