"""Hostile input: property-based fuzzing of every input topic through the embedded runtime.

Hypothesis draws *recipes* (truncated JSON, random bytes, wrong encodings, lone surrogates, deep
nesting, huge strings and ids, NaN/inf/zero/wrong-dimension vectors, wrong types, semantic misfits,
non-objects, SQL-looking and control-character text in malformed records, and duplicate ids with other
content); the test turns each into the bytes of one record on one of the five input topics, and mixes
valid records in between. After every batch: each hostile record is dead-lettered (the same bytes, on
its topic, with a non-empty reason), the runtime still runs, and every valid record was processed, in
order, its text stored verbatim even when it looks like SQL or holds control characters.

The heavy test throws >= 10,000 hostile records; the small one runs in the default suite, and on
PostgreSQL too.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from crp_stream import events
from crp_stream.config import Settings
from crp_stream.fabric.fabric import Fabric
from crp_stream.runtime.embedded import open_runtime
from crp_stream.runtime.embedded.log import EmbeddedLog
from crp_stream.runtime.embedded.runtime import EmbeddedRuntime
from tests.support.services import fresh_postgres_url

MODEL = "fuzz-model"
DIM = 8
MAX_BYTES = 128 * 1024
DOC, TEL, REQ, REP, CMD = (
    "crp.documents",
    "crp.telemetry",
    "crp.window.requests",
    "crp.window.reports",
    "crp.operator.commands",
)
TOPICS = (DOC, TEL, REQ, REP, CMD)
NASTY = (
    "'; DROP TABLE facts; --",
    "Robert'); DELETE FROM audit_log WHERE 1=1; --",
    '" OR "1"="1',
    "1; UPDATE consumer_offsets SET next_offset = 0",
    "%s %d {0} ${x} $(rm -rf /)",
    "\\x00\\n",
    "line\nbreak\r\ttab\x07bell\x1b[31mred\x1b[0m",
    "zero\u200bwidth \u202eRTL\u202c",
    "emoji 🧨 ∑ 𝔘",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "NULL",
    "null",
    "\x7f\x01\x02",
)
BAD_VECTORS = (
    "[NaN,1]",
    "[Infinity,0,0]",
    "[-Infinity]",
    "[1e999,0]",
    '["x",1]',
    "[null]",
    "[]",
    "[0,0,0,0,0,0,0,0]",
    "[1,2,3]",
    "[[1,0]]",
    "{}",
    '"v"',
)
WRONG: dict[str, dict[str, list[Any]]] = {
    DOC: {
        "event_id": [123, [], {}, None, ""],
        "source": [5, None, ""],
        "source_type": ["blog", 1, None],
        "facts": ["x", {}, 5, []],
        "trust": ["high", 1.5, -0.1, []],
        "document_id": [5, []],
        "modified_at": ["yesterday", 5],
        "ttl": ["forever", 5, "-P1D"],
        "embedding_model": [5, ""],
    },
    TEL: {
        "event_id": [123, None, ""],
        "source": [5, None],
        "observed_at": ["yesterday", 12, None],
        "subject": [5, "", []],
        "attribute": [None, 7],
        "value": [[], {}, None],
    },
    REQ: {
        "request_id": [5, None, ""],
        "session_id": [5, None, ""],
        "window": [0, -1, "1", 1.5, None],
        "query": ["text", [], None, {"text": 5}],
        "sub_queries": [{}, "x", [], [{"id": 5}]],
        "fact_budget": [0, -5, "ten", 1.5],
    },
    REP: {
        "session_id": [5, "", None],
        "window": [0, "1", None],
        "addressed": ["x", {}, [{"id": 5}]],
        "completeness": [1.5, -0.1, "x"],
        "output_text": [5, []],
    },
    CMD: {
        "command_id": [5, "", None],
        "command": ["drop_table", 5, None],
        "target_id": [None, 5, ""],
        "actor": [None, "", 5, "   "],
    },
}
ID_FIELD = {DOC: "event_id", TEL: "event_id", REQ: "request_id", REP: "session_id", CMD: "command_id"}

topic_st = st.sampled_from(TOPICS)
RECIPE = st.one_of(
    st.tuples(st.just("truncated"), topic_st, st.floats(0.0, 0.999)),
    st.tuples(st.just("binary"), topic_st, st.binary(max_size=48)),
    st.tuples(
        st.just("encoding"),
        topic_st,
        st.sampled_from(["latin-1", "utf-16", "utf-16-le", "utf-32", "cp1252", "utf-8-sig"]),
    ),
    st.tuples(st.just("surrogate"), topic_st, st.integers(0xD800, 0xDFFF)),
    st.tuples(st.just("nesting"), topic_st, st.integers(33, 3000), st.booleans()),
    st.tuples(st.just("huge"), topic_st, st.sampled_from(["record", "id", "text"])),
    st.tuples(st.just("vector"), st.sampled_from([DOC, TEL, REQ]), st.sampled_from(BAD_VECTORS), st.booleans()),
    st.tuples(st.just("wrong_type"), topic_st, st.integers(0, 10_000), st.integers(0, 10_000)),
    st.tuples(st.just("semantic"), topic_st, st.integers(0, 10_000)),
    st.tuples(
        st.just("not_object"),
        topic_st,
        st.one_of(st.integers(), st.text(max_size=20), st.none(), st.lists(st.integers(), max_size=3), st.booleans()),
    ),
    st.tuples(st.just("nul"), topic_st, st.booleans()),
    st.tuples(
        st.just("sql_control"), topic_st, st.sampled_from(NASTY), st.text(st.characters(max_codepoint=0x1F), max_size=8)
    ),
    st.tuples(
        st.just("duplicate"),
        st.sampled_from([DOC, TEL, REQ, REP, CMD]),
        st.integers(0, 10**6),
        st.text(min_size=1, max_size=12),
    ),
)


def vec(i: int) -> list[float]:
    v = np.zeros(DIM)
    v[i % DIM] = 1.0
    v[(i * 7 + 3) % DIM] += 0.5
    return [round(float(x), 6) for x in v / np.linalg.norm(v)]


@dataclass
class Fuzz:
    rt: EmbeddedRuntime
    log: EmbeddedLog
    fabric: Fabric
    uid: int = 0
    hostile: int = 0
    valid: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    history: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {t: [] for t in TOPICS})

    def next_uid(self) -> int:
        self.uid += 1
        return self.uid

    # --- valid records --------------------------------------------------------------------------------

    def valid_doc(self, u: int) -> dict[str, Any]:
        text = f"{NASTY[u % len(NASTY)]} #{u}"
        return {
            "event_id": f"v-doc-{u}",
            "source": "fuzz_src",
            "source_type": "news",
            "embedding_model": MODEL,
            "document_id": f"vd-{u}",
            "facts": [{"text": text, "embedding": vec(u)}],
        }

    def valid_tel(self, u: int) -> dict[str, Any]:
        return {
            "event_id": f"v-tel-{u}",
            "source": "fuzz_tel",
            "observed_at": "2030-01-01T00:00:00Z",
            "subject": f"svc {u % 20}",
            "attribute": "latency",
            "value": u,
            "unit": "ms",
            "embedding": vec(u),
            "embedding_model": MODEL,
        }

    def valid_req(self, u: int) -> dict[str, Any]:
        return {
            "request_id": f"v-req-{u}",
            "session_id": f"vs-{u}",
            "window": 1,
            "fact_budget": 5,
            "query": {"text": "what about it", "embedding": vec(u)},
            "embedding_model": MODEL,
            "sub_queries": [{"id": "a", "text": "part a", "embedding": vec(u + 1)}],
        }

    def valid_rep(self, session: str) -> dict[str, Any]:
        return {
            "session_id": session,
            "window": 1,
            "addressed": [{"id": "a", "depth": 0.5}],
            "output_text": "the generator wrote this",
            "completeness": 0.5,
        }

    # --- hostile records ----------------------------------------------------------------------------

    def base(self, topic: str, u: int) -> dict[str, Any]:
        if topic == DOC:
            return self.valid_doc(u) | {"event_id": f"h-doc-{u}"}
        if topic == TEL:
            return self.valid_tel(u) | {"event_id": f"h-tel-{u}"}
        if topic == REQ:
            return self.valid_req(u) | {"request_id": f"h-req-{u}", "session_id": f"hs-{u}"}
        if topic == REP:
            return self.valid_rep(f"hs-{u}")
        return {
            "command_id": f"h-cmd-{u}",
            "command": "resolve_refresh",
            "target_id": f"nothing-{u}",
            "actor": "mallory",
        }

    def materialize(self, recipe: tuple[Any, ...]) -> tuple[str, bytes]:
        kind, topic = recipe[0], recipe[1]
        u = self.next_uid()
        value = self.base(topic, u)
        dump: Callable[[Any], bytes] = lambda v: json.dumps(v, ensure_ascii=False).encode()  # noqa: E731
        if kind == "truncated":
            raw = dump(value)
            return topic, raw[: int(len(raw) * recipe[2])]
        if kind == "binary":
            return topic, b"\xff" + recipe[2]
        if kind == "encoding":
            value["note"] = "caf\u00e9 na\u00efve"
            text = json.dumps(value, ensure_ascii=False)
            return topic, text.encode(recipe[2], errors="replace")  # emoji have no cp1252 byte
        if kind == "surrogate":
            return topic, dump(value).replace(b"{", b'{"x":"\\u%04x",' % recipe[2], 1)
        if kind == "nesting":
            depth, as_list = recipe[2], recipe[3]
            deep = "[" * depth + "1" + "]" * depth if as_list else '{"d":' * depth + "1" + "}" * depth
            return topic, dump(value)[:-1] + b', "deep": ' + deep.encode() + b"}"
        if kind == "huge":
            which = recipe[2]
            if which == "record":
                return topic, dump(value | {"pad": "x" * (MAX_BYTES + 10)})
            if which == "id":
                return topic, dump(value | {ID_FIELD[topic]: "i" * 300})
            big = "t" * 70_000
            if topic == DOC:
                value["facts"][0]["text"] = big
            elif topic == TEL:
                value["text"] = big
            elif topic == REQ:
                value["query"]["text"] = big
            elif topic == REP:
                value["addressed"] = [{"id": "a" * 2000, "depth": 0.5}]
            else:
                value["reason"] = "r" * 5000
            return topic, dump(value)
        if kind == "vector":
            snippet = recipe[2]
            if topic == DOC:
                value["facts"][0]["embedding"] = "@V@"
            elif topic == TEL:
                value["embedding"] = "@V@"
            elif recipe[3]:
                value["query"]["embedding"] = "@V@"
            else:
                value["sub_queries"][0]["embedding"] = "@V@"
            return topic, dump(value).replace(b'"@V@"', snippet.encode())
        if kind == "wrong_type":
            fields = WRONG[topic]
            name = sorted(fields)[recipe[2] % len(fields)]
            value[name] = fields[name][recipe[3] % len(fields[name])]
            return topic, dump(value)
        if kind == "semantic":
            return topic, dump(self.semantic(topic, value, recipe[2]))
        if kind == "not_object":
            return topic, dump(recipe[2])
        if kind == "nul":  # valid JSON, but a NUL that PostgreSQL cannot store in text
            if recipe[2] and topic == DOC:
                value["facts"][0]["text"] = "before\x00after"
            else:
                value[ID_FIELD[topic]] = f"id\x00{u}"
            return topic, dump(value)
        if kind == "sql_control":
            value[ID_FIELD[topic]] = recipe[2] + recipe[3] or "x"
            value.pop("source" if topic in (DOC, TEL) else "window" if topic in (REQ, REP) else "actor")
            return topic, dump(value)
        return self.duplicate(topic, recipe[2], recipe[3], value)

    def semantic(self, topic: str, value: dict[str, Any], n: int) -> dict[str, Any]:
        if topic == DOC:
            return [
                value | {"source_type": "blog"},
                value | {"embedding_model": "other-model"},
                value | {"facts": [{"text": "no vector here"}]},
                value | {"facts": [{"text": f"f{i}", "embedding": vec(i)} for i in range(51)]},
            ][n % 4]
        if topic == TEL:
            return [value | {"embedding_model": "other"}, {k: v for k, v in value.items() if k != "embedding"}][n % 2]
        if topic == REQ:
            return [
                value | {"window": 2},
                {k: v for k, v in value.items() if k != "sub_queries"},
                value | {"embedding_model": "other"},
                value | {"query": {"text": "no vector"}},
            ][n % 4]
        if topic == REP:
            return value  # a report for a session that never requested a window
        self.history[CMD].append(value)  # rejected, but its id is now used: a duplicate recipe reuses it
        return value | {"command": ["resolve_refresh", "confirm_quarantine", "release_quarantine"][n % 3]}

    def duplicate(self, topic: str, pick: int, other: str, fallback: dict[str, Any]) -> tuple[str, bytes]:
        seen = self.history[topic]
        if not seen:
            return topic, json.dumps(fallback | {ID_FIELD[topic]: ""}).encode()  # still hostile: empty id
        first = seen[pick % len(seen)]
        if topic == DOC:
            changed = first | {"facts": [{"text": f"other content {other}", "embedding": vec(pick)}]}
        elif topic == TEL:
            changed = first | {"value": f"other {other}"}
        elif topic == REQ:
            changed = first | {"fact_budget": 3 + pick % 7 if first.get("fact_budget") != 3 + pick % 7 else 2}
        elif topic == REP:
            changed = first | {"output_text": f"another output {other}"}
        else:
            changed = first | {"reason": f"changed {other}"}
        return topic, json.dumps(changed).encode()

    # --- one batch --------------------------------------------------------------------------------------

    def run_batch(self, recipes: list[tuple[Any, ...]], valid_every: int) -> None:
        self.rt.run_until_idle()
        start = self.log.max_seq()
        hostile: Counter[tuple[str, bytes]] = Counter()
        expect_facts: list[str] = []
        expect_envelopes: list[str] = []
        valid_reports: list[bytes] = []
        texts: dict[str, str] = {}
        for i, recipe in enumerate(recipes):
            if i % valid_every == 0:
                u = self.next_uid()
                kind = (u // 1) % 4
                if kind == 0:
                    value, topic = self.valid_doc(u), DOC
                    expect_facts.append(value["event_id"])
                    texts[value["event_id"]] = value["facts"][0]["text"]
                elif kind == 1:
                    value, topic = self.valid_tel(u), TEL
                    expect_facts.append(value["event_id"])
                elif kind == 2:
                    value, topic = self.valid_req(u), REQ
                    expect_envelopes.append(value["request_id"])
                    self.history[REQ].append(value)
                else:
                    sessions = [
                        r["session_id"]
                        for r in self.history[REQ]
                        if r["session_id"] not in {p["session_id"] for p in self.history[REP]}
                    ]
                    if not sessions:
                        continue
                    value, topic = self.valid_rep(sessions[-1]), REP
                    self.history[REP].append(value)
                raw = json.dumps(value, ensure_ascii=False).encode()
                if topic == REP:
                    valid_reports.append(raw)
                if topic in (DOC, TEL):
                    self.history[topic].append(value)
                self.rt.publish(topic, ID_FIELD[topic], raw)
                self.valid += 1
            topic, raw = self.materialize(recipe)
            self.kinds[recipe[0]] += 1
            hostile[(topic, raw)] += 1
            self.rt.publish(topic, "hostile", raw)
        self.rt.run_until_idle()
        self.hostile += sum(hostile.values())
        self.check(start, hostile, expect_facts, expect_envelopes, valid_reports, texts)

    def check(
        self,
        start: int,
        hostile: Counter[tuple[str, bytes]],
        expect_facts: list[str],
        expect_envelopes: list[str],
        valid_reports: list[bytes],
        texts: dict[str, str],
    ) -> None:
        dead: Counter[tuple[str, bytes]] = Counter()
        facts: list[dict[str, Any]] = []
        envelopes: list[str] = []
        for rec in self.log.read_after(start, limit=10_000_000):
            value = json.loads(rec.value) if rec.topic.startswith("crp.") and rec.record_id else None
            if rec.topic == "crp.deadletter" and value is not None:
                assert value["reason"].strip(), value
                dead[(value["topic"], events.raw_bytes(value["raw"]))] += 1
            elif rec.topic == "crp.facts" and value is not None and value["type"] == "FactRecorded":
                facts.append(value)
            elif rec.topic == "crp.envelopes" and value is not None:
                envelopes.append(value["request_id"])
        missing = hostile - dead
        assert not missing, f"not dead-lettered: {[(t, r[:120]) for t, r in list(missing)[:5]]}"
        wrongly = {k: n for k, n in (dead - hostile).items()}
        assert not wrongly, f"valid records dead-lettered: {[(t, r[:200]) for t, r in list(wrongly)[:5]]}"
        origins = [f["origin_event_id"] for f in facts]
        assert [o for o in origins if o in set(expect_facts)] == expect_facts  # all processed, in order
        assert all(r in set(envelopes) for r in expect_envelopes), (expect_envelopes, envelopes)
        assert all(("crp.window.reports", r) not in dead for r in valid_reports)
        stored = {f["origin_event_id"]: f["text"] for f in facts if f["origin_event_id"] in texts}
        assert stored == texts  # SQL-looking and control-character text is stored verbatim


def make_fuzz(tmp_path: Path, database_url: str | None = None) -> Fuzz:
    s = Settings(
        data_dir=tmp_path,
        database_url=database_url,
        embedder=f"precomputed:{MODEL}",
        max_record_bytes=MAX_BYTES,
        max_facts_per_document=50,
        batch_size=500,
    )
    rt = open_runtime(s, clock=lambda: 1_900_000_000_000_000)
    fuzz = Fuzz(rt, rt.log, rt.fabric)
    fuzz.rt.publish(DOC, "seed", json.dumps(fuzz.valid_doc(0)).encode())  # fixes the fabric's dimension
    fuzz.rt.run_until_idle()
    return fuzz


def fuzz_run(tmp_path: Path, examples: int, per_example: int, database_url: str | None = None) -> Fuzz:
    fuzz = make_fuzz(tmp_path, database_url)

    # No shrinking: the runtime's state carries over from batch to batch, so a smaller re-run would not
    # reproduce; the failing batch is reported as it was.
    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    @given(st.lists(RECIPE, min_size=per_example, max_size=per_example))
    def one_batch(recipes: list[tuple[Any, ...]]) -> None:
        fuzz.run_batch(recipes, valid_every=7)

    try:
        one_batch()
        assert fuzz.rt.run_until_idle() == 0  # still running, nothing left behind
    finally:
        fuzz.fabric.close()
        fuzz.log.close()
    return fuzz


def test_small_fuzz_every_topic(tmp_path: Path) -> None:
    fuzz = fuzz_run(tmp_path, examples=8, per_example=60)
    assert fuzz.hostile >= 400 and fuzz.valid >= 60
    assert set(fuzz.kinds) >= {"truncated", "binary", "nesting", "vector", "wrong_type", "duplicate"}


@pytest.mark.postgres
def test_small_fuzz_on_postgresql(tmp_path: Path) -> None:
    fuzz = fuzz_run(tmp_path, examples=4, per_example=60, database_url=fresh_postgres_url())
    assert fuzz.hostile >= 200


@pytest.mark.heavy
def test_ten_thousand_hostile_records(tmp_path: Path) -> None:
    fuzz = fuzz_run(tmp_path, examples=105, per_example=100)
    assert fuzz.hostile >= 10_000, fuzz.hostile
    assert fuzz.valid >= 1_400
    assert min(fuzz.kinds.values()) >= 200, fuzz.kinds  # every kind of hostility, many times
