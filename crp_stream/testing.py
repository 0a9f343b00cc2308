"""Drive the embedded pipeline from code: a fresh fabric, the log, every handler, an injected clock,
captured outputs. ``crp-stream replay``, the benchmarks and the tests all run the pipeline this way.

    with Pipeline.fresh(tmp_path, embedder="hashing") as p:
        p.publish("crp.documents", "vendor_docs", {...}, ts_us=T0)
        envelopes = p.out("crp.envelopes")
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from crp_stream.config import Settings
from crp_stream.fabric.fabric import Fabric, UnitOfWork
from crp_stream.replay_format import Headers, ReplayRecord, format_line
from crp_stream.runtime.embedded import EmbeddedRuntime, LogRecord, open_fabric, open_runtime


class ManualClock:
    """The log's clock, set by the caller: log-append times are whatever the test or replay says."""

    def __init__(self, now_us: int = 0) -> None:
        self.now_us = now_us

    def __call__(self) -> int:
        return self.now_us

    def advance_to(self, ts_us: int) -> int:
        """Time never runs backwards: the clock moves to ``ts_us`` if that is later."""
        self.now_us = max(self.now_us, ts_us)
        return self.now_us


class Pipeline:
    """The embedded pipeline kept open: publish a record, everything it causes runs, read the outputs."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: ManualClock | None = None,
        fabric: Fabric | None = None,
        batch_size: int | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock or ManualClock()
        self.outputs: list[LogRecord] = []
        self.fabric = fabric or open_fabric(settings)
        self.rt: EmbeddedRuntime = open_runtime(
            settings, clock=self.clock, fabric=self.fabric, on_output=self.outputs.append, batch_size=batch_size
        )
        self.log = self.rt.log

    @classmethod
    def fresh(cls, workdir: Path, **settings: Any) -> Pipeline:
        """Embedded backends under ``workdir`` (SQLite, qdrant-edge, the log) and ``settings``."""
        return cls(Settings(data_dir=workdir, **settings))

    def publish(
        self,
        topic: str,
        key: str | None,
        value: bytes | dict[str, Any],
        *,
        ts_us: int | None = None,
        headers: Headers = (),
    ) -> list[LogRecord]:
        """Append one record (at ``ts_us``, or the clock's time), run until idle; its outputs, in log order."""
        raw = value if isinstance(value, bytes) else json.dumps(value, separators=(",", ":")).encode()
        now = self.clock.advance_to(ts_us) if ts_us is not None else self.clock.now_us
        start = len(self.outputs)
        self.rt.publish(topic, key, raw, ts_us=now, headers=headers)
        self.rt.run_until_idle()
        return self.outputs[start:]

    def feed(self, records: Iterable[ReplayRecord], step: Callable[[int], None] | None = None) -> Pipeline:
        """Replay records one by one, each at its own log-append time (never earlier than the last);
        ``step(1)`` after each (a progress bar)."""
        for topic, key, ts, raw, *rest in records:
            self.publish(topic, key, raw, ts_us=ts, headers=rest[0] if rest else ())
            if step is not None:
                step(1)
        return self

    def out(self, topic: str, type_: str | None = None) -> list[dict[str, Any]]:
        """The decoded values of every output on ``topic`` so far (of one event ``type_`` if given)."""
        physical = self.settings.topic(topic)
        values = [json.loads(r.value) for r in self.outputs if r.topic == physical]
        return [v for v in values if type_ is None or v.get("type") == type_]

    def lines(self) -> list[str]:
        """Every output so far as replay-format lines: what ``crp-stream replay`` writes."""
        return [format_line(self.settings.base_topic(r.topic), r.key, r.ts_us, r.value) for r in self.outputs]

    @contextmanager
    def uow(self) -> Iterator[UnitOfWork]:
        with self.fabric.unit_of_work() as uow:
            yield uow

    def close(self) -> None:
        self.fabric.close()
        self.log.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def replay(
    records: Iterable[ReplayRecord], settings: Settings, workdir: Path, step: Callable[[int], None] | None = None
) -> list[str]:
    """``crp-stream replay``: ``records`` through fresh embedded backends under ``workdir``; every output
    as a replay-format line, in log order. The same input gives the same bytes (ids are derived)."""
    settings = replace(settings, data_dir=workdir, database_url=None, qdrant=None, broker=None)
    with Pipeline(settings) as p:
        p.feed(records, step)
        return p.lines()


__all__ = ["ManualClock", "Pipeline", "replay"]
