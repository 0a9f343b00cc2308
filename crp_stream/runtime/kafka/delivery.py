"""Where a handler's outputs go on Kafka, and the outbox that makes producing them crash-safe.

Routing: every output carries the header ``crp-id`` (its derived record id) and is keyed as the
contract says. The partition is murmur2(partition key) like Kafka's default partitioner, where the
partition key is the record key, except on ``crp.facts``: there it is the fact's claim key
(subject/attribute), so every change of one claim lands on one partition and one arbiter sees them
in order; the record key stays the fact id. A fact without a structured claim goes by its fact id.

Outbox: the outputs of a record are written in the same database transaction as its effects and its
consumer offset (a row of ``meta`` per handler group and input partition), and produced after the
commit. A consumer downstream therefore never sees an output whose effects are not yet committed
(the arbiter looks a fact up by the id in ``FactRecorded``), and a crash between the commit and the
broker's acknowledgement loses nothing: on partition assignment the outbox is produced again. The
copies carry the same ``crp-id`` and the same idempotency keys, so consumers ignore them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.partitioner import murmur2

from crp_stream.config import Settings
from crp_stream.core.claim_values import claim_key
from crp_stream.events.topics import FACTS
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors.base import Output
from crp_stream.processors.dispatch import ID_HEADER

log = logging.getLogger("crp_stream.kafka")

OUTBOX_PREFIX = "outbox:"


@dataclass(frozen=True)
class Routed:
    topic: str  # physical topic name
    partition: int
    key: bytes
    value: bytes
    record_id: str
    trace: tuple[tuple[str, bytes], ...] = ()  # the trace context of its input (processors/tracing.py)

    @property
    def headers(self) -> list[tuple[str, bytes]]:
        return [(ID_HEADER, self.record_id.encode()), *self.trace]


def partition_for(key: str, partitions: int) -> int:
    """Kafka's default partitioner for a non-null key (murmur2, positive, modulo)."""
    return int(murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


def route(
    outputs: Sequence[Output], uow: UnitOfWork, settings: Settings, partitions: Mapping[str, int]
) -> list[Routed]:
    """Physical topic and partition of each output, in emission order. Runs inside the transaction."""
    claims = _fact_claims([o for o in outputs if o.topic == FACTS], uow)
    routed = []
    for o in outputs:
        pkey = claims.get(o.record_id, o.key) if o.topic == FACTS else o.key
        routed.append(
            Routed(
                settings.topic(o.topic),
                partition_for(pkey, partitions[o.topic]),
                o.key.encode("utf-8"),
                o.value,
                o.record_id,
                o.headers,
            )
        )
    return routed


def _fact_claims(outputs: Sequence[Output], uow: UnitOfWork) -> dict[str, str]:
    """record_id -> claim key, for the ``crp.facts`` outputs whose fact has subject and attribute."""
    named: dict[str, tuple[str, str]] = {}
    lookup: dict[str, list[str]] = {}
    for o in outputs:
        try:
            value = json.loads(o.value)
        except ValueError:
            continue
        if value.get("subject") and value.get("attribute"):
            named[o.record_id] = (str(value["subject"]), str(value["attribute"]))
        elif isinstance(value.get("fact_id"), str):
            lookup.setdefault(value["fact_id"], []).append(o.record_id)
    if lookup:
        for fid, row in uow.repo.facts_by_ids(list(lookup)).items():
            if row.get("subject") and row.get("attribute"):
                for rid in lookup[fid]:
                    named[rid] = (str(row["subject"]), str(row["attribute"]))
    return {rid: claim_key(s, a) for rid, (s, a) in named.items()}


def outbox_key(group: str, base_topic: str, partition: int) -> str:
    return f"{OUTBOX_PREFIX}{group}:{base_topic}:{partition}"


def outbox_value(routed: Sequence[Routed]) -> str:
    rows: list[list[Any]] = []
    for r in routed:
        row: list[Any] = [
            r.topic,
            r.partition,
            base64.b64encode(r.key).decode(),
            base64.b64encode(r.value).decode(),
            r.record_id,
        ]
        if r.trace:  # a sixth field only when traced: outboxes written before it read the same
            row.append([[k, v.decode("utf-8", "replace")] for k, v in r.trace])
        rows.append(row)
    return json.dumps(rows, separators=(",", ":"))


def save_outbox(uow: UnitOfWork, key: str, routed: Sequence[Routed]) -> None:
    uow.repo.set_meta(key, outbox_value(routed))


def load_outbox(uow: UnitOfWork, key: str) -> list[Routed]:
    raw = uow.repo.get_meta(key)
    if not raw:
        return []
    out = []
    for t, p, k, v, rid, *trace in json.loads(raw):
        headers = tuple((str(n), str(h).encode()) for n, h in trace[0]) if trace else ()
        out.append(Routed(t, int(p), base64.b64decode(k), base64.b64decode(v), rid, headers))
    return out


class Outboxes:
    """Which partitions' outboxes may hold rows, and which wait for the broker's acknowledgement.

    Changed by the fabric thread (in and after a unit of work) and by the event loop (acks, claims):
    every access is under one lock. The one-record and the batched path share these rules.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirty: set[str] = set()  # outboxes that may hold rows
        self._unacked: set[str] = set()  # outboxes whose rows the broker has not acknowledged yet

    def save(self, uow: UnitOfWork, key: str, routed: Sequence[Routed], offset: tuple[str, str, int, int]) -> None:
        """In the unit of work: the partition's consumer offset ``(group, topic, partition, next)``
        and its outbox, in one statement on PostgreSQL: the outputs, or empty if it may hold old rows
        (already produced; an empty one needs no write)."""
        with self._lock:
            dirty = key in self._dirty
        value = outbox_value(routed) if routed or dirty else None
        uow.repo.commit_offset_and_meta(*offset, key, value)  # the offset never moves back

    def committed(self, produced: Mapping[str, bool]) -> None:
        """After the commit: outboxes that got outputs wait for the broker; the others are empty."""
        with self._lock:
            for key, any_rows in produced.items():
                if any_rows:
                    self._dirty.add(key)
                    self._unacked.add(key)
                else:
                    self._dirty.discard(key)

    def acked(self, keys: Iterable[str]) -> None:
        with self._lock:
            self._unacked.difference_update(keys)

    def reproduced(self, key: str) -> None:
        """A claimed partition's old outbox was produced again; its rows stay until emptied."""
        with self._lock:
            self._dirty.add(key)

    def clearable(self) -> list[str]:
        """Outboxes with rows the broker has acknowledged: emptied on a clean stop."""
        with self._lock:
            return sorted(self._dirty - self._unacked)

    def cleared(self, keys: Iterable[str]) -> None:
        with self._lock:
            self._dirty.difference_update(keys)


async def produce_until_acked(producer: Any, routed: Sequence[Routed], failed: Callable[[str], None]) -> None:
    """Send every output, then wait for all acknowledgements; retried (backing off up to 5 s) until
    the broker takes them all. ``failed`` hears each failure (the worker's health shows it)."""
    delay = 0.1
    while True:
        try:
            futures = [await producer.send(r.topic, r.key, r.value, r.partition, None, r.headers) for r in routed]
            await asyncio.gather(*futures)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failed(f"produce: {type(exc).__name__}")
            log.warning(
                "producing %d outputs failed, retrying in %.1fs: %s: %s", len(routed), delay, type(exc).__name__, exc
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
