"""One handler per stream: (event, fabric unit of work) -> output events. No transport code."""

from __future__ import annotations

from crp_stream.processors.base import Handler


def all_handlers() -> list[Handler]:
    """Every worker of the pipeline, in the order the embedded runtime offers each record to them."""
    from crp_stream.processors.ingest import IngestHandler

    handlers: list[Handler] = [IngestHandler()]
    try:
        from crp_stream.processors.arbiter import ArbiterHandler

        handlers.append(ArbiterHandler())
    except ImportError:
        pass
    try:
        from crp_stream.processors.retrieval import RetrievalHandler

        handlers.append(RetrievalHandler())
    except ImportError:
        pass
    try:
        from crp_stream.processors.operator import OperatorHandler

        handlers.append(OperatorHandler())
    except ImportError:
        pass
    return handlers
