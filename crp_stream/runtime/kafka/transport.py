"""Producing to and reading from crp-stream's Kafka topics outside a worker: the CLI's Kafka commands
(``publish``, ``tail``, ``status``, ``refresh``, ``audit``, ``topics``) and ``crp_stream.client``.

One producer (``acks=all``) and group-less consumers, every client connected through security.py.
``start`` connects as the clients will first: a broker that refuses the credentials or certificate
is a ``ConfigError`` at once, one that does not answer a ``ConnectionError`` after ``connect_s``.
Topics are named by their contract name (``crp.documents``); the prefixes of the settings apply.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from crp_stream.config import Settings
from crp_stream.runtime.kafka.security import bootstrap_servers, check_broker, client_kwargs

Headers = tuple[tuple[str, bytes], ...]
Position = dict[tuple[str, int], int]  # (contract topic, partition) -> offset


@dataclass(frozen=True)
class Received:
    topic: str  # contract name
    partition: int
    offset: int
    key: str | None
    value: bytes
    ts_ms: int  # the broker's log-append time
    headers: Headers


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    ts_ms: int  # the broker's log-append time: the record's epoch


async def wait_for_broker(settings: Settings, connect_s: float) -> None:
    """Until a bootstrap server accepts us; ``ConfigError`` when one refuses us, ``ConnectionError``
    when none answers within ``connect_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + connect_s
    while True:
        why = await check_broker(settings, timeout_s=max(1.0, min(10.0, connect_s)))
        if why is None:
            return
        if loop.time() >= deadline:
            raise ConnectionError(f"broker {bootstrap_servers(settings.broker)}: not reachable ({why})")
        await asyncio.sleep(0.5)


class Transport:
    def __init__(self, settings: Settings, client_id: str = "crp-client"):
        self.settings = settings
        self.client_id = client_id
        self._kwargs = client_kwargs(settings)
        self._producer: AIOKafkaProducer | None = None

    async def start(self, connect_s: float = 30.0) -> None:
        await wait_for_broker(self.settings, connect_s)

    async def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def produce(self, topic: str, key: str | None, value: bytes, headers: Headers = ()) -> Produced:
        """Append one record to the contract topic ``topic``; returns where and when the broker put it."""
        if self._producer is None:
            producer = AIOKafkaProducer(**self._kwargs, acks="all", client_id=self.client_id)
            await producer.start()
            self._producer = producer
        md = await self._producer.send_and_wait(
            self.settings.topic(topic),
            value,
            key=None if key is None else key.encode(),
            headers=list(headers) or None,
        )
        return Produced(topic, md.partition, md.offset, md.timestamp)

    def _consumer(self) -> AIOKafkaConsumer:
        return AIOKafkaConsumer(
            **self._kwargs,
            client_id=self.client_id,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )

    async def _partitions(self, c: AIOKafkaConsumer, topics: Iterable[str]) -> list[TopicPartition]:
        cluster = await c._client.fetch_all_metadata()  # fresh metadata of every topic
        names = [self.settings.topic(t) for t in topics]
        return [TopicPartition(n, p) for n in names for p in sorted(cluster.partitions_for_topic(n) or ())]

    async def end_offsets(self, topics: Sequence[str]) -> Position:
        """The next offset of every partition of the existing ``topics`` (missing topics: none)."""
        c = self._consumer()
        await c.start()
        try:
            parts = await self._partitions(c, topics)
            ends = await c.end_offsets(parts) if parts else {}
        finally:
            await _stop(c)
        return {(self.settings.base_topic(tp.topic), tp.partition): int(o) for tp, o in ends.items()}

    async def records(
        self,
        topics: Sequence[str],
        start: Mapping[tuple[str, int], int] | None = None,
        *,
        follow: bool = False,
        idle_ms: int = 500,
    ) -> AsyncGenerator[Received, None]:
        """The records of ``topics`` from ``start`` (default: each partition's beginning), partition by
        partition in offset order; up to the end offsets at the call unless ``follow``."""
        c = self._consumer()
        await c.start()
        try:
            parts = await self._partitions(c, topics)
            if not parts:
                return
            c.assign(parts)
            await c.seek_to_beginning(*parts)
            for tp in parts:
                offset = (start or {}).get((self.settings.base_topic(tp.topic), tp.partition))
                if offset is not None:
                    c.seek(tp, offset)
            ends = await c.end_offsets(parts)
            left = {tp for tp in parts if await c.position(tp) < ends[tp]}
            while follow or left:
                batch = await c.getmany(*(parts if follow else left), timeout_ms=idle_ms)
                for tp, msgs in batch.items():
                    for m in msgs:
                        if not follow and m.offset >= ends[tp]:
                            continue
                        key = None if m.key is None else bytes(m.key).decode("utf-8", "replace")
                        yield Received(
                            self.settings.base_topic(tp.topic),
                            tp.partition,
                            m.offset,
                            key,
                            bytes(m.value or b""),
                            m.timestamp,
                            tuple((h, bytes(v)) for h, v in (m.headers or ())),
                        )
                if not follow:
                    left = {tp for tp in left if await c.position(tp) < ends[tp]}
        finally:
            await _stop(c)


async def _stop(consumer: AIOKafkaConsumer) -> None:
    with contextlib.suppress(asyncio.CancelledError):  # see runtime/kafka/console.py
        await consumer.stop()


def run(coro: Any) -> Any:
    """Run a transport coroutine from synchronous code (the CLI), one event loop per call."""
    return asyncio.run(coro)


__all__ = ["Headers", "Position", "Produced", "Received", "Transport", "run", "wait_for_broker"]
