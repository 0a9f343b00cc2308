"""``publish``, ``tail`` and ``status`` with ``--broker``: the Kafka topics instead of the embedded log.

``publish`` produces the records (``acks=all``; the broker stamps them). ``tail`` reads a topic's
partitions and prints the records in log-append order (``--from-beginning``: the first ``--limit``;
else the last ``--limit``, default 10; ``--follow``: then every new one). ``status`` reads the facts
and the consumer offsets from the workers' database (``--database``) and the end offsets from the
broker; the vector index belongs to the workers and is not opened.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import IO, Any

from crp_stream.cli.base import CliError
from crp_stream.cli.logcmds import format_thresholds
from crp_stream.cli.tables import repo_view
from crp_stream.config import Settings
from crp_stream.events.topics import ALL_TOPICS
from crp_stream.fabric.embedders.port import make_embedder
from crp_stream.fabric.fabric import http_options, parse_stored_thresholds, threshold_sources, thresholds_key
from crp_stream.processors import HANDLER_GROUPS
from crp_stream.replay_format import Headers, format_line
from crp_stream.runtime.kafka.transport import Position, Received, Transport

Rec = tuple[str, str | None, bytes, Headers]


def produce_all(settings: Settings, records: Sequence[Rec], step: Any = None) -> int:
    async def go() -> int:
        t = Transport(settings, "crp-cli-publish")
        await t.start()
        try:
            for topic, key, raw, headers in records:
                await t.produce(topic, key, raw, headers)
                if step is not None:
                    step(1)
        finally:
            await t.close()
        return len(records)

    return asyncio.run(go())


def _line(r: Received) -> str:
    return format_line(r.topic, r.key, r.ts_ms * 1000, r.value, r.headers)


def tail(ns: argparse.Namespace, settings: Settings) -> int:
    if ns.limit is not None and ns.limit < 1:
        raise CliError(f"--limit: {ns.limit} must be at least 1")

    async def go() -> None:
        t = Transport(settings, "crp-cli-tail")
        await t.start()
        ends = await t.end_offsets([ns.topic])
        if not ends:
            raise CliError(f"tail: the broker has no topic {settings.topic(ns.topic)}")
        limit = ns.limit or (None if ns.from_beginning else 10)
        start = None if ns.from_beginning or limit is None else {k: max(0, e - limit) for k, e in ends.items()}
        got = [r async for r in t.records([ns.topic], start)]
        got.sort(key=lambda r: (r.ts_ms, r.partition, r.offset))
        shown = got if limit is None else (got[:limit] if ns.from_beginning else got[-limit:])
        for r in shown:
            sys.stdout.write(_line(r) + "\n")
        sys.stdout.flush()
        if not ns.follow:
            return
        after: Position = dict(ends)
        for r in got:
            after[(r.topic, r.partition)] = max(after.get((r.topic, r.partition), 0), r.offset + 1)
        async for r in t.records([ns.topic], after, follow=True):
            sys.stdout.write(_line(r) + "\n")
            sys.stdout.flush()

    asyncio.run(go())
    return 0


def need_database(settings: Settings, command: str) -> None:
    if not settings.database_url:
        raise CliError(f"{command}: with --broker, give the workers' database: --database URL (or CRP_DATABASE_URL)")


def _embedder_model(settings: Settings) -> str:
    """The configured embedder's model id (nothing loaded or contacted)."""
    emb = make_embedder(settings.embedder, http_options(settings))
    close = getattr(emb, "close", None)
    if close is not None:
        close()
    return emb.model_id


def status_dict(settings: Settings) -> dict[str, Any]:
    need_database(settings, "status")

    async def ends() -> Position:
        t = Transport(settings, "crp-cli-status")
        await t.start()
        return await t.end_offsets(ALL_TOPICS)

    topic_ends = asyncio.run(ends())
    with repo_view(settings) as repo:
        counts = repo.fact_counts()
        model = repo.get_meta("embedding_model")
        edges = repo.edge_count()
        committed = {g: repo.offsets(g) for g in HANDLER_GROUPS}
        th_model = model or _embedder_model(settings)
        stored = parse_stored_thresholds(th_model, repo.get_meta(thresholds_key(th_model)))
    thresholds = threshold_sources(settings, th_model, stored)
    by_source: dict[str, dict[str, int]] = {}
    for source, state, n in counts:
        by_source.setdefault(source, {})[state] = n
    topics: dict[str, int] = {}
    for (topic, _p), end in topic_ends.items():
        topics[topic] = topics.get(topic, 0) + end
    lag = {
        g: {
            t: sum(max(0, e - done.get((t, p), 0)) for (t2, p), e in topic_ends.items() if t2 == t)
            for t in sorted({t for t, _p in done})
        }
        for g, done in committed.items()
    }
    return {
        "broker": settings.broker,
        "embedding_model": model,
        "facts": by_source,
        "similarity_edges": edges,
        "topics": topics,
        "consumer_offsets": {g: {t: o for (t, _p), o in done.items()} for g, done in committed.items()},
        "consumer_lag": lag,
        "thresholds": {k: {"value": v, "from": src} for k, (v, src) in thresholds.items()},
    }


def status(ns: argparse.Namespace, settings: Settings, out: IO[str] = sys.stdout) -> int:
    s = status_dict(settings)
    if ns.json:
        print(json.dumps(s, indent=2, sort_keys=True), file=out)
        return 0
    print(f"broker: {s['broker']}  fabric: model={s['embedding_model'] or '(none yet)'} "
          f"similarity_edges={s['similarity_edges']}", file=out)  # fmt: skip
    print(format_thresholds(s["thresholds"]), file=out)
    print(f"{'source':<28} {'status':<12} {'facts':>7}", file=out)
    for source, by_status in sorted(s["facts"].items()):
        for state, n in sorted(by_status.items()):
            print(f"{source:<28} {state:<12} {n:>7}", file=out)
    print(f"{'topic':<28} {'end offset':>10}  lag by group", file=out)
    for topic, n in sorted(s["topics"].items()):
        lags = ", ".join(f"{g} {v[topic]}" for g, v in sorted(s["consumer_lag"].items()) if topic in v)
        print(f"{topic:<28} {n:>10}  {lags}".rstrip(), file=out)
    return 0


__all__ = ["need_database", "produce_all", "status", "status_dict", "tail"]
