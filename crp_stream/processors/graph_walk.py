"""The similarity-graph edges one envelope request has read, as one edge list for ``core.cdgr``.

Facts are the fabric graph cache's ints; every loaded fact contributes all of its edges (a cache
entry is complete), so the list holds both directions of every edge with a loaded endpoint. The
CDGR walk and bridge values (``graph_rank.walk_levels``, ``cdgr.bridge_values_edges``) run on
it with numpy instead of merging neighbour dicts per fact.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from crp_stream.core import graph_kernels
from crp_stream.fabric.caches.graph import GraphCache
from crp_stream.fabric.fabric import UnitOfWork


def _ints(n: int = 0) -> npt.NDArray[np.int64]:
    return np.zeros(n, dtype=np.int64)


_TOKENS = itertools.count(1)  # one per LoadedEdges: a stamp no other request's walk leaves


class _Numbering(threading.local):
    """Per thread: ``number[i]``, the compact number of graph-cache int ``i`` in the walk whose token
    is ``stamp[i]``. ``owner`` is the walk the arrays were last stamped for: another walk of the same
    thread (an earlier request's, used again) stamps its own facts back before it reads them."""

    def __init__(self) -> None:
        self.stamp = np.zeros(0, dtype=np.int64)
        self.number = np.zeros(0, dtype=np.int64)
        self.owner = 0


_TABLE = _Numbering()


def _numbering(edges: LoadedEdges, size: int) -> _Numbering:
    """The thread's table, at least ``size`` ints long, holding ``edges``' numbering."""
    t = _TABLE
    if t.stamp.shape[0] < size:
        grown = max(size, 2 * t.stamp.shape[0], 1024)
        t.stamp, t.number, t.owner = np.zeros(grown, dtype=np.int64), np.zeros(grown, dtype=np.int64), 0
    if t.owner != edges.token:
        t.stamp[edges.glob] = edges.token
        t.number[edges.glob] = np.arange(edges.glob.shape[0], dtype=np.int64)
        t.owner = edges.token
    return t


@dataclass
class LoadedEdges:
    done: npt.NDArray[np.bool_] = field(
        default_factory=lambda: np.zeros(0, dtype=bool)
    )  # per compact number: edges loaded
    src: npt.NDArray[np.int64] = field(default_factory=_ints)
    dst: npt.NDArray[np.int64] = field(default_factory=_ints)
    weight: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0, dtype=np.float64))
    kind: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    cache: GraphCache | None = None  # the fabric's, from ``bind``
    # A compact numbering of the facts met so far (``local``), for the walk's levels: arrays as long as
    # the facts this request touched (thousands), not as the graph cache's ints (1M). ``lsrc``/``ldst``
    # are ``src``/``dst`` renumbered; ``glob`` maps back. Forward, through the thread's ``_Numbering``:
    # arrays as long as the cache's ints, made once per thread and stamped with this request's token,
    # so a request neither fills one (at 1M facts that was 8 MB filled and copied a dozen times) nor
    # sorts the facts it met at every call
    lsrc: npt.NDArray[np.int64] = field(default_factory=_ints)
    ldst: npt.NDArray[np.int64] = field(default_factory=_ints)
    glob: npt.NDArray[np.int64] = field(default_factory=_ints)
    token: int = field(default_factory=lambda: next(_TOKENS))

    @property
    def graph(self) -> GraphCache:
        """The bound graph cache (``bind`` first)."""
        if self.cache is None:
            raise RuntimeError("LoadedEdges.bind was not called")
        return self.cache

    def bind(self, uow: UnitOfWork) -> None:
        """On the first read of this request: is the fabric's graph cache still the stored graph?"""
        if self.cache is None:
            self.cache = uow.repo.sync_graph(uow.fabric.graph)

    def ints(self, fact_ids: Iterable[str]) -> list[int]:
        return list(self.graph.index(fact_ids))

    def names(self, ints: Iterable[int]) -> list[str]:
        names = self.graph.names
        return [names[i] for i in ints]

    def load(self, uow: UnitOfWork, ints: Iterable[int]) -> None:
        """Append every edge of the given facts (ints) not loaded yet (through the bound graph cache)."""
        self.load_local(uow, self.local(np.fromiter(ints, dtype=np.int64)))

    def _unloaded(self, local: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Those of the facts met (compact numbers) whose edges are not loaded yet."""
        done = self.done
        inside = local < done.shape[0]
        return np.concatenate([local[inside][~done[local[inside]]], local[~inside]])

    def load_local(self, uow: UnitOfWork, local: npt.NDArray[np.int64]) -> bool:
        """``load`` for facts met so far, by compact number; False when every one was loaded already."""
        local = self._unloaded(local)
        if not local.shape[0]:
            return False
        todo = np.unique(self.glob[local])  # sorted: the cache's rows come in int order
        src, dst, weight, kind = self.graph.edges(uow.repo, todo.tolist())  # slices of the packed cache
        self.src = np.concatenate([self.src, src])
        self.dst = np.concatenate([self.dst, dst])
        self.weight = np.concatenate([self.weight, weight])
        self.kind = np.concatenate([self.kind, kind])
        both = self.local(np.concatenate([src, dst]))  # numbered as src, then dst
        self.lsrc = np.concatenate([self.lsrc, both[: src.shape[0]]])
        self.ldst = np.concatenate([self.ldst, both[src.shape[0] :]])
        if self.done.shape[0] < self.glob.shape[0]:
            self.done = np.concatenate([self.done, np.zeros(self.glob.shape[0] - self.done.shape[0], dtype=bool)])
        self.done[local] = True
        return True

    def local(self, ints: Sequence[int] | npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The compact number of each fact (int); facts not met yet are numbered next, in order of
        first appearance."""
        g = np.asarray(ints, dtype=np.int64).reshape(-1)
        if g.shape[0] == 0:
            return g
        table = _numbering(self, int(g.max()) + 1)
        numbers, fresh = graph_kernels.number(g, table.stamp, table.number, self.token, self.glob.shape[0])
        if fresh.shape[0]:
            self.glob = np.concatenate([self.glob, fresh])
        return numbers

    def neighbours(self, ints: Iterable[int]) -> npt.NDArray[np.int64]:
        """Every neighbour of the given (loaded) facts."""
        return np.unique(self.dst[np.isin(self.src, np.asarray(list(ints), dtype=np.int64))])

    def edges_of(
        self, fact_ids: Iterable[str], kind: int | None = None, among: Iterable[str] | None = None
    ) -> dict[str, dict[str, float]]:
        """``{fact: {neighbour: weight}}`` over the edges read so far (of one ``kind`` if given, an
        index into ``core.graph_rank.EDGE_KINDS``; to the facts ``among`` if given): a fact's own
        edges if it was loaded, else its edges to loaded facts."""
        wanted = list(fact_ids)
        out: dict[str, dict[str, float]] = {f: {} for f in wanted}
        if self.cache is None or not wanted:
            return out
        mark = self._marks(self.graph.index(wanted))  # one pass over the edge list for all of them
        own, back = mark[self.lsrc], mark[self.ldst]
        if among is not None:
            other = self._marks(self.graph.index(among))
            own &= other[self.ldst]
            back &= other[self.lsrc]
        if kind is not None:
            own &= self.kind == kind
            back &= self.kind == kind
        fact = np.concatenate([self.src[own], self.dst[back]])
        other_end = np.concatenate([self.dst[own], self.src[back]])
        weight = np.concatenate([self.weight[own], self.weight[back]])
        names = self.graph.names
        for f, o, w in zip(fact.tolist(), other_end.tolist(), weight.tolist(), strict=True):
            out[names[f]][names[o]] = w
        return out

    def _marks(self, ints: Sequence[int]) -> npt.NDArray[np.bool_]:
        """A mark per compact number, set for the given facts met so far (no number is given out)."""
        mark = np.zeros(self.glob.shape[0], dtype=bool)
        g = np.asarray(ints, dtype=np.int64).reshape(-1)
        if g.shape[0] and self.glob.shape[0]:
            table = _numbering(self, int(g.max()) + 1)
            mark[table.number[g[table.stamp[g] == self.token]]] = True
        return mark


__all__ = ["LoadedEdges"]
