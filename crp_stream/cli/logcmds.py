"""``crp-stream publish | tail | status``: write to, read from and summarise the embedded log and fabric,
or with ``--broker`` the Kafka topics and the workers' database (cli/kafka_log.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import msgspec

from crp_stream.cli import progress
from crp_stream.cli.base import CliError, add_broker, add_common, read_text, settings_of
from crp_stream.config import Settings
from crp_stream.events import topics
from crp_stream.fabric.fabric import Fabric
from crp_stream.fabric.models import REEMBED_TARGET_KEY
from crp_stream.processors import HANDLER_GROUPS
from crp_stream.replay_format import Headers, format_line, json_lines, parse_headers, raw_value
from crp_stream.runtime.embedded import Append, EmbeddedLog, open_fabric, system_clock

Publish = Callable[..., Any]
Rec = tuple[str, str | None, bytes, Headers]


def register(sub: Any) -> None:
    pb = sub.add_parser("publish", help="publish replay-format lines (FILE) or JSON values (TOPIC FILE)")
    add_common(pb)
    add_broker(pb)
    pb.add_argument("args", nargs="+", metavar="[TOPIC] FILE")
    pb.add_argument("--key", help="record key when publishing JSON values to a TOPIC")
    pb.add_argument(
        "--seal",
        action="store_true",
        help="seal the text of documents and observations with their own key in --database (forget destroys it)",
    )
    pb.set_defaults(handler=publish)

    tl = sub.add_parser("tail", help="print a topic's records as replay-format lines")
    add_common(tl)
    add_broker(tl)
    tl.add_argument("topic")
    tl.add_argument("--from-beginning", action="store_true")
    tl.add_argument("--follow", action="store_true")
    tl.add_argument("--limit", type=int, default=None)
    tl.set_defaults(handler=tail)

    st = sub.add_parser("status", help="facts by source and status, model id, topics and offsets")
    add_common(st)
    add_broker(st, "end offsets from the Kafka topics, facts from the workers' --database")
    st.add_argument("--json", action="store_true")
    st.set_defaults(handler=status)


def publish_lines(publish: Publish, text: str, origin: str, step: Callable[[int], None] | None = None) -> int:
    """Publish replay-format lines; their ``ts`` is ignored, the log stamps the time."""
    n = 0
    for where, _line, obj in json_lines(text, origin):
        headers = parse_headers(obj.get("headers"), where)
        publish(obj["topic"], obj.get("key"), raw_value(obj["value"]), headers=headers)
        n += 1
        if step is not None:
            step(1)
    return n


def publish_records(ns: argparse.Namespace) -> list[Rec]:
    """The records a ``publish`` command names, all read and checked before any is published."""
    out: list[Rec] = []
    if len(ns.args) == 1:
        path = Path(ns.args[0])

        def collect(topic: str, key: str | None, raw: bytes, headers: Headers = ()) -> None:
            out.append((topic, key, raw, headers))

        publish_lines(collect, read_text(path), str(path))
    elif len(ns.args) == 2:
        topic, path = ns.args[0], Path(ns.args[1])
        text = read_text(path)
        single = text.lstrip().startswith("{") and "\n{" not in text.strip()
        lines = [(1, text)] if single else [(n, x) for n, x in enumerate(text.splitlines(), 1) if x.strip()]
        for number, line in lines:
            v, raw = _json_value(line, path, number)
            key = ns.key or (
                v.get("source") or v.get("session_id") or v.get("target_id") if isinstance(v, dict) else None
            )
            out.append((topic, key, raw, ()))
    else:
        raise CliError("publish takes FILE (replay lines) or TOPIC FILE (JSON values)")
    return out


def _json_value(line: str, path: Path, number: int) -> tuple[Any, bytes]:
    """A JSON Lines value and the bytes published for it: the line as written when it is one compact
    JSON value (parsed by msgspec, in C: a file of vectors is mostly floats), else the value as
    ``json.dumps`` writes it (what ``json`` accepts and msgspec does not, such as NaN, or a value
    spread over several lines)."""
    raw = line.strip().encode()
    if "\n" not in line:
        try:
            return msgspec.json.decode(raw), raw
        except msgspec.DecodeError:
            pass  # the standard library decides, and words the error
    try:
        v = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CliError(f"{path}: not JSON: {exc.msg} at line {exc.lineno + number - 1}") from None
    return v, json.dumps(v, ensure_ascii=False).encode()


def sealed_records(settings: Settings, records: list[Rec]) -> list[Rec]:
    """``publish --seal``: documents and observations sealed (docs/security.md "The log forgets")."""
    from crp_stream.fabric.sealing import Sealer, SealError
    from crp_stream.fabric.sql import db

    engine = db.make_engine(settings.database)
    try:
        db.upgrade(engine)
        sealer, out = Sealer(engine), []
        for n, (topic, key, raw, headers) in enumerate(records, 1):
            if settings.base_topic(topic) in (topics.DOCUMENTS, topics.TELEMETRY):
                try:
                    value = json.loads(raw)
                    if not isinstance(value, dict):
                        raise SealError("not a JSON object")
                    raw = json.dumps(sealer.seal(value), ensure_ascii=False).encode()
                except (ValueError, SealError) as exc:
                    raise CliError(f"--seal: record {n} on {topic}: {exc}") from None
            out.append((topic, key, raw, headers))
        return out
    finally:
        engine.dispose()


def publish(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)
    records = publish_records(ns)
    if ns.seal:
        records = sealed_records(settings, records)
    with progress.bar("publishing", total=len(records)) as bar:
        if settings.broker:
            from crp_stream.cli.kafka_log import produce_all

            n = produce_all(settings, records, progress.counter(bar))
        else:
            log_ = EmbeddedLog(settings.log_path, system_clock)
            for topic, key, raw, headers in records:
                log_.append([Append(settings.topic(topic), key, raw, headers=headers)])
                bar.update(1)
            n = len(records)
    print(f"published {n} records", file=sys.stderr)
    return 0


def tail(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)
    if settings.broker:
        from crp_stream.cli import kafka_log

        return kafka_log.tail(ns, settings)
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


def status(ns: argparse.Namespace) -> int:
    settings = settings_of(ns)
    if settings.broker:
        from crp_stream.cli import kafka_log

        return kafka_log.status(ns, settings)
    fabric = open_fabric(settings)
    log_ = EmbeddedLog(settings.log_path, system_clock)
    try:
        if ns.json:
            print(json.dumps(status_dict(fabric, log_, settings), indent=2, sort_keys=True))
        else:
            print_status(fabric, log_, settings, out=sys.stdout)
    finally:
        fabric.close()
    return 0


def status_dict(fabric: Fabric, log_: EmbeddedLog, settings: Settings) -> dict[str, Any]:
    with fabric.unit_of_work() as uow:
        counts = uow.repo.fact_counts()
        model = uow.repo.get_meta("embedding_model")
        building = uow.repo.get_meta(REEMBED_TARGET_KEY)  # a reembed not switched yet (or stopped)
        edges = uow.repo.edge_count()
        offsets = {g: {f"{t}": o for (t, _p), o in uow.repo.offsets(g).items()} for g in HANDLER_GROUPS}
        # the fabric's model decides (a worker with another embedder is refused); else the embedder's
        thresholds = fabric.threshold_sources(uow.repo, model or fabric.embedder.model_id)
    by_source: dict[str, dict[str, int]] = {}
    for source, state, n in counts:
        by_source.setdefault(source, {})[state] = n
    return {
        "embedding_model": model,
        "embedder": fabric.embedder.model_id,
        "reembed_target": building,
        "facts": by_source,
        "similarity_edges": edges,
        "vectors": fabric.vectors.count(),
        "topics": {settings.base_topic(t): n for t, n in log_.end_offsets().items()},
        "consumer_offsets": offsets,
        "thresholds": {k: {"value": v, "from": src} for k, (v, src) in thresholds.items()},
    }


def format_thresholds(thresholds: dict[str, dict[str, Any]]) -> str:
    """``thresholds: min_relevance=0.55 (seed) ...``: the values in force and where each comes from."""
    return "thresholds: " + " ".join(f"{k}={t['value']:.2f} ({t['from']})" for k, t in thresholds.items())


def print_status(fabric: Fabric, log_: EmbeddedLog, settings: Settings, out: IO[str] = sys.stderr) -> None:
    s = status_dict(fabric, log_, settings)
    print(
        f"fabric: model={s['embedding_model'] or '(none yet)'} vectors={s['vectors']} "
        f"similarity_edges={s['similarity_edges']}",
        file=out,
    )
    if s["reembed_target"]:
        print(f"reembed: building {s['reembed_target']} (not switched; run reembed again to finish)", file=out)
    print(format_thresholds(s["thresholds"]), file=out)
    print(f"{'source':<28} {'status':<12} {'facts':>7}", file=out)
    for source, by_status in sorted(s["facts"].items()):
        for state, n in sorted(by_status.items()):
            print(f"{source:<28} {state:<12} {n:>7}", file=out)
    print(f"{'topic':<28} {'end offset':>10}", file=out)
    for topic, n in sorted(s["topics"].items()):
        print(f"{topic:<28} {n:>10}", file=out)
