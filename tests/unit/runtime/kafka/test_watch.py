"""The broker watch and the rate limit on the Kafka clients' logs, without a broker."""

from __future__ import annotations

import asyncio
import logging

import pytest

from crp_stream.runtime.kafka.topics import bootstrap_servers
from crp_stream.runtime.kafka.watch import BrokerWatch, RateLimit
from tests.support.kafka import free_port


def record(name: str, msg: str, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, ("x",), None)


def test_rate_limit_lets_one_line_per_template_through_and_counts_the_rest() -> None:
    now = [0.0]
    limit = RateLimit(interval_s=10.0, clock=lambda: now[0])
    assert limit.filter(record("aiokafka", "Unable connect to node %s"))
    for t in range(1, 6):
        now[0] = float(t)
        assert not limit.filter(record("aiokafka", "Unable connect to node %s"))
    assert limit.filter(record("aiokafka.consumer.fetcher", "Failed fetch messages from %s"))  # another template
    assert limit.filter(record("crp_stream.kafka", "broker %s unreachable"))  # ours are never limited
    assert limit.filter(record("aiokafka", "connected to %s", logging.INFO))  # below WARNING: the level decides
    now[0] = 11.0
    again = record("aiokafka", "Unable connect to node %s")
    assert limit.filter(again)
    assert again.getMessage() == "Unable connect to node x (5 more like this in the last 11 s)"


def test_broker_watch_says_unreachable_once_then_retries_with_backoff(caplog: pytest.LogCaptureFixture) -> None:
    servers = bootstrap_servers(f"kafka://127.0.0.1:{free_port()}")  # nothing listens there
    changes: list[bool] = []

    async def run() -> BrokerWatch:
        client = {"bootstrap_servers": servers}
        watch = BrokerWatch(client, first_retry_s=0.1, max_backoff_s=0.4, on_change=changes.append)
        watch.start()
        for _ in range(400):
            if sum("still unreachable" in r.getMessage() for r in caplog.records) >= 4:
                break
            await asyncio.sleep(0.01)
        await watch.stop()
        return watch

    with caplog.at_level(logging.WARNING, "crp_stream.kafka"):
        watch = asyncio.run(run())
        msgs = [r.getMessage() for r in caplog.records if r.name == "crp_stream.kafka"]
        assert not watch.reachable and watch.error and changes == [False]
        assert "unreachable" in msgs[0] and "checking again in 0.1 s" in msgs[0]
        waits = [m.rsplit("next check in ", 1)[1] for m in msgs[1:5]]
        assert waits == ["0.2 s", "0.4 s", "0.4 s", "0.4 s"]  # doubling, capped
        watch.confirm()  # the worker's own producer got an acknowledgement
        assert watch.reachable and changes == [False, True]
        assert "reachable again after" in caplog.records[-1].getMessage()
