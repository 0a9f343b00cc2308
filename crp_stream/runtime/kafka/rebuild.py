"""``crp-stream rebuild`` on Kafka: drop the projections and replay the topics from offset 0.

Not by resetting the worker group's offsets and letting the workers replay: Kafka orders a partition,
not the topics, and workers replaying every partition at once would let a window request see whatever
ingest had reached by then, not what it saw live. The rebuild reads every partition from offset 0 and
applies the input records in the order the broker appended them (their LogAppendTime; the live order
whenever an input was applied before the next one arrived), and what each record causes on an internal
topic (``crp.facts`` -> arbiter) before the next input, like the embedded rebuild and the live worker.

An output whose derived id is already on its topic is not produced again: the arbiter consumes it with
the partition, offset and broker stamp of the record that carries that id (the first copy), as the
live arbiter did. An output the topics do not have (the code changed) is produced, then consumed. At
the end every group's offsets in the fabric are at the topics' ends: they are the authority, a worker
started afterwards skips everything below them. The rebuild refuses to run while a worker of this
topic prefix is a member of its consumer group.
"""

from __future__ import annotations

import asyncio
import json
import logging
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from sqlalchemy import inspect

from crp_stream.config import ConfigError, Settings
from crp_stream.core.forget import replay_keeps
from crp_stream.events import ALL_TOPICS, INPUT_TOPICS
from crp_stream.events.topics import DOCUMENTS, OPERATOR_COMMANDS, TELEMETRY
from crp_stream.fabric.fabric import Fabric, open_vector_index
from crp_stream.fabric.sql import db
from crp_stream.processors import all_handlers
from crp_stream.processors.base import AnyHandler, Output, Record
from crp_stream.processors.dispatch import ID_HEADER, apply_record, internal_error_output
from crp_stream.runtime import projections
from crp_stream.runtime.kafka.delivery import route
from crp_stream.runtime.kafka.security import client_kwargs
from crp_stream.runtime.rebuild import (
    RebuildResult,
    active_vectors,
    drop_projections,
    restore_audit,
    saved_rows,
    verified,
)
from crp_stream.runtime.transient import is_transient
from crp_stream.runtime.vector_guard import GuardedVectors, VectorJournal, reconcile

log = logging.getLogger("crp_stream.rebuild")


@dataclass(frozen=True)
class Msg:
    topic: str  # contract name
    partition: int
    offset: int
    key: str | None
    value: bytes
    ts_ms: int
    headers: tuple[tuple[str, bytes], ...]

    @property
    def record_id(self) -> str | None:
        return next((v.decode() for k, v in self.headers if k == ID_HEADER), None)


@dataclass
class Topics:
    inputs: list[Msg]  # in replay order
    known: dict[str, dict[str, Msg]]  # output topic -> record id -> its first copy
    ends: dict[tuple[str, int], int]
    partitions: dict[str, int]


def rebuild_kafka(settings: Settings, verify: bool) -> RebuildResult:
    return asyncio.run(_rebuild(settings, verify))


async def _rebuild(settings: Settings, verify: bool) -> RebuildResult:
    await _refuse_if_workers_run(settings)
    topics = await read_topics(settings)
    engine = db.make_engine(settings.database)
    before = snapshot(engine, settings) if verify and "facts" in inspect(engine).get_table_names() else {}
    meta_rows, audit_rows = saved_rows(engine)
    drop_projections(engine, meta_rows, settings)
    _clear_worker_journals(settings)
    producer = AIOKafkaProducer(**client_kwargs(settings), acks="all")
    await producer.start()
    tmp = tempfile.TemporaryDirectory()
    journal = VectorJournal(Path(tmp.name) / "journal.sqlite")
    fabric = Fabric(
        settings,
        engine=engine,
        migrate=False,
        vectors=GuardedVectors(open_vector_index(settings.vectors), journal),
        wrap=lambda v: GuardedVectors(v, journal),
    )
    try:
        fabric.vectors.delete_all()
        replay = _Replay(settings, fabric, topics, producer, journal)
        for msg in topics.inputs:
            await replay.input(msg)
        replay.finish()
        restored = restore_audit(fabric, audit_rows)
        fabric.vectors.flush()
    finally:
        journal.close()
        fabric.close()
        tmp.cleanup()
        await producer.stop()
    return verified(
        RebuildResult(len(topics.inputs), replay.handled, dict(replay.grown), restored), before, settings, snapshot
    )


