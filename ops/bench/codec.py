"""Benchmark of the edge codec: records/s of decoding and encoding, msgspec path vs the pydantic models.

    .venv/bin/python -m ops.bench.codec                  # 2000 records of each kind
    .venv/bin/python -m ops.bench.codec --records 200    # quick

Decoding: documents (text, and five facts with subjects and TTLs), telemetry, window requests (three
sub-queries; every other one with 384-d query and sub-query vectors), window reports and the
changelog's FactRecorded / FactStatusChanged records, each through ``decode_input`` (msgspec, then
explicit checks) and through ``decode_pydantic`` (the models alone) in the same run. Encoding: the
decoded changelog records and envelopes of 20 facts, through ``encode`` and ``encode_pydantic``.
The ratio is new / baseline records/s.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from crp_stream import events
from crp_stream.events.codec import decode_pydantic, encode_pydantic

DIM = 384
CANON = {"sort_keys": True, "separators": (",", ":")}


def documents(n: int, rng: random.Random) -> list[bytes]:
    out = []
    for i in range(n):
        doc: dict[str, Any] = {"event_id": f"d{i}", "source": "vendor_docs", "source_type": "official"}
        if i % 2:
            doc.update(document_id=f"doc{i}", modified_at="2026-09-01T00:00:00Z")
            doc["text"] = "The billing API allows 1000 requests per second. " * rng.randint(2, 8)
        else:
            doc.update(trust=0.9, modified_at="2026-09-01T00:00:00+02:00", ttl="P30D")
            doc["facts"] = [
                {"fact_id": f"f{i}-{j}", "text": f"The api {j} limit is {j * 10} rps.", "importance": 0.8}
                | {"subject": f"api {j}", "attribute": "limit", "value": j * 10, "unit": "rps"}
                for j in range(5)
            ]
        out.append(json.dumps(doc).encode())
    return out


def telemetry(n: int, rng: random.Random) -> list[bytes]:
    return [
        json.dumps(
            {"event_id": f"t{i}", "source": "field_telemetry", "observed_at": "2026-09-01T00:00:00.123456Z"}
            | {"subject": "billing API", "attribute": "rate limit", "value": rng.randint(1, 999), "unit": "rps"}
        ).encode()
        for i in range(n)
    ]


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(DIM)]


def requests(n: int, rng: random.Random) -> list[bytes]:
    out = []
    for i in range(n):
        vectors = i % 2 == 0
        subs = [
            {"id": f"q{j}", "text": f"sub-query {j} of the task", "expected_words": 200}
            | ({"embedding": _vector(rng)} if vectors else {})
            for j in range(3)
        ]
        query: dict[str, Any] = {"text": "What is the billing API's rate limit?"}
        req: dict[str, Any] = {"request_id": f"r{i}", "session_id": f"s{i % 7}", "window": 1, "query": query}
        req.update(sub_queries=subs, fact_budget=10, policy={"max_hops": 2})
        if vectors:
            query["embedding"] = _vector(rng)
            req["embedding_model"] = "bench-384"
        out.append(json.dumps(req).encode())
    return out


def reports(n: int, rng: random.Random) -> list[bytes]:
    return [
        json.dumps(
            {"session_id": f"s{i}", "window": 2, "output_text": "The limit is 250 rps. " * 20}
            | {"addressed": [{"id": "q1", "depth": 0.7}, {"id": "q2", "words": 120}], "completeness": rng.random()}
        ).encode()
        for i in range(n)
    ]


def changelog(n: int, rng: random.Random) -> list[bytes]:
    out = []
    for i in range(n):
        fact = {"type": "FactRecorded", "fact_id": f"f{i}", "source": "field_telemetry", "source_type": "telemetry"}
        fact |= {"trust": 0.4, "epoch": "2026-01-01T00:00:05.000000Z", "modified_at": "2026-01-01T00:00:05.000000Z"}
        fact |= {"ttl": "none", "text": f"The api {i} limit is 250 rps.", "importance": 1.0, "status": "active"}
        fact |= {"subject": f"api {i}", "attribute": "limit", "value": "250", "unit": "rps", "origin_event_id": "e1"}
        change = {"type": "FactStatusChanged", "fact_id": f"f{i}", "status": "stale", "reason": "STALE_HIGH_TRUST"}
        change |= {"at": "2026-01-01T00:00:05.000000Z", "cause_id": f"c{rng.randint(0, 9)}"}
        out += [json.dumps(fact, **CANON).encode(), json.dumps(change, **CANON).encode()]  # type: ignore[arg-type]
    return out


def envelope(i: int, rng: random.Random) -> events.EnvelopeAssembled:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i)
    facts = [
        events.EnvelopeFact(
            fact_id=f"f{i}-{j}",
            text=f"The api {j} limit is {j * 10} rps.",
            role="anchor" if j % 4 else "connector",
            score=rng.random(),
            relevance=rng.random(),
            novelty=rng.random(),
            recency=rng.random(),
            authority=rng.random(),
            source="vendor_docs",
            source_type="official",
            epoch=at,
            modified_at=at,
            support=1 + j % 3,
            via="similarity",
            rank=j + 1,
        )
        for j in range(20)
    ]
    headers: dict[str, str | int | float] = {"CRP-Context-Coverage-Score": rng.random(), "CRP-Window": 1}
    return events.EnvelopeAssembled(
        request_id=f"r{i}",
        session_id=f"s{i}",
        window=1,
        status="in-progress",
        facts=facts,
        residual_anchor="billing API rate limit",
        headers=headers,
    )


def rate(fn: Callable[[Any], object], items: list[Any]) -> float:
    """Items per second of ``fn``, the best of three passes."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - t0)
    return len(items) / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2000, help="records of each kind")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    n = args.records
    kinds = [
        ("crp.documents", documents(n, rng)),
        ("crp.telemetry", telemetry(n, rng)),
        ("crp.window.requests", requests(n, rng)),
        ("crp.window.reports", reports(n, rng)),
        ("crp.facts", changelog(n // 2, rng)),
    ]
    print(f"{'decode':<28}{'msgspec rec/s':>15}{'pydantic rec/s':>16}{'ratio':>8}")
    for topic, raws in kinds:
        new = rate(lambda r, t=topic: events.decode_input(t, r), raws)  # type: ignore[misc]
        old = rate(lambda r, t=topic: decode_pydantic(t, r), raws)  # type: ignore[misc]
        print(f"{topic:<28}{new:>15,.0f}{old:>16,.0f}{new / old:>8.2f}")
    encoded = [
        ("changelog records", [events.decode_input("crp.facts", r) for r in kinds[-1][1]]),
        ("window requests", [events.decode_input("crp.window.requests", r) for r in kinds[2][1]]),
        ("envelopes (20 facts)", [envelope(i, rng) for i in range(max(1, n // 4))]),
    ]
    print(f"{'encode':<28}{'msgspec rec/s':>15}{'pydantic rec/s':>16}{'ratio':>8}")
    for name, evs in encoded:
        new, old = rate(events.encode, evs), rate(encode_pydantic, evs)
        print(f"{name:<28}{new:>15,.0f}{old:>16,.0f}{new / old:>8.2f}")


if __name__ == "__main__":
    main()
