"""What every command shares: the one-line error, the parser that raises it, common flags, settings."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import NoReturn

from crp_stream import redaction
from crp_stream.config import Settings, load_settings

WORKER_GROUPS = ("ingest", "arbiter", "retrieval", "operator")


class CliError(Exception):
    """A usage or input problem reported as one line."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error raises ``CliError`` (printed as one line) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{self.prog}: {message}")


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", help="directory of the embedded backends (env CRP_DATA, default ./.crp)")
    p.add_argument("--config", help="TOML configuration file (env CRP_CONFIG)")
    p.add_argument("--database", help="SQLAlchemy URL (env CRP_DATABASE_URL; default SQLite under --data)")
    p.add_argument(
        "--qdrant",
        help="edge:PATH | a Qdrant server http(s)://HOST:6333 (REST) or grpc(s)://HOST:6334 (gRPC), ?collection=NAME "
        "(env CRP_QDRANT; default embedded)",
    )
    p.add_argument(
        "--embedder",
        help="default | openai:BASE_URL#MODEL | onnx:PATH | sentence-transformers:NAME | precomputed:MODEL_ID"
        " | hashing[:DIM] (env CRP_EMBEDDER)",
    )
    add_logging(p)


KAFKA_FLAGS = (
    "broker",
    "kafka_security_protocol",
    "kafka_sasl_mechanism",
    "kafka_sasl_username",
    "kafka_ssl_cafile",
    "kafka_ssl_certfile",
    "kafka_ssl_keyfile",
)


def add_broker(p: argparse.ArgumentParser, what: str = "the Kafka topics instead of the embedded log") -> None:
    """``--broker`` and the Kafka security flags; the SASL password and an OAUTHBEARER token only come
    from the environment or the TOML file (argv is visible to every user of the machine)."""
    p.add_argument("--broker", help=f"kafka://HOST:PORT[,HOST:PORT]: {what} (env CRP_BROKER)")
    g = p.add_argument_group("Kafka security (password: CRP_KAFKA_SASL_PASSWORD or the TOML file's [kafka])")
    g.add_argument("--kafka-security-protocol", metavar="P", help="PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL")
    g.add_argument("--kafka-sasl-mechanism", metavar="M", help="PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER")
    g.add_argument("--kafka-sasl-username", metavar="USER")
    g.add_argument("--kafka-ssl-cafile", metavar="PEM", help="the CA of the brokers' certificates")
    g.add_argument("--kafka-ssl-certfile", metavar="PEM", help="client certificate (mutual TLS)")
    g.add_argument("--kafka-ssl-keyfile", metavar="PEM", help="client key (mutual TLS)")


def add_logging(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--log-format", choices=["text", "json"], help="default: text on a terminal, else json")


def settings_of(ns: argparse.Namespace) -> Settings:
    """Flags > CRP_* environment > TOML file > defaults; the settings' secrets are redacted from here on."""
    flags = {
        "data": ns.data,
        "config": ns.config,
        "database": ns.database,
        "qdrant": ns.qdrant,
        "embedder": ns.embedder,
    }
    for extra in (*KAFKA_FLAGS, "metrics_port", "partitions", "instance_id", "replication_factor", "derived_retention"):
        if hasattr(ns, extra):
            flags[extra] = getattr(ns, extra)
    settings = load_settings(flags)
    redaction.register(redaction.secrets_in(settings, os.environ))
    return settings


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text") from None
