"""How every Kafka client of crp-stream connects: the one place settings become client arguments.

The worker's faust app, its aiokafka admin clients, consumers and producers, the broker watch, the
console, ``rebuild``, the CLI's Kafka commands and ``crp_stream.client`` all take their connection
from here: ``client_kwargs`` for aiokafka (``bootstrap_servers``, ``security_protocol``,
``sasl_mechanism``, ``sasl_plain_username``/``password`` or an OAUTHBEARER token provider, and an
``ssl_context`` from ``aiokafka.helpers.create_ssl_context(cafile, certfile, keyfile)``) and
``faust_kwargs`` for the app (``broker`` and ``broker_credentials``: ``faust.SASLCredentials``,
``faust.SSLCredentials`` or ``faust.OAuthCredentials``).

``check_broker`` tells a broker that is down (wait for it) from one that answers and refuses us: a
wrong password or mechanism, an untrusted certificate, a TLS client on a plaintext listener. Those
are configuration errors, raised as one ``ConfigError`` line; the worker exits on them instead of
waiting forever. Secrets never appear in a message (only setting names, the user, the host).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import os
import shlex
import ssl
import time
from typing import Any

from aiokafka.abc import AbstractTokenProvider
from aiokafka.conn import AIOKafkaConnection, OAuthAuthenticator, create_conn
from aiokafka.errors import (
    AuthenticationFailedError,
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.helpers import create_ssl_context

from crp_stream import redaction
from crp_stream.config import ConfigError, Settings, kafka_problem

AUTH_ERRORS = (
    SaslAuthenticationFailed,
    AuthenticationFailedError,
    UnsupportedSaslMechanismError,
    IllegalSaslStateError,
)
# What a broker's TLS alert says when it refuses our client certificate (or its absence): mutual TLS
CLIENT_CERT_ALERTS = (
    "BAD_CERTIFICATE",
    "CERTIFICATE_UNKNOWN",
    "CERTIFICATE_REQUIRED",
    "UNKNOWN_CA",
    "CERTIFICATE_EXPIRED",
    "CERTIFICATE_REVOKED",
    "UNSUPPORTED_CERTIFICATE",
    "ACCESS_DENIED",
)
TOKEN_COMMAND_TTL_S = 60.0  # a token command runs at most once a minute (each connection asks for a token)
TOKEN_EXPIRY_MARGIN_S = 5.0  # ... and again this long before the token it printed expires
TOKEN_COMMAND_TIMEOUT_S = 30.0


def bootstrap_servers(broker: str | None) -> str:
    """``kafka://h1:9092,h2:9092`` -> ``h1:9092,h2:9092``."""
    if not broker or not broker.startswith("kafka://"):
        raise ConfigError(f"broker: {broker!r} must look like kafka://HOST:PORT")
    servers = broker[len("kafka://") :].strip("/")
    if not servers or any(":" not in s for s in servers.split(",")):
        raise ConfigError(f"broker: {broker!r} must look like kafka://HOST:PORT")
    return servers


def security_kwargs(settings: Settings) -> dict[str, Any]:
    """aiokafka's security arguments (any client: consumer, producer, admin, ``AIOKafkaClient``)."""
    problem = kafka_problem(settings)
    if problem:
        raise ConfigError(problem)
    protocol = settings.kafka_security_protocol
    out: dict[str, Any] = {"security_protocol": protocol}
    if protocol.endswith("SSL"):
        out["ssl_context"] = ssl_context(settings)
    if protocol.startswith("SASL_"):
        out["sasl_mechanism"] = settings.kafka_sasl_mechanism
        if settings.kafka_sasl_mechanism == "OAUTHBEARER":
            _answer_oauth_error_challenges()
            out["sasl_oauth_token_provider"] = TokenProvider(
                settings.kafka_oauth_token_file, settings.kafka_oauth_token_command
            )
        else:
            out["sasl_plain_username"] = settings.kafka_sasl_username
            out["sasl_plain_password"] = settings.kafka_sasl_password
    return out


def client_kwargs(settings: Settings) -> dict[str, Any]:
    """``bootstrap_servers`` and the security arguments of an aiokafka client for ``settings.broker``."""
    return {"bootstrap_servers": bootstrap_servers(settings.broker), **security_kwargs(settings)}


