"""Crash equivalence, reusable across runtimes.

- ``build_scenario(seed)``: a deterministic stream of inputs on every input topic (documents with
  precomputed vectors, telemetry that makes the arbiter file a refresh request and a quarantine
  candidate, window requests and reports of several sessions, operator commands that act on those,
  malformed records and duplicate ids). Log-append times lie in the future (2031), so every output
  appended while they are processed gets the same, deterministic append time (the log never goes
  backwards), and two runs of the same input log can be compared value for value.
- ``KillPlan``: seeded kill points, each measured from a restart: "the log has grown by D records", or
  "T ms after the log first grew" (which lands anywhere: inside a handler, between the log sync and the
  database commit, in the vector reconciliation...); D is drawn from the work left, so every point fits.
- ``run_with_kills(command, progress, plan)``: start the worker command, SIGKILL it at each point,
  restart it, and finally let it run to completion. ``command`` and ``progress`` are all that tie it
  to a runtime: the embedded one polls its log file; the Kafka worker (``tests/support/kafka_pipelines.py``)
  counts records committed in its fabric plus outputs read, and is stopped by ``until_done``.
- ``compare_outputs``: outputs by record id, in order per topic; a duplicate (if the runtime's
  guarantee allows one) must carry an id already seen with the same value.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from crp_stream.processors.base import dt_to_us
from crp_stream.runtime.embedded import open_runtime

MODEL = "crash-model"
DIM = 16
T0 = dt_to_us(datetime(2031, 1, 1, tzinfo=UTC))
MINUTE_US = 60 * 1_000_000
Input = tuple[str, str | None, int, bytes]

WORDS = (
    "router",
    "switch",
    "cache",
    "proxy",
    "queue",
    "shard",
    "index",
    "broker",
    "ledger",
    "gateway",
    "replica",
    "cluster",
    "token",
    "schema",
    "buffer",
    "socket",
)


def iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Gen:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.py = random.Random(seed)
        self.ts = T0
        self.out: list[Input] = []

    def vec(self, axis: int, noise: float = 0.35) -> list[float]:
        v = np.zeros(DIM)
        v[axis % DIM] = 1.0
        v = v + noise * self.rng.standard_normal(DIM)
        return [round(float(x), 6) for x in v / np.linalg.norm(v)]

    def sentence(self, topic: int, i: int) -> str:
        a, b = WORDS[topic % len(WORDS)], self.py.choice(WORDS)
        return f"The {a} {i} keeps {b} state for {self.py.randint(2, 90)} seconds."

    def add(self, topic: str, key: str | None, value: Any, raw: bytes | None = None) -> None:
        self.ts += MINUTE_US
        data = raw if raw is not None else json.dumps(value, separators=(",", ":")).encode()
        self.out.append((topic, key, self.ts, data))

    def doc(self, eid: str, source: str, stype: str, facts: list[dict[str, Any]], **kw: Any) -> None:
        self.add(
            "crp.documents",
            source,
            {"event_id": eid, "source": source, "source_type": stype, "embedding_model": MODEL, "facts": facts, **kw},
        )

    def fact(self, topic: int, i: int, **kw: Any) -> dict[str, Any]:
        return {"text": self.sentence(topic, i), "embedding": self.vec(topic), **kw}

    def claim_fact(self, subject: str, value: str, axis: int) -> dict[str, Any]:
        return {
            "text": f"The {subject} rate limit is {value} rps.",
            "embedding": self.vec(axis, 0.05),
            "subject": subject,
            "attribute": "rate limit",
            "value": value,
            "unit": "rps",
        }

    def telemetry(self, eid: str, subject: str, value: str, axis: int) -> None:
        self.add(
            "crp.telemetry",
            "field_telemetry",
            {
                "event_id": eid,
                "source": "field_telemetry",
                "observed_at": iso(self.ts),
                "subject": subject,
                "attribute": "rate limit",
                "value": value,
                "unit": "rps",
                "embedding": self.vec(axis, 0.05),
                "embedding_model": MODEL,
            },
        )

    def request(self, session: str, window: int, topics: Sequence[int]) -> None:
        value: dict[str, Any] = {
            "request_id": f"{session}-w{window}",
            "session_id": session,
            "window": window,
            "query": {"text": f"explain {session}", "embedding": self.vec(topics[0], 0.5)},
            "fact_budget": 6,
            "max_windows": 4,
            "embedding_model": MODEL,
        }
        if window == 1:
            value["sub_queries"] = [
                {"id": f"q{t}", "text": f"about {WORDS[t % len(WORDS)]}", "embedding": self.vec(t, 0.1)} for t in topics
            ]
        self.add("crp.window.requests", session, value)

    def report(self, session: str, window: int, topics: Sequence[int]) -> None:
        self.add(
            "crp.window.reports",
            session,
            {
                "session_id": session,
                "window": window,
                "addressed": [{"id": f"q{t}", "depth": round(0.3 + 0.2 * window, 2)} for t in topics[:2]],
                "output_text": " ".join(self.sentence(t, window) for t in topics),
                "completeness": 0.3 * window,
            },
        )

    def command(self, cid: str, command: str, target: str, actor: str = "alice") -> None:
        self.add(
            "crp.operator.commands",
            "ops",
            {
                "command_id": cid,
                "command": command,
                "target_id": target,
                "actor": actor,
                "reason": f"{command} by the crash scenario",
            },
        )


def _phase_a(g: _Gen) -> None:
    sessions = {f"s{i}": [(i + j) % 8 for j in range(3)] for i in range(4)}
    # the poisoning shape: low-trust blog first, then the trusted vendor, later (freshness holds)
    for i in range(3):
        g.doc(f"blog-b-{i}", "unverified_blog", "unverified", [g.claim_fact("api-b", "5", 11)])
    for i in range(12):
        facts = [g.fact(i % 8, 10 * i + j) for j in range(3)]
        if i == 0:
            facts.append(g.claim_fact("api-a", "1000", 10))
        if i == 1:
            facts.append(g.claim_fact("api-b", "500", 11))
        g.doc(f"vendor-{i}", "vendor_docs", "official", facts, document_id=f"doc-{i}")
        if i == 5:
            g.add("crp.documents", "bad", None, raw=b'{"event_id": "broken", "source": ')  # invalid JSON
            g.add(
                "crp.documents",
                "bad",
                None,
                raw=b'{"event_id":"nan","source":"x","source_type":"news",'
                b'"embedding_model":"crash-model","facts":[{"text":"x","embedding":[NaN,1.0]}]}',
            )
    for s, topics in sessions.items():
        g.request(s, 1, topics)
    for i in range(30):  # the drift shape: telemetry and community agree on a later value
        g.telemetry(f"tele-a-{i}", "api-a", "250", 10)
        if i % 10 == 0:
            g.doc(f"community-{i}", "community_notes", "community", [g.claim_fact("api-a", "250", 10), g.fact(9, i)])
        if i % 6 == 0:
            s = f"s{(i // 6) % 4}"
            g.report(s, 1, sessions[s])
    g.doc(
        "vendor-3-v2", "vendor_docs", "official", [g.fact(3, 999), g.fact(3, 31), g.fact(3, 32)], document_id="doc-3"
    )  # supersedes doc-3's changed sentence
    g.doc("vendor-0", "vendor_docs", "official", [g.fact(0, 1)])  # same id, other content: dead-lettered
    for s, topics in sessions.items():
        g.request(s, 2, topics)
        g.report(s, 2, topics)
    g.add(
        "crp.window.reports",
        "s9",
        {"session_id": "s9", "window": 1, "addressed": [], "output_text": "", "completeness": 0.1},
    )  # unknown session
    g.add(
        "crp.telemetry",
        "field_telemetry",
        {"event_id": "t-bad", "source": "field_telemetry", "observed_at": "yesterday"},
    )  # bad time
    for i in range(60):
        g.doc(
            f"late-{i}",
            "vendor_docs" if i % 3 else "community_notes",
            "official" if i % 3 else "community",
            [g.fact((i * 5) % 8, 500 + i), g.fact((i * 3) % 8, 600 + i)],
            document_id=f"late-{i}",
        )
        if i % 8 == 0:
            g.telemetry(f"tele-c-{i}", "api-c", str(100 + i), 12)


def _phase_b(g: _Gen, refresh_ids: list[str], candidate_ids: list[str]) -> None:
    sessions = {f"s{i}": [(i + j) % 8 for j in range(3)] for i in range(4)}
    for rid in refresh_ids[:1]:
        g.command("cmd-resolve", "resolve_refresh", rid)
        g.command("cmd-resolve-again", "resolve_refresh", rid)  # already resolved: rejected
    for cid in candidate_ids[:1]:
        g.command("cmd-confirm", "confirm_quarantine", cid, actor="bob")
        for s, topics in sessions.items():
            g.request(s, 3, topics)
        g.command("cmd-release", "release_quarantine", cid)
    g.command("cmd-unknown", "resolve_refresh", "no-such-request")
    g.command("cmd-blank-actor", "release_quarantine", "no-such", actor="   ")
    for i in range(40):
        g.doc(
            f"tail-{i}",
            "vendor_docs",
            "official",
            [g.fact(i % 8, 700 + i), g.fact((i + 1) % 8, 800 + i)],
            document_id=f"doc-{i % 12}",
        )  # rewrites the early documents: supersedes
        if i % 10 == 9:
            s = f"s{(i // 10) % 4}"
            g.report(s, 3, sessions[s])
            g.request(s, 4, sessions[s])


def build_scenario(seed: int, discover: Callable[[list[Input]], tuple[list[str], list[str]]]) -> list[Input]:
    """Phase A, then operator commands on the refresh requests and quarantine candidates that phase A
    produced (``discover`` runs phase A and returns their ids), then more traffic."""
    g = _Gen(seed)
    _phase_a(g)
    refresh_ids, candidate_ids = discover(list(g.out))
    _phase_b(g, refresh_ids, candidate_ids)
    return g.out


# --- kill plans and the kill loop -----------------------------------------------------------------------


@dataclass(frozen=True)
class KillPoint:
    kind: str  # "records": the log grew by ``at`` records since the restart; "ms": ``at`` ms after it first grew
    at: int
    # a timed kill also fires once the log grew by this much: a fast worker must not eat the work the
    # kills still to make need (CI once ran out at 19 of 20 that way)
    cap: int | None = None


@dataclass
class KillPlan:
    """Seeded kill points, chosen one at a time from the work left (``total`` minus the log's size), so
    that ``kills`` points always fit in the run however far a timed kill let the worker get."""

    seed: int
    kills: int
    max_ms: int = 400
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def next(self, remaining: int, done: int) -> KillPoint | None:
        left = self.kills - done
        if left <= 0 or remaining < 2:
            return None
        share = max(1, (2 * remaining) // (left + 1))  # on average, the work left split evenly
        # a batch appends several records at once, so a kill overshoots its point: keep ~4 records of
        # room for each kill still to make
        room = max(1, min(share, remaining - 1, remaining - 4 * (left - 1)))
        # a timed kill may let the worker run far (up to max_ms of work): only while the work left
        # leaves room for the kills still to make, and capped so that it keeps ~8 records for each
        if remaining > 40 and self.rng.random() < 1 / 3 and remaining > 15 * left:
            return KillPoint("ms", self.rng.randint(0, self.max_ms), cap=max(room, remaining - 8 * left))
        return KillPoint("records", self.rng.randint(1, room))


@dataclass
class CrashReport:
    kills: int = 0
    kills_mid_work: int = 0  # the log had grown since the process started
    finished_early: int = 0
    runs: int = 0
    log: list[str] = field(default_factory=list)


def sqlite_log_size(path: Path) -> Callable[[], int]:
    """Progress of the embedded runtime: records in its log (read-only; never blocks the writer)."""

    def size() -> int:
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
            try:
                row = conn.execute("SELECT COUNT(*) FROM records").fetchone()
            finally:
                conn.close()
            return int(row[0])
        except sqlite3.Error:
            return 0

    return size


def run_with_kills(
    command: Sequence[str],
    progress: Callable[[], int],
    plan: KillPlan,
    total: int | Callable[[], int],
    *,
    env: dict[str, str] | None = None,
    timeout_s: float = 600.0,
    until_done: Callable[[], bool] | None = None,
    log_path: Path | None = None,
) -> CrashReport:
    """Kill the worker at ``plan``'s points until it has made them all (``total``: the progress an
    uninterrupted run reaches, or a function estimating it when that run goes alongside), then let it
    finish. A worker that never exits by itself (a Kafka worker) gets ``until_done``: once it is true,
    the running worker is stopped with SIGTERM, as an operator would, and the run counts as finished.
    ``log_path``: every run's stderr is appended there (so a harness that times out can show it)."""
    report = CrashReport()
    full_env = {**os.environ, **(env or {})}
    expected = total if callable(total) else (lambda: total)
    while (point := plan.next(expected() - progress(), report.kills)) is not None:
        start = progress()
        # a file, not a pipe: a chatty worker never blocks
        err_file = open(log_path, "ab+") if log_path is not None else tempfile.TemporaryFile()  # noqa: SIM115
        proc = subprocess.Popen(list(command), env=full_env, stdout=subprocess.DEVNULL, stderr=err_file)
        report.runs += 1
        t0 = time.monotonic()
        grew_at: float | None = None
        killed = False
        while proc.poll() is None:
            now = progress()
            if grew_at is None and now > start:
                grew_at = time.monotonic()
            timed_out = grew_at is not None and (time.monotonic() - grew_at) * 1000 >= point.at
            if (point.kind == "records" and now >= start + point.at) or (
                point.kind == "ms" and (timed_out or (point.cap is not None and now >= start + point.cap))
            ):
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
            if until_done is not None and until_done():
                proc.send_signal(signal.SIGTERM)
                break
            if time.monotonic() - t0 > timeout_s:
                proc.kill()
                raise AssertionError(f"worker did not reach {point} within {timeout_s}s")
            time.sleep(0.002)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"worker did not stop within 60 s after {point}") from None
        err_file.seek(0)
        err = err_file.read()[-20_000:]
        err_file.close()
        if killed:
            report.kills += 1
            grown = progress() > start
            report.kills_mid_work += int(grown)
            report.log.append(f"kill at {point.kind}={point.at}: log {start} -> {progress()}")
            if log_path is not None:  # beside the worker's own lines, so a stall's log shows the kills
                with open(log_path, "a") as f:
                    f.write(f"harness: {report.log[-1]} after {time.monotonic() - t0:.1f}s\n")
        else:
            if proc.returncode != 0:
                raise AssertionError(f"worker exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
            report.finished_early += 1
            report.log.append(f"finished before {point.kind}={point.at} (log {progress()} of {expected()})")
            if until_done is not None:
                return report  # stopped because the work is done: that was the final run
            break  # the worker is done: no later point can be reached
    report.runs += 1
    if until_done is None:
        done = subprocess.run(list(command), env=full_env, capture_output=True, timeout=timeout_s)
        if done.returncode != 0:
            raise AssertionError(f"final run exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
        return report
    with open(log_path, "ab+") if log_path is not None else tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(list(command), env=full_env, stdout=subprocess.DEVNULL, stderr=err_file)
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None and not until_done() and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        err_file.seek(0)
        err = err_file.read()[-20_000:]
    if proc.returncode != 0 or not until_done():
        raise AssertionError(
            f"final run exited {proc.returncode} (done: {until_done()}): {err.decode(errors='replace')[-2000:]}"
        )
    return report


# --- comparing outputs ----------------------------------------------------------------------------------

Outputs = dict[str, list[tuple[str | None, str | None, str]]]


def compare_outputs(expected: Outputs, actual: Outputs, allow_duplicates: bool = False) -> list[str]:
    """Differences between two runs' outputs (topic -> [(record id, key, value)] in order).

    Every output has a derived id. A duplicate is allowed only if ``allow_duplicates`` and only as a
    repeat of an id already seen with the same key and value; order is compared on first occurrences.
    """
    problems: list[str] = []
    for topic in sorted(set(expected) | set(actual)):
        seen: dict[str | None, tuple[str | None, str]] = {}
        firsts = []
        for rid, key, value in actual.get(topic, []):
            if rid is None:
                problems.append(f"{topic}: an output without a derived id: {value[:200]}")
                continue
            if rid in seen:
                if not allow_duplicates:
                    problems.append(f"{topic}: duplicate of {rid}")
                elif seen[rid] != (key, value):
                    problems.append(f"{topic}: duplicate id {rid} with different content")
                continue
            seen[rid] = (key, value)
            firsts.append((rid, key, value))
        want = expected.get(topic, [])
        if firsts != want:
            lost = [r for r, _, _ in want if r not in seen]
            extra = [r for r, _, _ in firsts if r not in {w[0] for w in want}]
            problems.append(f"{topic}: {len(want)} expected, {len(firsts)} got; lost {lost[:5]}, extra {extra[:5]}")
            for i, (a, b) in enumerate(zip(want, firsts, strict=False)):
                if a != b:
                    problems.append(f"  first difference at #{i}:\n    {str(a)[:400]}\n    {str(b)[:400]}")
                    break
    return problems


# --- the embedded runtime's side of it ---------------------------------------------------------------------


def seed_log(data: Path, inputs: list[Input]) -> None:
    """Write the inputs into a fresh embedded log with their own append times."""
    from crp_stream.runtime.embedded.log import Append, EmbeddedLog

    log_ = EmbeddedLog(data / "log.sqlite", lambda: 0)
    log_.append([Append(topic, key, raw, ts_us=ts) for topic, key, ts, raw in inputs])
    log_.close()


def embedded_settings(data: Path, database_url: str | None = None) -> Any:
    from crp_stream.config import Settings

    return Settings(data_dir=data, database_url=database_url, embedder=f"precomputed:{MODEL}")


def discover_embedded(tmp: Path) -> Callable[[list[Input]], tuple[list[str], list[str]]]:
    """``build_scenario``'s ``discover`` on the embedded runtime, in-process."""

    def run(inputs: list[Input]) -> tuple[list[str], list[str]]:
        data = tmp / f"discover-{len(inputs)}"
        seed_log(data, inputs)
        s = embedded_settings(data)
        rt = open_runtime(s, clock=lambda: 0)
        fabric, log_ = rt.fabric, rt.log
        try:
            rt.run_until_idle()
            with fabric.unit_of_work() as uow:
                return (
                    [r["request_id"] for r in uow.repo.refresh_requests()],
                    [c["candidate_id"] for c in uow.repo.candidates()],
                )
        finally:
            fabric.close()
            log_.close()

    return run


def embedded_snapshot(data: Path, database_url: str | None = None) -> dict[str, Any]:
    """Tables, vector index and output topics of an embedded data directory."""
    from crp_stream.events import OUTPUT_TOPICS
    from crp_stream.runtime.embedded import open_fabric
    from crp_stream.runtime.embedded.log import EmbeddedLog
    from crp_stream.runtime.projections import outputs_snapshot, tables_snapshot, vectors_snapshot

    s = embedded_settings(data, database_url)
    fabric = open_fabric(s)
    log_ = EmbeddedLog(s.log_path, lambda: 0)
    try:
        snap: dict[str, Any] = tables_snapshot(fabric.engine)
        snap["vectors"] = vectors_snapshot(fabric.vectors, [r["fact_id"] for r in snap["facts"]])
        snap["outputs"] = outputs_snapshot(log_, [s.topic(t) for t in OUTPUT_TOPICS])
        return snap
    finally:
        fabric.close()
        log_.close()


def cli_command(data: Path, *extra: str) -> list[str]:
    """The embedded worker; ``CRP_BATCH_SIZE`` in its environment sets how often it commits."""
    return [
        sys.executable,
        "-m",
        "crp_stream",
        "run",
        "--until-idle",
        "--data",
        str(data),
        "--embedder",
        f"precomputed:{MODEL}",
        "--log-level",
        "WARNING",
        *extra,
    ]


def run_embedded(data: Path, url: str, until: Any = None) -> None:
    """Run the embedded runtime over a seeded log until idle, on the database at ``url``."""
    from crp_stream.runtime.embedded import open_runtime

    s = embedded_settings(data, url)
    rt = open_runtime(s, clock=lambda: 0, batch_size=20)
    fabric, log_ = rt.fabric, rt.log
    try:
        rt.run_until_idle()
    finally:
        fabric.close()
        log_.close()
