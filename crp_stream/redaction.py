"""No secret in a log line or an error message.

Secrets come from configuration and the environment: the password of a database URL, the signing
keys (``CRP_SIGNING_KEYS``), Kafka SASL/SSL passwords (``CRP_KAFKA_SASL_PASSWORD`` and any ``CRP_*``
variable whose name says PASSWORD, SECRET, TOKEN or KEY). The CLI registers them once at start-up;
``redact`` replaces them, and the password of any ``scheme://user:password@host`` URL or
``password=...`` pair, with ``***``. ``RedactingFormatter`` applies it to every formatted log line,
tracebacks included.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

MASK = "***"
MIN_SECRET_CHARS = 4  # shorter values would mask ordinary words; refuse such keys in docs instead
_SECRET_NAME = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|KEY", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)([^@\s]+)(@)")
_PAIR_PASSWORD = re.compile(r"(password\s*[=:]\s*)('[^']*'|\"[^\"]*\"|[^\s,;&]+)", re.IGNORECASE)

_secrets: set[str] = set()


def register(values: Iterable[str | None]) -> None:
    """Remember secret values to mask wherever they appear."""
    for v in values:
        if v and len(v) >= MIN_SECRET_CHARS:
            _secrets.add(v)
            decoded = unquote(v)
            if decoded != v and len(decoded) >= MIN_SECRET_CHARS:
                _secrets.add(decoded)


def url_password(url: str | None) -> str | None:
    if not url or "://" not in url:
        return None
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def secrets_in(settings: Any, env: Mapping[str, str]) -> list[str]:
    """Every secret value the settings and the environment hold."""
    found: list[str | None] = [
        url_password(getattr(settings, "database_url", None)),
        url_password(getattr(settings, "broker", None)),
        url_password(getattr(settings, "qdrant", None)),
        getattr(settings, "kafka_sasl_password", None),  # from the TOML file too, not only CRP_*
    ]
    found.extend(getattr(settings, "signing_keys", {}).values())
    for name, value in env.items():
        if not name.startswith(("CRP_", "PG", "KAFKA_")):
            continue
        if name == "CRP_SIGNING_KEYS":
            found.extend(p.split("=", 1)[1].strip() for p in value.split(",") if "=" in p)
        elif _SECRET_NAME.search(name):
            found.append(value)
        elif "URL" in name or name in ("CRP_DATABASE", "CRP_BROKER", "CRP_QDRANT"):
            found.append(url_password(value))
    return [f for f in found if f]


def redact(text: str) -> str:
    """``text`` with every registered secret and every URL / ``password=`` password masked."""
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    text = _PAIR_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactingFormatter(logging.Formatter):
    """A formatter whose output (message, arguments and traceback) never shows a secret."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


__all__ = ["MASK", "RedactingFormatter", "redact", "register", "secrets_in", "url_password"]