def faust_kwargs(settings: Settings) -> dict[str, Any]:
    """``broker`` and ``broker_credentials`` of the worker's ``faust.App`` (the same security)."""
    import faust  # only the worker loads faust

    sec = security_kwargs(settings)
    out: dict[str, Any] = {"broker": f"kafka://{bootstrap_servers(settings.broker)}"}
    protocol, context = sec["security_protocol"], sec.get("ssl_context")
    if protocol == "SSL":
        out["broker_credentials"] = faust.SSLCredentials(context)
    elif "sasl_oauth_token_provider" in sec:
        out["broker_credentials"] = faust.OAuthCredentials(
            oauth_cb=sec["sasl_oauth_token_provider"], ssl_context=context
        )
    elif protocol.startswith("SASL_"):
        out["broker_credentials"] = faust.SASLCredentials(
            username=sec["sasl_plain_username"],
            password=sec["sasl_plain_password"],
            ssl_context=context,  # SASL_SSL with a context, SASL_PLAINTEXT without
            mechanism=sec["sasl_mechanism"],
        )
    return out


def ssl_context(settings: Settings) -> ssl.SSLContext:
    for name in ("kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile"):
        path = getattr(settings, name)
        if path is not None and not os.access(path, os.R_OK):
            why = "no such file" if not os.path.exists(path) else "not readable"
            raise ConfigError(f"{name}: {path}: {why}")
    return _context(settings.kafka_ssl_cafile, settings.kafka_ssl_certfile, settings.kafka_ssl_keyfile)


@functools.lru_cache(maxsize=8)
def _context(cafile: str | None, certfile: str | None, keyfile: str | None) -> ssl.SSLContext:
    """One context per set of files: the host name is checked, the broker's chain against ``cafile``
    (the system's CAs without it)."""
    try:
        context: ssl.SSLContext = create_ssl_context(cafile=cafile, certfile=certfile, keyfile=keyfile)
    except ssl.SSLError as exc:
        files = ", ".join(f for f in (cafile, certfile, keyfile) if f)
        raise ConfigError(f"kafka_ssl_*: cannot load {files}: {exc.reason or exc}") from None
    return context


class _OAuthAuthenticator(OAuthAuthenticator):  # type: ignore[misc]
    """OAUTHBEARER as RFC 7628 has it: a broker that refuses the token answers with an error challenge
    and fails the authentication only after the client's ``%x01`` reply. aiokafka's own authenticator
    stops once the token is sent, so a refused token left the connection half authenticated (every
    later request read as garbage) instead of raising ``SaslAuthenticationFailed``."""

    _acknowledged = False

    async def step(self, payload: bytes | None) -> tuple[bytes, bool] | None:
        if self._token_sent and payload:  # the broker's error challenge (JSON) instead of an empty success
            if self._acknowledged:
                return None
            self._acknowledged = True
            return b"\x01", True
        result: tuple[bytes, bool] | None = await super().step(payload)
        return result


def _oauth_authenticator(conn: AIOKafkaConnection) -> _OAuthAuthenticator:
    return _OAuthAuthenticator(sasl_oauth_token_provider=conn._sasl_oauth_token_provider)


def _answer_oauth_error_challenges() -> None:
    """Every aiokafka connection (faust's included) authenticates OAUTHBEARER with ``_OAuthAuthenticator``."""
    AIOKafkaConnection.authenticator_oauth = _oauth_authenticator


