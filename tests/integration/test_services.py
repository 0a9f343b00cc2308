"""Smoke tests of the real services that ops/postgres and ops/kafka start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from sqlalchemy import create_engine, text

OLD_MS = 978_307_200_000  # 2001-01-01T00:00:00Z: a producer timestamp the broker must overwrite
LOG_APPEND_TIME = 1  # Kafka's timestamp type id (0 is CreateTime)


@pytest.mark.postgres
def test_postgres_answers_select_1(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("select 1")).scalar_one() == 1
            assert conn.dialect.name == "postgresql"
            assert int(conn.execute(text("show server_version_num")).scalar_one()) >= 150000
    finally:
        engine.dispose()


UNKNOWN_TOPIC_OR_PARTITION = 3


class TopicNotYetKnown(Exception):
    """A topic created a moment ago that the answering broker's metadata does not show yet."""


def _config_values(response: object) -> dict[str, str]:
    """{name: value} of one DescribeConfigs response (aiokafka returns the raw protocol struct)."""
    out: dict[str, str] = {}
    for resp in response if isinstance(response, list) else [response]:
        for resource in resp.resources:
            error_code, error_message = resource[0], resource[1]
            if error_code == UNKNOWN_TOPIC_OR_PARTITION:
                raise TopicNotYetKnown(resource[3])
            assert error_code == 0, (error_code, error_message)
            for entry in resource[4]:
                out[entry[0]] = entry[1]
    return out


async def _log_append_roundtrip(bootstrap: str) -> None:
    topic = f"crp-smoke-{os.getpid()}-{time.time_ns()}"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    producer: AIOKafkaProducer | None = None
    consumer: AIOKafkaConsumer | None = None
    try:
        broker = _config_values(await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")]))
        assert broker.get("log.message.timestamp.type") == "LogAppendTime", "broker default must be LogAppendTime"
        assert broker.get("auto.create.topics.enable") == "false"

        await admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"message.timestamp.type": "LogAppendTime"})])
        for _ in range(100):  # creation returns before every metadata cache has the topic
            try:
                cfg = _config_values(await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]))
                break
            except TopicNotYetKnown:
                await asyncio.sleep(0.1)
        else:
            pytest.fail(f"topic {topic} not described 10 s after its creation")
        assert cfg["message.timestamp.type"] == "LogAppendTime"

        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        before_ms = time.time_ns() // 1_000_000
        meta = await producer.send_and_wait(topic, b"hello", key=b"k", timestamp_ms=OLD_MS)
        after_ms = time.time_ns() // 1_000_000
        assert meta.timestamp_type == LOG_APPEND_TIME
        assert meta.timestamp != OLD_MS

        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        msg = await asyncio.wait_for(consumer.getone(), timeout=30)
        assert (msg.key, msg.value) == (b"k", b"hello")
        assert msg.timestamp_type == LOG_APPEND_TIME
        # the broker's append time (same machine clock, generous slack), not the producer's 2001 stamp
        assert msg.timestamp != OLD_MS
        assert before_ms - 5_000 <= msg.timestamp <= after_ms + 5_000
        assert msg.timestamp == meta.timestamp
    finally:
        if consumer is not None:
            await consumer.stop()
        if producer is not None:
            await producer.stop()
        with contextlib.suppress(Exception):  # cleanup only; the topic may not exist if creation failed
            await admin.delete_topics([topic])
        await admin.close()


@pytest.mark.kafka
def test_kafka_stamps_log_append_time(kafka_bootstrap: str) -> None:
    asyncio.run(asyncio.wait_for(_log_append_roundtrip(kafka_bootstrap), timeout=90))