class _Replay:
    def __init__(
        self, settings: Settings, fabric: Fabric, topics: Topics, producer: AIOKafkaProducer, journal: VectorJournal
    ):
        self.settings, self.fabric, self.topics, self.producer = settings, fabric, topics, producer
        self.journal = journal
        self.handlers = all_handlers()
        for h in self.handlers:
            h.bind(fabric)
        self.handled = 0
        self.grown: dict[str, int] = {}
        self.unreconciled = False

    async def input(self, msg: Msg) -> None:
        """One input record, then everything it causes on internal topics, breadth first."""
        queue = deque([_record(msg)])
        while queue:
            record = queue.popleft()
            for h in self.handlers:
                if record.topic not in h.topics:
                    continue
                for out in self.apply(h, record):
                    copy = self.topics.known.get(out.topic, {}).get(out.record_id) or await self.produce(out)
                    if any(out.topic in other.topics for other in self.handlers):
                        queue.append(_record(copy))

    def apply(self, h: AnyHandler, record: Record) -> list[Output]:
        """One transaction, as the live worker; transient errors retried, others dead-lettered at the third."""
        attempts, delay = 0, 0.05
        failed: BaseException | None = None
        while True:
            try:
                if self.unreconciled:  # the failed attempt's vector writes, before the next attempt
                    reconcile(self.fabric, self.journal)
                    self.unreconciled = False
                with self.fabric.unit_of_work() as uow:
                    outs = (
                        apply_record(h, record, uow)
                        if failed is None
                        else internal_error_output(h, record, failed, uow.settings)
                    )
                    uow.repo.commit_offset(h.group, record.topic, record.partition, record.offset + 1)
                self.journal.clear()
                self.handled += 1
                return outs
            except Exception as exc:
                self.unreconciled = True
                if is_transient(exc):
                    log.warning("rebuild: transient error, retrying in %.2fs: %s", delay, type(exc).__name__)
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                if failed is not None:
                    raise  # even the dead letter fails
                attempts += 1
                if attempts >= 3:
                    log.error(
                        "rebuild: %s: %s[%d]@%d: dead-lettering after %d attempts: %s",
                        h.group,
                        record.topic,
                        record.partition,
                        record.offset,
                        attempts,
                        exc,
                    )
                    failed = exc

    async def produce(self, out: Output) -> Msg:
        """A derivation the topics do not have (the code changed): produce it, as a worker would."""
        with self.fabric.unit_of_work() as uow:
            routed = route([out], uow, self.settings, self.topics.partitions)[0]
        md = await self.producer.send_and_wait(
            routed.topic, routed.value, key=routed.key, partition=routed.partition, headers=routed.headers
        )
        msg = Msg(out.topic, md.partition, md.offset, out.key, out.value, md.timestamp, tuple(routed.headers))
        self.topics.known.setdefault(out.topic, {})[out.record_id] = msg
        self.grown[out.topic] = self.grown.get(out.topic, 0) + 1
        tp = (out.topic, md.partition)
        self.topics.ends[tp] = max(self.topics.ends.get(tp, 0), md.offset + 1)
        return msg

    def finish(self) -> None:
        """Every group's offsets at the topics' ends: what was not re-caused is an older derivation."""
        with self.fabric.unit_of_work() as uow:
            for h in self.handlers:
                for (topic, partition), end in sorted(self.topics.ends.items()):
                    if topic in h.topics and end > 0:
                        uow.repo.commit_offset(h.group, topic, partition, end)


def _record(msg: Msg) -> Record:
    return Record(msg.topic, msg.partition, msg.offset, msg.key, msg.value, msg.ts_ms * 1000, msg.headers)