def token_expires_in(token: str) -> float | None:
    """Seconds until a JWT's ``exp`` claim, read without verifying it (only to know when to ask for a
    new one; the broker verifies); None for a token without one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        return float(claims["exp"]) - time.time()
    except (ValueError, KeyError, TypeError):  # not base64, not JSON, no or a bad exp
        return None


class TokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """OAUTHBEARER: the token from a file (read at every connection, so a sidecar may rotate it) or
    printed by a command (run again after a minute, or sooner when the token's ``exp`` is nearer)."""

    def __init__(self, path: str | None, command: str | None):
        self.path, self.command = path, command
        self._cached: tuple[float, str] | None = None  # (monotonic time to run the command again, token)

    async def token(self) -> str:
        if self.path is not None:
            try:
                with open(self.path, encoding="utf-8") as fh:
                    value = fh.read().strip()
            except OSError as exc:
                raise ConfigError(f"kafka_oauth_token_file: {self.path}: {exc.strerror}") from None
            return self._checked(value, f"kafka_oauth_token_file: {self.path} is empty")
        if self._cached is not None and time.monotonic() < self._cached[0]:
            return self._cached[1]
        value = await self._run()
        keep = TOKEN_COMMAND_TTL_S
        left = token_expires_in(value)
        if left is not None:  # a connection made after the token expired would be refused with it
            keep = min(keep, max(0.0, left - TOKEN_EXPIRY_MARGIN_S))
        self._cached = (time.monotonic() + keep, value)
        return value

    async def _run(self) -> str:
        assert self.command is not None
        proc = await asyncio.create_subprocess_exec(
            *shlex.split(self.command), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), TOKEN_COMMAND_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            raise ConfigError(f"kafka_oauth_token_command: no token after {TOKEN_COMMAND_TIMEOUT_S:.0f} s") from None
        if proc.returncode != 0:
            raise ConfigError(f"kafka_oauth_token_command: exited with {proc.returncode}")
        return self._checked(out.decode("utf-8", "replace").strip(), "kafka_oauth_token_command printed no token")

    @staticmethod
    def _checked(value: str, empty: str) -> str:
        if not value:
            raise ConfigError(empty)
        redaction.register([value])  # a token is a secret like a password
        return value


async def check_broker(settings: Settings, timeout_s: float = 10.0) -> str | None:
    """Connect to each bootstrap server as the clients will (TLS, then SASL): None once one accepts
    us; why none did if none answers (down, starting: wait and ask again). Raises ``ConfigError``
    when a broker answers but refuses our credentials or we refuse its certificate."""
    kwargs = security_kwargs(settings)
    why: str | None = None
    for server in bootstrap_servers(settings.broker).split(","):
        host, _, port = server.rpartition(":")
        try:
            conn = await create_conn(
                host, int(port), client_id="crp-preflight", request_timeout_ms=int(timeout_s * 1000), **kwargs
            )
        except AUTH_ERRORS as exc:
            raise ConfigError(_auth_refused(settings, server, exc)) from None
        except ssl.SSLCertVerificationError as exc:
            raise ConfigError(
                f"kafka: TLS to {server}: the broker's certificate is not trusted ({exc.verify_message}); "
                f"check kafka_ssl_cafile (CRP_KAFKA_SSL_CAFILE) and that the broker's name is {host}"
            ) from None
        except ssl.SSLError as exc:
            if refused := _client_cert_refused(settings, server, exc):
                raise ConfigError(refused) from None
            if "EOF" in str(exc.reason or exc):  # the connection went away mid-handshake: retried
                why = f"broker {server}: TLS handshake cut short"
                continue
            raise ConfigError(
                f"kafka: TLS to {server} failed ({exc.reason or exc}): is it a TLS listener? "
                f"(kafka_security_protocol is {settings.kafka_security_protocol})"
            ) from None
        except (OSError, KafkaError, TimeoutError) as exc:
            if refused := _client_cert_refused(settings, server, exc):  # TLS 1.3: the alert follows the handshake
                raise ConfigError(refused) from None
            why = f"broker {server}: {type(exc).__name__}"
            if not isinstance(exc, ConnectionRefusedError):  # it listens, then drops us: the wrong protocol?
                why += f" (if it is up: does this listener speak {settings.kafka_security_protocol}?)"
            continue
        with contextlib.suppress(Exception):  # the socket closes (TLS: after its shutdown) before we go on
            await asyncio.wait_for(asyncio.shield(conn.close()), 2.0)
        return None
    return why


def _auth_refused(settings: Settings, server: str, exc: BaseException) -> str:
    mechanism = settings.kafka_sasl_mechanism
    detail = redaction.redact(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)[:200]
    if mechanism == "OAUTHBEARER":
        source = "kafka_oauth_token_file" if settings.kafka_oauth_token_file else "kafka_oauth_token_command"
        return (
            f"kafka: the broker {server} refused the OAUTHBEARER token ({detail}); "
            f"check the token {source} gives (expired? the audience or scope the broker expects?)"
        )
    return (
        f"kafka: the broker {server} refused authentication as {settings.kafka_sasl_username!r} with {mechanism} "
        f"({detail}); check kafka_sasl_username, kafka_sasl_password (CRP_KAFKA_SASL_PASSWORD) and "
        "kafka_sasl_mechanism"
    )


def _client_cert_refused(settings: Settings, server: str, exc: BaseException) -> str | None:
    """Why the broker refused our client certificate, if a TLS alert from it says so; else None."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, ssl.SSLError):
        seen = seen.__cause__ or seen.__context__
    reason = str(seen.reason or "") if isinstance(seen, ssl.SSLError) else ""
    if "ALERT" not in reason or not any(alert in reason for alert in CLIENT_CERT_ALERTS):
        return None
    alert = reason.split("ALERT_", 1)[-1].lower().replace("_", " ")
    if settings.kafka_ssl_certfile is None:
        return (
            f"kafka: TLS to {server}: the broker requires a client certificate ({alert}); set kafka_ssl_certfile "
            "and kafka_ssl_keyfile (CRP_KAFKA_SSL_CERTFILE, CRP_KAFKA_SSL_KEYFILE)"
        )
    return (
        f"kafka: TLS to {server}: the broker refused the client certificate {settings.kafka_ssl_certfile} "
        f"({alert}); is it signed by a CA the broker trusts, and still valid?"
    )


__all__ = [
    "TokenProvider",
    "bootstrap_servers",
    "check_broker",
    "client_kwargs",
    "faust_kwargs",
    "security_kwargs",
    "ssl_context",
    "token_expires_in",
]
