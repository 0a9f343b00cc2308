"""What a micro-batch of window requests reads, read once for the batch before any is served.

Every request's top-K probes (its question and its session's open sub-queries) are searched together
(``fabric.vectors.ahead``), and the facts they find are read into the fact cache in one call; each
request then gathers its candidates as alone, from memory. Neither changes what a request finds:
the same probes give the same hits, and the cache returns the rows the store holds.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.fabric.vectors import ahead as vector_ahead
from crp_stream.fabric.vectors.ahead import Probes
from crp_stream.fabric.vectors.port import VectorIndex
from crp_stream.processors import assembly
from crp_stream.processors.session import vec_from_json

if TYPE_CHECKING:
    from crp_stream.processors.retrieval import RequestPlan


@contextmanager
def searched(uow: UnitOfWork, plans: Sequence[RequestPlan]) -> Iterator[None]:
    """Within: the requests' searches answered from memory (a batch of one reads as before)."""
    if len(plans) < 2:
        yield
        return
    by_model: dict[int, list[RequestPlan]] = {}
    for p in plans:  # a session on a model a reembed retired searches that model's vectors
        by_model.setdefault(id(p.model), []).append(p)
    touched: list[VectorIndex] = []
    try:
        for group in by_model.values():
            uow.model = group[0].model
            try:
                index = uow.vectors
                touched.append(index)
                probes = [_probes(p) for p in group]
                vector_ahead.search_ahead(index, probes, assembly.EXCLUDED)
                found: set[str] = set()
                for pr in probes:
                    found.update(index.search_union(pr.vectors, pr.k, pr.now, assembly.EXCLUDED, pr.tenant))
                uow.facts.read_ahead(uow.repo, index, sorted(found))
            finally:
                uow.model = None
        yield
    finally:
        for index in touched:
            vector_ahead.forget(index)


def _probes(p: RequestPlan) -> Probes:
    """The request's searches as ``assembly.gather`` makes them (a fan-out's branches each search a
    part of these)."""
    residual = [vec_from_json(s.embedding) for s in p.state.residual_states()]
    return Probes([p.qvec, *residual], assembly.top_k(p.ev.fact_budget), p.record.ts_us / 1e6, p.state.tenant)


__all__ = ["searched"]
