"""``crp_stream.client``: a service's way into a crp-stream deployment on Kafka.

```python
from crp_stream.client import Client

with Client() as crp:  # CRP_BROKER, CRP_KAFKA_* (SASL, TLS) or a TOML file (CRP_CONFIG), as the CLI
    crp.publish_document("vendor_docs", "The API allows 1000 requests per second.", source_type="official")
    envelope = crp.request_window("session-1", "What is the API's rate limit?", timeout=30)
    for fact in envelope.facts:
        print(fact.text)
    print(envelope.headers["CRP-Context-Coverage-Score"])
```

``Client`` is synchronous (its own event loop on a background thread); ``AsyncClient`` is the same for
asyncio code. Inputs are validated as the workers validate them (``ValueError`` naming the field)
before anything is produced. ``request_window`` produces a ``WindowRequested`` and returns that
request's envelope (``EnvelopeAssembled``: ``.facts``, each with ``.text``, and ``.headers``), or raises
``RequestRejected`` with the worker's reason, or ``TimeoutError``. ``audit()`` iterates the audit events
of ``crp.audit``. ``seal=True`` on a publish encrypts the text under the document's own key in the
workers' database (``database=`` / ``CRP_DATABASE_URL``), so ``forget`` leaves only ciphertext on the
broker (docs/security.md "The log forgets"). The transport (aiokafka, the security settings) is
``crp_stream/runtime/kafka``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import AsyncGenerator, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from crp_stream import events
from crp_stream.config import ConfigError, Settings, load_settings
from crp_stream.core.ids import derive_id
from crp_stream.core.provenance import SIGNATURE_HEADER, sign_value
from crp_stream.events.topics import AUDIT, DOCUMENTS, TELEMETRY, WINDOW_REPORTS, WINDOW_REQUESTS
from crp_stream.processors import tracing
from crp_stream.runtime.kafka.replies import ReplyListener
from crp_stream.runtime.kafka.transport import Transport

if TYPE_CHECKING:
    from crp_stream.fabric.sealing import Sealer

Envelope = events.EnvelopeAssembled
AuditEvent = events.AuditRecorded
T = TypeVar("T")


class RequestRejected(Exception):
    """The worker dead-lettered the request; ``reason`` says why (as on ``crp.deadletter``)."""

    def __init__(self, request_id: str, reason: str):
        super().__init__(f"window request {request_id} rejected: {reason}")
        self.request_id, self.reason = request_id, reason


@dataclass(frozen=True)
class Published:
    topic: str
    event_id: str  # the event's id (``request_id`` of a report: none, the session id)
    partition: int
    offset: int
    epoch: datetime  # the broker's log-append time: the ingestion epoch of what it brings


def _settings(settings: Settings | None, flags: Mapping[str, Any]) -> Settings:
    s = settings if settings is not None else load_settings(dict(flags))
    if settings is not None and flags.get("database"):  # given beside the settings: it wins, as a flag would
        s = dataclasses.replace(s, database_url=str(flags["database"]))
    if not s.broker:
        raise ConfigError("broker: set CRP_BROKER=kafka://HOST:PORT (or broker= / the TOML file's broker)")
    return s


def _checked(topic: str, data: dict[str, Any], what: str) -> bytes:
    try:
        return events.encode(events.validate_value(topic, data))
    except events.Rejected as exc:
        raise ValueError(f"{what}: {exc}") from None


def _sub_queries(query_text: str, given: Sequence[str | Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    if not given:
        return [{"id": "q1", "text": query_text}]
    return [{"id": f"q{i + 1}", "text": q} if isinstance(q, str) else dict(q) for i, q in enumerate(given)]


class AsyncClient:
    def __init__(
        self,
        settings: Settings | None = None,
        *,
        broker: str | None = None,
        config: str | None = None,
        database: str | None = None,
    ):
        self.settings = _settings(settings, {"broker": broker, "config": config, "database": database})
        self._transport = Transport(self.settings, "crp-client")
        self._replies = ReplyListener(self._transport)
        self._started = False
        self._sealer: Sealer | None = None

    async def start(self, connect_s: float = 30.0) -> AsyncClient:
        if not self._started:
            await self._transport.start(connect_s)  # a refused password or certificate: ConfigError
            self._started = True
        return self

    async def close(self) -> None:
        await self._replies.stop()
        await self._transport.close()
        self._started = False
        if self._sealer is not None:
            self._sealer.engine.dispose()
            self._sealer = None

    async def __aenter__(self) -> AsyncClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _sealed(self, topic: str, data: dict[str, Any], what: str) -> bytes:
        """``data`` validated, then its text sealed under its document's key (made on first use)."""
        _checked(topic, data, what)  # the plain record must be valid: the worker validates what it opens
        if not self.settings.database_url:
            raise ConfigError(f"{what}: seal needs the workers' database: database= or CRP_DATABASE_URL")
        return await asyncio.to_thread(self._seal_now, data, what)

    def _seal_now(self, data: dict[str, Any], what: str) -> bytes:
        # the key store is the workers' database (a blocking driver: run in a thread)
        from crp_stream.fabric.sealing import Sealer, SealError
        from crp_stream.fabric.sql import db

        if self._sealer is None:
            engine = db.make_engine(self.settings.database)
            db.upgrade(engine)  # the keys' table, as ``publish --seal`` makes sure of
            self._sealer = Sealer(engine)
        try:
            return json.dumps(self._sealer.seal(data), ensure_ascii=False).encode()
        except SealError as exc:
            raise ValueError(f"{what}: {exc}") from None

    async def _produce(self, topic: str, key: str, value: bytes, event_id: str, signing_key: str | None) -> Published:
        await self.start()
        signed = ((SIGNATURE_HEADER, sign_value(signing_key, value).encode()),) if signing_key else ()
        headers = tracing.inject(signed)  # the caller's current span, when the otel extra is installed
        p = await self._transport.produce(topic, key, value, headers)
        return Published(topic, event_id, p.partition, p.offset, datetime.fromtimestamp(p.ts_ms / 1000, tz=UTC))

    async def publish_document(
        self,
        source: str,
        text: str | None = None,
        *,
        facts: Sequence[Mapping[str, Any]] | None = None,
        source_type: str = "official",
        document_id: str | None = None,
        event_id: str | None = None,
        title: str | None = None,
        modified_at: datetime | str | None = None,
        signing_key: str | None = None,
        seal: bool = False,
        **fields: Any,
    ) -> Published:
        """A document on ``crp.documents``: its ``text`` (split into sentence facts) or its ``facts``.
        ``signing_key``: the source's key, to sign the exact bytes sent (docs/security.md). ``seal``:
        its title, section and texts encrypted under the document's own key (``forget`` destroys it)."""
        data: dict[str, Any] = {"source": source, "source_type": source_type, **fields}
        for name, value in (("text", text), ("facts", facts and [dict(f) for f in facts]), ("title", title)):
            if value is not None:
                data[name] = value
        if modified_at is not None:
            data["modified_at"] = modified_at if isinstance(modified_at, str) else modified_at.isoformat()
        data["document_id"] = document_id or derive_id("client-document", source, text or "", repr(facts))
        data["event_id"] = event_id or derive_id("client-event", data["document_id"], str(time.time_ns()))
        raw = (
            await self._sealed(DOCUMENTS, data, "publish_document")
            if seal
            else _checked(DOCUMENTS, data, "publish_document")
        )
        return await self._produce(DOCUMENTS, source, raw, data["event_id"], signing_key)

    async def publish_telemetry(
        self,
        source: str,
        subject: str,
        attribute: str,
        value: str | int | float,
        *,
        observed_at: datetime | str | None = None,
        unit: str | None = None,
        event_id: str | None = None,
        signing_key: str | None = None,
        seal: bool = False,
        **fields: Any,
    ) -> Published:
        """One observation on ``crp.telemetry`` (``observed_at`` defaults to now). ``seal``: its ``text``
        encrypted under the observation's own key; subject, attribute and value stay readable."""
        at = observed_at or datetime.now(UTC)
        data: dict[str, Any] = {"source": source, "subject": subject, "attribute": attribute, "value": value, **fields}
        data["observed_at"] = at if isinstance(at, str) else at.isoformat()
        if unit is not None:
            data["unit"] = unit
        data["event_id"] = event_id or derive_id("client-telemetry", source, subject, attribute, str(time.time_ns()))
        raw = (
            await self._sealed(TELEMETRY, data, "publish_telemetry")
            if seal
            else _checked(TELEMETRY, data, "publish_telemetry")
        )
        return await self._produce(TELEMETRY, source, raw, data["event_id"], signing_key)

    async def request_window(
        self,
        session_id: str,
        query_text: str,
        *,
        window: int = 1,
        fact_budget: int = 35,
        sub_queries: Sequence[str | Mapping[str, Any]] | None = None,
        max_windows: int = 5,
        request_id: str | None = None,
        timeout: float = 30.0,
        **fields: Any,
    ) -> Envelope:
        """Produce a window request and return its envelope. Window 1 needs the task's sub-queries
        (strings or ``{"id", "text", ...}``); without them the query is the one sub-query."""
        rid = request_id or derive_id("client-request", session_id, str(window), query_text, str(time.time_ns()))
        data: dict[str, Any] = {
            "request_id": rid,
            "session_id": session_id,
            "window": window,
            "query": {"text": query_text},
            "fact_budget": fact_budget,
            "max_windows": max_windows,
            **fields,
        }
        if window == 1 or sub_queries:
            data["sub_queries"] = _sub_queries(query_text, sub_queries)
        raw = _checked(WINDOW_REQUESTS, data, "request_window")
        await self.start()
        await self._replies.start()  # at the end offsets before the request exists: its answer comes after
        answer = self._replies.expect(rid)
        try:
            await self._transport.produce(WINDOW_REQUESTS, session_id, raw)
            reply = await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"no envelope for window request {rid} within {timeout:g} s "
                "(is a worker with the retrieval group running?)"
            ) from None
        finally:
            self._replies.forget(rid)
        if reply.envelope is None:
            raise RequestRejected(rid, reply.reason or "")
        return Envelope.model_validate_json(reply.envelope)

    async def report_window(
        self,
        session_id: str,
        window: int,
        *,
        completeness: float,
        output_text: str = "",
        addressed: Sequence[Mapping[str, Any]] = (),
        **fields: Any,
    ) -> Published:
        """What the generator produced for a window (``crp.window.reports``): the next window may follow."""
        data = {
            "session_id": session_id,
            "window": window,
            "completeness": completeness,
            "output_text": output_text,
            "addressed": [dict(a) for a in addressed],
            **fields,
        }
        raw = _checked(WINDOW_REPORTS, data, "report_window")
        return await self._produce(WINDOW_REPORTS, session_id, raw, session_id, None)

    async def audit(self, *, audit_type: str | None = None, follow: bool = False) -> AsyncGenerator[AuditEvent, None]:
        """The audit events on ``crp.audit`` (of one ``audit_type``) from the beginning: each partition in
        order, partitions interleaved (``.at`` is each event's time); ``follow``: then new ones as they come."""
        await self.start()
        seen: set[str] = set()  # an output produced again (a restarted worker's outbox) counts once
        records = self._transport.records([AUDIT], follow=follow)
        async with contextlib.aclosing(records):
            async for r in records:
                event = AuditEvent.model_validate_json(r.value)
                if event.event_id not in seen and (audit_type is None or event.audit_type == audit_type):
                    seen.add(event.event_id)
                    yield event


