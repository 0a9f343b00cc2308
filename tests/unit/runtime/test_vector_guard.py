"""GuardedVectors.flush: the backend is flushed after a write, and not again until the next one."""

from __future__ import annotations

from pathlib import Path

import pytest

from crp_stream.fabric.vectors.edge import EdgeVectorIndex
from crp_stream.fabric.vectors.port import VectorItem
from crp_stream.runtime.vector_guard import GuardedVectors, VectorJournal


class Counted(EdgeVectorIndex):
    """The embedded index, counting its flushes."""

    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


@pytest.fixture
def guarded(tmp_path: Path) -> GuardedVectors:
    return GuardedVectors(Counted(tmp_path / "vectors"), VectorJournal(tmp_path / "journal.sqlite"))


def test_a_flush_after_no_write_reaches_no_backend(guarded: GuardedVectors) -> None:
    inner = guarded.inner
    assert isinstance(inner, Counted)
    guarded.upsert([VectorItem("a", [1.0, 0.0], "active"), VectorItem("b", [0.0, 1.0], "active")])
    guarded.flush()
    assert inner.flushes == 1
    guarded.search([1.0, 0.0], 2, 0.0)  # a read writes nothing
    guarded.flush()
    assert inner.flushes == 1
    for write in (
        lambda: guarded.set_status(["a"], "quarantined"),
        lambda: guarded.upsert_committed([VectorItem("c", [0.6, 0.8], "active")]),
        lambda: guarded.set_status_committed(["c"], "stale"),
        lambda: guarded.delete(["b"]),
    ):
        before = inner.flushes
        write()
        guarded.flush()
        guarded.flush()
        assert inner.flushes == before + 1
    assert sorted(guarded.get_vectors(["a", "b", "c"])) == ["a", "c"]
