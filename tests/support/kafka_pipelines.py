"""Kafka pipelines side by side on the same input topics, fed one input at a time.

Why side by side: the broker stamps every record (LogAppendTime), and a stamp is a fact's epoch, an
input of recency and part of derived ids (a verdict's fingerprint holds the high-trust epoch). Two
runs on separate input topics could never be compared id for id. So each pipeline here reads the same
input topics (``CRP_INPUT_TOPIC_PREFIX``) and has its own output topics, consumer group, database and
qdrant-edge index.

Why one input at a time: Kafka orders records per partition only; with every input published at once
a window request would see whatever the ingest agent happened to have reached. The pacer publishes
input i+1 only when every pipeline has settled input i (``Pipeline.settled``). What is still timing
dependent is the broker's stamp of a record a pipeline writes itself (``crp.facts``, which its arbiter
consumes): such times are compared as the input step they fall in (``Clock``).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from crp_stream.config import Settings
from crp_stream.fabric.fabric import open_vector_index
from crp_stream.fabric.sql.db import make_engine
from crp_stream.runtime.kafka.topics import ensure_topics
from crp_stream.runtime.projections import differences, tables_snapshot, vectors_snapshot
from tests.support.crash import MODEL, Input, compare_outputs
from tests.support.kafka import INPUTS_BY_GROUP, Consumed, Kafka, WorkerProcess, broker, unique_prefix
from tests.support.services import fresh_postgres_url

GROUP_OF = {t: g for g, topics in INPUTS_BY_GROUP.items() for t in topics}
TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})")
Outputs = dict[str, list[tuple[str | None, str | None, str]]]


class Clock:
    """Maps a time to the input step it falls in, unless it is an input's own stamp (equal in every
    pipeline) or lies outside the run (a producer's claim such as ``observed_at``)."""

    def __init__(self, input_stamps_ms: Sequence[int]):
        self.inputs = sorted(ms * 1000 for ms in input_stamps_ms)
        self.exact = set(self.inputs)
        self.hi = int(time.time() * 1e6) + 3_600_000_000

    def step(self, us: int) -> int:
        return bisect.bisect_right(self.inputs, us) - 1

    def us(self, value: int) -> int | str:
        if value in self.exact or not self.inputs or not self.inputs[0] <= value <= self.hi:
            return value
        return f"<after input {self.step(value)}>"

    def text(self, value: str) -> str:
        def sub(m: re.Match[str]) -> str:
            try:
                us = round(datetime.fromisoformat(m.group(0).replace("Z", "+00:00")).timestamp() * 1e6)
            except ValueError:
                return m.group(0)
            label = self.us(us)
            return m.group(0) if isinstance(label, int) else label

        return TIME_RE.sub(sub, value)

    def walk(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self.walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.walk(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, int) and not isinstance(value, bool) and key.endswith("_us"):
            return self.us(value)
        return value

    def json_text(self, raw: str) -> str:
        try:
            value = json.loads(raw)
        except ValueError:
            return self.text(raw)
        if not isinstance(value, dict | list):
            return raw
        return json.dumps(self.walk(value), sort_keys=True)


class Pipeline:
    """One worker's world: output topics + consumer group (``prefix``), database, edge index, a tap."""

    def __init__(
        self,
        name: str,
        tmp: Path,
        input_prefix: str,
        *,
        instance_id: str | None = None,
        env: Mapping[str, str] | None = None,
        db: str | None = None,
    ):
        self.name = name
        self.prefix = unique_prefix(name)
        self.input_prefix = input_prefix
        self.db = db or fresh_postgres_url()
        self.kafka = Kafka(self.prefix)
        extra = {"CRP_INPUT_TOPIC_PREFIX": input_prefix, **(env or {})}
        if instance_id:
            extra["CRP_INSTANCE_ID"] = instance_id
        self.worker = WorkerProcess(tmp, self.prefix, self.db, name=name, embedder=f"precomputed:{MODEL}", env=extra)
        self._engine = make_engine(self.db)

    def create_topics(self) -> None:
        """Before any worker starts, so the tap can read from the first output on."""
        settings = Settings(broker=broker(), topic_prefix=self.prefix, input_topic_prefix=self.input_prefix)
        asyncio.run(ensure_topics(settings))
        self.kafka.tap()

    def progress(self) -> int:
        """Records committed in the fabric (by every handler group) plus distinct outputs read: a kill
        point counted in it lands just after a commit (before its outputs are produced) as often as
        just after an output. An output produced again (a restart's outbox) is not progress: counted,
        it let kills land right after each restart's outbox, before any new work, until a step's
        timeout ran out (the intermittent stall of stops 17-20)."""
        try:
            with self._engine.connect() as conn:
                committed = conn.execute(text("SELECT COALESCE(SUM(next_offset), 0) FROM consumer_offsets")).scalar()
        except SQLAlchemyError:
            committed = 0
        return int(committed or 0) + self.kafka.distinct()

    def settled(self, inputs: Mapping[tuple[str, int], int]) -> bool:
        """Every input up to ``inputs`` (end offset by input partition) is done: each handler group has
        committed, in the fabric, its input partitions to their end (``crp.facts`` included), every output
        in an outbox was produced, and the tap has read each output topic to its end. Read in this order
        (database, tap, broker), a record produced after the database read would show as unread."""
        try:
            offsets, outbox = self._fabric()
        except SQLAlchemyError:
            return False  # not migrated yet
        ids = {r.crp_id for r in self.kafka.snapshot()}
        ends = self.kafka.ends()
        if ends is None or not self.caught_up(ends) or any(rid not in ids for rid in outbox):
            return False
        need = {**inputs, **{tp: end for tp, end in ends.items() if tp[0] == "crp.facts"}}
        return all(offsets.get((GROUP_OF[t], t, p), 0) >= end for (t, p), end in need.items() if end > 0)

    def unsettled(self, inputs: Mapping[tuple[str, int], int]) -> str:
        """What ``settled`` waits for, for a timeout's message: offsets behind their end, output
        partitions the tap has not read to their end."""
        try:
            offsets, _outbox = self._fabric()
        except SQLAlchemyError as exc:
            return f"fabric unreadable: {type(exc).__name__}"
        ends = self.kafka.ends() or {}
        need = {**inputs, **{tp: end for tp, end in ends.items() if tp[0] == "crp.facts"}}
        behind = {
            f"{GROUP_OF[t]}:{t}[{p}]": (offsets.get((GROUP_OF[t], t, p), 0), end)
            for (t, p), end in need.items()
            if end > 0 and offsets.get((GROUP_OF[t], t, p), 0) < end
        }
        read: dict[tuple[str, int], int] = {}
        for r in self.kafka.snapshot():
            read[(r.topic, r.partition)] = max(read.get((r.topic, r.partition), 0), r.offset + 1)
        unread = {f"{t}[{p}]": (read.get((t, p), 0), end) for (t, p), end in ends.items() if read.get((t, p), 0) < end}
        return f"offsets behind (committed, end): {behind}; outputs unread (read, end): {unread}"

    def caught_up(self, ends: Mapping[tuple[str, int], int] | None = None) -> bool:
        """The tap has read every output topic to its end."""
        ends = ends if ends is not None else self.kafka.ends()
        if ends is None:
            return False
        read: dict[tuple[str, int], int] = {}
        for r in self.kafka.snapshot():
            read[(r.topic, r.partition)] = max(read.get((r.topic, r.partition), 0), r.offset + 1)
        return all(read.get(tp, 0) >= end for tp, end in ends.items())

    def _fabric(self) -> tuple[dict[tuple[str, str, int], int], list[str]]:
        """Committed offsets by (group, topic, partition), and the record ids in the outboxes."""
        with self._engine.connect() as conn:
            offsets = {
                (r[0], r[1], int(r[2])): int(r[3])
                for r in conn.execute(text('SELECT consumer, topic, "partition", next_offset FROM consumer_offsets'))
            }
            rows = [r[0] for r in conn.execute(text("SELECT value FROM meta WHERE key LIKE 'outbox:%'"))]
        return offsets, [row[4] for raw in rows for row in json.loads(raw)]

    def pending_outbox(self) -> list[str]:
        """Record ids left in an outbox that were never produced (must be none)."""
        ids = {r.crp_id for r in self.kafka.snapshot()}
        return [rid for rid in self._fabric()[1] if rid not in ids]

    def snapshot(self, clock: Clock) -> dict[str, Any]:
        """Projections and outputs, with what legitimately differs between two correct runs made equal:
        times of records the pipeline wrote itself (``Clock``), ``crp.facts`` offsets (an at-least-once
        duplicate moves them: the arbiter must have read to the end), the outboxes (checked apart:
        ``pending_outbox``) and the order of audit rows of one step (partitions interleave)."""
        snap: dict[str, Any] = tables_snapshot(self._engine)
        ends = self.kafka.ends() or {}
        for table, rows in snap.items():
            snap[table] = [
                _row(table, r, clock, ends)
                for r in rows
                if not (table == "meta" and str(r["key"]).startswith("outbox:"))
            ]
        snap["audit_log"].sort(key=lambda r: r["event_id"])
        vectors = open_vector_index(self.worker.qdrant)
        try:
            snap["vectors"] = vectors_snapshot(vectors, [r["fact_id"] for r in snap["facts"]])
        finally:
            vectors.close()
        snap["outputs"] = outputs(self.kafka.snapshot(), clock)
        return snap

    def close(self) -> None:
        self.worker.stop()
        self.kafka.close()
        self._engine.dispose()


def _row(table: str, row: dict[str, Any], clock: Clock, ends: Mapping[tuple[str, int], int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, int) and not isinstance(v, bool) and k.endswith("_us"):
            v = clock.us(v)
        elif isinstance(v, str):
            v = clock.json_text(v)
        out[k] = v
    if out.get("topic") == "crp.facts":
        if table == "processed_events":
            out.pop("offset")
        elif table == "consumer_offsets" and out["next_offset"] == ends.get(("crp.facts", out["partition"])):
            out["next_offset"] = "end"
    return out


def outputs(records: Sequence[Consumed], clock: Clock) -> Outputs:
    """Per topic, (record id, key, value) ordered by the input step each record was produced in, then
    id: Kafka orders one partition only, and within a step the arbiter's partitions interleave."""
    by_topic: dict[str, list[tuple[int, str, int, int, tuple[str | None, str | None, str]]]] = {}
    for r in records:
        value = clock.json_text(r.value.decode("utf-8", "replace"))
        by_topic.setdefault(r.topic, []).append(
            (clock.step(r.ts_ms * 1000), r.crp_id or "", r.partition, r.offset, (r.crp_id, r.key, value))
        )
    return {t: [x[-1] for x in sorted(rows)] for t, rows in sorted(by_topic.items())}


def first_occurrences(outputs: Outputs) -> Outputs:
    """An uninterrupted run's outputs without the (rare) duplicate a producer's retry may leave."""
    out: Outputs = {}
    for topic, rows in outputs.items():
        seen: set[str | None] = set()
        out[topic] = []
        for row in rows:
            if row[0] not in seen:
                seen.add(row[0])
                out[topic].append(row)
    return out


def compare(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Differences between two snapshots; ``actual`` may repeat an output (same id, same content)."""
    problems = compare_outputs(first_occurrences(expected["outputs"]), actual["outputs"], allow_duplicates=True)
    return problems + differences(
        {k: v for k, v in expected.items() if k != "outputs"}, {k: v for k, v in actual.items() if k != "outputs"}
    )


class Pacer:
    """Publishes inputs one at a time, each after every pipeline has settled the previous one."""

    def __init__(self, feed: Kafka, pipelines: Sequence[Pipeline], step_timeout_s: float = 120.0):
        self.feed = feed
        self.pipelines = list(pipelines)
        self.step_timeout_s = step_timeout_s
        self.stamps: list[int] = []  # broker stamps (ms) of the inputs, in publishing order
        self.ends: dict[tuple[str, int], int] = {}
        self.over = threading.Event()  # the feeding thread finished or failed
        self.stopping = threading.Event()  # the test gave up: stop feeding
        self.error: BaseException | None = None

    def publish(self, item: Input) -> None:
        topic, key, _ts, raw = item
        # a stamp of the previous step must not share a millisecond with this input's
        newest = max((r.ts_ms for p in self.pipelines for r in p.kafka.snapshot()), default=0)
        while time.time() * 1000 <= newest + 1:
            time.sleep(0.001)
        partition, offset, ts = self.feed.produce(topic, key, raw)
        self.stamps.append(ts)
        self.ends[(topic, partition)] = offset + 1

    def wait_settled(self, pipelines: Sequence[Pipeline] | None = None) -> None:
        deadline = time.monotonic() + self.step_timeout_s
        for p in pipelines or self.pipelines:
            while not p.settled(self.ends):
                if self.stopping.is_set():
                    raise RuntimeError("pacer stopped")
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{p.name} did not settle input {len(self.stamps) - 1} within "
                        f"{self.step_timeout_s}s; outputs never produced: {p.pending_outbox()[:5]}; "
                        f"{p.unsettled(self.ends)}; "
                        f"worker log:\n{p.worker.log_tail()}"
                    )
                time.sleep(0.01)

    def feed_all(self, items: Sequence[Input]) -> None:
        for item in items:
            self.publish(item)
            self.wait_settled()

    def start(self, body: Callable[[], None]) -> threading.Thread:
        """Run ``body`` (which feeds) on a thread; ``over`` is set when it returns or fails."""

        def run() -> None:
            try:
                body()
            except BaseException as exc:  # surfaced by the test through ``error``
                self.error = exc
            finally:
                self.over.set()

        thread = threading.Thread(target=run, name="pacer", daemon=True)
        thread.start()
        return thread

    def discover(self, reference: Pipeline) -> Callable[[list[Input]], tuple[list[str], list[str]]]:
        """``build_scenario``'s ``discover``: feed phase A, then read the refresh requests and
        quarantine candidates that ``reference`` filed (ordered by step, then id)."""

        def run(phase_a: list[Input]) -> tuple[list[str], list[str]]:
            self.feed_all(phase_a)
            clock = Clock(self.stamps)

            def ids(topic: str, field: str) -> list[str]:
                recs = [r for r in reference.kafka.snapshot() if r.topic == topic]
                return [r.json[field] for r in sorted(recs, key=lambda r: (clock.step(r.ts_ms * 1000), r.json[field]))]

            return ids("crp.refresh.requests", "request_id"), ids("crp.quarantine.candidates", "candidate_id")

        return run


__all__ = ["Clock", "Outputs", "Pacer", "Pipeline", "compare", "first_occurrences", "outputs"]
