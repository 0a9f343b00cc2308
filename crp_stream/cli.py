"""The ``crp-stream`` command: wiring only. Errors print one line, never a traceback."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from crp_stream import redaction
from crp_stream.config import ConfigError, Settings, load_settings

WORKER_GROUPS = ("ingest", "arbiter", "retrieval", "operator")
# ``run`` polls the log this often when idle: the longest a record waits before it is picked up
# (was 0.2 s, which alone broke any envelope latency goal); an empty poll costs ~10 µs.
IDLE_POLL_S = 0.005


class CliError(Exception):
    """A usage or input problem reported as one line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CliError(f"{self.prog}: {message}")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", help="directory of the embedded backends (env CRP_DATA, default ./.crp)")
    p.add_argument("--config", help="TOML configuration file (env CRP_CONFIG)")
    p.add_argument("--database", help="SQLAlchemy URL (env CRP_DATABASE_URL; default SQLite under --data)")
    p.add_argument("--qdrant", help="edge:PATH | http(s)://HOST:PORT (env CRP_QDRANT; default embedded)")
    p.add_argument("--embedder", help="default | precomputed:MODEL_ID | hashing[:DIM] (env CRP_EMBEDDER)")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--log-format", choices=["text", "json"], help="default: text on a terminal, else json")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="crp-stream", description="Event-sourced stream processor for a living knowledge fabric.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    r = sub.add_parser("run", help="run all workers on the embedded defaults")
    _common(r)
    r.add_argument("--until-idle", action="store_true", help="process everything published so far, then exit")
    r.add_argument("--sample", action="store_true", help="publish the bundled sample (ops/sample) first")

    rp = sub.add_parser("replay", help="run the pipeline on a replay JSONL file, write every output record")
    _common(rp)
    rp.add_argument("input")
    rp.add_argument("--out", required=True)

    pb = sub.add_parser("publish", help="publish replay-format lines (FILE) or JSON values (TOPIC FILE)")
    _common(pb)
    pb.add_argument("args", nargs="+", metavar="[TOPIC] FILE")
    pb.add_argument("--key", help="record key when publishing JSON values to a TOPIC")

    tl = sub.add_parser("tail", help="print a topic's records as replay-format lines")
    _common(tl)
    tl.add_argument("topic")
    tl.add_argument("--from-beginning", action="store_true")
    tl.add_argument("--follow", action="store_true")
    tl.add_argument("--limit", type=int, default=None)

    st = sub.add_parser("status", help="facts by source and status, model id, topics and offsets")
    _common(st)
    st.add_argument("--json", action="store_true")

    dbp = sub.add_parser("db", help="database migrations")
    _common(dbp)
    dbsub = dbp.add_subparsers(dest="db_cmd", required=True, parser_class=_Parser)
    dbsub.add_parser("upgrade", help="apply the migrations (alembic upgrade head)")
    dbsub.add_parser("downgrade", help="revert every migration (alembic downgrade base)")

    wk = sub.add_parser("worker", help="run the handlers as a Kafka worker (faust-streaming); N workers share the load")
    _common(wk)
    wk.add_argument("--broker", help="kafka://HOST:PORT[,HOST:PORT] (env CRP_BROKER)")
    wk.add_argument("--groups", default=",".join(WORKER_GROUPS),
                    help="handler groups this worker runs (default: all): " + ",".join(WORKER_GROUPS))
    wk.add_argument("--partitions", type=int, help="partitions of the topics it creates (env CRP_PARTITIONS)")
    wk.add_argument("--metrics-port", type=int, help="serve /metrics and /health on this port (env CRP_METRICS_PORT)")
    wk.add_argument("--instance-id", help="static consumer-group membership: unique per worker, stable across its "
                    "restarts (env CRP_INSTANCE_ID)")

    from crp_stream import cli_calibrate, cli_ops

    cli_ops.add_commands(sub, _common)
    cli_calibrate.add_command(sub, _common)
    from crp_stream import cli_rebuild, cli_sign

    cli_rebuild.add_command(sub, _common)
    cli_sign.add_command(sub)
    return p


