"""Before a Kafka worker starts: wait for the broker, the database and a Qdrant server, saying so on
``/health``.

A worker started while one is down would otherwise give up (topic creation times out after 60 s)
or die opening the fabric. Instead it waits with backoff, logs what it waits for, answers ``/health``
with 503 ``degraded`` on its metrics port meanwhile, and starts once all answer. The Qdrant server is
waited for only when the vectors are on one (``--qdrant http(s)://`` or ``grpc(s)://``); the embedded
qdrant-edge store is a directory. A broker that answers but refuses the worker's credentials or
certificate is not down: that is a configuration error (``ConfigError``, one line, the worker exits at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiokafka.admin import AIOKafkaAdminClient

from crp_stream.config import Settings
from crp_stream.fabric.fabric import SERVER_SCHEMES, open_vector_index
from crp_stream.fabric.sql import db
from crp_stream.runtime.kafka.security import bootstrap_servers, check_broker, client_kwargs
from crp_stream.runtime.transient import is_transient

log = logging.getLogger("crp_stream.kafka")

Probe = Callable[[], Awaitable[str | None]]  # None: reachable; else why not
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 5.0)


def broker_probe(settings: Settings) -> Probe:
    servers = bootstrap_servers(settings.broker)

    async def probe() -> str | None:
        # a broker that refuses our credentials or certificate raises ConfigError: no waiting
        why = await check_broker(settings, timeout_s=3.0)
        if why is not None:
            return why
        admin = AIOKafkaAdminClient(**client_kwargs(settings), request_timeout_ms=3000)
        try:
            await admin.start()
            await admin.list_topics()
            return None
        except Exception as exc:
            return f"broker {servers}: {type(exc).__name__}"
        finally:
            try:
                await admin.close()
            except Exception as exc:  # closing a client that never connected may fail too
                log.debug("closing the probe admin client: %s", exc)

    return probe


def database_probe(settings: Settings) -> Probe:
    def connect() -> str | None:
        engine = db.make_engine(settings.database)
        try:
            with engine.connect():
                return None
        except Exception as exc:
            if not is_transient(exc):
                raise  # a wrong URL or password does not heal by waiting
            return f"database: {type(exc).__name__}"
        finally:
            engine.dispose()

    async def probe() -> str | None:
        return await asyncio.get_running_loop().run_in_executor(None, connect)

    return probe


def vectors_probe(settings: Settings) -> Probe:
    """The Qdrant server answers and its collection can be read (``dim``: exists, and its size)."""

    def connect() -> str | None:
        index = open_vector_index(settings.vectors)  # a malformed URL is a ConfigError: raised, not waited on
        try:
            _ = index.dim
            return None
        except Exception as exc:
            return f"qdrant: {type(exc).__name__}"  # not the URL: /health is not redacted
        finally:
            index.close()

    async def probe() -> str | None:
        return await asyncio.get_running_loop().run_in_executor(None, connect)

    return probe


def service_probes(settings: Settings) -> dict[str, Probe]:
    """What a worker waits for before it starts: the broker, the database, and a Qdrant server if used."""
    probes = {"broker": broker_probe(settings), "database": database_probe(settings)}
    if settings.vectors.startswith(SERVER_SCHEMES):
        probes["qdrant"] = vectors_probe(settings)
    return probes


async def wait_for_services(
    settings: Settings,
    stop: asyncio.Event,
    probes: dict[str, Probe] | None = None,
) -> bool:
    """Return True once every probe answers (False if ``stop`` came first); serve a degraded
    ``/health`` on the metrics port while waiting."""
    probes = probes if probes is not None else service_probes(settings)
    waiting: dict[str, str] = {}
    runner = await _health_server(settings.metrics_port, waiting)
    attempt = 0
    try:
        while not stop.is_set():
            waiting.clear()
            for name, probe in probes.items():
                why = await probe()
                if why is not None:
                    waiting[name] = why
            if not waiting:
                if attempt:
                    log.info("%s reachable: starting", ", ".join(probes))
                return True
            delay = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
            attempt += 1
            log.warning("waiting before start: %s; checking again in %.1f s", "; ".join(waiting.values()), delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
        return False
    finally:
        if runner is not None:
            await runner.cleanup()  # frees the port for the worker's own /health


async def _health_server(port: int | None, waiting: dict[str, str]) -> web.AppRunner | None:
    if not port:
        return None

    async def health(_request: web.Request) -> web.Response:
        body: dict[str, object] = {
            "status": "degraded" if waiting else "starting",
            "waiting_for": dict(waiting),
            "assigned": [],
        }
        return web.json_response(body, status=503)

    app = web.Application()
    app.router.add_get("/health", health)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", port).start()
    return runner
