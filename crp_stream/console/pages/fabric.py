"""The fabric: facts by source and status, topics with offsets and lag, the model id and its thresholds."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from crp_stream.console.app import Console


def routes(console: Console) -> list[Route]:
    backend = console.backend

    def load() -> dict[str, Any]:
        with backend.repo() as repo:
            counts = repo.fact_counts()
            sources = {s["source"]: dict(s) for s in repo.sources()}
            edges = repo.edge_count()
        statuses = sorted({state for _s, state, _n in counts})
        by_source: dict[str, dict[str, int]] = {}
        for source, state, n in counts:
            by_source.setdefault(source, {})[state] = n
        return {
            "statuses": statuses,
            "by_source": sorted(by_source.items()),
            "sources": sources,
            "edges": edges,
            "topics": backend.topics(),
            "model": backend.model(),
            "vectors": backend.vector_count(),
        }

    async def index(request: Request) -> Response:
        return console.page(request, "fabric.html", **await console.call(load))

    return [Route("/fabric", index)]
