"""Kafka topics of crp-stream: their Kafka configuration, creation with an admin client, and the checks a worker needs.

Every topic is created with ``message.timestamp.type=LogAppendTime``: the broker stamps each record
when it appends it, and that stamp is the fact's ingestion epoch (docs/contract.md), whatever timestamp
the producer set. A worker refuses to start on a topic that is configured otherwise.

Retention: the inputs that are the source of truth (documents, telemetry, window reports, operator
commands) are created with ``retention.ms=-1``: the broker never deletes them, whatever its default
(7 days), because ``rebuild`` replays them from offset 0. The others (window requests and every
output) keep ``derived_retention`` (``CRP_DERIVED_RETENTION``, default infinite too). Partitions and
the replication factor are settings. ``topic_report`` (``crp-stream topics check``) names every
existing topic whose configuration breaks these rules.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from crp_stream.config import INFINITE_RETENTION_MS, ConfigError, Settings
from crp_stream.events.topics import ALL_TOPICS, DOCUMENTS, OPERATOR_COMMANDS, TELEMETRY, WINDOW_REPORTS
from crp_stream.runtime.kafka.security import bootstrap_servers, check_broker, client_kwargs

log = logging.getLogger("crp_stream.kafka")

# What rebuild replays and nothing re-derives: kept forever (retention.ms=-1). The names, and which
# topics exist, are the contract's (events/topics.py); this module adds only how Kafka keeps them.
SOURCE_OF_TRUTH = (DOCUMENTS, TELEMETRY, WINDOW_REPORTS, OPERATOR_COMMANDS)
TIMESTAMP_TYPE = "message.timestamp.type"
LOG_APPEND_TIME = "LogAppendTime"
RETENTION_MS = "retention.ms"
TOPIC_EXISTS = 36

__all__ = [
    "SOURCE_OF_TRUTH",
    "TopicState",
    "bootstrap_servers",
    "create_topics",
    "ensure_topics",
    "retention_ms",
    "retention_text",
    "topic_report",
]


def retention_ms(settings: Settings, base: str) -> int:
    """The ``retention.ms`` a topic is created with: -1 (never deleted) for the source of truth."""
    return INFINITE_RETENTION_MS if base in SOURCE_OF_TRUTH else settings.derived_retention_ms


def retention_text(ms: int | None) -> str:
    if ms is None:
        return "?"
    if ms < 0:
        return "infinite"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _new_topic(settings: Settings, name: str, base: str) -> NewTopic:
    configs = {TIMESTAMP_TYPE: LOG_APPEND_TIME, RETENTION_MS: str(retention_ms(settings, base))}
    return NewTopic(name, settings.partitions, settings.replication_factor, topic_configs=configs)


async def _admin(settings: Settings, timeout_s: float) -> AIOKafkaAdminClient:
    """A started admin client; retried until ``timeout_s`` while the broker does not answer. A broker
    that refuses our credentials or certificate is a ``ConfigError`` at once (security.py)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        why = await check_broker(settings, timeout_s=min(10.0, timeout_s))
        if why is None:
            admin = AIOKafkaAdminClient(**client_kwargs(settings), request_timeout_ms=int(timeout_s * 1000))
            try:
                await admin.start()
                return admin
            except Exception as exc:  # the broker may still be starting
                why = f"{type(exc).__name__}: {exc}"
                await admin.close()
        if loop.time() > deadline:
            raise ConnectionError(f"broker {bootstrap_servers(settings.broker)}: not reachable: {why}") from None
        await asyncio.sleep(1.0)


async def ensure_topics(
    settings: Settings,
    bases: Iterable[str] = ALL_TOPICS,
    *,
    timeout_s: float = 60.0,
) -> dict[str, int]:
    """Create the missing topics (``settings.partitions`` each, LogAppendTime, retention by kind); return
    the partition count of every topic by its contract name. Existing topics keep their partition count;
    one with ``CreateTime`` is refused, one with another retention is logged."""
    names = {settings.topic(b): b for b in bases}
    admin = await _admin(settings, timeout_s)
    deadline = asyncio.get_running_loop().time() + timeout_s
    try:
        await _create_missing(admin, settings, names)
        counts = await _partition_counts(admin, list(names), deadline)
        configs = await _configs(admin, list(names))
    finally:
        await admin.close()
    wrong = sorted(
        f"{t}={c.get(TIMESTAMP_TYPE)}" for t, c in configs.items() if c.get(TIMESTAMP_TYPE) != LOG_APPEND_TIME
    )
    if wrong:
        raise ConfigError(
            f"{TIMESTAMP_TYPE} must be {LOG_APPEND_TIME} (the broker stamps the epoch); "
            f"found {', '.join(wrong)}: kafka-configs --alter --add-config "
            f"{TIMESTAMP_TYPE}={LOG_APPEND_TIME}"
        )
    for name, cfg in sorted(configs.items()):
        want = retention_ms(settings, names[name])
        if _int_or_none(cfg.get(RETENTION_MS)) != want:
            log.warning(
                "topic %s: retention.ms is %s, not %s (%s): see crp-stream topics check",
                name,
                cfg.get(RETENTION_MS),
                want,
                "the source of truth: rebuild replays it" if want < 0 else "CRP_DERIVED_RETENTION",
            )
    return {names[n]: c for n, c in counts.items()}


