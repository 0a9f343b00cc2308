"""Is the broker reachable? What the operator of a Kafka worker sees when it is not.

The worker does not stop when the broker goes away: faust and aiokafka keep their consumer, producer
and group membership and reconnect on their own (a record whose outputs are not acknowledged yet is
held, and produced when the broker is back; a lost group session is rejoined). What they log is a
flood: one ERROR per connection attempt, every 100 ms, per connection. So:

- ``BrokerWatch`` asks the broker for its metadata (the brokers only, no topic) every few seconds;
  when that fails it says once that the broker is unreachable and what the worker does meanwhile,
  then checks again with exponential backoff (0.5 s -> 10 s), one WARNING per check, and says when
  the broker is back and after how long. While it is unreachable ``/health`` answers 503 ``degraded``.
- ``RateLimit`` lets through one line per message template of the Kafka clients per interval and
  counts the rest (``... (41 more like this in 10 s)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import KafkaError
from aiokafka.protocol.metadata import MetadataRequest

log = logging.getLogger("crp_stream.kafka")

CLIENT_LOGGERS = ("aiokafka", "kafka", "faust", "mode")


class RateLimit(logging.Filter):
    """At most one record per (logger, message template) per ``interval_s`` from the Kafka clients."""

    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # -> (time let through, suppressed since)

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(CLIENT_LOGGERS) or record.levelno < logging.WARNING:
            return True
        key = (record.name, str(record.msg))
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return False
        if last is not None and last[1]:
            record.msg = f"{record.msg} ({last[1]} more like this in the last {now - last[0]:.0f} s)"
        self._last[key] = (now, 0)
        return True


class BrokerWatch:
    """Checks the broker's metadata; ``down_since`` is the monotonic time it became unreachable."""

    def __init__(
        self,
        client: Mapping[str, Any],
        *,
        interval_s: float = 2.0,
        first_retry_s: float = 0.5,
        max_backoff_s: float = 10.0,
        on_change: Callable[[bool], None] | None = None,
    ):
        self.client = client  # aiokafka's connection arguments (security.py)
        self.servers = str(client["bootstrap_servers"])
        self.interval_s = interval_s
        self.first_retry_s = first_retry_s
        self.max_backoff_s = max_backoff_s
        self.on_change = on_change
        self.down_since: float | None = None
        self.error: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._client: Any = None

    @property
    def reachable(self) -> bool:
        return self.down_since is None

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _run(self) -> None:
        delay = self.first_retry_s
        try:
            while True:
                try:
                    await asyncio.wait_for(self._check(), 15.0)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    await self._close_client()  # a fresh client for the next check: it bootstraps again
                    delay = self._unreachable(exc, delay)
                    await asyncio.sleep(delay)
                    continue
                self._reachable()
                delay = self.first_retry_s
                await asyncio.sleep(self.interval_s)
        finally:
            await self._close_client()

    async def _check(self) -> None:
        if self._client is None:
            self._client = AIOKafkaClient(**self.client, request_timeout_ms=5000, client_id="crp-broker-watch")
            await self._client.bootstrap()
            return
        # the brokers only (no topic): the whole cluster's metadata costs ms of decoding per check
        node = self._client.get_random_node()
        if node is None:
            raise KafkaError("no broker in the cluster metadata")
        await self._client.send(node, MetadataRequest([]))

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    def _unreachable(self, exc: BaseException, delay: float) -> float:
        """Log this failed check; return the wait before the next one (doubling, capped)."""
        said = (str(exc).splitlines() or [""])[0][:200]
        self.error = said if said.startswith(type(exc).__name__) else f"{type(exc).__name__}: {said}"
        now = time.monotonic()
        if self.down_since is None:
            self.down_since = now
            log.warning(
                "broker %s unreachable (%s): consuming and producing wait for it (outputs of the "
                "record in hand are held and produced when it is back; nothing is acknowledged "
                "early); checking again in %.1f s",
                self.servers,
                self.error,
                delay,
            )
            if self.on_change:
                self.on_change(False)
            return delay
        delay = min(delay * 2, self.max_backoff_s)
        log.warning(
            "broker %s still unreachable after %.1f s (%s): retrying, next check in %.1f s",
            self.servers,
            now - self.down_since,
            self.error,
            delay,
        )
        return delay

    def confirm(self) -> None:
        """The worker's own clients got through (outputs acknowledged): reachable, whatever the last check said."""
        self._reachable()

    def _reachable(self) -> None:
        if self.down_since is None:
            return
        log.warning(
            "broker %s reachable again after %.1f s unreachable", self.servers, time.monotonic() - self.down_since
        )
        self.down_since = None
        self.error = None
        if self.on_change:
            self.on_change(True)


__all__ = ["BrokerWatch", "RateLimit"]
