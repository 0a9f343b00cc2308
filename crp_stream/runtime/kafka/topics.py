"""Kafka topics of crp-stream: names, creation with an admin client, and the checks a worker needs.

Every topic is created with ``message.timestamp.type=LogAppendTime``: the broker stamps each record
when it appends it, and that stamp is the fact's ingestion epoch (docs/contract.md), whatever timestamp
the producer set. A worker refuses to start on a topic that is configured otherwise.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from crp_stream.config import ConfigError, Settings

log = logging.getLogger("crp_stream.kafka")

INPUT_TOPICS = ("crp.documents", "crp.telemetry", "crp.window.requests", "crp.window.reports", "crp.operator.commands")
OUTPUT_TOPICS = (
    "crp.facts",
    "crp.envelopes",
    "crp.audit",
    "crp.refresh.requests",
    "crp.quarantine.candidates",
    "crp.deadletter",
)
ALL_TOPICS = INPUT_TOPICS + OUTPUT_TOPICS
TIMESTAMP_TYPE = "message.timestamp.type"
LOG_APPEND_TIME = "LogAppendTime"
TOPIC_EXISTS = 36


def bootstrap_servers(broker: str | None) -> str:
    """``kafka://h1:9092,h2:9092`` -> ``h1:9092,h2:9092``."""
    if not broker or not broker.startswith("kafka://"):
        raise ConfigError(f"broker: {broker!r} must look like kafka://HOST:PORT")
    servers = broker[len("kafka://") :].strip("/")
    if not servers or any(":" not in s for s in servers.split(",")):
        raise ConfigError(f"broker: {broker!r} must look like kafka://HOST:PORT")
    return servers


async def ensure_topics(
    settings: Settings,
    bases: Iterable[str] = ALL_TOPICS,
    *,
    timeout_s: float = 60.0,
) -> dict[str, int]:
    """Create the missing topics (``settings.partitions`` each, LogAppendTime); return the partition
    count of every topic by its contract name. Existing topics keep their partition count."""
    servers = bootstrap_servers(settings.broker)
    names = {settings.topic(b): b for b in bases}
    admin = AIOKafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=int(timeout_s * 1000))
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            await admin.start()
            break
        except Exception as exc:  # the broker may still be starting: retry until the deadline
            if asyncio.get_running_loop().time() > deadline:
                raise ConnectionError(f"broker {servers}: not reachable: {type(exc).__name__}: {exc}") from None
            await asyncio.sleep(1.0)
    try:
        existing = set(await admin.list_topics())
        missing = [n for n in names if n not in existing]
        if missing:
            resp = await admin.create_topics(
                [NewTopic(n, settings.partitions, 1, topic_configs={TIMESTAMP_TYPE: LOG_APPEND_TIME}) for n in missing]
            )
            for err in resp.to_object()["topic_errors"]:
                if err["error_code"] not in (0, TOPIC_EXISTS):
                    raise ConfigError(f"topic {err['topic']}: cannot create: {err['error_message']}")
            log.info("created topics %s (%d partitions, %s)", ", ".join(missing), settings.partitions, LOG_APPEND_TIME)
        counts = await _partition_counts(admin, list(names), deadline)
        await _check_timestamp_type(admin, list(names))
    finally:
        await admin.close()
    return {names[n]: c for n, c in counts.items()}


async def _partition_counts(admin: AIOKafkaAdminClient, topics: list[str], deadline: float) -> dict[str, int]:
    while True:
        described = await admin.describe_topics(topics)
        counts = {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0 and t["partitions"]}
        if len(counts) == len(topics):
            return counts
        if asyncio.get_running_loop().time() > deadline:
            raise ConfigError(f"topics not ready: {sorted(set(topics) - set(counts))}")
        await asyncio.sleep(0.2)


async def _check_timestamp_type(admin: AIOKafkaAdminClient, topics: list[str]) -> None:
    resources = [ConfigResource(ConfigResourceType.TOPIC, t, {TIMESTAMP_TYPE: None}) for t in topics]
    wrong = []
    for resp in await admin.describe_configs(resources):
        for res in resp.to_object()["resources"]:
            for entry in res["config_entries"]:
                if entry["config_names"] == TIMESTAMP_TYPE and entry["config_value"] != LOG_APPEND_TIME:
                    wrong.append(f"{res['resource_name']}={entry['config_value']}")
    if wrong:
        raise ConfigError(
            f"{TIMESTAMP_TYPE} must be {LOG_APPEND_TIME} (the broker stamps the epoch); "
            f"found {', '.join(sorted(wrong))}: kafka-configs --alter --add-config "
            f"{TIMESTAMP_TYPE}={LOG_APPEND_TIME}"
        )
