"""Prometheus metrics of a worker: one registry per runtime, rendered by its ``/metrics`` endpoint.

What a runtime counts: records processed and dead-lettered per input topic, verdicts (audit events
by ``audit_type``), outputs per topic, envelope assembly latency (the retrieval handler's time on a
window request, in process) and consumer lag per partition.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from crp_stream.events.topics import AUDIT, DEADLETTER, WINDOW_REQUESTS

LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.02,
    0.025,
    0.035,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    10.0,
)

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]


class Metrics:
    def __init__(self, runtime: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.info = Gauge("crp_worker_info", "Constant 1, labelled with the runtime", ["runtime"], registry=r)
        self.info.labels(runtime=runtime).set(1)
        self.processed = Counter(
            "crp_records_processed", "Input records applied by a handler group", ["group", "topic"], registry=r
        )
        self.deadlettered = Counter(
            "crp_records_deadlettered", f"Input records sent to {DEADLETTER}", ["topic"], registry=r
        )
        self.skipped = Counter(
            "crp_records_redelivered_skipped",
            "Redelivered records skipped because the fabric already committed them",
            ["group", "topic"],
            registry=r,
        )
        self.outputs = Counter("crp_output_records", "Records produced, by output topic", ["topic"], registry=r)
        self.verdicts = Counter(
            "crp_verdicts", "Audit events emitted, by audit_type (verdicts and actions)", ["audit_type"], registry=r
        )
        self.errors = Counter(
            "crp_handler_errors", "Failed attempts to apply a record (retried)", ["group", "kind"], registry=r
        )
        self.assembly = Histogram(
            "crp_envelope_assembly_seconds",
            "In-process time to turn a window request into its envelopes",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.handling = Histogram(
            "crp_record_handling_seconds",
            "In-process time to apply one record",
            ["group"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.fabric_wall = Histogram(
            "crp_fabric_thread_seconds",
            "Wall time of one record's work on the fabric thread (transaction and commit; no queueing)",
            ["group"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.fabric_cpu = Counter(
            "crp_fabric_thread_cpu_seconds", "CPU time of the fabric thread's record work", ["group"], registry=r
        )
        self.barrier = Histogram(
            "crp_barrier_wait_seconds",
            "Kafka: a window request's wait for the inputs appended before it",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.barrier_timeouts = Counter(
            "crp_barrier_timeouts",
            "Kafka: window requests served before the barrier was met (envelope header CRP-Context-Fabric-Lag)",
            registry=r,
        )
        self.waited = Histogram(
            "crp_record_wait_seconds",
            "From the broker's append of a record to the start of its handling (fetch + queue)",
            ["group"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.produced = Histogram(
            "crp_produce_seconds",
            "Producing one record's outputs until acknowledged",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.lag = Gauge(
            "crp_consumer_lag",
            "Records behind the partition's high watermark",
            ["group", "topic", "partition"],
            registry=r,
        )
        self.assigned = Gauge("crp_assigned_partitions", "Partitions assigned to this worker", registry=r)
        self.broker_reachable = Gauge(
            "crp_broker_reachable", "1 while the broker answers metadata requests", registry=r
        )
        self._lock = threading.Lock()

    def record_outputs(self, input_topic: str, outputs: Iterable[Any]) -> None:
        """Count one applied record's outputs (objects with ``topic`` and ``value``, base topic names)."""
        for o in outputs:
            self.outputs.labels(topic=o.topic).inc()
            if o.topic == DEADLETTER:
                self.deadlettered.labels(topic=input_topic).inc()
            elif o.topic == AUDIT:
                self.verdicts.labels(audit_type=_audit_type(o.value)).inc()

    def observe(self, group: str, topic: str, seconds: float) -> None:
        self.processed.labels(group=group, topic=topic).inc()
        self.handling.labels(group=group).observe(seconds)
        if topic == WINDOW_REQUESTS:
            self.assembly.observe(seconds)

    def render(self) -> bytes:
        with self._lock:
            return generate_latest(self.registry)


def _audit_type(value: bytes) -> str:
    try:
        return str(json.loads(value).get("audit_type") or "unknown")
    except (ValueError, AttributeError):
        return "unknown"
