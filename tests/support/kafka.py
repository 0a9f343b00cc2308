"""Test harness for the Kafka runtime: worker processes, a producer and a tap on the output topics.

Workers run as real ``crp-stream worker`` processes (so a test can kill -9 one). The tap reads every
partition of the topics it watches from the beginning, without a consumer group.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from sqlalchemy import text

from crp_stream.fabric.sql.db import make_engine
from tests.support.services import require_env

REPO = Path(__file__).resolve().parents[2]
OUTPUT_TOPICS = (
    "crp.facts",
    "crp.envelopes",
    "crp.audit",
    "crp.refresh.requests",
    "crp.quarantine.candidates",
    "crp.deadletter",
)
INPUTS_BY_GROUP = {
    "ingest": ("crp.documents", "crp.telemetry"),
    "arbiter": ("crp.facts",),
    "retrieval": ("crp.window.requests", "crp.window.reports"),
    "operator": ("crp.operator.commands",),
}


def broker() -> str:
    """``kafka://HOST:PORT`` of the test broker (CRP_TEST_KAFKA may omit the scheme)."""
    raw = require_env("CRP_TEST_KAFKA")
    return raw if raw.startswith("kafka://") else f"kafka://{raw}"


def servers() -> str:
    return broker().removeprefix("kafka://")


def unique_prefix(tag: str) -> str:
    return f"t{tag}{uuid.uuid4().hex[:10]}."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Consumed:
    topic: str  # contract name
    partition: int
    offset: int
    key: str | None
    value: bytes
    ts_ms: int
    headers: tuple[tuple[str, bytes], ...]

    @property
    def json(self) -> Any:
        return json.loads(self.value)

    @property
    def crp_id(self) -> str | None:
        return next((v.decode() for k, v in self.headers if k == "crp-id"), None)


