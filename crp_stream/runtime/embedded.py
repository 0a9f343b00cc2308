"""The embedded runtime: drives every handler from the in-process durable log, no servers.

Records are processed in global log order; each handler's effects, its consumer offset and its
outputs commit together (outputs are appended with derived ids before the database commits, so a
crash in between re-emits the same ids, which the log ignores).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.exc import DBAPIError, OperationalError

from crp_stream.fabric.fabric import Fabric
from crp_stream.processors.base import Handler, Record
from crp_stream.processors.dispatch import ID_HEADER, apply_record, internal_error_output
from crp_stream.runtime.log import Append, EmbeddedLog, LogRecord

log = logging.getLogger("crp_stream.runtime")

TRANSIENT = (OperationalError, DBAPIError, ConnectionError, TimeoutError)


def system_clock() -> int:
    return time.time_ns() // 1000


@dataclass
class Stats:
    processed: dict[str, int] = field(default_factory=dict)
    deadlettered: dict[str, int] = field(default_factory=dict)
    outputs: int = 0


class EmbeddedRuntime:
    def __init__(self, fabric: Fabric, log_: EmbeddedLog, handlers: Sequence[Handler],
                 max_attempts: int = 3, on_output: Callable[[LogRecord], None] | None = None):
        self.fabric = fabric
        self.log = log_
        self.handlers = list(handlers)
        self.max_attempts = max_attempts
        self.on_output = on_output
        self.stats = Stats()
        self._offsets: dict[tuple[str, str], int] = {}
        self._cursor = 0
        self._pending: list[LogRecord] = []
        for h in self.handlers:
            h.bind(fabric)
        self._load_offsets()

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

    def publish(self, base_topic: str, key: str | None, value: bytes, ts_us: int | None = None) -> LogRecord | None:
        written = self.log.append([Append(self.physical(base_topic), key, value, None, ts_us)])
        return written[0] if written else None

    def run_until_idle(self, max_records: int | None = None) -> int:
        """Process everything in the log, including what processing appends; returns records handled."""
        done = 0
        while True:
            batch = self.log.read_after(self._cursor, limit=500)
            if not batch:
                return done
            for rec in batch:
                self._cursor = rec.seq
                done += self._dispatch(rec)
                # Cascade first: what a record caused is handled before the next input, so a window
                # request sees the verdicts its predecessors led to, as replay does.
                while self._pending:
                    done += self._dispatch(self._pending.pop(0))
                if max_records is not None and done >= max_records:
                    return done

    def _dispatch(self, lr: LogRecord) -> int:
        base = self.fabric.settings.base_topic(lr.topic)
        headers = ((ID_HEADER, lr.record_id.encode()),) if lr.record_id else ()
        record = Record(base, lr.partition, lr.offset, lr.key, lr.value, lr.ts_us, headers)
        n = 0
        for h in self.handlers:
            if base not in h.topics or self._offsets.get((h.group, base), 0) > lr.offset:
                continue
            self._apply(h, record)
            self._offsets[(h.group, base)] = lr.offset + 1
            self.stats.processed[base] = self.stats.processed.get(base, 0) + 1
            n += 1
        return n

    def _apply(self, h: Handler, record: Record) -> None:
        attempt = 0
        delay = 0.05
        while True:
            attempt += 1
            try:
                with self.fabric.unit_of_work() as uow:
                    outs = apply_record(h, record, uow)
                    uow.repo.commit_offset(h.group, record.topic, record.partition, record.offset + 1)
                    self._append(outs)
                return
            except TRANSIENT as exc:
                log.warning("handler %s: transient error on %s@%d (attempt %d), retrying in %.2fs: %s",
                            h.group, record.topic, record.offset, attempt, delay, type(exc).__name__)
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
            except Exception as exc:
                if attempt < self.max_attempts:
                    log.warning("handler %s: error on %s@%d (attempt %d): %s: %s", h.group, record.topic,
                                record.offset, attempt, type(exc).__name__, exc)
                    continue
                log.error("handler %s: dead-lettering %s@%d after %d attempts: %s: %s", h.group, record.topic,
                          record.offset, attempt, type(exc).__name__, exc)
                with self.fabric.unit_of_work() as uow:
                    uow.repo.commit_offset(h.group, record.topic, record.partition, record.offset + 1)
                    self._append(internal_error_output(h, record, exc))
                return

    def _append(self, outs: Sequence[object]) -> None:
        items = [Append(self.physical(o.topic), o.key, o.value, o.record_id) for o in outs]  # type: ignore[attr-defined]
        written = self.log.append(items)
        self._pending.extend(written)
        self.stats.outputs += len(written)
        for w in written:
            if w.topic == self.physical("crp.deadletter"):
                self.stats.deadlettered[w.topic] = self.stats.deadlettered.get(w.topic, 0) + 1
            if self.on_output:
                self.on_output(w)
