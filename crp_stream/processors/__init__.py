"""One handler per stream: (event, fabric unit of work) -> output events. No transport code."""

from __future__ import annotations

from crp_stream.processors.arbiter import ArbiterHandler
from crp_stream.processors.base import AnyHandler
from crp_stream.processors.ingest import IngestHandler
from crp_stream.processors.operator import OperatorHandler
from crp_stream.processors.retrieval import RetrievalHandler

# The order the embedded runtime offers each record in; a Kafka worker runs any subset.
HANDLER_GROUPS: tuple[str, ...] = ("ingest", "arbiter", "retrieval", "operator")
_HANDLERS: dict[str, type[AnyHandler]] = {
    "ingest": IngestHandler,
    "arbiter": ArbiterHandler,
    "retrieval": RetrievalHandler,
    "operator": OperatorHandler,
}


def all_handlers(groups: tuple[str, ...] = HANDLER_GROUPS) -> list[AnyHandler]:
    """A fresh handler for each of ``groups``, in pipeline order."""
    return [_HANDLERS[g]() for g in HANDLER_GROUPS if g in groups]


__all__ = ["HANDLER_GROUPS", "all_handlers"]
