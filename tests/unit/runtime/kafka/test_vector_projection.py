"""The projection that keeps a Kafka worker's own embedded index (``runtime/kafka/projection.py``):
loading the committed facts at start and applying the facts a run of ``crp.facts`` records names, on
SQLite and qdrant-edge (the runtime keeps it where PostgreSQL is shared; the reads are the same)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from crp_stream.config import Settings
from crp_stream.fabric.fabric import Fabric
from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.port import STATUSES, VectorItem
from crp_stream.runtime.kafka.projection import VectorProjection
from crp_stream.runtime.vector_guard import GuardedVectors, VectorJournal
from tests.contract.test_repository import fact


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[Fabric]:
    settings = Settings(data_dir=tmp_path, embedder="hashing")
    vectors = GuardedVectors(EdgeVectorIndex(tmp_path / "own"), VectorJournal(tmp_path / "journal.sqlite"))
    f = Fabric(settings, vectors=vectors)
    yield f
    f.close()


def projection(fabric: Fabric) -> VectorProjection:
    return VectorProjection(cast(Any, SimpleNamespace(fabric=fabric, groups=("retrieval",))))


def record(fabric: Fabric, *rows: tuple[dict[str, Any], list[float] | None]) -> None:
    """Facts committed as ingest leaves them where vectors are stored (a vector of None: none stored)."""
    with fabric.unit_of_work() as uow:
        uow.repo.insert_facts([row for row, _ in rows])
        uow.repo.insert_fact_vectors([VectorItem(row["fact_id"], v) for row, v in rows if v is not None])


def statuses(fabric: Fabric) -> dict[str, str]:
    """Each point's status, by filtered searches (the port has no payload read)."""
    out: dict[str, str] = {}
    for s in sorted(STATUSES):
        for fid, _ in fabric.vectors.search([1.0, 1.0, 1.0], 50, 0.0, tuple(sorted(STATUSES - {s}))):
            out[fid] = s
    return out


def test_load_adds_the_missing_facts_and_corrects_statuses_without_journaling(fabric: Fabric) -> None:
    fabric.vectors.upsert([VectorItem("f2", [0.0, 1.0, 0.0], "active")])  # held, but stale in the database
    assert isinstance(fabric.vectors, GuardedVectors)
    fabric.vectors.journal.clear()
    record(
        fabric,
        (fact("f1"), [1.0, 0.0, 0.0]),
        (fact("f2", status="stale"), [0.0, 1.0, 0.0]),
        (fact("f3"), None),  # written before vectors were stored: cannot be projected
    )
    assert projection(fabric).load() == 1
    assert statuses(fabric) == {"f1": "active", "f2": "stale"}
    assert fabric.vectors.get_vectors(["f1"])["f1"].tolist() == [1.0, 0.0, 0.0]
    assert fabric.vectors.journal.ids() == []  # the committed state: nothing for a rollback to undo


def test_apply_writes_the_committed_state_of_the_named_facts_only(fabric: Fabric) -> None:
    p = projection(fabric)
    record(fabric, (fact("f1"), [1.0, 0.0, 0.0]))
    p.apply(["f1", "f-uncommitted"])
    assert statuses(fabric) == {"f1": "active"}
    with fabric.unit_of_work() as uow:  # another worker quarantines it, then records a new fact
        uow.repo.set_fact_status(["f1"], "quarantined")
    record(fabric, (fact("f4", expires_at_us=5_000_000), [0.0, 0.0, 1.0]))
    p.apply(["f1", "f4"])
    p.apply(["f1", "f4"])  # a run applied twice (a record read again) changes nothing
    assert statuses(fabric) == {"f1": "quarantined", "f4": "active"}
    assert fabric.vectors.count() == 2
    assert fabric.vectors.search([0.0, 0.0, 1.0], 5, 6.0) == []  # f4's expiry came with it