async def _create_missing(admin: AIOKafkaAdminClient, settings: Settings, names: dict[str, str]) -> list[str]:
    existing = set(await admin.list_topics())
    missing = [n for n in names if n not in existing]
    if not missing:
        return []
    resp = await admin.create_topics([_new_topic(settings, n, names[n]) for n in missing])
    for err in resp.to_object()["topic_errors"]:
        if err["error_code"] not in (0, TOPIC_EXISTS):
            raise ConfigError(f"topic {err['topic']}: cannot create: {err['error_message']}")
    log.info(
        "created topics %s (%d partitions, replication %d, %s, retention: source of truth infinite, others %s)",
        ", ".join(missing),
        settings.partitions,
        settings.replication_factor,
        LOG_APPEND_TIME,
        retention_text(settings.derived_retention_ms),
    )
    return missing


async def _partition_counts(admin: AIOKafkaAdminClient, topics: list[str], deadline: float) -> dict[str, int]:
    while True:
        described = await admin.describe_topics(topics)
        counts = {t["topic"]: len(t["partitions"]) for t in described if t["error_code"] == 0 and t["partitions"]}
        if len(counts) == len(topics):
            return counts
        if asyncio.get_running_loop().time() > deadline:
            raise ConfigError(f"topics not ready: {sorted(set(topics) - set(counts))}")
        await asyncio.sleep(0.2)


async def _configs(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, dict[str, str]]:
    """``{topic: {config: value}}`` of the timestamp type and the retention of each topic."""
    if not topics:
        return {}
    wanted = {TIMESTAMP_TYPE: None, RETENTION_MS: None}
    resources = [ConfigResource(ConfigResourceType.TOPIC, t, dict(wanted)) for t in topics]
    out: dict[str, dict[str, str]] = {}
    for resp in await admin.describe_configs(resources):
        for res in resp.to_object()["resources"]:
            out[res["resource_name"]] = {e["config_names"]: e["config_value"] for e in res["config_entries"]}
    return out


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass
class TopicState:
    """One topic of the contract as the broker has it, and what breaks the rules (``topics check``)."""

    base: str
    name: str
    exists: bool
    partitions: int | None = None
    replication: int | None = None
    timestamp_type: str | None = None
    retention_ms: int | None = None
    problems: list[str] = field(default_factory=list)


async def topic_report(settings: Settings, *, timeout_s: float = 30.0) -> list[TopicState]:
    """Every topic of the contract with its partitions, replication, timestamp type and retention, and
    what breaks the rules: missing, not LogAppendTime, retention other than its kind's, partitions
    other than ``settings.partitions``, fewer replicas than ``settings.replication_factor``."""
    names = {settings.topic(b): b for b in ALL_TOPICS}
    admin = await _admin(settings, timeout_s)
    try:
        existing = set(await admin.list_topics()) & set(names)
        described = await admin.describe_topics(sorted(existing)) if existing else []
        configs = await _configs(admin, sorted(existing))
    finally:
        await admin.close()
    shape = {t["topic"]: t["partitions"] for t in described if t["error_code"] == 0}
    out = []
    for name, base in names.items():
        if name not in existing:
            out.append(TopicState(base, name, False, problems=["missing (crp-stream topics create)"]))
            continue
        parts = shape.get(name) or []
        cfg = configs.get(name, {})
        st = TopicState(
            base,
            name,
            True,
            len(parts),
            min((len(p["replicas"]) for p in parts), default=0),
            cfg.get(TIMESTAMP_TYPE),
            _int_or_none(cfg.get(RETENTION_MS)),
        )
        want = retention_ms(settings, base)
        if st.timestamp_type != LOG_APPEND_TIME:
            st.problems.append(f"{TIMESTAMP_TYPE}={st.timestamp_type}, must be {LOG_APPEND_TIME}")
        if st.retention_ms != want:
            kind = "the source of truth" if base in SOURCE_OF_TRUTH else "derived_retention"
            st.problems.append(f"retention {retention_text(st.retention_ms)}, must be {retention_text(want)} ({kind})")
        if st.partitions != settings.partitions:
            st.problems.append(f"{st.partitions} partitions, settings say {settings.partitions}")
        if st.replication is not None and st.replication < settings.replication_factor:
            st.problems.append(f"replication {st.replication}, settings say {settings.replication_factor}")
        out.append(st)
    return out


async def create_topics(settings: Settings, *, timeout_s: float = 30.0) -> list[str]:
    """Create the contract's missing topics as ``ensure_topics`` does; return the names created."""
    names = {settings.topic(b): b for b in ALL_TOPICS}
    admin = await _admin(settings, timeout_s)
    try:
        return await _create_missing(admin, settings, names)
    finally:
        await admin.close()
