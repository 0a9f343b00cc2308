"""Replay equivalence: ``crp-stream rebuild`` drops the projections and rebuilds them from
the log's input topics; the rebuilt state equals the live state, and the log gains nothing."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from crp_stream import cli
from crp_stream.runtime.embedded.log import Append, EmbeddedLog
from crp_stream.runtime.projections import differences
from tests.support.crash import MODEL, Input, build_scenario, discover_embedded, embedded_snapshot, seed_log
from tests.support.crash import sqlite_log_size as log_size
from tests.support.services import fresh_postgres_url


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> list[Input]:
    return build_scenario(3, discover_embedded(tmp_path_factory.mktemp("scenario")))


def crp(data: Path, url: str | None, *args: str) -> int:
    return cli.main(
        [*args, "--data", str(data), "--embedder", f"precomputed:{MODEL}", *(["--database", url] if url else [])]
    )


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_rebuild_equals_the_live_state(
    backend: str, scenario: list[Input], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = fresh_postgres_url() if backend == "postgres" else None
    data = tmp_path / "live"
    half = len(scenario) // 2
    seed_log(data, scenario[:half])
    assert crp(data, url, "run", "--until-idle") == 0
    log_ = EmbeddedLog(data / "log.sqlite", lambda: 0)  # the rest arrives while the first half is done
    log_.append([Append(t, k, raw, ts_us=ts) for t, k, ts, raw in scenario[half:]])
    log_.close()
    assert crp(data, url, "run", "--until-idle") == 0
    live = embedded_snapshot(data, url)
    size = log_size(data / "log.sqlite")()
    assert live["audit_log"] and live["sessions"] and live["edges"] and live["vectors"]["count"]

    capsys.readouterr()
    assert crp(data, url, "rebuild", "--yes", "--verify") == 0
    assert "verified: rebuilt projections equal the dropped ones" in capsys.readouterr().err
    rebuilt = embedded_snapshot(data, url)
    assert differences(live, rebuilt) == []
    assert log_size(data / "log.sqlite")() == size  # outputs were re-derived, never appended twice

    assert crp(data, url, "run", "--until-idle") == 0  # a worker after the rebuild has nothing to redo
    assert log_size(data / "log.sqlite")() == size
    assert differences(live, embedded_snapshot(data, url)) == []


def test_rebuild_requires_confirmation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    EmbeddedLog(tmp_path / "log.sqlite", lambda: 0).close()
    assert crp(tmp_path, None, "rebuild") == 2
    assert "--yes" in capsys.readouterr().err


def test_rebuild_keeps_audit_rows_it_cannot_derive_and_ignores_stale_derivations(
    tmp_path: Path, scenario: list[Input], caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "live"
    seed_log(data, scenario[:60])
    assert crp(data, None, "run", "--until-idle") == 0
    # what an older version of the code wrote: an audit row, and a crp.facts record, neither re-derived
    from crp_stream.runtime.embedded import open_fabric
    from tests.support.crash import embedded_settings

    fabric = open_fabric(embedded_settings(data))
    with fabric.unit_of_work() as uow:
        uow.repo.append_audit("old-audit-row", "DRIFT_UNDETERMINED", 1, "k", {"by": "an older version"})
    fabric.close()
    stale: dict[str, Any] = {
        "type": "FactStatusChanged",
        "fact_id": "nope",
        "status": "stale",
        "reason": "an older derivation",
        "at": "2031-01-01T00:00:00Z",
    }
    log_ = EmbeddedLog(data / "log.sqlite", lambda: 0)
    log_.append([Append("crp.facts", "nope", json.dumps(stale).encode(), record_id="old-derivation")])
    log_.close()

    with caplog.at_level(logging.WARNING):
        assert crp(data, None, "rebuild", "--yes") == 0
    assert any("1 audit rows were not derived again" in r.getMessage() for r in caplog.records)
    after = embedded_snapshot(data)
    assert [r for r in after["audit_log"] if r["event_id"] == "old-audit-row"]
    arbiter_offset = next(o for o in after["consumer_offsets"] if o["consumer"] == "arbiter")
    assert arbiter_offset["next_offset"] == len(after["outputs"]["crp.facts"])  # consumed to the end
    assert not [d for d in after["outputs"]["crp.deadletter"] if "nope" in d[2]]  # never applied
