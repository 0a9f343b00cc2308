"""In-memory cache of the similarity graph (the ``edges`` table) for the CDGR walk (SPEC-025 §1.3, §2.3).

Envelope assembly walks the graph hop by hop from its anchors; without a cache every hop is a SQL
round trip over thousands of edge rows, on every window request. Edges only change when facts are
ingested, so a fact's neighbours can be kept in memory between requests.

- Entries are *complete*: ``adjacency(repo, ids)`` stores, for each id it loaded, every edge of that
  id (edges are stored in both directions, so ``src IN ids`` sees them all). The reverse entries that
  ``Repository.adjacency`` also returns for the neighbours are partial and never kept or returned.
- ``sync(generation)`` drops everything when the fabric's graph generation changed (a value that
  changes whenever another process or transaction added edges); ``invalidate(ids)`` drops the
  entries of facts that just gained edges, for the writer in the same process; ``written(old, new,
  ids)`` does both for that writer: it forgets ``ids`` and moves to ``new`` only if the cache was at
  ``old``, so the next ``sync(new)`` keeps everything else (a rolled-back write leaves the store at
  ``old``, and ``sync(old)`` then drops everything: never stale).
- Bounded: past ``max_nodes`` entries the oldest are dropped (FIFO), so memory stays flat.
- Returned inner mappings are the cache's own: read them, never mutate them.
- One cache per process; not thread-safe (the runtimes drive one record at a time).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

Adjacency = dict[str, dict[str, float]]


class EdgeSource(Protocol):
    """What the cache loads from: ``Repository`` (one transaction's view of the ``edges`` table)."""

    def adjacency(self, fact_ids: Iterable[str]) -> Mapping[str, Mapping[str, float]]: ...


class GraphCache:
    def __init__(self, max_nodes: int = 500_000) -> None:
        if max_nodes < 1:
            raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
        self.max_nodes = max_nodes
        self._adj: Adjacency = {}
        self._generation: object = None
        self.hits = 0
        self.misses = 0
        self.loads = 0  # SQL round trips (batched calls to the source)

    def __len__(self) -> int:
        return len(self._adj)

    def __contains__(self, fact_id: object) -> bool:
        return fact_id in self._adj

    # consistency --------------------------------------------------------------------------------
    def sync(self, generation: object) -> None:
        """Drop everything if ``generation`` differs from the last one seen (None: no information)."""
        if generation is None:
            return
        if generation != self._generation:
            self._adj.clear()
            self._generation = generation

    def written(self, old: object, new: object, fact_ids: Iterable[str]) -> None:
        """This process moved the graph generation from ``old`` to ``new`` by adding edges of ``fact_ids``."""
        if self._generation == old:
            self.invalidate(fact_ids)
            self._generation = new
        else:  # another writer came between: nothing cached can be trusted
            self._adj.clear()
            self._generation = new

    def invalidate(self, fact_ids: Iterable[str]) -> None:
        """Forget the given facts: call with both endpoints of every edge just written."""
        for fid in fact_ids:
            self._adj.pop(fid, None)

    def clear(self) -> None:
        self._adj.clear()

    # reads --------------------------------------------------------------------------------------
    def adjacency(self, source: EdgeSource, fact_ids: Iterable[str]) -> Adjacency:
        """``{id: {neighbour: weight}}`` for every requested id (``{}`` when it has no edge).

        Misses are loaded from ``source`` in one batched call; only the requested ids are returned,
        each with all of its edges.
        """
        ids = sorted(set(fact_ids))
        missing = [i for i in ids if i not in self._adj]
        self.hits += len(ids) - len(missing)
        if missing:
            self.misses += len(missing)
            self.loads += 1
            loaded = source.adjacency(missing)
            room = len(self._adj) + len(missing) - self.max_nodes
            if room > 0:
                self._evict(room)
            for fid in missing:
                self._adj[fid] = {str(k): float(w) for k, w in loaded.get(fid, {}).items()}
        return {i: self._adj[i] for i in ids}

    def neighbours(self, source: EdgeSource, fact_id: str) -> dict[str, float]:
        """Every similarity edge of one fact: ``{neighbour: weight}``."""
        return self.adjacency(source, [fact_id])[fact_id]

    def walk(self, source: EdgeSource, seeds: Iterable[str], hops: int) -> Adjacency:
        """Complete adjacency of every fact within ``hops`` edges of ``seeds`` (levels 0..hops).

        One batched load per level, of the misses only: what ``assembly._connectors`` needs with
        ``hops = max_hops`` (bridge values look one edge past the connectors).
        """
        if hops < 0:
            raise ValueError(f"hops must be >= 0, got {hops}")
        out: Adjacency = {}
        frontier = set(seeds)
        for level in range(hops + 1):
            todo = frontier - out.keys()
            if not todo:
                break
            out.update(self.adjacency(source, todo))
            if level < hops:
                frontier = {n for f in todo for n in out[f]}
        return out

    def _evict(self, count: int) -> None:
        for fid in list(self._adj)[:count]:
            del self._adj[fid]


__all__ = ["Adjacency", "EdgeSource", "GraphCache"]