def _settings(ns: argparse.Namespace) -> Settings:
    flags = {
        "data": ns.data, "config": ns.config, "database": ns.database, "qdrant": ns.qdrant,
        "embedder": ns.embedder,
    }
    for extra in ("broker", "metrics_port", "partitions", "instance_id"):
        if hasattr(ns, extra):
            flags[extra] = getattr(ns, extra)
    settings = load_settings(flags)
    redaction.register(redaction.secrets_in(settings, os.environ))
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    # Secrets of the environment are masked from the first line on (settings add theirs later).
    redaction.register(redaction.secrets_in(None, os.environ))
    try:
        ns = build_parser().parse_args(argv)
    except CliError as exc:
        print(_redact(str(exc)), file=sys.stderr)
        return 2
    fmt = getattr(ns, "log_format", None) or ("text" if sys.stderr.isatty() else "json")
    log_format = ('{"ts":"%(asctime)s","level":"%(levelname)s","logger":"%(name)s","msg":%(message_json)s}'
                  if fmt == "json" else "%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    logging.basicConfig(level=getattr(ns, "log_level", "INFO"), stream=sys.stderr, datefmt="%Y-%m-%dT%H:%M:%S%z",
                        format=log_format)
    for handler in logging.getLogger().handlers:  # every line, traceback included, is redacted
        handler.setFormatter(redaction.RedactingFormatter(log_format, "%Y-%m-%dT%H:%M:%S%z"))
    _install_json_messages()
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        return int(_dispatch(ns) or 0)
    except (ConfigError, CliError) as exc:
        print(f"crp-stream: {_redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # last line of defence: one line, no traceback
        from crp_stream.fabric.embedders import EmbedderError

        if isinstance(exc, EmbedderError):
            print(f"crp-stream: {_redact(str(exc))}", file=sys.stderr)
            return 2
        print(f"crp-stream: error: {type(exc).__name__}: {_redact(str(exc))}", file=sys.stderr)
        return 1


def _redact(msg: str) -> str:
    return redaction.redact(msg)[:500]


def _install_json_messages() -> None:
    old = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        rec = old(*args, **kwargs)
        rec.message_json = json.dumps(_redact(rec.getMessage()))
        return rec

    logging.setLogRecordFactory(factory)


def _dispatch(ns: argparse.Namespace) -> int:
    from crp_stream import cli_ops

    if ns.cmd == "sign":
        from crp_stream import cli_sign

        return cli_sign.run(ns)
    if ns.cmd == "replay":
        from crp_stream.runtime.replay import replay_file

        settings = _settings(ns)
        n = replay_file(Path(ns.input), Path(ns.out), settings)
        print(f"replayed {n['inputs']} input records, wrote {n['outputs']} output records to {ns.out}",
              file=sys.stderr)
        return 0
    settings = _settings(ns)
    if ns.cmd == "db":
        from crp_stream.fabric import db

        engine = db.make_engine(settings.database)
        if ns.db_cmd == "upgrade":
            db.upgrade(engine)
            print("database is at the latest revision", file=sys.stderr)
        else:
            db.downgrade(engine)
            print("database is at base (no tables)", file=sys.stderr)
        return 0
    if ns.cmd == "run":
        return _run(ns, settings)
    if ns.cmd == "worker":
        if not settings.broker:
            raise CliError("worker: --broker kafka://HOST:PORT (or CRP_BROKER) is required")
        from crp_stream.runtime.kafka import run_worker

        return run_worker(settings, ns.groups)
    if ns.cmd == "publish":
        return _publish(ns, settings)
    if ns.cmd == "rebuild":
        from crp_stream import cli_rebuild

        return cli_rebuild.run(ns, settings)
    if ns.cmd == "tail":
        return _tail(ns, settings)
    if ns.cmd == "status":
        return _status(ns, settings)
    if ns.cmd == "calibrate":
        from crp_stream import cli_calibrate

        return cli_calibrate.run(ns, settings)
    return cli_ops.dispatch(ns, settings)


def open_embedded(settings: Settings) -> Any:
    from crp_stream.fabric.fabric import Fabric
    from crp_stream.processors import all_handlers
    from crp_stream.runtime.embedded import EmbeddedRuntime, system_clock
    from crp_stream.runtime.log import EmbeddedLog

    fabric = Fabric(settings)
    log_ = EmbeddedLog(settings.log_path, system_clock)
    return EmbeddedRuntime(fabric, log_, all_handlers(), batch_size=settings.batch_size)


def _run(ns: argparse.Namespace, settings: Settings) -> int:
    rt = open_embedded(settings)
    log = logging.getLogger("crp_stream.run")
    if ns.sample:
        n = publish_lines(rt.publish, sample_path().read_text(encoding="utf-8"), str(sample_path()))
        log.info("published %d sample records from %s", n, sample_path())
    log.info("embedded run: data=%s model=%s", settings.data_dir, rt.fabric.embedder.model_id)
    # What is alive now (modules, classes) lives as long as the process: frozen out of the collector's
    # sight, a full collection scans only what the worker allocates later (57 ms -> 3 ms).
    gc.collect()
    gc.freeze()
    try:
        while True:
            t0 = time.monotonic()
            n = rt.run_until_idle()
            if n:
                log.info("processed %d records in %.2fs (%s); dead-lettered %d; outputs %d", n,
                         time.monotonic() - t0, _fmt_counts(rt.stats.processed),
                         rt.stats.deadlettered, rt.stats.outputs)
            if ns.until_idle:
                break
            time.sleep(IDLE_POLL_S)
    finally:
        _print_status(rt.fabric, rt.log, settings)
        rt.fabric.close()
    return 0


def _fmt_counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items())) or "none"


def sample_path() -> Path:
    return Path(__file__).resolve().parents[1] / "ops" / "sample" / "sample.jsonl"


def publish_lines(publish: Any, text: str, origin: str) -> int:
    """Publish replay-format lines; their ``ts`` is ignored, the log stamps the time."""
    from crp_stream.runtime.replay import ReplayError, json_lines, parse_headers, raw_value

    n = 0
    try:
        for where, _line, obj in json_lines(text, origin):
            headers = parse_headers(obj.get("headers"), where)
            publish(obj["topic"], obj.get("key"), raw_value(obj["value"]), headers=headers)
            n += 1
    except ReplayError as exc:
        raise CliError(str(exc)) from None
    return n


