"""Writes ``scenarios/mixed_large.jsonl``: a larger mixed scenario for the unpaced congruence test.
Deterministic (a seeded generator); run ``python tests/congruence/make_mixed.py`` to rebuild.

Interleaves documents of five sources (official, news, community, unverified), telemetry that drifts
and telemetry that contradicts, malformed records, operator commands, and eight retrieval sessions of
up to three windows each (one fanned out to two branches), with window reports between the windows,
so that every request depends on inputs published just before it.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent / "scenarios" / "mixed_large.jsonl"
T0 = datetime(2026, 11, 1, tzinfo=UTC)
SUBJECTS = [
    ("payments api", "rate limit", "rps", [400, 800, 1200]),
    ("search api", "timeout", "ms", [250, 500, 900]),
    ("ingress", "max body size", "MiB", [8, 16, 32]),
    ("etcd", "quota", "GiB", [2, 4, 8]),
    ("scheduler", "batch size", "pods", [50, 100, 200]),
]
TOPICS = [
    "pods",
    "services",
    "ingress controllers",
    "network policies",
    "etcd snapshots",
    "node pressure",
    "rolling updates",
    "service meshes",
    "dns caching",
    "image pulls",
    "quotas",
    "autoscaling",
]
# two official sources of different trust, so the high-trust partition changes when vendor_docs speaks
SOURCES = [
    ("vendor_docs", "official"),
    ("platform_docs", "official"),
    ("cilium_blog", "news"),
    ("community_notes", "community"),
    ("legacy_wiki", "unverified"),
]


def sentence(rng: random.Random, topic: str) -> str:
    verbs = [
        "depends on",
        "is limited by",
        "interacts with",
        "is configured through",
        "is monitored with",
        "fails over to",
        "is throttled by",
        "is cached by",
    ]
    other = rng.choice([t for t in TOPICS if t != topic])
    return f"In this cluster {topic} {rng.choice(verbs)} {other} during {rng.choice(['peak', 'night', 'batch'])} load."


def build(seed: int = 13) -> list[dict[str, object]]:
    rng = random.Random(seed)
    recs: list[dict[str, object]] = []
    t = T0

    def add(topic: str, key: str, value: object) -> None:
        nonlocal t
        t += timedelta(minutes=rng.randint(1, 90))
        recs.append({"topic": topic, "key": key, "ts": t.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": value})

    n_doc = n_tel = 0
    sessions: dict[str, int] = {}
    for step in range(150):
        r = rng.random()
        if r < 0.40:
            n_doc += 1
            source, stype = rng.choice(SOURCES)
            facts = []
            for _ in range(rng.randint(2, 5)):
                facts.append({"text": sentence(rng, rng.choice(TOPICS))})
            if rng.random() < 0.5:
                subj, attr, unit, values = rng.choice(SUBJECTS)
                v = values[0] if source in ("vendor_docs", "platform_docs") else rng.choice(values)
                facts.append(
                    {
                        "text": f"The {subj} {attr} is {v} {unit}.",
                        "subject": subj,
                        "attribute": attr,
                        "value": str(v),
                        "unit": unit,
                    }
                )
            add(
                "crp.documents",
                source,
                {
                    "event_id": f"m-doc-{n_doc}",
                    "source": source,
                    "source_type": stype,
                    "document_id": f"m-doc-{n_doc}",
                    "facts": facts,
                },
            )
        elif r < 0.70:
            n_tel += 1
            subj, attr, unit, values = rng.choice(SUBJECTS)
            v = values[min(2, step // 50)]  # the true value drifts over the scenario
            add(
                "crp.telemetry",
                "field_telemetry",
                {
                    "event_id": f"m-tel-{n_tel}",
                    "source": "field_telemetry",
                    "observed_at": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "subject": subj,
                    "attribute": attr,
                    "value": str(v),
                    "unit": unit,
                },
            )
        elif r < 0.75:
            add("crp.documents", "broken", rng.choice(['{"event_id": ', '"not an object"', '{"source": "x"}']))
        else:
            open_sessions = [s for s, w in sessions.items() if w <= 3]
            if open_sessions and rng.random() < 0.6:
                sid = rng.choice(open_sessions)
                w = sessions[sid]
                branches = [0, 1] if sid == "m-s-fan" and w == 1 else [None]
                for b in branches:
                    value = {
                        "session_id": sid,
                        "window": w,
                        "addressed": [{"id": f"q{w}", "words": 120}],
                        "output_text": f"Window {w} wrote about {TOPICS[w]} and {TOPICS[w + 1]} in depth today.",
                        "completeness": 0.3 * w,
                        "safety_budget": 0.9,
                    }
                    if b is not None:
                        value["branch"] = b
                        value["addressed"] = [{"id": f"q{2 * b + 1}", "depth": 0.6}]
                    add("crp.window.reports", sid, value)
                sessions[sid] = w + 1
                if w == 3:  # the last window's report closes the session (limit-reached)
                    continue
                add(
                    "crp.window.requests",
                    sid,
                    {
                        "request_id": f"{sid}-w{w + 1}",
                        "session_id": sid,
                        "window": w + 1,
                        "query": {"text": f"How do {TOPICS[w]} behave?"},
                        "fact_budget": 8,
                        "policy": {"min_relevance": 0.05},
                    },
                )
            elif len(sessions) < 8:
                sid = "m-s-fan" if len(sessions) == 3 else f"m-s-{len(sessions)}"
                topic = rng.choice(TOPICS)
                subs = [
                    {
                        "id": f"q{i}",
                        "text": f"{TOPICS[(TOPICS.index(topic) + i) % len(TOPICS)]} limits",
                        "expected_words": 200,
                    }
                    for i in range(1, 5)
                ]
                sessions[sid] = 1
                add(
                    "crp.window.requests",
                    sid,
                    {
                        "request_id": f"{sid}-w1",
                        "session_id": sid,
                        "window": 1,
                        "query": {"text": f"How do {topic} fail under load?"},
                        "sub_queries": subs,
                        "fact_budget": 8,
                        "max_windows": 3,
                        "policy": {"min_relevance": 0.05},
                        "fanout": 2 if sid == "m-s-fan" else 1,
                    },
                )
        if step == 100:
            add(
                "crp.operator.commands",
                "legacy_wiki",
                {
                    "command_id": "m-cmd-1",
                    "command": "release_quarantine",
                    "target_id": "no-such-candidate",
                    "actor": "ops",
                },
            )
    return recs


def main() -> None:
    OUT.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in build()))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