class Client:
    """``AsyncClient`` for synchronous code: the same methods, each waiting for its result."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        broker: str | None = None,
        config: str | None = None,
        database: str | None = None,
    ):
        self._async = AsyncClient(settings, broker=broker, config=config, database=database)
        self.settings = self._async.settings
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="crp-client", daemon=True)
        self._thread.start()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        # the loop runs the call in a copy of the caller's context: its current trace span among it
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def start(self, connect_s: float = 30.0) -> Client:
        self._call(self._async.start(connect_s))
        return self

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._call(self._async.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def __enter__(self) -> Client:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def publish_document(self, source: str, text: str | None = None, **kw: Any) -> Published:
        return self._call(self._async.publish_document(source, text, **kw))

    def publish_telemetry(self, source: str, subject: str, attribute: str, value: Any, **kw: Any) -> Published:
        return self._call(self._async.publish_telemetry(source, subject, attribute, value, **kw))

    def request_window(self, session_id: str, query_text: str, **kw: Any) -> Envelope:
        return self._call(self._async.request_window(session_id, query_text, **kw))

    def report_window(self, session_id: str, window: int, **kw: Any) -> Published:
        return self._call(self._async.report_window(session_id, window, **kw))

    def audit(self, *, audit_type: str | None = None, follow: bool = False) -> Iterator[AuditEvent]:
        events_ = self._async.audit(audit_type=audit_type, follow=follow)

        async def step() -> AuditEvent | None:
            try:
                return await events_.__anext__()
            except StopAsyncIteration:
                return None

        try:
            while (event := self._call(step())) is not None:
                yield event
        finally:
            self._call(events_.aclose())


__all__ = ["AsyncClient", "AuditEvent", "Client", "Envelope", "Published", "RequestRejected"]
