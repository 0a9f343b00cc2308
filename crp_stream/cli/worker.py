"""``crp-stream worker``: the handlers as a Kafka worker (faust-streaming); workers in a group share the load."""

from __future__ import annotations

import argparse
from typing import Any

from crp_stream.cli.base import CliError, add_broker, add_common, settings_of
from crp_stream.processors import HANDLER_GROUPS


def register(sub: Any) -> None:
    wk = sub.add_parser("worker", help="run the handlers as a Kafka worker (faust-streaming); N workers share the load")
    add_common(wk)
    add_broker(wk, "the broker to work on")
    wk.add_argument(
        "--groups",
        default=",".join(HANDLER_GROUPS),
        help="handler groups this worker runs (default: all): " + ",".join(HANDLER_GROUPS),
    )
    wk.add_argument("--partitions", type=int, help="partitions of the topics it creates (env CRP_PARTITIONS)")
    wk.add_argument("--metrics-port", type=int, help="serve /metrics and /health on this port (env CRP_METRICS_PORT)")
    wk.add_argument(
        "--instance-id",
        help="static consumer-group membership: unique per worker, stable across its restarts (env CRP_INSTANCE_ID)",
    )
    wk.add_argument(
        "--console",
        action="store_true",
        help="serve the operator console at /console on the --metrics-port (token: CRP_CONSOLE_TOKEN)",
    )
    wk.set_defaults(handler=run)


def run(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)
    if not settings.broker:
        raise CliError("worker: --broker kafka://HOST:PORT (or CRP_BROKER) is required")
    from crp_stream.runtime.kafka.launch import run_worker  # faust loads only for this command
    from crp_stream.runtime.kafka.worker import Mount

    mounts: list[Mount] = []
    if ns.console:
        if not settings.metrics_port:
            raise CliError("worker: --console is served on the worker's HTTP port: give --metrics-port")
        mounts.append(("/console", _console))
    if not mounts:  # the plain call, as tests/support/faulty_worker.py wraps it
        return run_worker(settings, ns.groups)
    return run_worker(settings, ns.groups, mounts=mounts)


def _console(worker: Any) -> Any:
    from crp_stream.cli.console import console_tokens
    from crp_stream.console import create_app
    from crp_stream.runtime.kafka.console import KafkaConsoleBackend

    token, tenants = console_tokens()
    return create_app(KafkaConsoleBackend(worker), token=token, tenant_tokens=tenants)
