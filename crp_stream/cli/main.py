"""``crp-stream``: builds the parser from the command modules and runs one. Errors print one line."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from crp_stream import redaction
from crp_stream.cli import (
    calibrate,
    console,
    db,
    forget,
    logcmds,
    ops,
    rebuild,
    reembed,
    replay,
    run,
    sign,
    topics,
    worker,
)
from crp_stream.cli.base import CliError, Parser
from crp_stream.config import ConfigError
from crp_stream.fabric.embedders.port import EmbedderError
from crp_stream.replay_format import ReplayFormatError

COMMANDS = (run, replay, logcmds, db, worker, topics, ops, calibrate, rebuild, reembed, sign, console, forget)
LOG_DATEFMT = "%Y-%m-%dT%H:%M:%S%z"


def package_version() -> str:
    """The installed distribution's version (``pyproject.toml``'s, which CHANGELOG.md's newest entry names)."""
    try:
        return version("crp-stream")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "unknown"


def build_parser() -> Parser:
    p = Parser(prog="crp-stream", description="Event-sourced stream processor for a living knowledge fabric.")
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    for module in COMMANDS:
        module.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    # Secrets of the environment are masked from the first line on (settings add theirs later).
    redaction.register(redaction.secrets_in(None, os.environ))
    try:
        ns = build_parser().parse_args(argv)
    except CliError as exc:
        print(_redact(str(exc)), file=sys.stderr)
        return 2
    _setup_logging(getattr(ns, "log_level", "INFO"), getattr(ns, "log_format", None))
    try:
        return int(ns.handler(ns) or 0)
    except (ConfigError, CliError, ReplayFormatError, EmbedderError) as exc:
        print(f"crp-stream: {_redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # last line of defence: one line, no traceback
        print(f"crp-stream: error: {type(exc).__name__}: {_redact(str(exc))}", file=sys.stderr)
        return 1


def _setup_logging(level: str, fmt: str | None) -> None:
    fmt = fmt or ("text" if sys.stderr.isatty() else "json")
    log_format = (
        '{"ts":"%(asctime)s","level":"%(levelname)s","logger":"%(name)s","msg":%(message_json)s}'
        if fmt == "json"
        else "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
    )
    logging.basicConfig(level=level, stream=sys.stderr, datefmt=LOG_DATEFMT, format=log_format)
    for handler in logging.getLogger().handlers:  # every line, traceback included, is redacted
        handler.setFormatter(redaction.RedactingFormatter(log_format, LOG_DATEFMT))
    _install_json_messages()
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if level != "DEBUG":  # the Kafka clients' INFO lines (subscriptions, connections) are not the command's
        for name in ("aiokafka", "kafka"):
            logging.getLogger(name).setLevel(logging.WARNING)


def _redact(msg: str) -> str:
    return redaction.redact(msg)[:500]


def _install_json_messages() -> None:
    old = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        rec = old(*args, **kwargs)
        rec.message_json = json.dumps(_redact(rec.getMessage()))
        return rec

    logging.setLogRecordFactory(factory)
