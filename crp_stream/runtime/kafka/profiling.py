"""The Kafka worker's fabric thread, timed: every record's fabric work (transaction, handler, commit,
outbox) runs there, one record at a time.

Its wall time per record (``crp_fabric_thread_seconds``) and CPU time (``crp_fabric_thread_cpu_seconds``)
are exported; ``crp_record_handling_seconds`` adds the wait for the thread (records of other partitions
queued before). With ``CRP_PROFILE=path`` (off by default) the work also runs under cProfile (wall
clock; ``CRP_PROFILE_CLOCK=cpu``: the thread's CPU time, which other processes' load does not
inflate), written to ``path`` when the worker stops (``python -m pstats path``;
``ops/bench/kafka_e2e.py --profile``).
"""

from __future__ import annotations

import cProfile
import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from crp_stream.runtime.kafka.metrics import Metrics

log = logging.getLogger("crp_stream.kafka")

T = TypeVar("T")
ENV = "CRP_PROFILE"


class FabricThread:
    def __init__(self, metrics: Metrics, path: str | None = None) -> None:
        self.metrics = metrics
        self.path = path if path is not None else os.environ.get(ENV) or None
        cpu = os.environ.get(ENV + "_CLOCK") == "cpu"
        self._prof = (cProfile.Profile(time.thread_time) if cpu else cProfile.Profile()) if self.path else None

    def run(self, group: str, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn(*args)`` (on the fabric thread), timed."""
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args) if self._prof is None else self._prof.runcall(fn, *args)
        finally:
            self.metrics.fabric_wall.labels(group=group).observe(time.perf_counter() - wall)
            self.metrics.fabric_cpu.labels(group=group).inc(time.thread_time() - cpu)

    def dump(self) -> None:
        if self._prof is not None and self.path:
            self._prof.dump_stats(self.path)
            log.warning("fabric thread profile written to %s", self.path)


__all__ = ["ENV", "FabricThread"]