def _publish(ns: argparse.Namespace, settings: Settings) -> int:
    from crp_stream.runtime.embedded import system_clock
    from crp_stream.runtime.log import Append, EmbeddedLog

    log_ = EmbeddedLog(settings.log_path, system_clock)
    if len(ns.args) == 1:
        path = Path(ns.args[0])

        def publish(topic: str, key: str | None, raw: bytes, headers: Any = ()) -> None:
            log_.append([Append(settings.topic(topic), key, raw, headers=headers)])

        n = publish_lines(publish, _read(path), str(path))
    elif len(ns.args) == 2:
        topic, path = ns.args[0], Path(ns.args[1])
        text = _read(path)
        try:
            values = [json.loads(text)] if text.lstrip().startswith("{") and "\n{" not in text.strip() else [
                json.loads(x) for x in text.splitlines() if x.strip()]
        except json.JSONDecodeError as exc:
            raise CliError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
        for v in values:
            key = ns.key or (v.get("source") or v.get("session_id") or v.get("target_id") if isinstance(v, dict)
                             else None)
            log_.append([Append(settings.topic(topic), key, json.dumps(v, ensure_ascii=False).encode())])
        n = len(values)
    else:
        raise CliError("publish takes FILE (replay lines) or TOPIC FILE (JSON values)")
    print(f"published {n} records", file=sys.stderr)
    return 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CliError(f"{path}: not UTF-8 text") from None


def _tail(ns: argparse.Namespace, settings: Settings) -> int:
    from crp_stream.runtime.embedded import system_clock
    from crp_stream.runtime.log import EmbeddedLog
    from crp_stream.runtime.replay import format_line

    log_ = EmbeddedLog(settings.log_path, system_clock)
    topic = settings.topic(ns.topic)
    ends = log_.end_offsets()
    start = 0 if ns.from_beginning else max(0, ends.get(topic, 0) - (ns.limit or 10))
    shown = 0
    while True:
        for rec in log_.iter_topic(topic, start):
            line = format_line(settings.base_topic(rec.topic), rec.key, rec.ts_us, rec.value, rec.headers)
            sys.stdout.write(line + "\n")
            start = rec.offset + 1
            shown += 1
            if ns.limit and shown >= ns.limit and not ns.follow:
                return 0
        sys.stdout.flush()
        if not ns.follow:
            return 0
        time.sleep(0.5)


def _status(ns: argparse.Namespace, settings: Settings) -> int:
    from crp_stream.fabric.fabric import Fabric
    from crp_stream.runtime.embedded import system_clock
    from crp_stream.runtime.log import EmbeddedLog

    fabric = Fabric(settings)
    log_ = EmbeddedLog(settings.log_path, system_clock)
    try:
        if ns.json:
            print(json.dumps(status_dict(fabric, log_, settings), indent=2, sort_keys=True))
        else:
            _print_status(fabric, log_, settings, out=sys.stdout)
    finally:
        fabric.close()
    return 0


def status_dict(fabric: Any, log_: Any, settings: Settings) -> dict[str, Any]:
    with fabric.unit_of_work() as uow:
        counts = uow.repo.fact_counts()
        model = uow.repo.get_meta("embedding_model")
        edges = uow.repo.edge_count()
        offsets = {g: {f"{t}": o for (t, _p), o in uow.repo.offsets(g).items()}
                   for g in ("ingest", "arbiter", "retrieval", "operator")}
    by_source: dict[str, dict[str, int]] = {}
    for source, status, n in counts:
        by_source.setdefault(source, {})[status] = n
    return {
        "embedding_model": model, "embedder": fabric.embedder.model_id, "facts": by_source,
        "similarity_edges": edges, "vectors": fabric.vectors.count(),
        "topics": {settings.base_topic(t): n for t, n in log_.end_offsets().items()},
        "consumer_offsets": offsets,
    }


def _print_status(fabric: Any, log_: Any, settings: Settings, out: Any = sys.stderr) -> None:
    s = status_dict(fabric, log_, settings)
    print(f"fabric: model={s['embedding_model'] or '(none yet)'} vectors={s['vectors']} "
          f"similarity_edges={s['similarity_edges']}", file=out)
    print(f"{'source':<28} {'status':<12} {'facts':>7}", file=out)
    for source, by_status in sorted(s["facts"].items()):
        for status, n in sorted(by_status.items()):
            print(f"{source:<28} {status:<12} {n:>7}", file=out)
    print(f"{'topic':<28} {'end offset':>10}", file=out)
    for topic, n in sorted(s["topics"].items()):
        print(f"{topic:<28} {n:>10}", file=out)


if __name__ == "__main__":
    # ``python -m crp_stream.cli``: run the package's module, so that ``CliError`` raised by the
    # sub-command modules (which import it from ``crp_stream.cli``) is the class ``main`` catches.
    from crp_stream.cli import main as _main

    sys.exit(_main())
