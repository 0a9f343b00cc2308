"""The fabric's typed graph (the ``edges`` table): part of ``Repository``, kept apart so each file stays
one noun. Similarity edges hold each fact to its K strongest (SPEC-025 §1.3); structure edges
(adjacency, mention) are never pruned."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import func, select

from crp_stream.core.edges import edges_past_k
from crp_stream.fabric.sql import tables as t
from crp_stream.fabric.sql.driver import DriverSQL


class EdgeRecords(DriverSQL):
    """Mixed into ``Repository``: the same connection, the same transaction."""

    def add_edges(self, edges: Sequence[tuple[str, str, float]], kind: str = "similarity") -> None:
        """Both directions of each edge of ``kind``; an edge already there is kept as it is. A pair can
        have one edge of each kind (similar and adjacent facts)."""
        rows: list[tuple[str, str, float]] = []
        for a, b, w in edges:
            if a == b:
                continue
            rows.append((a, b, float(w)))
            rows.append((b, a, float(w)))
        self.add_directed_edges(rows, kind)

    def add_directed_edges(self, rows: Sequence[tuple[str, str, float]], kind: str = "similarity") -> None:
        """The given ``(src, dst, weight)`` rows of ``kind``, in that direction only; a row already there
        (or earlier in ``rows``) is kept as it is. One statement for the lot: on PostgreSQL the rows
        travel as arrays (``unnest``), since psycopg's executemany sends a statement per row."""
        if not rows:
            return
        if self._dialect == "postgresql":
            src, dst, weight = zip(*rows, strict=True)
            self._execute_pg(
                "INSERT INTO edges (src, dst, weight, kind) SELECT s, d, w, %s FROM "
                "unnest(%b::text[], %b::text[], %b::float8[]) WITH ORDINALITY AS r(s, d, w, n) ORDER BY n "
                "ON CONFLICT (src, dst, kind) DO NOTHING",
                (kind, list(src), list(dst), [float(w) for w in weight]),
            )
            return
        sql = "INSERT INTO edges (src, dst, weight, kind) VALUES (?, ?, ?, ?) ON CONFLICT (src, dst, kind) DO NOTHING"
        self._executemany(sql, [(a, b, float(w), kind) for a, b, w in rows])

    def delete_similarity(self, pairs: Sequence[tuple[str, str]]) -> None:
        """Delete the similarity rows ``(src, dst)`` (that direction only), in one statement."""
        if not pairs:
            return
        if self._dialect == "postgresql":
            src, dst = zip(*pairs, strict=True)
            self._execute_pg(
                "DELETE FROM edges e USING unnest(%b::text[], %b::text[]) AS d(s, t) "
                "WHERE e.src = d.s AND e.dst = d.t AND e.kind = 'similarity'",
                (list(src), list(dst)),
            )
            return
        self._executemany("DELETE FROM edges WHERE src = ? AND dst = ? AND kind = 'similarity'", pairs)

    def prune_similarity(self, fact_ids: Iterable[str], k: int) -> list[tuple[str, str]]:
        """SPEC-025 §1.3: each given fact keeps its ``k`` strongest similarity edges (weight, then
        neighbour id); the others are deleted (that direction only). Returns the (src, dst) deleted."""
        rows = self._select_in(("src", "dst", "weight", "kind"), "edges", "src", list(fact_ids))
        rows = [r for r in rows if r[3] == "similarity"]
        if not rows:
            return []
        src, dst, weight, _kind = zip(*rows, strict=True)
        drop_pairs = [(src[i], dst[i]) for i in edges_past_k(src, dst, weight, k)]
        self.delete_similarity(drop_pairs)  # one executemany: a batch of documents drops thousands
        return drop_pairs

    def adjacency(self, fact_ids: Iterable[str]) -> dict[str, dict[str, float]]:
        """Similarity neighbours only (the arbiter's near claims); ``edge_rows`` has every kind."""
        ids = sorted(set(fact_ids))
        adj: dict[str, dict[str, float]] = {}
        found = sorted(self._select_in(("src", "dst", "weight", "kind"), "edges", "src", ids))  # the PK's order
        for src, dst, weight, kind in found:
            if kind == "similarity":
                adj.setdefault(src, {})[dst] = weight
                adj.setdefault(dst, {})[src] = weight
        return adj

    def edge_rows(self, fact_ids: Sequence[str]) -> list[tuple[str, str, float, str]]:
        """``(src, dst, weight, kind)`` of every edge whose ``src`` is given: each fact's edges, complete,
        in key order (byte order on both databases: a graph cache entry is the same wherever it loads)."""
        cols = ("src", "dst", "weight", "kind")
        return [
            (r[0], r[1], r[2], r[3]) for r in self._select_in(cols, "edges", "src", fact_ids, ("src", "dst", "kind"))
        ]

    def edge_count(self, kind: str = "similarity") -> int:
        """Edges of ``kind``: rows over 2 (each edge is stored in both directions until pruning drops one)."""
        q = select(func.count()).select_from(t.edges).where(t.edges.c.kind == kind)
        return int(self.conn.execute(q).scalar_one()) // 2
