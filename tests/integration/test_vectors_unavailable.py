"""Qdrant unavailable: nothing is acknowledged as processed until the vector write succeeded.

The vector index is wrapped so that its writes (and reads) fail for a while with whatever error the
client raises. While it fails, the consumer offsets stay where they were, no fact is committed and
nothing is dead-lettered; once it recovers, every record is processed exactly once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from crp_stream.config import Settings
from crp_stream.processors import all_handlers
from crp_stream.runtime.embedded import open_fabric
from crp_stream.runtime.embedded.log import EmbeddedLog
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime
from crp_stream.runtime.vector_guard import GuardedVectors

MODEL = "vu-model"
T0 = 1_790_000_000 * 1_000_000


class QdrantDown(Exception):
    """What a client raises when the server is gone (not a ConnectionError subclass on purpose)."""


# The backend hooks behind each call of the port (GuardedVectors calls the inner index's hooks).
HOOKS = {
    "upsert": {"_upsert"},
    "set_status": {"_set_status"},
    "search": {"_query", "_query_many"},
    "search_many": {"_query", "_query_many"},
    "get_vectors": {"get_vectors"},
}


class Flaky:
    """A VectorIndex backend whose ``fail_on`` calls raise for the next ``failures`` calls."""

    def __init__(self, inner: Any, fail_on: set[str], failures: int, check: Any, apply_first: bool = False):
        self.inner, self.failures = inner, failures
        self.fail_on = {hook for name in fail_on for hook in HOOKS[name]}
        self.check, self.apply_first = check, apply_first
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in self.fail_on:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            if self.failures > 0:
                self.failures -= 1
                if self.apply_first:  # the write reached the server, its acknowledgement did not
                    attr(*args, **kwargs)
                self.check()
                raise QdrantDown(f"{name}: connection refused")
            return attr(*args, **kwargs)

        return call


def vec(axis: int) -> list[float]:
    v = np.zeros(8)
    v[axis] = 1.0
    v[7] = 0.2
    return [float(x) for x in v / np.linalg.norm(v)]


def doc(i: int) -> bytes:
    return json.dumps(
        {
            "event_id": f"d{i}",
            "source": "vendor_docs",
            "source_type": "official",
            "embedding_model": MODEL,
            "document_id": "doc",
            "facts": [
                {"text": f"Fact {i} about routers.", "embedding": vec(i % 6)},
                {"text": "A stable sentence.", "embedding": vec(6)},
            ],
        }
    ).encode()


def request(session: str) -> bytes:
    return json.dumps(
        {
            "request_id": f"r-{session}",
            "session_id": session,
            "window": 1,
            "query": {"text": "routers", "embedding": vec(0)},
            "embedding_model": MODEL,
            "sub_queries": [{"id": "a", "text": "routers", "embedding": vec(0)}],
        }
    ).encode()


def committed(db_path: Path) -> dict[str, Any]:
    engine = create_engine(f"sqlite:///{db_path}")
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT consumer || ':' || topic, next_offset FROM consumer_offsets")).all()
            offsets = dict(rows)
            facts = conn.execute(text("SELECT COUNT(*) FROM facts")).scalar_one()
            return {"offsets": offsets, "facts": facts}
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("fail_on", "apply_first"),
    [
        ({"upsert"}, False),
        ({"upsert"}, True),
        ({"set_status"}, True),
        ({"search", "search_many", "get_vectors"}, False),
    ],
)
def test_nothing_is_acknowledged_until_the_vector_write_succeeds(
    tmp_path: Path, fail_on: set[str], apply_first: bool
) -> None:
    s = Settings(data_dir=tmp_path, embedder=f"precomputed:{MODEL}")
    fabric = open_fabric(s)
    log_ = EmbeddedLog(s.log_path, lambda: T0)
    first = EmbeddedRuntime(fabric, log_, all_handlers())
    first.publish("crp.documents", "vendor_docs", doc(0), ts_us=T0)
    first.run_until_idle()  # the fabric exists before the outage
    before = committed(tmp_path / "fabric.sqlite")
    seen: list[dict[str, Any]] = []

    def check() -> None:
        now = committed(tmp_path / "fabric.sqlite")
        seen.append(now)
        assert now == before, "an offset or a fact was committed while the vector index was failing"

    flaky = Flaky(fabric.vectors.inner, fail_on, failures=6, check=check, apply_first=apply_first)
    guarded = fabric.vectors
    assert isinstance(guarded, GuardedVectors)
    fabric.vectors = GuardedVectors(flaky, guarded.journal)  # type: ignore[arg-type]
    rt = EmbeddedRuntime(fabric, log_, all_handlers())
    for i in (1, 2):
        rt.publish("crp.documents", "vendor_docs", doc(i), ts_us=T0 + i)
    rt.publish("crp.window.requests", "s1", request("s1"), ts_us=T0 + 3)
    rt.run_until_idle()
    assert len(seen) == 6 and flaky.failures == 0  # more failures than max_attempts: still no dead letter

    outputs = {
        t: [json.loads(r.value) for r in log_.iter_topic(t)] for t in ("crp.facts", "crp.deadletter", "crp.envelopes")
    }
    assert outputs["crp.deadletter"] == []
    recorded = [f["fact_id"] for f in outputs["crp.facts"] if f["type"] == "FactRecorded"]
    assert len(recorded) == len(set(recorded)) == 4  # d0's two facts, then one new sentence each for d1, d2
    superseded = [f for f in outputs["crp.facts"] if f["type"] == "FactStatusChanged"]
    assert len(superseded) == 2
    assert len(outputs["crp.envelopes"]) == 1
    after = committed(tmp_path / "fabric.sqlite")
    assert after["facts"] == 4
    assert after["offsets"]["ingest:crp.documents"] == 3 and after["offsets"]["retrieval:crp.window.requests"] == 1
    assert fabric.vectors.count() == 4
    assert rt.stats.deadlettered == 0
    fabric.close()
    log_.close()