class WorkerProcess:
    """One ``crp-stream worker`` subprocess with its own metrics port and log file."""

    def __init__(
        self,
        tmp: Path,
        prefix: str,
        database: str,
        *,
        name: str = "w",
        groups: str | None = None,
        qdrant: str | None = None,
        embedder: str = "hashing",
        partitions: int = 4,
        env: dict[str, str] | None = None,
        exit_after_commit: int | None = None,
        broker: str | None = None,
    ):
        self.tmp, self.prefix, self.database, self.name = tmp, prefix, database, name
        self.exit_after_commit = exit_after_commit  # the fault: die between a commit and its produce
        self.groups, self.embedder, self.partitions = groups, embedder, partitions
        self.qdrant = qdrant or f"edge:{tmp / ('vectors-' + name)}"
        self.port = free_port()
        self.env = env or {}
        self.broker = broker  # None: the test broker's PLAINTEXT listener (CRP_TEST_KAFKA)
        self.log_path = tmp / f"worker-{name}-{uuid.uuid4().hex[:6]}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def args(self) -> list[str]:
        launcher = (
            ["-m", "crp_stream"]
            if self.exit_after_commit is None
            else ["-m", "tests.support.faulty_worker", str(self.exit_after_commit)]
        )
        args = [
            sys.executable,
            *launcher,
            "worker",
            "--broker",
            self.broker or broker(),
            "--database",
            self.database,
            "--qdrant",
            self.qdrant,
            "--embedder",
            self.embedder,
            "--data",
            str(self.tmp / f"data-{self.name}"),
            "--partitions",
            str(self.partitions),
            "--metrics-port",
            str(self.port),
        ]
        if self.groups:
            args += ["--groups", self.groups]
        return args

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRP_") or k.startswith("CRP_TEST_")}
        env.update({"CRP_TOPIC_PREFIX": self.prefix, **self.env})
        return env

    def start(self) -> WorkerProcess:
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()/kill()
        self.proc = subprocess.Popen(
            self.args(), stdout=self._log, stderr=subprocess.STDOUT, env=self.environment(), cwd=str(REPO)
        )
        return self

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def health(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                return dict(json.loads(r.read()))
        except urllib.error.HTTPError as exc:
            return dict(json.loads(exc.read()))
        except (OSError, ValueError):
            return None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
            return r.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        total = 0.0
        for line in self.metrics().splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            head, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total

    def wait_ready(self, timeout: float = 90.0, assigned: bool = True) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                pytest.fail(f"worker {self.name} exited ({self.proc and self.proc.returncode}):\n{self.log_tail()}")
            h = self.health()
            if h and h.get("status") == "ok" and (h.get("assigned") or not assigned):
                return h
            time.sleep(0.3)
        pytest.fail(f"worker {self.name} not ready after {timeout}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 60.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


async def partitions(c: AIOKafkaConsumer, names: Sequence[str]) -> list[TopicPartition]:
    """Every partition of the existing topics among ``names`` (fresh metadata)."""
    cluster = await c._client.fetch_all_metadata()
    return [TopicPartition(n, p) for n in names for p in sorted(cluster.partitions_for_topic(n) or ())]


class Kafka:
    """A producer and a tap on a background event loop, usable from synchronous tests."""

    def __init__(self, prefix: str, client: dict[str, Any] | None = None):
        self.prefix = prefix
        # aiokafka's connection arguments: the PLAINTEXT test listener unless given (a secure one)
        self.client = client or {"bootstrap_servers": servers()}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.records: list[Consumed] = []
        self._distinct: set[tuple[str, str]] = set()  # (topic, crp-id): a re-produced output counts once
        self._lock = threading.Lock()
        self._producer: AIOKafkaProducer | None = None
        self._taps: list[asyncio.Task[None]] = []
        self._stop = False
        self._ends: tuple[AIOKafkaConsumer, list[TopicPartition]] | None = None

    def _run(self, coro: Any, timeout: float = 60.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def physical(self, base: str) -> str:
        return self.prefix + base.removeprefix("crp.")

    def base(self, physical: str) -> str:
        return "crp." + physical.removeprefix(self.prefix)

    def produce(
        self,
        topic: str,
        key: str | None,
        value: bytes | dict[str, Any],
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> tuple[int, int, int]:
        """Produce one record; returns (partition, offset, broker timestamp ms)."""
        raw = value if isinstance(value, bytes) else json.dumps(value, separators=(",", ":")).encode()

        async def go() -> tuple[int, int, int]:
            if self._producer is None:
                self._producer = AIOKafkaProducer(**self.client, acks="all")
                await self._producer.start()
            md = await self._producer.send_and_wait(
                self.physical(topic),
                raw,
                key=None if key is None else key.encode(),
                timestamp_ms=timestamp_ms,
                headers=list(headers) if headers else None,
            )
            return md.partition, md.offset, md.timestamp

        result: tuple[int, int, int] = self._run(go())
        return result

    def tap(self, topics: Iterable[str] = OUTPUT_TOPICS) -> None:
        """Start collecting every record of ``topics`` (contract names) from offset 0."""
        names = [self.physical(t) for t in topics]

        async def wait_metadata(c: AIOKafkaConsumer) -> list[TopicPartition]:
            for _ in range(300):
                parts = await partitions(c, names)
                if {tp.topic for tp in parts} == set(names):
                    return parts
                await asyncio.sleep(0.2)
            raise TimeoutError(f"topics {names} do not exist")

        async def run(c: AIOKafkaConsumer) -> None:
            while not self._stop:
                batch = await c.getmany(timeout_ms=200)
                with self._lock:
                    for tp, msgs in batch.items():
                        for m in msgs:
                            key = None if m.key is None else m.key.decode("utf-8", "replace")
                            rec = Consumed(
                                self.base(tp.topic),
                                tp.partition,
                                m.offset,
                                key,
                                m.value or b"",
                                m.timestamp,
                                tuple(m.headers or ()),
                            )
                            self.records.append(rec)
                            self._distinct.add((rec.topic, rec.crp_id or f"{tp.partition}:{m.offset}"))

        async def start() -> None:
            c = AIOKafkaConsumer(**self.client, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
            await c.start()
            parts = await wait_metadata(c)
            c.assign(parts)
            await c.seek_to_beginning(*parts)
            self._taps.append(asyncio.ensure_future(run(c)))
            self._consumers.append(c)

        self._consumers: list[AIOKafkaConsumer] = getattr(self, "_consumers", [])
        self._run(start())

    def distinct(self) -> int:
        """Outputs read, a record produced again with its id (a restarted worker's outbox) counted once."""
        with self._lock:
            return len(self._distinct)

    def snapshot(self, topic: str | None = None) -> list[Consumed]:
        with self._lock:
            return [r for r in self.records if topic is None or r.topic == topic]

    def wait_for(
        self,
        predicate: Callable[[list[Consumed]], bool],
        timeout: float = 60.0,
        what: str = "",
    ) -> list[Consumed]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            recs = self.snapshot()
            if predicate(recs):
                return recs
            time.sleep(0.1)
        got = [(r.topic, r.key, r.value[:120]) for r in self.snapshot()]
        pytest.fail(f"timed out after {timeout}s waiting for {what}; consumed {len(got)}: {got[-20:]}")

    def end_offsets(self, topics: Sequence[str]) -> dict[tuple[str, int], int]:
        async def go() -> dict[tuple[str, int], int]:
            c = AIOKafkaConsumer(**self.client, group_id=None)
            await c.start()
            try:
                parts = await partitions(c, [self.physical(t) for t in topics])
                ends = await c.end_offsets(parts) if parts else {}
                return {(self.base(tp.topic), tp.partition): int(o) for tp, o in ends.items()}
            finally:
                await c.stop()

        result: dict[tuple[str, int], int] = self._run(go())
        return result

    def ends(self, topics: Sequence[str] = OUTPUT_TOPICS) -> dict[tuple[str, int], int] | None:
        """End offsets by (contract topic, partition) from one long-lived consumer; None while the
        broker does not answer (a pacer polls this many times a second)."""
        names = [self.physical(t) for t in topics]

        async def go() -> dict[tuple[str, int], int]:
            if self._ends is None:
                c = AIOKafkaConsumer(**self.client, group_id=None, request_timeout_ms=5000)
                await c.start()
                self._ends = (c, [])
            c, parts = self._ends
            if {tp.topic for tp in parts} != set(names):  # until every topic exists
                parts = await partitions(c, names)
                self._ends = (c, parts)
            ends = await c.end_offsets(parts)
            return {(self.base(tp.topic), tp.partition): int(o) for tp, o in ends.items()}

        try:
            result: dict[tuple[str, int], int] = self._run(go(), timeout=10)
        except Exception:
            return None
        return result

    def close(self) -> None:
        self._stop = True

        async def go() -> None:
            if self._ends is not None:
                await self._ends[0].stop()
            for t in self._taps:
                await asyncio.wait_for(t, 5)
            for c in getattr(self, "_consumers", []):
                await c.stop()
            if self._producer is not None:
                await self._producer.stop()

        try:
            self._run(go(), timeout=30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()


def db_offsets(database: str) -> dict[tuple[str, str, int], int]:
    engine = make_engine(database)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text('SELECT consumer, topic, "partition", next_offset FROM consumer_offsets'))
            return {(r[0], r[1], int(r[2])): int(r[3]) for r in rows}
    finally:
        engine.dispose()


def wait_quiescent(
    kafka: Kafka,
    database: str,
    groups: Sequence[str] = tuple(INPUTS_BY_GROUP),
    timeout: float = 120.0,
    settle: float = 0.4,
) -> None:
    """Until every group has committed (in the fabric) every record of its input topics, the tap has
    read every output, and nothing moved for ``settle`` seconds."""
    inputs = sorted({t for g in groups for t in INPUTS_BY_GROUP[g]})
    watched = sorted(set(inputs) | set(OUTPUT_TOPICS))
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        ends = kafka.end_offsets(watched)
        committed = db_offsets(database)
        done = all(
            committed.get((g, t, p), 0) >= end
            for g in groups
            for (t, p), end in ends.items()
            if t in INPUTS_BY_GROUP[g] and end > 0
        )
        seen: dict[tuple[str, int], int] = {}
        for r in kafka.snapshot():
            seen[(r.topic, r.partition)] = max(seen.get((r.topic, r.partition), 0), r.offset + 1)
        tapped = all(seen.get(k, 0) >= end for k, end in ends.items() if k[0] in OUTPUT_TOPICS and end > 0)
        state = (ends, committed)
        if done and tapped and state == last:
            return
        last = state if done and tapped else None
        time.sleep(settle)
    pytest.fail(f"pipeline not quiescent after {timeout}s")


JAVA_PRODUCER = REPO / "tests" / "support_java" / "FastProducer.java"


def kafka_client_jars() -> str:
    """The kafka-clients jars that ``ops/kafka`` fetched with the broker (a classpath wildcard)."""
    libs = sorted(Path.home().glob(".cache/crp-stream/kafka-*/libs"))
    if not libs or not list(libs[-1].glob("kafka-clients-*.jar")):
        pytest.fail("no kafka-clients jar under ~/.cache/crp-stream/kafka-*/libs (run ops/kafka once)")
    return str(libs[-1] / "*")


def java_produce(
    records: Sequence[tuple[str, str | None, bytes]], timeout: float = 180.0, distinct_ms: bool = False
) -> list[tuple[int, int, int]]:
    """Produce ``(physical topic, key, value)`` records at full speed with the Java kafka-clients producer
    (no pacing, no wait between records); returns ``(partition, offset, timestamp_ms)`` of each, in order.
    ``distinct_ms``: one broker millisecond per record (FastProducer.java says why), still unpaced."""
    import base64

    def b64(b: bytes) -> str:
        return base64.b64encode(b).decode("ascii")

    lines = "".join(f"{t}\t{'-' if k is None else b64(k.encode())}\t{b64(v)}\n" for t, k, v in records)
    args = ["java", "-cp", kafka_client_jars(), str(JAVA_PRODUCER), servers()]
    args += ["distinct-ms"] if distinct_ms else []
    done = subprocess.run(args, input=lines.encode(), capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0:
        pytest.fail(f"java producer failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    out = [tuple(int(x) for x in line.split()) for line in done.stdout.decode().splitlines() if line.strip()]
    assert len(out) == len(records), done.stdout.decode()[-2000:]
    return [(p, o, ts) for p, o, ts in out]


class JavaProducer:
    """A running FastProducer.java: ``send`` records (unpaced), ``flush`` returns their stamps."""

    def __init__(self, distinct_ms: bool = True):
        args = ["java", "-cp", kafka_client_jars(), str(JAVA_PRODUCER), servers()]
        args += ["distinct-ms"] if distinct_ms else []
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(self, topic: str, key: str | None, value: bytes) -> None:
        import base64

        k = "-" if key is None else base64.b64encode(key.encode()).decode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{topic}\t{k}\t{base64.b64encode(value).decode()}\n".encode())

    def flush(self) -> list[tuple[int, int, int]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"FLUSH\n")
        self.proc.stdin.flush()
        out: list[tuple[int, int, int]] = []
        while (line := self.proc.stdout.readline().decode().strip()) != "FLUSHED":
            if not line:
                pytest.fail("the java producer stopped")
            p, o, ts = (int(x) for x in line.split())
            out.append((p, o, ts))
        return out

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
