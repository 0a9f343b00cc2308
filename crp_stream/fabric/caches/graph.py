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
- ``preload`` fills it at start-up (``Fabric.warm``, with the ANN cache), so that the walks of the first
  requests read no edge from the store; it is refilled lazily after a ``sync`` drops it.
- Compact: fact ids are interned as ints (``index``/``names``) and an entry is three numpy arrays
  (neighbours, weights, edge kinds), which ``rows`` returns as they are, for vectorised walks (``core.cdgr``'s
  edge-list rules); ``adjacency`` returns the same entries as dicts. Read them, never mutate them.
- Packed: ``pack`` lays every entry out as one CSR array triple (a start and a length per int); a
  packed entry then holds no object of its own (its slot in the FIFO holds None, and ``rows`` hands
  out views), so a fact costs its edges' 17 bytes each plus its ints, not ~0.5 KB of array headers.
  ``preload`` reads straight into the pack. ``edges`` (the walk's load) is one gather, not a
  concatenation of hundreds of arrays. An entry replaced or loaded later is served from its own arrays
  until the next ``pack``; ``edges`` packs again once those outnumber a quarter of the entries, so
  memory stays within twice the bound.
- One cache per process; not thread-safe (the runtimes drive one record at a time).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from crp_stream.core import graph_kernels
from crp_stream.core.graph_rank import EDGE_KINDS

Adjacency = dict[str, dict[str, float]]
# one fact's neighbours, edge weights and edge kinds (index into core.graph_rank.EDGE_KINDS)
Row = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int8]]
_EMPTY: Row = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int8))
_KIND = {k: i for i, k in enumerate(EDGE_KINDS)}
GRAPH_GENERATION = "graph_generation"  # meta counter: moves whenever edges are written (ingest)


class EdgeSource(Protocol):
    """What the cache loads from: ``Repository`` (one transaction's view of the ``edges`` table)."""

    def adjacency(self, fact_ids: Iterable[str]) -> Mapping[str, Mapping[str, float]]: ...


