"""Facts' vectors in the relational store (the ``fact_vectors`` table): part of ``Repository``. Written
where each worker keeps its own embedded index on a shared database, and read by a worker to load what
its index lacks (``runtime/kafka/projection.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import select

from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.sql.driver import DriverSQL
from crp_stream.fabric.vectors.port import Vector, VectorItem, normalise

# (fact_id, status, expires_at epoch seconds or None, source): a point's payload as the fabric holds it
FactPoint = tuple[str, str, float | None, str, str]  # fact id, status, expiry (s), source, tenant


class VectorRecords(DriverSQL):
    """Mixed into ``Repository``: the same connection, the same transaction."""

    def insert_fact_vectors(self, items: Sequence[VectorItem]) -> None:
        """Each item's unit float32 vector (as the index stores it), in one statement; a fact already
        there keeps its row (a fact's vector never changes: its id derives from its content)."""
        if not items:
            return
        ids = [it.fact_id for it in items]
        blobs = [normalise(it.vector).tobytes() for it in items]
        if self._dialect == "postgresql":
            self._execute_pg(
                "INSERT INTO fact_vectors (fact_id, vector) SELECT f, v FROM unnest(%b::text[], %b::bytea[]) "
                "AS r(f, v) ON CONFLICT (fact_id) DO NOTHING",
                (ids, blobs),
            )
            return
        self._executemany(
            "INSERT INTO fact_vectors (fact_id, vector) VALUES (?, ?) ON CONFLICT (fact_id) DO NOTHING",
            list(zip(ids, blobs, strict=True)),
        )

    def fact_vectors(self, fact_ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors of the given facts (absent: none stored)."""
        rows = self._select_in(("fact_id", "vector"), "fact_vectors", "fact_id", fact_ids)
        return {str(f): np.frombuffer(bytes(v), dtype=np.float32) for f, v in rows}

    def fact_points(self, fact_ids: Sequence[str] | None = None) -> list[FactPoint]:
        """The committed payload of the given facts (every fact when None), in fact id order."""
        columns = ("fact_id", "status", "expires_at_us", "source", "tenant")
        if fact_ids is None:
            c = t.facts.c
            q = select(c.fact_id, c.status, c.expires_at_us, c.source, c.tenant).order_by(c.fact_id)
            rows: list[Any] = list(self.conn.execute(q))
        else:
            rows = self._select_in(columns, "facts", "fact_id", fact_ids, order=("fact_id",))
        return [(str(f), str(s), None if e is None else e / 1e6, str(src), str(tn)) for f, s, e, src, tn in rows]
