"""The Kafka worker's fabric thread: every database transaction of the worker runs there, one at a
time, off the event loop, timed (``profiling.FabricThread``); transient errors are retried with a
backoff. Vector writes are outside the database transaction: they are journaled, and after a
rollback the journal puts them back (``vector_guard.reconcile``); when that fails too (the index or
the database is down), the next attempt of any record reconciles first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from crp_stream.fabric.fabric import Fabric
from crp_stream.runtime.kafka.metrics import Metrics
from crp_stream.runtime.kafka.profiling import FabricThread
from crp_stream.runtime.transient import is_transient
from crp_stream.runtime.vector_guard import VectorJournal, reconcile

log = logging.getLogger("crp_stream.kafka")

T = TypeVar("T")


class FabricExecutor:
    def __init__(
        self, fabric: Fabric, journal: VectorJournal, metrics: Metrics, on_transient: Callable[[str], None]
    ) -> None:
        self.fabric = fabric
        self.journal = journal
        self.on_transient = on_transient  # the worker's last error (status, /health)
        self.thread = FabricThread(metrics)  # timed; CRP_PROFILE=path: under cProfile
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="crp-fabric")
        self._unreconciled = False  # a rollback's vector writes are not put back yet

    async def call(self, group: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the fabric thread, timed under ``group``; no retry."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.thread.run, group, fn, *args)

    async def retry(self, fn: Callable[[], T], what: str, pool: ThreadPoolExecutor | None = None) -> T:
        """``fn()`` on the fabric thread (or ``pool``), retried while its errors are transient."""
        loop = asyncio.get_running_loop()
        delay = 0.05
        while True:
            try:
                return await loop.run_in_executor(pool or self.pool, fn)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self.on_transient(f"{what}: {type(exc).__name__}")
                log.warning("%s: transient error, retrying in %.2fs: %s", what, delay, type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def before_apply(self) -> None:
        """On the fabric thread, before a transaction: a rolled-back attempt's vector writes first
        (while the index or database is down this raises, and the attempt is retried)."""
        if self._unreconciled:
            reconcile(self.fabric, self.journal)
            self._unreconciled = False

    def committed(self) -> None:
        """The transaction committed: its vector writes stand."""
        self.journal.clear()

    def rolled_back(self) -> None:
        """After a rollback: put the vector points the transaction wrote back to the committed state."""
        try:
            reconcile(self.fabric, self.journal)
        except Exception as exc:
            if not is_transient(exc):
                raise
            self._unreconciled = True
            log.warning("vector index not reconciled yet (%s): done before the next attempt", type(exc).__name__)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)
        self.thread.dump()


__all__ = ["FabricExecutor"]