async def read_topics(settings: Settings) -> Topics:
    """Every record of every topic up to its end now; inputs in the order the broker appended them."""
    names = {settings.topic(b): b for b in ALL_TOPICS}
    consumer = AIOKafkaConsumer(
        **client_kwargs(settings), group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        cluster = await consumer._client.fetch_all_metadata()  # fresh metadata of every topic
        parts = [TopicPartition(n, p) for n in names for p in sorted(cluster.partitions_for_topic(n) or ())]
        if not parts:
            raise ConfigError(f"rebuild: no topic with the prefix {settings.topic_prefix!r} on {settings.broker}")
        firsts = await consumer.beginning_offsets(parts)
        # retention deleted inputs: the replay would miss them. Outputs may be trimmed (derived_retention):
        # what the rebuild derives again and no longer finds on its topic is produced again
        cut = [
            f"{tp.topic}[{tp.partition}] from {o}"
            for tp, o in firsts.items()
            if o > 0 and names[tp.topic] in INPUT_TOPICS
        ]
        if cut:
            raise ConfigError(f"rebuild: the topics no longer start at offset 0 ({', '.join(cut[:5])})")
        ends = {tp: int(o) for tp, o in (await consumer.end_offsets(parts)).items()}
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        read: list[Msg] = []
        left = {tp for tp, end in ends.items() if end > 0}
        while left:
            for tp, batch in (await consumer.getmany(*left, timeout_ms=1000)).items():
                for m in batch:
                    if m.offset < ends[tp]:
                        key = None if m.key is None else bytes(m.key).decode("utf-8", "replace")
                        read.append(
                            Msg(
                                names[tp.topic],
                                tp.partition,
                                m.offset,
                                key,
                                bytes(m.value or b""),
                                m.timestamp,
                                tuple(m.headers or ()),
                            )
                        )
                    if m.offset + 1 >= ends[tp]:
                        left.discard(tp)
    finally:
        await consumer.stop()
    rank = {t: i for i, t in enumerate(INPUT_TOPICS)}
    inputs = sorted((m for m in read if m.topic in rank), key=lambda m: (m.ts_ms, rank[m.topic], m.partition, m.offset))
    inputs = without_forgotten(inputs)
    known: dict[str, dict[str, Msg]] = {}
    for m in sorted((m for m in read if m.topic not in rank), key=lambda m: (m.partition, m.offset)):
        if m.record_id is not None:
            known.setdefault(m.topic, {}).setdefault(m.record_id, m)
    counts: dict[str, int] = {}
    for tp in parts:
        counts[names[tp.topic]] = counts.get(names[tp.topic], 0) + 1
    return Topics(inputs, known, {(names[tp.topic], tp.partition): e for tp, e in ends.items()}, counts)


def without_forgotten(inputs: list[Msg]) -> list[Msg]:
    """The inputs a later ``forget`` names are not replayed (``core.forget.replay_keeps``): plain
    records that the broker still holds stay out of the fabric, even before their command comes."""
    wanted = {DOCUMENTS, TELEMETRY}
    decoded = [
        (m.topic in wanted, _json(m.value) if m.topic in wanted or m.topic == OPERATOR_COMMANDS else None)
        for m in inputs
    ]
    keeps = replay_keeps(decoded)
    dropped = len(inputs) - sum(keeps)
    if dropped:
        log.info("rebuild: %d forgotten input records left out", dropped)
    return [m for m, keep in zip(inputs, keeps, strict=True) if keep]


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


async def _refuse_if_workers_run(settings: Settings) -> None:
    admin = AIOKafkaAdminClient(**client_kwargs(settings))
    await admin.start()
    try:
        groups = [
            g[0] for g in await admin.list_consumer_groups() if str(g[0]).startswith(f"{settings.topic_prefix}worker")
        ]
        busy = []
        for resp in await admin.describe_consumer_groups(groups) if groups else []:
            for group in resp.to_object()["groups"]:
                if group["members"]:
                    busy.append(group["group"])
    finally:
        await admin.close()
    if busy:
        raise ConfigError(f"rebuild: stop the workers first; consumer groups with members: {', '.join(sorted(busy))}")


def _clear_worker_journals(settings: Settings) -> None:
    """The workers' vector journals name points of the dropped projections."""
    spec = settings.vectors
    paths = (
        [Path(spec[len("edge:") :] + ".kafka-journal.sqlite")]
        if spec.startswith("edge:")
        else sorted(Path(settings.data_dir).glob("kafka-vector-journal-*.sqlite"))
    )
    for path in paths:
        if path.exists():
            journal = VectorJournal(path)
            journal.clear()
            journal.close()


def snapshot(engine: Any, settings: Settings) -> dict[str, Any]:
    """The projections as ``rebuild --verify`` compares them on Kafka: without the outboxes (produced
    records waiting for their acknowledgement, none after a rebuild), and the audit log by event id
    (the live arbiter's partitions interleave, so rows of one input may have been written in any order)."""
    snap: dict[str, Any] = projections.tables_snapshot(engine)
    snap["meta"] = [r for r in snap["meta"] if not str(r["key"]).startswith("outbox:")]
    snap["audit_log"] = sorted(snap["audit_log"], key=lambda r: r["event_id"])
    vectors = open_vector_index(active_vectors(engine, settings))
    try:
        snap["vectors"] = projections.vectors_snapshot(vectors, [r["fact_id"] for r in snap["facts"]])
    finally:
        vectors.close()
    return snap


__all__ = ["Msg", "Topics", "read_topics", "rebuild_kafka", "snapshot"]
