"""The Kafka runtime: a faust-streaming app driving the same handlers as the embedded runtime, on a
real broker, PostgreSQL and Qdrant; one agent per handler group, workers of a group split partitions.

At-least-once delivery with idempotent, transactional fabric effects (not faust's exactly_once: the
effects live in the database, which a Kafka transaction cannot include). One database transaction
checks the fabric's offset, applies the records and writes their outputs to the partition's outbox;
the outputs are produced after the commit. Ingest and the arbiter apply a burst in one transaction
(batch.py), the other groups one record each; handler work runs off the event loop (docs/kafka.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import faust

from crp_stream.config import ConfigError, Settings
from crp_stream.processors import all_handlers, tracing
from crp_stream.processors.base import AnyHandler, Output, Record
from crp_stream.processors.dispatch import IsolationNeeded, apply_record, internal_error_output
from crp_stream.runtime.kafka.batch import BATCHED_GROUPS, BatchAgent
from crp_stream.runtime.kafka.delivery import (
    Outboxes,
    Routed,
    load_outbox,
    outbox_key,
    produce_until_acked,
    route,
    save_outbox,
)
from crp_stream.runtime.kafka.executor import FabricExecutor
from crp_stream.runtime.kafka.fabric_open import open_fabric
from crp_stream.runtime.kafka.groups import GROUPS, parse_groups
from crp_stream.runtime.kafka.ledger import PartitionLedger
from crp_stream.runtime.kafka.metrics import CONTENT_TYPE_LATEST, Metrics
from crp_stream.runtime.kafka.projection import VectorProjection, projects
from crp_stream.runtime.kafka.security import bootstrap_servers, client_kwargs, faust_kwargs
from crp_stream.runtime.kafka.sessions import WorkerBarrier
from crp_stream.runtime.kafka.status import WorkerStatus
from crp_stream.runtime.kafka.topics import ensure_topics
from crp_stream.runtime.kafka.watch import BrokerWatch
from crp_stream.runtime.transient import is_transient
from crp_stream.runtime.vector_guard import VectorJournal, reconcile

log = logging.getLogger("crp_stream.kafka")

LOG_APPEND_TIME = 1

Mount = tuple[str, Callable[["KafkaWorker"], Any]]  # (path prefix, ASGI app factory)


class KafkaWorker(WorkerStatus):
    def __init__(
        self,
        settings: Settings,
        groups: Sequence[str] | None = None,
        *,
        max_attempts: int = 3,
        session_timeout_s: float = 10.0,
        commit_interval_s: float = 1.0,
        after_commit: Callable[[list[Routed]], None] | None = None,
        mounts: Sequence[Mount] = (),
        batch_max: int | None = None,
    ):
        self.settings = settings
        self.servers, self.kafka = bootstrap_servers(settings.broker), client_kwargs(settings)  # security.py
        self.groups = parse_groups(groups)
        self.handlers: list[AnyHandler] = [h for h in all_handlers() if h.group in self.groups]
        missing = sorted(set(self.groups) - {h.group for h in self.handlers})
        if missing:
            raise ConfigError(f"groups: no handler is installed for {', '.join(missing)}")
        # vector writes are outside the database transaction: journal them, undo them on a rollback
        self.journal = VectorJournal(self.journal_path())
        if tracing.enabled(settings):  # ``on`` without the otel extra: a configuration error now
            tracing.install_provider()
        self.fabric = open_fabric(settings, self.journal)
        self.fabric.warm(graph=any(h.group == "retrieval" for h in self.handlers))  # not on the first requests
        for h in self.handlers:
            h.bind(self.fabric)
        reconcile(self.fabric, self.journal)  # a crash may have left a record's vector writes behind
        self.max_attempts = max_attempts
        self.session_timeout_s = session_timeout_s
        self.commit_interval_s = commit_interval_s
        self.batch_max = settings.kafka_batch_max if batch_max is None else batch_max  # 1: one per record
        self.metrics = Metrics("kafka")
        self.partitions: dict[str, int] = {}
        self.app: faust.App | None = None
        self.executor = FabricExecutor(self.fabric, self.journal, self.metrics, self._transient)
        self.ledger = PartitionLedger()
        self.outboxes = Outboxes()
        self._group_of: dict[str, str] = {settings.topic(t): h.group for h in self.handlers for t in h.topics}
        self._warned_ts: set[str] = set()
        self.last_error: str | None = None
        self.started_at: float | None = None
        self.broker = BrokerWatch(self.kafka, on_change=lambda up: self.metrics.broker_reachable.set(int(up)))
        self.after_commit = after_commit  # tests inject faults here (between commit and produce)
        self.mounts = tuple(mounts)  # (path prefix, ASGI app factory) served on the web port (the console)
        # event-time barrier (barrier.py): retrieval records leave log order, so the committed offset
        # of a partition is its lowest record not yet applied (redelivery is deduplicated by id)
        self.rb = WorkerBarrier(self)
        self.projection = VectorProjection(self) if projects(self) else None  # an edge: index per worker

    def journal_path(self) -> Path:
        """Beside an embedded index (one process per index); else per data dir and consumer group, so
        workers on one host need distinct ``--data`` directories."""
        spec = self.settings.vectors
        if spec.startswith("edge:"):
            return Path(spec[len("edge:") :] + ".kafka-journal.sqlite")
        return Path(self.settings.data_dir) / f"kafka-vector-journal-{self.app_id}.sqlite"

    @property
    def app_id(self) -> str:
        suffix = "" if self.groups == GROUPS else "-" + "-".join(self.groups)
        return f"{self.settings.topic_prefix}worker{suffix}"

    # app ------------------------------------------------------------------------------------------
    def build_app(self) -> faust.App:
        port = self.settings.metrics_port
        static: dict[str, Any] = {}
        if self.settings.instance_id:
            # static membership: a restarted worker takes its partitions back without a rebalance;
            # faust's assignor asserts the returned assignment names this worker's URL, so keep it stable
            static = {
                "consumer_group_instance_id": self.settings.instance_id,
                "canonical_url": f"http://localhost/{quote(self.settings.instance_id, safe='')}",
            }
        datadir = self.settings.data_dir / "faust"  # not the cwd: faust writes there even with memory://
        datadir.mkdir(parents=True, exist_ok=True)
        app = faust.App(
            self.app_id,
            **faust_kwargs(self.settings),  # broker and broker_credentials (SASL, TLS): security.py
            value_serializer="raw",
            key_serializer="raw",
            store="memory://",
            autodiscover=False,
            topic_allow_declare=False,
            topic_disable_leader=True,
            consumer_auto_offset_reset="earliest",
            processing_guarantee="at_least_once",
            broker_commit_interval=self.commit_interval_s,
            broker_session_timeout=self.session_timeout_s,
            broker_heartbeat_interval=max(1.0, self.session_timeout_s / 4),
            broker_rebalance_timeout=60.0,
            producer_acks=-1,
            stream_wait_empty=False,
            web_enabled=bool(port),
            web_port=port or 6066,
            web_bind="0.0.0.0",
            web_in_thread=False,
            datadir=str(datadir),
            **static,
        )
        for h in self.handlers:
            channel = app.topic(
                *[self.settings.topic(t) for t in h.topics], key_serializer="raw", value_serializer="raw"
            )
            app.agent(channel, name=f"crp-{h.group}")(self._agent(h))

        @app.page("/metrics")
        async def metrics(web: Any, request: Any) -> Any:
            return web.bytes(self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

        @app.page("/health")
        async def health(web: Any, request: Any) -> Any:
            body = self.health()
            return web.json(body, status=200 if body["status"] == "ok" else 503)

        async def revoked(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
            self.forget(args[0] if args else kwargs.get("revoked"))

        app.on_partitions_revoked.connect(cast(Any, revoked))

        async def lag() -> None:
            self.update_lag()

        app.timer(interval=2.0)(lag)
        if self.mounts:  # the operator console (runtime/kafka/console.py)
            from crp_stream.runtime.kafka.console import mount_all

            mount_all(app, self)

        self.app = app
        return app

    def _agent(self, h: AnyHandler) -> Any:
        async def agent(stream: Any) -> None:
            if h.group == "retrieval" and self.settings.barrier_wait > 0:
                async for event in stream.noack().events():  # applied maybe out of order, acked in order
                    self.rb.sequence(h, event)
                return
            if h.group in BATCHED_GROUPS and self.batch_max > 1:
                await BatchAgent(self, h, self.batch_max, self.settings.batch_linger_ms / 1000).run(
                    stream
                )  # batch.py: one transaction per burst
                return
            async for event in stream.events():
                await self.rb.before(h.group, event.message)
                await self.handle_message(h, event.message)

        agent.__name__ = agent.__qualname__ = f"crp_{h.group}"
        return agent

    # one record -----------------------------------------------------------------------------------
    async def handle_message(self, h: AnyHandler, m: Any, lag_ms: int | None = None) -> None:
        slot = (h.group, self.settings.base_topic(m.topic), m.partition)
        async with self.rb.lock(slot):  # a partition's outbox holds one record's outputs until acknowledged
            await self._handle(h, m, lag_ms)
        self.rb.applied(slot, m.offset)

    def _transient(self, error: str) -> None:
        self.last_error = error

    def record(self, m: Any, lag_ms: int | None = None) -> Record:
        """The handlers' view of a faust message (the epoch is the broker's LogAppendTime)."""
        base = self.settings.base_topic(m.topic)
        if m.timestamp_type != LOG_APPEND_TIME and m.topic not in self._warned_ts:
            self._warned_ts.add(m.topic)
            log.warning("topic %s: record timestamps are not LogAppendTime; the epoch is the producer's", m.topic)
        ts_us = round((m.timestamp or 0.0) * 1000) * 1000
        key = None if m.key is None else bytes(m.key).decode("utf-8", "replace")
        return Record(
            base, m.partition, m.offset, key, bytes(m.value or b""), ts_us, tuple(m.headers or ()), fabric_lag_ms=lag_ms
        )

    async def claimed(self, h: AnyHandler, m: Any) -> tuple[str, str, int]:
        """The slot of message ``m``, claimed first if the partition is new to this worker or came back
        in another generation."""
        slot = (h.group, self.settings.base_topic(m.topic), m.partition)
        if self.ledger.unclaimed(slot, m.generation_id):
            await self.claim_partition(h, slot[1], m.partition, m.generation_id)
        return slot

    async def _handle(self, h: AnyHandler, m: Any, lag_ms: int | None) -> None:
        record = self.record(m, lag_ms)
        base = record.topic
        slot = await self.claimed(h, m)
        if record.offset < self.ledger.offset(slot):
            self.metrics.skipped.labels(group=h.group, topic=base).inc()
            return
        if m.timestamp:
            self.metrics.waited.labels(group=h.group).observe(max(0.0, time.time() - m.timestamp))
        t0 = time.perf_counter()
        commit_to = self.rb.commit_to(slot, record.offset, self.ledger.offset(slot))
        outputs, routed = await self._apply(h, record, commit_to)
        elapsed = time.perf_counter() - t0
        if outputs is not None and self.after_commit is not None:
            self.after_commit(routed)
        t1 = time.perf_counter()
        await self.produce(routed)
        if routed:
            self.metrics.produced.observe(time.perf_counter() - t1)
        self.outboxes.acked([outbox_key(h.group, base, m.partition)])
        self.ledger.advance(slot, commit_to)
        if outputs is not None:
            self.metrics.observe(h.group, base, elapsed)
            self.metrics.record_outputs(base, outputs)
        else:
            self.metrics.skipped.labels(group=h.group, topic=base).inc()

    def forget(self, revoked: Any) -> None:
        """Revoked partitions are claimed again (offset and outbox reloaded) if they come back."""
        for tp in revoked or ():
            self.rb.forget(tp.topic, tp.partition)
            self.ledger.release(self.settings.base_topic(tp.topic), tp.partition)

    async def claim_partition(self, h: AnyHandler, base: str, partition: int, generation: int) -> None:
        """First record of a (re)assigned partition: load the fabric's offset, re-produce the outbox."""
        okey = outbox_key(h.group, base, partition)

        def load() -> tuple[int, list[Routed]]:
            with self.fabric.unit_of_work() as uow:
                return uow.repo.offsets(h.group).get((base, partition), 0), load_outbox(uow, okey)

        committed, pending = await self.executor.retry(load, f"{h.group}: loading {base}[{partition}]")
        if pending:
            log.info(
                "%s: %s[%d] assigned; producing %d outputs of its outbox again (same crp-id)",
                h.group,
                base,
                partition,
                len(pending),
            )
            await self.produce(pending)
            self.outboxes.reproduced(okey)
        self.ledger.claim((h.group, base, partition), committed, generation)

    async def _apply(
        self,
        h: AnyHandler,
        record: Record,
        commit_to: int | None = None,
    ) -> tuple[list[Output] | None, list[Routed]]:
        """Apply with retries; ``(None, [])`` when the fabric had already committed the record.
        ``commit_to``: the offset committed with it (default: the next one)."""
        commit_to = record.offset + 1 if commit_to is None else commit_to
        attempt = 0
        delay = 0.05
        where = f"{h.group}: {record.topic}[{record.partition}]@{record.offset}"
        shelter = False  # the handler's savepoint, if it may skip it (``Handler.rejects_before_writes``)
        while True:
            attempt += 1
            try:
                result = await self.executor.call(h.group, self._apply_sync, h, record, None, commit_to, shelter)
                self.last_error = None
                return result
            except IsolationNeeded as exc:  # rolled back; redone at once, in the savepoint
                log.warning("%s: %s; applying it again in a savepoint", where, exc)
                shelter = True
                attempt -= 1
                continue
            except Exception as exc:
                if is_transient(exc):
                    self.metrics.errors.labels(group=h.group, kind="transient").inc()
                    self.last_error = f"{where}: {type(exc).__name__}"
                    log.warning(
                        "%s: transient error (attempt %d), retrying in %.2fs: %s: %s",
                        where,
                        attempt,
                        delay,
                        type(exc).__name__,
                        (str(exc).splitlines() or [""])[0][:200],
                    )
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                self.metrics.errors.labels(group=h.group, kind="error").inc()
                if attempt < self.max_attempts:
                    log.warning("%s: error (attempt %d): %s: %s", where, attempt, type(exc).__name__, exc)
                    continue
                log.error("%s: dead-lettering after %d attempts: %s: %s", where, attempt, type(exc).__name__, exc)
                done: tuple[list[Output] | None, list[Routed]] = await self.executor.retry(
                    functools.partial(self._apply_sync, h, record, exc, commit_to), where
                )
                return done

    def _apply_sync(
        self,
        h: AnyHandler,
        record: Record,
        failed: BaseException | None,
        commit_to: int,
        shelter: bool = True,
    ) -> tuple[list[Output] | None, list[Routed]]:
        okey = outbox_key(h.group, record.topic, record.partition)
        self.executor.before_apply()
        try:
            with self.fabric.unit_of_work() as uow:
                # one round trip: the offset, the handler's meta reads and this partition's outbox row
                meta = (*h.meta_keys, okey)
                start = uow.repo.record_start(h.group, record.topic, record.partition, meta)
                if start > record.offset:
                    return None, []
                # record_start only read: nothing is written yet (a handler may skip its savepoint)
                outs = (
                    apply_record(h, record, uow, unwritten=not shelter)
                    if failed is None
                    else internal_error_output(h, record, failed, uow.settings)
                )
                routed = route(outs, uow, self.settings, self.partitions)
                self.outboxes.save(uow, okey, routed, (h.group, record.topic, record.partition, commit_to))
        except BaseException:
            self.executor.rolled_back()
            raise
        self.executor.committed()
        self.outboxes.committed({okey: bool(routed)})
        return outs, routed

    async def produce(self, routed: Sequence[Routed]) -> None:
        """Send every output, then wait for all acknowledgements; retried until the broker takes them."""
        if not routed:
            return
        assert self.app is not None
        await produce_until_acked(self.app.producer, routed, self._produce_failed)
        self.broker.confirm()

    def _produce_failed(self, error: str) -> None:
        self.last_error = error

    # lifecycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        self.partitions = await ensure_topics(self.settings)
        if self.projection is not None:  # before any record: the index holds every committed fact
            await self.projection.start()
        await self.rb.start()
        app = self.build_app()
        await app.start()
        self.started_at = time.monotonic()
        self.metrics.broker_reachable.set(1)
        self.broker.start()
        log.info(
            "kafka worker %s started: groups=%s broker=%s topics prefix=%r model=%s metrics=%s",
            self.app_id,
            ",".join(self.groups),
            self.servers,
            self.settings.topic_prefix,
            self.fabric.embedder.model_id,
            self.settings.metrics_port,
        )

    async def stop(self) -> None:
        await self.broker.stop()
        await self.rb.stop()
        if self.projection is not None:
            await self.projection.stop()
        if self.app is not None:
            with contextlib.suppress(Exception):
                await self.app.stop()
        try:
            await self.executor.call("stop", self._clear_outboxes)
        except Exception as exc:  # harmless: the next owner re-produces them, with the same ids
            log.warning("could not clear the outboxes on shutdown: %s: %s", type(exc).__name__, exc)
        self.executor.shutdown()
        self.journal.close()
        self.fabric.close()

    def _clear_outboxes(self) -> None:
        """On a clean stop, empty the outboxes whose outputs the broker acknowledged, so the next
        owner of the partition has nothing to produce again."""
        done = self.outboxes.clearable()
        if not done:
            return
        with self.fabric.unit_of_work() as uow:
            for okey in done:
                save_outbox(uow, okey, [])
        self.outboxes.cleared(done)

    async def run(self, stop: asyncio.Event | None = None) -> int:
        """Run until ``stop`` is set (or SIGTERM/SIGINT); 1 if the faust app crashed."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, stop.set)
        code = 0
        try:
            await self.start()
            assert self.app is not None
            while not stop.is_set():
                if self.app.crashed or self.app.should_stop:
                    log.error(
                        "kafka worker %s: the faust app stopped: %r",
                        self.app_id,
                        getattr(self.app, "crash_reason", None),
                    )
                    code = 1
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
        finally:
            await self.stop()
            log.info("kafka worker %s stopped", self.app_id)
        return code


__all__ = ["KafkaWorker", "Mount", "open_fabric"]
