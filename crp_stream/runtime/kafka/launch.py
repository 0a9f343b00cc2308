"""``crp-stream worker``: the process around a ``KafkaWorker`` (logging, signals, waiting for services)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Sequence

from crp_stream.config import Settings
from crp_stream.runtime import heap, threads
from crp_stream.runtime.kafka.delivery import Routed
from crp_stream.runtime.kafka.groups import parse_groups
from crp_stream.runtime.kafka.startup import wait_for_services
from crp_stream.runtime.kafka.watch import RateLimit
from crp_stream.runtime.kafka.worker import KafkaWorker, Mount


def run_worker(
    settings: Settings,
    groups: Sequence[str] | str | None = None,
    after_commit: Callable[[list[Routed]], None] | None = None,
    mounts: Sequence[Mount] = (),
) -> int:
    """``crp-stream worker``: run one Kafka worker process until it is told to stop."""
    for name in ("faust", "mode", "aiokafka", "kafka"):
        if logging.getLogger().level > logging.DEBUG:
            logging.getLogger(name).setLevel(logging.WARNING)
    limit = RateLimit()  # the clients log every reconnect attempt; BrokerWatch says what matters
    for handler in logging.getLogger().handlers:
        handler.addFilter(limit)
    chosen = parse_groups(groups)
    threads.limit_blas(settings.blas_threads)  # from the main thread, before the fabric thread runs

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
        if not await wait_for_services(settings, stop):
            return 0
        worker = KafkaWorker(settings, chosen, after_commit=after_commit, mounts=mounts)
        # as `crp-stream run` does (a full collection over faust's objects cost tens of ms mid-request)
        heap.settle()
        return await worker.run(stop)

    return asyncio.run(main())


__all__ = ["run_worker"]
