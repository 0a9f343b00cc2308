"""Crash equivalence: kill -9 the worker at >= 20 seeded points while a scenario streams
through it, restart it each time, and compare everything with an uninterrupted run of the same log:
the fabric tables (facts, sources, edges, sessions, audit log, refresh requests, quarantine candidates,
claims, processed events, consumer offsets), the vector index (points and their status) and every
output topic (by record id, in order). On SQLite and on PostgreSQL (``--database``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from crp_stream.runtime.projections import differences
from tests.support.crash import (
    Input,
    KillPlan,
    build_scenario,
    cli_command,
    compare_outputs,
    discover_embedded,
    run_with_kills,
    seed_log,
)
from tests.support.crash import embedded_snapshot as snapshot
from tests.support.crash import sqlite_log_size as log_size
from tests.support.services import fresh_postgres_url

pytestmark = pytest.mark.heavy

SEED = 6
KILLS = 24  # planned; at least 20 are required, and a kill near the end can find no work left
MIN_KILLS = 20


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> list[Input]:
    return build_scenario(SEED, discover_embedded(tmp_path_factory.mktemp("scenario")))


def db_args(url: str | None) -> list[str]:
    return ["--database", url] if url else []


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_kill_9_at_random_points_changes_nothing(backend: str, scenario: list[Input], tmp_path: Path) -> None:
    url_ref = fresh_postgres_url() if backend == "postgres" else None
    url_crash = fresh_postgres_url() if backend == "postgres" else None

    ref = tmp_path / "uninterrupted"
    seed_log(ref, scenario)
    subprocess.run(cli_command(ref, *db_args(url_ref)), check=True, capture_output=True, timeout=600)
    expected = snapshot(ref, url_ref)
    audit_types = {r["audit_type"] for r in expected["audit_log"]}
    # the scenario exercises what it claims to: arbiter verdicts, operator decisions, sessions
    assert {
        "STALE_HIGH_TRUST",
        "POISONING_CANDIDATE",
        "REFRESH_RESOLVED",
        "FACT_QUARANTINED",
        "QUARANTINE_RELEASED",
    } <= audit_types, audit_types
    assert len(expected["sessions"]) == 4 and expected["outputs"]["crp.envelopes"]
    assert expected["outputs"]["crp.deadletter"] and any(f["status"] == "superseded" for f in expected["facts"])
    total = log_size(ref / "log.sqlite")()

    crashed = tmp_path / "crashed"
    seed_log(crashed, scenario)
    # the interrupted worker commits every 25 records, the reference every 200: batches change nothing
    report = run_with_kills(
        cli_command(crashed, *db_args(url_crash)),
        log_size(crashed / "log.sqlite"),
        KillPlan(SEED, KILLS),
        total,
        env={"CRP_BATCH_SIZE": "25"},
    )
    assert report.kills >= MIN_KILLS and report.kills_mid_work >= MIN_KILLS, report.log

    actual = snapshot(crashed, url_crash)
    problems = compare_outputs(expected.pop("outputs"), actual.pop("outputs"))
    problems += differences(expected, actual)
    assert not problems, "\n".join(problems[:40]) + "\n" + "\n".join(report.log)
    assert log_size(crashed / "log.sqlite")() == total  # nothing lost, nothing appended twice
