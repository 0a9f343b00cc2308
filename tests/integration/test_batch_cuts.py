"""Micro-batches do not change what the pipeline derives: the same log processed with batches of 1,
7 and 200 records (ingest's facts written together, their similarity edges found by one search and
one matrix product, the arbiter's reads done once a batch) leaves the same tables, vectors, edges and
output topics, record for record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crp_stream import cli
from crp_stream.runtime.projections import differences
from tests.support.crash import MODEL, Input, build_scenario, discover_embedded, embedded_snapshot, seed_log


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> list[Input]:
    return build_scenario(5, discover_embedded(tmp_path_factory.mktemp("scenario")))


def run(data: Path, scenario: list[Input], batch: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seed_log(data, scenario)
    monkeypatch.setenv("CRP_BATCH_SIZE", str(batch))
    assert cli.main(["run", "--until-idle", "--data", str(data), "--embedder", f"precomputed:{MODEL}"]) == 0
    return embedded_snapshot(data)


def test_batch_boundaries_leave_the_same_fabric_and_outputs(
    scenario: list[Input], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = run(tmp_path / "one", scenario, 1, monkeypatch)
    assert one["edges"] and one["facts"] and one["audit_log"]
    assert any(e["kind"] == "similarity" for e in one["edges"])
    for batch in (7, 200):
        other = run(tmp_path / f"b{batch}", scenario, batch, monkeypatch)
        assert differences(one, other) == [], f"batches of {batch}: " + "\n".join(differences(one, other))
