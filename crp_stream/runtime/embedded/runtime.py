"""The embedded runtime: drives every handler from the in-process durable log, no servers.

Records are processed in global log order, and what a record causes (its outputs on internal topics
such as crp.facts) is handled before the next input, so a live run and a replay agree. Work is
batched: one database transaction covers up to ``batch_size`` records, and every handler's effects
and consumer offsets commit together at its end. Outputs are appended to the log (with derived ids)
and synced before that commit, so a crash in between re-emits the same ids, which the log ignores.
A record that keeps failing for a non-transient reason is isolated and dead-lettered.

An output already in the log when it is caused again (the batch is redone after a crash or a
rollback) is still handed, in causal order, to the handlers that have not consumed it, so a redone
batch is processed exactly as the first attempt. Vector writes of an uncommitted batch are undone by
``vector_guard.reconcile``; a failing vector index is transient (retried, never dead-lettered).
``rederive=True`` is ``crp-stream rebuild``: only input topics are read from the log, and what they
cause is re-derived (internal topics are consumed as they are re-caused, never re-read).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crp_stream.events import INPUT_TOPICS, topics
from crp_stream.fabric.embedders.prefetch import EmbeddingPrefetch
from crp_stream.fabric.fabric import Fabric, UnitOfWork
from crp_stream.processors import tracing
from crp_stream.processors.base import AnyHandler, Output, Record
from crp_stream.processors.dispatch import ID_HEADER, apply_prefix, apply_records, internal_error_output
from crp_stream.runtime.embedded.forget import erase_forgotten
from crp_stream.runtime.embedded.log import Append, EmbeddedLog, Headers, LogRecord
from crp_stream.runtime.transient import is_transient
from crp_stream.runtime.vector_guard import GuardedVectors, reconcile

log = logging.getLogger("crp_stream.runtime")


_MAX_PENDING_TEXTS = 20_000  # texts embedded ahead and not taken yet, at most (a bound, not a target)


def system_clock() -> int:
    return time.time_ns() // 1000


@dataclass
class Stats:
    processed: dict[str, int] = field(default_factory=dict)
    deadlettered: int = 0
    outputs: int = 0


class EmbeddedRuntime:
    def __init__(
        self,
        fabric: Fabric,
        log_: EmbeddedLog,
        handlers: Sequence[AnyHandler],
        max_attempts: int = 3,
        on_output: Callable[[LogRecord], None] | None = None,
        batch_size: int = 200,
        rederive: bool = False,
    ):
        self.fabric = fabric
        self.log = log_
        self.handlers = list(handlers)
        self.max_attempts = max_attempts
        self.on_output = on_output
        self.batch_size = batch_size
        self.stats = Stats()
        self._offsets: dict[tuple[str, str], int] = {}
        self._dirty: set[tuple[str, str]] = set()
        self._cursor = 0
        self._pending: list[LogRecord] = []
        self._emitted: list[LogRecord] = []
        self._isolate = 0  # records left to process one per transaction after a failed batch
        self.rederive = rederive
        self._inputs = [self.physical(t) for t in INPUT_TOPICS] if rederive else None
        self._serving = {self.physical(topics.WINDOW_REQUESTS), self.physical(topics.WINDOW_REPORTS)}
        if not isinstance(fabric.vectors, GuardedVectors):
            raise TypeError(
                "EmbeddedRuntime needs a fabric with a guarded vector index: build it with "
                "crp_stream.runtime.embedded.open_fabric"
            )
        self.journal = fabric.vectors.journal
        if tracing.enabled(fabric.settings):  # ``on`` without the otel extra: a configuration error now
            tracing.install_provider()
        for h in self.handlers:
            h.bind(fabric)
        self._load_offsets()
        # A crash may have left a batch's vector writes behind: undo them before the first batch (inside
        # the retry loop, so an unreachable database at start-up is retried like any other time).
        self._reconcile = True

    def physical(self, base: str) -> str:
        return self.fabric.settings.topic(base)

    def _load_offsets(self) -> None:
        with self.fabric.unit_of_work() as uow:
            for h in self.handlers:
                for (topic, _p), nxt in uow.repo.offsets(h.group).items():
                    self._offsets[(h.group, topic)] = nxt
        starts = []
        for h in self.handlers:
            for base in h.topics:
                seq = self.log.seq_of(self.physical(base), self._offsets.get((h.group, base), 0))
                if seq is not None:
                    starts.append(seq - 1)
        self._cursor = min(starts) if starts else self.log.max_seq()

    def publish(
        self, base_topic: str, key: str | None, value: bytes, ts_us: int | None = None, headers: Headers = ()
    ) -> LogRecord | None:
        written = self.log.append([Append(self.physical(base_topic), key, value, None, ts_us, tuple(headers))])
        return written[0] if written else None

    def _read(self, limit: int) -> list[LogRecord]:
        return self.log.read_after(self._cursor, self._inputs, limit=limit)

    def run_until_idle(self, max_records: int | None = None) -> int:
        """Process everything in the log, including what processing appends; returns records handled."""
        done = 0
        delay = 0.05
        attempts = 0
        while True:
            limit = 1 if self._isolate else self.batch_size
            snapshot = (self._cursor, dict(self._offsets), list(self._pending))
            try:
                n, idle = self._batch(limit)
            except Exception as exc:
                self._restore(snapshot)
                if is_transient(exc):
                    log.warning("transient error, retrying in %.2fs: %s: %s", delay, type(exc).__name__, exc)
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                if not self._isolate:
                    self._isolate = limit
                    log.warning("batch failed (%s: %s); isolating its records", type(exc).__name__, exc)
                    continue
                attempts += 1
                if attempts < self.max_attempts:
                    continue
                self._deadletter_current(exc)
                attempts = 0
                continue
            delay, attempts = 0.05, 0
            if self._isolate:
                self._isolate = max(0, self._isolate - 1)
            done += n
            if idle or (max_records is not None and done >= max_records):
                return done

    def drain(self, progress: Callable[[int, int], None] | None = None, chunk: int = 500) -> int:
        """``run_until_idle``, reporting ``(log records passed, log records to pass)`` every ``chunk``
        records handled; the second grows as processing appends what it causes."""
        if progress is None:
            return self.run_until_idle()
        start, done = self._cursor, 0
        while True:
            n = self.run_until_idle(max_records=chunk)
            done += n
            passed = self._cursor - start
            progress(passed, max(passed, self.log.last_seq(self._inputs) - start) if n else passed)
            if n == 0:
                return done

    def _restore(self, snapshot: tuple[int, dict[tuple[str, str], int], list[LogRecord]]) -> None:
        self._cursor, self._offsets, self._pending = snapshot[0], snapshot[1], snapshot[2]
        self._dirty.clear()
        self._emitted.clear()
        self._forget_lookahead()
        self._reconcile = True  # before the batch is redone, never skipped (the database may be down now)

    def _batch(self, limit: int) -> tuple[int, bool]:
        if self._reconcile:
            reconcile(self.fabric, self.journal)
            self._reconcile = False
        buf = [] if self._pending else self._read(limit)
        if not buf and not self._pending:
            return 0, True
        if len(buf) < limit:
            buf = self._serving_cut(buf)
        self._lookahead(buf + self._peek_next(buf))
        n = 0
        with self.fabric.unit_of_work() as uow:
            n += self._cascade(uow)
            i = 0
            while i < len(buf):
                # a run of inputs of one batch-native handler (ingest) is one micro-batch; any other
                # input goes alone
                h = self._batcher(buf[i].topic)
                j = i + 1
                while h is not None and j < len(buf) and self._batcher(buf[j].topic) is h:
                    j += 1
                self._cursor = buf[j - 1].seq
                n += self._dispatch(buf[i:j], uow)
                # Cascade first: what a record caused is handled before the next input.
                n += self._cascade(uow)
                i = j
            for group, topic in sorted(self._dirty):
                uow.repo.commit_offset(group, topic, 0, self._offsets[(group, topic)])
            if n:  # durable before the commit that acknowledges them (power loss, not only kill -9)
                self.fabric.vectors.flush()
            self.log.sync()
        self.journal.clear()
        self._dirty.clear()
        if uow.forgotten:  # committed: the log forgets it too
            erase_forgotten(self.log, self.fabric, uow.forgotten)
        self._publish_emitted()
        self._trim_lookahead()
        return n, False

    def _serving_cut(self, buf: list[LogRecord]) -> list[LogRecord]:
        """The batch up to the end of its first run of window requests and reports. An envelope is
        published when its batch commits: caught up with the log (fewer records than a batch), a request
        then waits for the inputs appended before it (the event-time contract), not for those after it
        in the same batch. A backlog keeps whole batches. Batch boundaries change no output."""
        serving = self._serving
        first = next((i for i, lr in enumerate(buf) if lr.topic in serving), None)
        if first is None:
            return buf
        end = first + 1
        while end < len(buf) and buf[end].topic in serving:
            end += 1
        return buf[:end]

    def _lookahead(self, buf: Sequence[LogRecord]) -> None:
        if len(buf) < 2:
            return
        records = [self._record(lr) for lr in buf]
        for h in self.handlers:
            mine = [r for r in records if r.topic in h.topics]
            if mine:
                h.lookahead(mine, self.fabric)

    def _peek_next(self, buf: Sequence[LogRecord]) -> list[LogRecord]:
        """With a prefetching embedder: the next batch's records, announced with this one's, so the
        model embeds them while this batch is written (a vector does not depend on when it was made)."""
        if not buf or not isinstance(self.fabric.embedder, EmbeddingPrefetch):
            return []
        return self.log.read_after(buf[-1].seq, self._inputs, limit=self.batch_size)

    def _trim_lookahead(self) -> None:
        """After a batch: what was announced for the next one stays; what no batch took (a record
        dead-lettered) is dropped once it passes a bound."""
        emb = self.fabric.embedder
        if isinstance(emb, EmbeddingPrefetch) and emb.pending() > _MAX_PENDING_TEXTS:
            emb.forget()

    def _forget_lookahead(self) -> None:
        if isinstance(self.fabric.embedder, EmbeddingPrefetch):
            self.fabric.embedder.forget()

    def finish_rederive(self) -> None:
        """After a rebuild: internal topics count as consumed to their end (what the rebuild did not
        re-cause is an older derivation and is never applied again)."""
        ends = self.log.end_offsets()
        with self.fabric.unit_of_work() as uow:
            for h in self.handlers:
                for base in h.topics:
                    end = ends.get(self.physical(base), 0)
                    if base not in INPUT_TOPICS and end > self._offsets.get((h.group, base), 0):
                        self._offsets[(h.group, base)] = end
                        uow.repo.commit_offset(h.group, base, 0, end)

    def _record(self, lr: LogRecord) -> Record:
        base = self.fabric.settings.base_topic(lr.topic)
        headers = ((ID_HEADER, lr.record_id.encode()),) if lr.record_id else ()
        return Record(base, lr.partition, lr.offset, lr.key, lr.value, lr.ts_us, lr.headers + headers)

    def _cascade(self, uow: UnitOfWork) -> int:
        """Handle what was caused, in order (FIFO). A run of caused records of one topic that a single
        handler consumes (a document's facts on ``crp.facts``) is handed over as one run: the same
        order and outputs as one by one, since no other handler comes between them."""
        n = 0
        while self._pending:
            topic = self._pending[0].topic
            run = 1
            if len(self._consumers(topic)) == 1:
                while run < len(self._pending) and self._pending[run].topic == topic:
                    run += 1
            lrs, self._pending = self._pending[:run], self._pending[run:]
            n += self._dispatch(lrs, uow, caused=True)
        return n

    def _consumers(self, physical: str) -> list[AnyHandler]:
        base = self.fabric.settings.base_topic(physical)
        return [h for h in self.handlers if base in h.topics]

    def _batcher(self, physical: str) -> AnyHandler | None:
        """The topic's one consumer, if it is batch-native: its records form micro-batches."""
        found = self._consumers(physical)
        return found[0] if len(found) == 1 and found[0].batch_native else None

    def _dispatch(self, lrs: Sequence[LogRecord], uow: UnitOfWork, caused: bool = False) -> int:
        """Apply records of one topic, each handler over the run in order (one handler when several)."""
        records = [self._record(lr) for lr in lrs]
        base = records[0].topic
        # Rebuild: a re-caused record is consumed now, whatever older derivations the offsets passed.
        fresh = caused and self.rederive
        batcher = self._batcher(lrs[0].topic)
        if batcher is not None:
            return self._dispatch_batches(batcher, records, uow, fresh)
        # SQLite counts the rows every statement changes, so a rejection's writes are seen even after
        # the batch's earlier records: a handler rejecting only before its writes skips its savepoint
        # (breaking its word fails the batch, redone record by record in savepoints)
        exact = not self._isolate and uow.repo.conn.dialect.name == "sqlite"
        n = 0
        for h in self.handlers:
            if base not in h.topics:
                continue
            done = self._offsets.get((h.group, base), 0)
            todo = [r for r in records if fresh or done <= r.offset]
            if not todo:
                continue
            self._append(apply_records(h, todo, uow, unwritten=exact))
            self._offsets[(h.group, base)] = max(done, max(r.offset for r in todo) + 1)
            self._dirty.add((h.group, base))
            self.stats.processed[base] = self.stats.processed.get(base, 0) + len(todo)
            n += len(todo)
        return n

    def _dispatch_batches(self, h: AnyHandler, records: Sequence[Record], uow: UnitOfWork, fresh: bool) -> int:
        """Records (perhaps of several topics) of one batch-native handler, as micro-batches: where the
        handler stops early, what its batch caused is handled before it is offered the rest."""
        n = 0
        rest = list(records)
        while rest:
            todo = [r for r in rest if fresh or self._offsets.get((h.group, r.topic), 0) <= r.offset]
            if not todo:
                break
            outs, took = apply_prefix(h, todo, uow)
            if took > 1:
                self._read_ahead(outs, uow)
            for r, each in zip(todo[:took], outs, strict=True):
                key = (h.group, r.topic)
                self._offsets[key] = max(self._offsets.get(key, 0), r.offset + 1)
                self._dirty.add(key)
                self.stats.processed[r.topic] = self.stats.processed.get(r.topic, 0) + 1
                # released record by record: what each caused is handled before the next one's outputs
                # are appended, so the log holds what record-by-record processing would append
                uow.unreleased.difference_update(o.key for o in each if o.topic == topics.FACTS)
                self._append(each)
                n += self._cascade(uow)
            n += took
            last = todo[took - 1]
            rest = rest[next(i for i, r in enumerate(rest) if r is last) + 1 :]
        return n

    def _read_ahead(self, outs: Sequence[Sequence[Output]], uow: UnitOfWork) -> None:
        """What a micro-batch caused reaches its consumers record by record (below); each may read
        ahead, once for the batch, what those runs will read."""
        keys: dict[str, list[str]] = {}
        for each in outs:
            for o in each:
                keys.setdefault(o.topic, []).append(o.key)
        for topic, found in keys.items():
            for h in self.handlers:
                if topic in h.topics:
                    h.read_ahead(topic, found, uow)

    def _deadletter_current(self, exc: BaseException) -> None:
        """The isolated record failed every attempt: dead-letter it for each handler still owing it."""
        found = self._pending[:1] or self._read(1)
        if not found:
            return
        rec = found[0]
        record = self._record(rec)
        base = record.topic
        with self.fabric.unit_of_work() as uow:
            for h in self.handlers:
                if base not in h.topics or self._offsets.get((h.group, base), 0) > rec.offset:
                    continue
                log.error(
                    "handler %s: dead-lettering %s@%d after %d attempts: %s: %s",
                    h.group,
                    base,
                    rec.offset,
                    self.max_attempts,
                    type(exc).__name__,
                    exc,
                )
                self._append(internal_error_output(h, record, exc, uow.settings))
                self._offsets[(h.group, base)] = rec.offset + 1
                uow.repo.commit_offset(h.group, base, 0, rec.offset + 1)
            self.log.sync()
        if self._pending and self._pending[0] is rec:
            self._pending.pop(0)
        else:
            self._cursor = rec.seq
        self._publish_emitted()

    def _append(self, outs: Sequence[Output]) -> None:
        items = [Append(self.physical(o.topic), o.key, o.value, o.record_id, None, o.headers) for o in outs]
        for rec, new in self.log.append_outputs(items):
            self._pending.append(rec)  # already in the log (a redone batch): its consumers may still owe it
            if new:
                self._emitted.append(rec)

    def _publish_emitted(self) -> None:
        """Count and report outputs only once their batch committed (a rolled-back batch re-emits them)."""
        dead = self.physical(topics.DEADLETTER)
        for w in self._emitted:
            self.stats.outputs += 1
            if w.topic == dead:
                self.stats.deadlettered += 1
            if self.on_output:
                self.on_output(w)
        self._emitted.clear()
