"""What a Kafka worker reports about itself: its assigned partitions, their lag, and ``/health``."""

from __future__ import annotations

import time
from typing import Any

import faust

from crp_stream.config import Settings
from crp_stream.runtime.kafka.ledger import PartitionLedger
from crp_stream.runtime.kafka.metrics import Metrics
from crp_stream.runtime.kafka.watch import BrokerWatch


class WorkerStatus:
    """Mixed into ``KafkaWorker``; reads only the state the worker keeps."""

    app: faust.App | None
    settings: Settings
    metrics: Metrics
    broker: BrokerWatch
    groups: tuple[str, ...]
    last_error: str | None
    started_at: float | None
    _group_of: dict[str, str]
    ledger: PartitionLedger

    @property
    def app_id(self) -> str:
        raise NotImplementedError

    def assignment(self) -> list[Any]:
        if self.app is None:
            return []
        try:
            return sorted(self.app.consumer.assignment(), key=lambda tp: (tp.topic, tp.partition))
        except Exception:
            return []

    def update_lag(self) -> None:
        assigned = self.assignment()
        self.metrics.assigned.set(len(assigned))
        for tp in assigned:
            group = self._group_of.get(tp.topic)
            if group is None or self.app is None:
                continue
            base = self.settings.base_topic(tp.topic)
            position = self.ledger.positions(group, base, [tp.partition]).get(tp.partition)
            try:
                high = self.app.consumer.highwater(tp)
            except Exception:
                continue
            if high is None or position is None:
                continue
            self.metrics.lag.labels(group=group, topic=base, partition=str(tp.partition)).set(max(0, high - position))

    def health(self) -> dict[str, Any]:
        app = self.app
        running = app is not None and app.started and not app.should_stop and not app.crashed
        ok = self.last_error is None and self.broker.reachable
        return {
            "status": "ok" if running and ok else "degraded" if running else "down",
            "groups": list(self.groups),
            "consumer_group": self.app_id,
            "assigned": [f"{tp.topic}[{tp.partition}]" for tp in self.assignment()],
            "broker": "reachable" if self.broker.reachable else f"unreachable: {self.broker.error}",
            "last_error": self.last_error,
            "uptime_s": round(time.monotonic() - self.started_at, 1) if self.started_at else 0.0,
        }