class GraphCache:
    def __init__(self, max_nodes: int = 500_000) -> None:
        if max_nodes < 1:
            raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
        self.max_nodes = max_nodes
        self._ids: dict[str, int] = {}
        self._names: list[str] = []
        self._adj: dict[int, Row | None] = {}  # FIFO of the entries held; None: in the pack
        self._generation: object = None
        self._unames: npt.NDArray[Any] = np.zeros(0, dtype="S1")  # ``names`` fixed-width (``name_array``)
        self._unames_len = 0
        self._unpack()
        self.hits = 0
        self.misses = 0
        self.loads = 0  # SQL round trips (batched calls to the source)

    def __len__(self) -> int:
        return len(self._adj)

    def __contains__(self, fact_id: object) -> bool:
        i = self._ids.get(fact_id) if isinstance(fact_id, str) else None
        return i is not None and i in self._adj

    # interning ----------------------------------------------------------------------------------
    def index(self, fact_ids: Iterable[str]) -> list[int]:
        """The int of each fact id (new ids get the next ints); stable until ``clear``."""
        ids, names = self._ids, self._names
        if not isinstance(fact_ids, list):
            fact_ids = list(fact_ids)
        known: list[int | None] = list(map(ids.get, fact_ids))
        if None not in known:  # every id known: looked up in C
            return known  # type: ignore[return-value]  # no None
        out = []
        for f in fact_ids:
            i = ids.get(f)
            if i is None:
                f = sys.intern(str(f))  # as the ANN and fact caches' ids: lookups compare pointers
                i = ids[f] = len(names)
                names.append(f)
            out.append(i)
        return out

    @property
    def names(self) -> list[str]:
        """Fact id of each int (read only)."""
        return self._names

    def name_array(self) -> npt.NDArray[Any]:
        """``names`` as a fixed-width array (read only; its length may exceed ``names``'): the ids of
        many ints gathered in C, without touching their string objects, and sortable in C. Bytes
        (``S``) while every id is ASCII, as derived ids are: a quarter of unicode's 4 bytes a
        character (~80 MiB less at 1M facts), in the same order (ASCII's bytes are its code points).
        Unicode (``U``) from the first id that is not. ``.astype(str)`` gives ``str`` either way."""
        n, have = len(self._names), self._unames_len
        if n > have:
            arr = self._unames
            new = _fixed(self._names[have:n], arr.dtype.kind)
            if new.dtype.kind != arr.dtype.kind:  # the first id that is not ASCII: unicode from now on
                arr, have = np.zeros(0, dtype="U1"), 0
                new = _fixed(self._names[:n], "U")
            if n > arr.shape[0] or new.dtype.itemsize > arr.dtype.itemsize:  # grow by doubling
                wide = np.dtype((new.dtype.type, max(arr.dtype.itemsize, new.dtype.itemsize) // _char_bytes(new.dtype)))
                # room for 4 x max_nodes ids at once: np.zeros maps untouched pages lazily, so the room
                # costs no resident memory, and a 1M fabric's walks never copy its ids inside a window
                grown = np.zeros(max(n, 2 * arr.shape[0], 4 * self.max_nodes, 1024), dtype=wide)
                grown[:have] = arr[:have]
                arr = self._unames = grown
            arr[have:n] = new
            self._unames_len = n
        return self._unames

    # consistency --------------------------------------------------------------------------------
    def sync(self, generation: object) -> None:
        """Drop everything if ``generation`` differs from the last one seen (None: no information)."""
        if generation is None:
            return
        if generation != self._generation:
            self.clear()
            self._generation = generation

    def written(self, old: object, new: object, fact_ids: Iterable[str]) -> None:
        """This process moved the graph generation from ``old`` to ``new`` by adding edges of ``fact_ids``."""
        if self._generation == old:
            self.invalidate(fact_ids)
        else:  # another writer came between: nothing cached can be trusted
            self._adj.clear()
            self._unpack()
        self._generation = new

    def invalidate(self, fact_ids: Iterable[str]) -> None:
        """Forget the given facts: call with both endpoints of every edge just written."""
        for fid in fact_ids:
            i = self._ids.get(fid)
            if i is not None:
                self._adj.pop(i, None)
                self._unpacked(i)

    def clear(self) -> None:
        self._adj.clear()
        self._unpack()
        if len(self._names) > 2 * self.max_nodes:  # ints of facts long gone: start the numbering over
            self._ids.clear()
            self._names.clear()
            self._unames_len = 0

    def preload(self, source: EdgeSource, fact_ids: Sequence[str], generation: object, batch: int = 5_000) -> int:
        """Load every edge of ``fact_ids`` (the first ``max_nodes``), read in the transaction that read
        ``generation``: at start-up, as the ANN cache is built, so that the walks of the first
        requests read no edge from the store. Returns the entries held."""
        self.sync(generation)
        ids = self.index(fact_ids[: self.max_nodes])
        missing = [i for i in dict.fromkeys(ids) if i not in self._adj]
        self._evict(len(self._adj) + len(missing) - self.max_nodes)
        parts = [sorted(missing[s : s + batch]) for s in range(0, len(missing), batch)]
        self.pack([(part, *self._columns(source, part)) for part in parts])
        self.name_array()  # at start-up, not in the first walk (100k ids: ~0.1 s)
        self.hits = self.misses = self.loads = 0  # the counters describe the requests served
        return len(self)

    def install(self, fact_ids: Sequence[str], rows: Sequence[Row]) -> None:
        """Replace the entries of ``fact_ids`` with ``rows`` (complete: every edge of each, ordered by
        neighbour id then kind, as the store returns them): the writer in this process keeps what it
        just wrote instead of reading it back. Call ``written`` after, as for any write."""
        ids = self.index(fact_ids)
        adj = self._adj
        for i, row in zip(ids, rows, strict=True):
            adj.pop(i, None)  # re-inserted last: the newest entry is the last to be dropped
            adj[i] = row
            self._unpacked(i)
        self._evict(len(adj) - self.max_nodes)  # the bound holds whatever was installed (oldest first)

    def extend(self, rows: Sequence[tuple[str, str, float, str]]) -> None:
        """Add rows ``(src, dst, weight, kind)`` just written with ON CONFLICT DO NOTHING (a row already
        there, or earlier in ``rows``, stays as it is) to the entries held, in the store's key order;
        facts not held stay so. The writer keeps its structure edges instead of reading every new
        fact's entry back (the arbiter reads them next). Call ``written`` after, without these facts."""
        adds: dict[int, list[tuple[str, str, float, str]]] = {}
        for row in rows:
            i = self._ids.get(row[0])
            if i is not None and i in self._adj:
                adds.setdefault(i, []).append(row)
        names = self._names
        for i, extra in adds.items():
            nb, w, kd = self._entry(i)
            have = {(names[d], EDGE_KINDS[k]) for d, k in zip(nb.tolist(), kd.tolist(), strict=True)}
            merged = [
                (names[d], EDGE_KINDS[k], x) for d, x, k in zip(nb.tolist(), w.tolist(), kd.tolist(), strict=True)
            ]
            for _s, dst, weight, kind in extra:
                if (dst, kind) not in have:
                    have.add((dst, kind))
                    merged.append((dst, kind, float(weight)))
            if len(merged) == nb.shape[0]:
                continue
            merged.sort(key=lambda r: (r[0], r[1]))
            entry: Row = (
                np.asarray(self.index([d for d, _k, _w in merged]), dtype=np.int64),
                np.asarray([x for _d, _k, x in merged], dtype=np.float64),
                np.asarray([_KIND.get(k, 0) for _d, k, _x in merged], dtype=np.int8),
            )
            self.install([names[i]], [entry])

    # reads --------------------------------------------------------------------------------------
    def rows(self, source: EdgeSource, ids: Sequence[int]) -> list[Row]:
        """Every edge of each fact (given as ints), as ``(neighbour ints, weights)``; misses are loaded
        from ``source`` in one batched call."""
        adj, entry = self._adj, self._entry
        missing = sorted({i for i in ids if i not in adj})
        self.hits += len(ids) - len(missing)
        if not missing:
            return [entry(i) for i in ids]
        self.misses += len(missing)
        self.loads += 1
        held = {i: entry(i) for i in ids if i in adj}  # taken first: a full cache's load may evict them
        self._load(source, missing)
        held.update((i, entry(i)) for i in missing)
        return [held[i] for i in ids]

    def _entry(self, i: int) -> Row:
        row = self._adj[i]
        if row is not None:
            return row
        lo = int(self._start[i])
        hi = lo + int(self._count[i])
        nb, w, k = self._pack
        return nb[lo:hi], w[lo:hi], k[lo:hi]

    def _evict(self, n: int) -> None:
        """Drop the ``n`` oldest entries (none if ``n`` <= 0)."""
        if n > 0:
            for i in list(islice(self._adj, n)):
                del self._adj[i]
                self._unpacked(i)

    def _columns(self, source: EdgeSource, missing: list[int]) -> tuple[Row, npt.NDArray[np.int64]]:
        """Every edge of ``missing`` (sorted ints) read from ``source``: the edges' columns grouped by
        source fact in that order, and each one's count."""
        names = self._names
        edge_rows = getattr(source, "edge_rows", None)
        if edge_rows is not None:  # Repository: raw (src, dst, weight, kind) rows, grouped here with numpy
            raw = edge_rows([names[i] for i in missing])
        else:
            loaded = source.adjacency([names[i] for i in missing])
            raw = [(names[i], d, w, "similarity") for i in missing for d, w in loaded.get(names[i], {}).items()]
        if not raw:
            return _EMPTY, np.zeros(len(missing), dtype=np.int64)
        # columns by C-level transposition, ints by one dict lookup a row (new ids interned in order
        # of first appearance, as ``index`` would): the load is thousands of rows per request
        src_col, dst_col, w_col, kind_col = zip(*raw, strict=True)
        ids = self._ids
        fresh = [f for f in dict.fromkeys(dst_col) if f not in ids]
        if fresh:
            self.index(fresh)
        src = np.fromiter(map(ids.__getitem__, src_col), dtype=np.int64, count=len(raw))
        dst = np.fromiter(map(ids.__getitem__, dst_col), dtype=np.int64, count=len(raw))
        w = np.asarray(w_col, dtype=np.float64)
        kind = np.fromiter((_KIND.get(k, 0) for k in kind_col), dtype=np.int8, count=len(raw))
        order = np.argsort(src, kind="stable")
        src, dst, w, kind = src[order], dst[order], w[order], kind[order]
        wanted = np.asarray(missing, dtype=np.int64)
        lo = np.searchsorted(src, wanted, side="left")
        hi = np.searchsorted(src, wanted, side="right")
        if int((hi - lo).sum()) != src.shape[0]:  # rows of facts not asked for: left out
            keep = np.isin(src, wanted)
            dst, w, kind = dst[keep], w[keep], kind[keep]
        return (dst, w, kind), hi - lo

    def _load(self, source: EdgeSource, missing: list[int]) -> None:
        self._evict(len(self._adj) + len(missing) - self.max_nodes)
        (dst, w, kind), counts = self._columns(source, missing)
        ends = np.cumsum(counts).tolist()
        adj, lo = self._adj, 0
        for i, hi in zip(missing, ends, strict=True):
            self._unpacked(i)
            # copies: a view would keep the whole load alive while any one of its entries is
            adj[i] = (dst[lo:hi].copy(), w[lo:hi].copy(), kind[lo:hi].copy()) if hi > lo else _EMPTY
            lo = hi

    # the pack ---------------------------------------------------------------------------------------
    def _unpack(self) -> None:
        self._start = np.zeros(0, dtype=np.int64)  # per int: where its entry starts in the pack, -1: not in it
        self._count = np.zeros(0, dtype=np.int64)
        self._packed = 0  # entries in the pack
        self._pack: Row = _EMPTY

    def _unpacked(self, i: int) -> None:
        """Entry ``i`` was replaced or dropped (called after): it is no longer served from the pack."""
        if i < self._start.shape[0] and self._start[i] >= 0:
            self._start[i] = -1
            self._packed -= 1

    def pack(self, fresh: Sequence[tuple[list[int], Row, npt.NDArray[np.int64]]] = ()) -> None:
        """Lay every entry, and the ``fresh`` ones (ints, then what ``_columns`` read for them), out in
        one CSR array triple; the entries keep no arrays of their own."""
        adj, start, count = self._adj, self._start, self._count
        at = np.fromiter(adj, dtype=np.int64, count=len(adj))
        in_pack = np.zeros(at.shape[0], dtype=bool)
        inside = at < start.shape[0]
        in_pack[inside] = start[at[inside]] >= 0
        old = at[in_pack]
        old_counts = count[old]
        ends = np.cumsum(old_counts)
        pos = np.repeat(start[old] - (ends - old_counts), old_counts) + np.arange(int(ends[-1]) if old.size else 0)
        nb, w, k = self._pack
        parts: list[Row] = [(nb[pos], w[pos], k[pos])]
        loose = at[~in_pack].tolist()
        parts.extend(cast(Row, adj[i]) for i in loose)  # entries outside the pack hold their rows
        order = [old, np.asarray(loose, dtype=np.int64)]
        counts = [old_counts, np.fromiter((len(p[0]) for p in parts[1:]), dtype=np.int64, count=len(loose))]
        for ids, row, n in fresh:
            parts.append(row)
            order.append(np.asarray(ids, dtype=np.int64))
            counts.append(n)
            for i in ids:
                adj[i] = None
        ints = np.concatenate(order)
        sizes = np.concatenate(counts)
        self._pack = (
            np.concatenate([p[0] for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        )
        self._start = np.full(len(self._names), -1, dtype=np.int64)
        self._count = np.zeros(len(self._names), dtype=np.int64)
        self._start[ints] = np.cumsum(sizes) - sizes
        self._count[ints] = sizes
        self._packed = int(ints.shape[0])
        for i in loose:
            adj[i] = None

    def edges(
        self, source: EdgeSource, ids: Sequence[int]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int8]]:
        """Every edge of each fact (ints), as (src, neighbour, weight, kind) columns, the facts' entries
        one after another in the given order: ``rows`` concatenated, counted and loaded as ``rows``."""
        at = np.asarray(ids, dtype=np.int64)
        start = self._start
        inside = at < start.shape[0]
        packed = bool(inside.all()) and bool((start[at[inside]] >= 0).all())
        if not packed:
            rows = self.rows(source, ids)
            unpacked = len(self._adj) - self._packed
            evicted = any(i not in self._adj for i in ids)  # a full cache's load dropped some: no pack holds them
            if evicted or unpacked <= max(1024, len(self._adj) // 4):
                if not rows:
                    return at, _EMPTY[0], _EMPTY[1], _EMPTY[2]
                counts = np.fromiter(map(len, (r[0] for r in rows)), dtype=np.int64, count=len(rows))
                nbs, ws, ks = zip(*rows, strict=True)
                return np.repeat(at, counts), np.concatenate(nbs), np.concatenate(ws), np.concatenate(ks)
            self.pack()
            start = self._start
        else:
            self.hits += len(ids)
        nb, w, k = self._pack
        return graph_kernels.gather_rows(at, start, self._count, nb, w, k)  # compiled: no index arrays

    def adjacency(self, source: EdgeSource, fact_ids: Iterable[str]) -> Adjacency:
        """``{id: {neighbour: weight}}`` for every requested id (``{}`` when it has no edge).

        Misses are loaded from ``source`` in one batched call; only the requested ids are returned,
        each with all of its edges.
        """
        ids = sorted(set(fact_ids))
        names = self._names
        return {
            f: dict(zip([names[j] for j in nb.tolist()], w.tolist(), strict=True))
            for f, (nb, w, _k) in zip(ids, self.rows(source, self.index(ids)), strict=True)
        }

    def neighbours(self, source: EdgeSource, fact_id: str) -> dict[str, float]:
        """Every similarity edge of one fact: ``{neighbour: weight}``."""
        return self.adjacency(source, [fact_id])[fact_id]

    def walk(self, source: EdgeSource, seeds: Iterable[str], hops: int) -> Adjacency:
        """Complete adjacency of every fact within ``hops`` edges of ``seeds`` (levels 0..hops).

        One batched load per level, of the misses only.
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


def _fixed(names: Sequence[str], kind: str) -> npt.NDArray[Any]:
    """``names`` as a fixed-width array: bytes (``kind`` "S") if every one is ASCII, else unicode."""
    if kind == "S":
        try:
            return np.asarray(names, dtype=np.bytes_)
        except UnicodeEncodeError:
            pass
    return np.asarray(names, dtype=np.str_)


def _char_bytes(dtype: np.dtype[Any]) -> int:
    return 1 if dtype.kind == "S" else 4


__all__ = ["GRAPH_GENERATION", "Adjacency", "EdgeSource", "GraphCache", "Row"]
