"""Matching a window request to its envelope for ``crp_stream.client``.

One listener per client reads ``crp.envelopes`` and ``crp.deadletter`` from their end offsets at the
moment it starts (so a request produced afterwards always has its answer after them) and hands each
record to the caller waiting for its ``request_id``: the envelope (the first that is not a closing
one), or the dead letter that refused the request (its reason).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass

from crp_stream.events.topics import DEADLETTER, ENVELOPES, WINDOW_REQUESTS
from crp_stream.runtime.kafka.transport import Received, Transport


@dataclass(frozen=True)
class Reply:
    envelope: bytes | None  # the envelope's value, or None when the request was dead-lettered
    reason: str | None  # why it was dead-lettered


def _request_id_of(raw: object) -> str | None:
    try:
        value = json.loads(str(raw))
    except ValueError:
        return None
    rid = value.get("request_id") if isinstance(value, dict) else None
    return rid if isinstance(rid, str) else None


class ReplyListener:
    def __init__(self, transport: Transport):
        self.transport = transport
        self._waiting: dict[str, asyncio.Future[Reply]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """Positioned at the end offsets now: every reply to a request produced after this returns."""
        if self._task is not None and not self._task.done():
            return
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.ensure_future(self._run())
        await asyncio.shield(self._ready)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for fut in self._waiting.values():
            if not fut.done():
                fut.cancel()
        self._waiting.clear()

    def expect(self, request_id: str) -> asyncio.Future[Reply]:
        fut: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = fut
        return fut

    def forget(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)

    async def _run(self) -> None:
        assert self._ready is not None
        try:
            start = await self.transport.end_offsets([ENVELOPES, DEADLETTER])
            records = self.transport.records([ENVELOPES, DEADLETTER], start, follow=True, idle_ms=100)
            self._ready.set_result(None)
            async with contextlib.aclosing(records):
                async for r in records:
                    self._dispatch(r)
        except Exception as exc:  # the broker went away for good, a bad setting: every waiter hears it
            if not self._ready.done():
                self._ready.set_exception(exc)
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(exc)
            raise

    def _dispatch(self, r: Received) -> None:
        try:
            value = json.loads(r.value)
        except ValueError:
            return
        if not isinstance(value, dict):
            return
        if r.topic == ENVELOPES:
            rid, reply = value.get("request_id"), Reply(r.value, None)
            if value.get("closing"):
                return  # a window's exit, sent when its reports arrive: not the answer to the request
        elif value.get("topic") in (WINDOW_REQUESTS, self.transport.settings.topic(WINDOW_REQUESTS)):  # contract name
            rid, reply = _request_id_of(value.get("raw")), Reply(None, str(value.get("reason")))
        else:
            return
        fut = self._waiting.pop(rid, None) if isinstance(rid, str) else None
        if fut is not None and not fut.done():
            fut.set_result(reply)


__all__ = ["Reply", "ReplyListener"]
