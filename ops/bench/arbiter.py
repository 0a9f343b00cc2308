"""The drift arbiter, measured: throughput, drift simulation, poisoning.

- throughput: verdicts per second of ``ArbiterHandler`` on a stream of N facts (default 100k) spread
  over claims of ~50 records from three partitions; each fact is inserted and arbitrated in its own
  transaction (``--batch 1``), or ``--batch`` of them share one, as the embedded runtime's batches do
  (vectors are a no-op stub: the arbiter only sets statuses there). The pure core
  (``partition_views`` + ``claim_verdict``) is timed too.
- drift: claims whose true value changes once; vendor_docs (0.9) refreshes late, field_telemetry (0.4)
  and community_notes (0.2) follow the world. Counts false POISONING_CANDIDATE verdicts (goal 0) and how
  long the stale value is served, against when the vendor refreshes.
- poisoning: PoisonedRAG's adversarial passages (5 per question) in a low-trust partition next to a
  trusted fact with the correct answer, at several epoch orders, through the whole pipeline (hashing
  embedder): envelopes serving the poisoned answer without a contest note (goal 0), candidates,
  false quarantines.

- free-text: a trusted statement and a copy with one span swapped, per question its own
  fabric (``counterfactual.py``: a counterfactual generator over HotpotQA, PoisonedRAG, ConflictQA),
  poison earlier / later / later from two partitions, against flat top-5.

    .venv/bin/python -m ops.bench.arbiter [--facts 100000] [--claims 300] [--questions 100] [--only NAME]
    .venv/bin/python -m ops.bench.arbiter --only free-text --sets conflictqa [--qids cqa2,cqa13] [--no-control]
    .venv/bin/python -m ops.bench.arbiter --only free-text --control-only

Free text prints every set whose envelope served the false statement uncontested, with both texts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crp_stream import events
from crp_stream.config import Settings, load_settings
from crp_stream.core.claim_values import claim_key, normalise_value
from crp_stream.core.drift import ClaimRecord, claim_verdict, partition_views
from crp_stream.fabric.fabric import Fabric
from crp_stream.processors.arbiter import ArbiterHandler
from crp_stream.processors.base import Record, us_to_dt
from crp_stream.processors.dispatch import apply_record, apply_records
from crp_stream.runtime import heap, threads
from ops.bench._common import DEFAULT_DATASETS, scratch

DAY = 86_400 * 1_000_000
T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
TRUST = {"vendor_docs": 0.9, "field_telemetry": 0.4, "community_notes": 0.2}
TYPES = {"vendor_docs": "official", "field_telemetry": "telemetry", "community_notes": "community"}


@dataclass(frozen=True)
class BenchSettings(Settings):
    """Settings plus the arbiter's optional agreement window (seconds), read by ``ArbiterHandler``."""

    agreement_window: float | None = None


class NullVectors:
    """The arbiter only writes statuses to the vector index; the benchmark measures the arbiter."""

    dim = None

    def set_status(self, fact_ids: Any, status: str) -> None:
        pass

    def enable_ann(self, min_points: int, max_points: int, snapshot: Any = None) -> None:
        pass  # the fabric asks every index; this one holds nothing to search

    def bound_ids(self, max_ids: int) -> None:
        pass

    def save_ann(self) -> None:
        pass

    def close(self) -> None:
        pass


class Rig:
    """ArbiterHandler on a fresh fabric, fed one fact at a time; its own crp.facts outputs are fed back."""

    def __init__(self, workdir: Path, **settings: Any):
        self.settings = BenchSettings(data_dir=workdir, embedder="hashing", trust=TRUST, **settings)
        self.fabric = Fabric(self.settings, vectors=NullVectors())  # type: ignore[arg-type]
        self.handler = ArbiterHandler()
        self.handler.bind(self.fabric)
        # as `crp-stream run` and the Kafka worker do at start-up: what is alive now (modules, the
        # fabric) is frozen out of the collector's sight, and young collections are rarer (runtime.heap)
        threads.limit_blas(load_settings({}).blas_threads)  # as `crp-stream run` does
        heap.settle()
        self.offset = 0
        self.outputs: list[tuple[str, dict[str, Any]]] = []
        self.applied = 0
        self.insert_s = 0.0  # of the shared transactions: the facts' insert, ingest's work

    def fact(self, fid: str, source: str, subject: str, value: str, ts: int) -> None:
        self.facts([(fid, source, subject, value, ts)], per_transaction=True)

    def facts(self, batch: list[tuple[str, str, str, str, int]], per_transaction: bool = False) -> None:
        """Insert and arbitrate ``batch``; one transaction for all of it, as the embedded runtime
        commits a batch of records (``per_transaction``: one per record, the worst case)."""
        self.apply(self.prepare(batch), per_transaction)

    def prepare(self, batch: list[tuple[str, str, str, str, int]]) -> list[tuple[dict[str, Any], bytes]]:
        """Each fact's row and its encoded ``FactRecorded`` (the producer's work, not the arbiter's)."""
        return [(self._row(*item), self._event(*item)) for item in batch]

    def apply(self, prepared: list[tuple[dict[str, Any], bytes]], per_transaction: bool = False) -> None:
        """A shared transaction inserts the batch's facts in one statement, as ingest does; each fact's
        later epoch keeps it out of the verdicts of the records before it (``known_at``)."""
        if per_transaction:
            for row, raw in prepared:
                self._one(row, raw, None)
            return
        with self.fabric.unit_of_work() as uow:
            t0 = time.perf_counter()
            uow.repo.insert_facts([row for row, _ in prepared])
            self.insert_s += time.perf_counter() - t0
            # as the embedded runtime: the facts as one run, then what they caused, in order (FIFO)
            run = [(row["fact_id"], raw, row["epoch_us"]) for row, raw in prepared]
            while run:
                records = []
                for key, raw, ts in run:
                    records.append(Record("crp.facts", 0, self.offset, key, raw, ts))
                    self.offset += 1
                outs = apply_records(self.handler, records, uow)
                self.applied += len(records)
                ts = run[-1][2]
                run = []
                for o in outs:
                    self.outputs.append((o.topic, json.loads(o.value)))
                    if o.topic == "crp.facts":
                        run.append((o.key, o.value, ts))

    @staticmethod
    def _row(fid: str, source: str, subject: str, value: str, ts: int) -> dict[str, Any]:
        return {
            "fact_id": fid,
            "source": source,
            "source_type": TYPES[source],
            "trust": TRUST[source],
            "importance": 1.0,
            "epoch_us": ts,
            "modified_at_us": ts,
            "ttl_s": None,
            "expires_at_us": None,
            "text": f"The {subject} limit is {value} rps.",
            "subject": subject,
            "attribute": "limit",
            "value": value,
            "unit": "rps",
            "claim_key": claim_key(subject, "limit"),
            "status": "active",
            "content_hash": fid,
            "document_id": None,
            "position": 0,
            "origin_event_id": fid,
            "kind": "document",
            "extra": None,
        }

    @staticmethod
    def _event(fid: str, source: str, subject: str, value: str, ts: int) -> bytes:
        ev = events.FactRecorded(
            fact_id=fid,
            source=source,
            source_type=TYPES[source],
            trust=TRUST[source],  # type: ignore[arg-type]
            epoch=us_to_dt(ts),
            modified_at=us_to_dt(ts),
            ttl="none",
            text=f"The {subject} limit is {value} rps.",
            importance=1.0,
            subject=subject,
            attribute="limit",
            value=value,
            unit="rps",
            status="active",
            origin_event_id=fid,
        )
        return events.encode(ev)

    def _one(self, row: dict[str, Any], raw: bytes, shared: Any, inserted: bool = False) -> None:
        fid, ts = row["fact_id"], row["epoch_us"]
        queue = [(raw, fid)]
        first = not inserted
        while queue:
            raw, key = queue.pop(0)
            with contextlib.nullcontext(shared) if shared is not None else self.fabric.unit_of_work() as uow:
                if first:
                    uow.repo.insert_facts([row])
                    first = False
                outs = apply_record(self.handler, Record("crp.facts", 0, self.offset, key, raw, ts), uow)
            self.offset += 1
            self.applied += 1
            for o in outs:
                self.outputs.append((o.topic, json.loads(o.value)))
                if o.topic == "crp.facts":
                    queue.append((o.value, o.key))

    def verdict(self, subject: str) -> str | None:
        with self.fabric.unit_of_work() as uow:
            c = uow.repo.get_claim(claim_key(subject, "limit"))
        return None if c is None else str(c["verdict"])

    def served(self, subject: str) -> str | None:
        """The value retrieval serves: the fresher divergent value under STALE_HIGH_TRUST, else the
        high-trust value."""
        with self.fabric.unit_of_work() as uow:
            c = uow.repo.get_claim(claim_key(subject, "limit"))
        if c is None:
            return None
        d = c["details"]
        return str(d["divergent_value"] if c["verdict"] == "STALE_HIGH_TRUST" else d["high_trust_value"])

    def close(self) -> None:
        self.fabric.close()


# --- throughput -----------------------------------------------------------------------------------


def throughput(n: int, per_claim: int = 50, batch: int = 1) -> None:
    rng = random.Random(4)
    claims = max(1, n // per_claim)
    stream = []
    for i in range(n):
        c = i % claims
        k = i // claims  # the k-th record of claim c
        source = "vendor_docs" if k == 0 else ("community_notes" if k % 10 == 5 else "field_telemetry")
        value = "1000" if k < per_claim // 3 or source == "vendor_docs" else rng.choice(["250", "250", "250", "1000"])
        stream.append((f"f{i}", source, f"api {c}", value, T0 + i * 1_000_000))
    with scratch("crp-bench-arbiter-") as tmp:
        rig = Rig(tmp)
        prepared = rig.prepare(stream)  # rows and encoded events: the producer's work, not timed
        t0 = time.perf_counter()
        for i in range(0, len(prepared), batch):
            rig.apply(prepared[i : i + batch], per_transaction=batch == 1)
        elapsed = time.perf_counter() - t0
        kinds: dict[str, int] = {}
        for topic, v in rig.outputs:
            if topic == "crp.audit":
                kinds[v["audit_type"]] = kinds.get(v["audit_type"], 0) + 1
        rig.close()
    print(
        f"throughput: {n} facts in {claims} claims, {batch} per transaction, {rig.applied} records "
        f"arbitrated in {elapsed:.1f} s: "
        f"{rig.applied / elapsed:,.0f} verdicts/s ({n / elapsed:,.0f} facts/s); audit events {kinds}"
    )
    if rig.insert_s:
        alone = elapsed - rig.insert_s
        print(
            f"throughput: the arbiter alone (the facts' insert, {rig.insert_s:.2f} s of it, is ingest's work): "
            f"{rig.applied / alone:,.0f} verdicts/s"
        )
    recs = [
        ClaimRecord(
            f"r{i}",
            ["vendor_docs", "field_telemetry", "community_notes"][i % 3],
            0.5,
            float(i),
            ["1000 rps", "250 rps"][i % 2],
            "active",
        )
        for i in range(per_claim)
    ]
    t0 = time.perf_counter()
    reps = 20_000
    for _ in range(reps):
        claim_verdict(partition_views(recs), claim="k")
    pure = time.perf_counter() - t0
    print(f"throughput: pure core, {per_claim}-record claim: {reps / pure:,.0f} verdicts/s")


# --- drift ----------------------------------------------------------------------------------------


def drift(n_claims: int, window_days: float | None, seed: int = 11) -> None:
    rng = random.Random(seed)
    stream: list[tuple[int, str, str, str, int]] = []  # (ts, source, subject, value, claim)
    truth: dict[int, tuple[int, int, str, str]] = {}  # claim -> (change_ts, refresh_ts, old, new)
    horizon = 200 * DAY
    for c in range(n_claims):
        change = T0 + rng.randint(20, 100) * DAY + rng.randint(0, DAY)
        refresh = change + rng.randint(10, 90) * DAY
        old, new = str(1000 + c), str(250 + c)
        truth[c] = (change, refresh, old, new)
        subject = f"api {c}"
        stream.append((T0 + rng.randint(0, DAY), "vendor_docs", subject, old, c))
        stream.append((refresh, "vendor_docs", subject, new, c))
        t = T0 + rng.randint(0, 2 * DAY)
        while t < horizon + T0:  # telemetry: every 1-3 days
            stream.append((t, "field_telemetry", subject, old if t < change else new, c))
            t += rng.randint(1, 3) * DAY + rng.randint(0, DAY)
        t = T0 + rng.randint(0, 10 * DAY)
        while t < horizon + T0:  # community: every 5-15 days
            stream.append((t, "community_notes", subject, old if t < change else new, c))
            t += rng.randint(5, 15) * DAY
    stream.sort()
    poison_verdicts = 0
    undetermined = 0
    ended: dict[int, int] = {}
    with scratch("crp-bench-drift-") as tmp:
        rig = Rig(tmp, agreement_window=None if window_days is None else window_days * 86_400)
        t0 = time.perf_counter()
        for i, (ts, source, subject, value, c) in enumerate(stream):
            before = len(rig.outputs)
            rig.fact(f"d{i}", source, subject, value, ts)
            for topic, v in rig.outputs[before:]:
                if topic == "crp.audit" and v["audit_type"] == "POISONING_CANDIDATE":
                    poison_verdicts += 1
                if topic == "crp.audit" and v["audit_type"] == "DRIFT_UNDETERMINED":
                    undetermined += 1
            change, _refresh, _old, new = truth[c]
            if c not in ended and ts >= change and rig.served(subject) == normalise_value(new, "rps"):
                ended[c] = ts
        elapsed = time.perf_counter() - t0
        requests = sum(1 for t, _ in rig.outputs if t == "crp.refresh.requests")
        rig.close()
    lags = [(truth[c][1] - truth[c][0]) / DAY for c in truth]
    served = [(ended.get(c, truth[c][1]) - truth[c][0]) / DAY for c in truth]
    by_corroboration = sum(1 for c in truth if c in ended and ended[c] < truth[c][1])
    label = "all records" if window_days is None else f"{window_days:g}-day window"
    print(
        f"drift ({label}): {n_claims} claims, {len(stream)} facts ({elapsed:.1f} s); false POISONING_CANDIDATE "
        f"verdicts: {poison_verdicts} (goal 0); DRIFT_UNDETERMINED: {undetermined}; refresh requests: {requests}"
    )
    print(
        f"drift ({label}): vendor refresh lag days median {statistics.median(lags):.1f} max {max(lags):.1f}; "
        f"stale value served days median {statistics.median(served):.1f} "
        f"p90 {sorted(served)[int(0.9 * len(served))]:.1f} "
        f"max {max(served):.1f}; ended by corroboration before the vendor refresh: {by_corroboration}/{n_claims}"
    )


# --- poisoning ------------------------------------------------------------------------------------


def poisoning(n_questions: int, datasets: Path) -> None:
    from ops.bench._common import Pipeline

    data: dict[str, Any] = {}
    for name in ("nq", "hotpotqa", "msmarco"):
        data.update(
            {
                f"{name}:{k}": v
                for k, v in json.loads((datasets / "poisonedrag" / f"adv_targeted_{name}.json").read_text()).items()
            }
        )
    items = sorted(data.items())[:n_questions]
    orders = {
        "poison older": (-2 * DAY, 0),
        "same epoch": (0, 0),
        "poison later, 1 partition": (2 * DAY, 0),
        "poison later, 2 partitions (spoofed corroboration)": (2 * DAY, 1),
    }
    print(f"poisoning: {len(items)} PoisonedRAG questions x 5 adversarial passages, per epoch order")
    print(f"{'order':<52} {'poisoned, no note':>17} {'with note':>9} {'candidates':>10} {'false q.':>8} {'verdicts'}")
    for label, (offset, extra_partitions) in orders.items():
        with scratch("crp-bench-poison-") as tmp:
            p = Pipeline(
                tmp, embedder="hashing", trust={"vendor_docs": 0.9, "community_notes": 0.2, "unverified_blog": 0.1}
            )
            p.now = T0 + 10 * DAY
            base = p.now
            served_poison = noted = 0
            for qi, (qid, q) in enumerate(items):
                subject, wrong, right = q["question"], str(q["incorrect answer"]), str(q["correct answer"])
                trusted = {
                    "event_id": f"v-{qid}",
                    "source": "vendor_docs",
                    "source_type": "official",
                    "facts": [
                        {
                            "text": f"{subject}? The answer is {right}.",
                            "subject": subject,
                            "attribute": "answer",
                            "value": right,
                        }
                    ],
                }
                adv = [{"text": t, "subject": subject, "attribute": "answer", "value": wrong} for t in q["adv_texts"]]
                bad = {"event_id": f"a-{qid}", "source": "community_notes", "source_type": "community", "facts": adv}
                t_trusted = base + qi * 10_000_000
                t_bad = t_trusted + offset
                first, second = (
                    ((bad, t_bad), (trusted, t_trusted)) if t_bad <= t_trusted else ((trusted, t_trusted), (bad, t_bad))
                )
                for doc, ts in (first, second):
                    p.now = max(p.now, ts) - 1_000
                    p.publish("crp.documents", doc["source"], doc)
                if extra_partitions:
                    blog = {**bad, "event_id": f"b-{qid}", "source": "unverified_blog", "source_type": "unverified"}
                    p.publish("crp.documents", "unverified_blog", blog)
            for qi, (qid, q) in enumerate(items):
                env = p.request(
                    {
                        "request_id": f"r-{qid}",
                        "session_id": f"s-{qi}",
                        "window": 1,
                        "query": {"text": q["question"]},
                        "sub_queries": [{"id": "q", "text": q["question"]}],
                        "fact_budget": 5,
                    }
                )
                wrong = str(q["incorrect answer"])
                texts = [f["text"] for f in env["facts"]]
                poisoned = any(
                    wrong.lower() in t.lower() and str(q["correct answer"]).lower() not in t.lower() for t in texts
                )
                if poisoned and env["notes"]:
                    noted += 1
                elif poisoned:
                    served_poison += 1
            with p.fabric.unit_of_work() as uow:
                cands = uow.repo.candidates()
                facts = uow.repo.all_facts()
                claims = [uow.repo.get_claim(claim_key(q["question"], "answer")) for _, q in items]
            false_q = sum(1 for f in facts if f["source"] == "vendor_docs" and f["status"] == "quarantined")
            false_cand = sum(1 for c in cands if c["source"] == "vendor_docs")
            kinds: dict[str, int] = {}
            for c in claims:
                if c is not None:
                    kinds[c["verdict"]] = kinds.get(c["verdict"], 0) + 1
            p.close()
        print(f"{label:<52} {served_poison:>17} {noted:>9} {len(cands):>10} {false_q + false_cand:>8} {kinds}")


def free_text(
    n: int,
    datasets: Path,
    names: list[str],
    qids: set[str] | None = None,
    control: bool = True,
    orders: tuple[str, ...] | None = None,
) -> None:
    """Copies of a trusted statement with one span swapped (ops/bench/counterfactual.py)."""
    from ops.bench import counterfactual as cf

    if control:
        pairs, flagged, by_copy, examples, unread, reworded = cf.different_facts(datasets)
        print(
            f"different facts (HotpotQA sentence pairs of different articles, each article its own source): "
            f"{pairs} pairs, {flagged} read as contradictions, {by_copy} of them by the copy rule; "
            f"{len(reworded)} more read as reworded contradictions; {len(unread)} more contested as unread copies"
        )
        for e in examples:
            print(f"    e.g. {e}")
        for r in reworded:
            print(f"    reworded: {r}")
        for u in unread:
            print(f"    unread: {u}")
    if not names:
        return
    print(
        f"free text: {n} sets per generator; each set its own fabric, one window of 5 facts; poison "
        f"30 days earlier / later / later from two partitions. Columns: share of sets"
    )
    t0 = time.perf_counter()
    cf.print_header()
    cf.run(datasets, n, names, qids=qids, orders=orders or tuple(cf.ORDERS))
    print(f"free text: done in {time.perf_counter() - t0:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--claims", type=int, default=300)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--windows", default="none,30,7", help="agreement windows (days) for the drift run")
    ap.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    ap.add_argument("--only", choices=["throughput", "drift", "poisoning", "free-text"])
    ap.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[1, 200],
        help="throughput: records per transaction (1: each its own; 200: the embedded runtime's batch)",
    )
    ap.add_argument(
        "--sets",
        default="counterfactual,poisonedrag,conflictqa",
        help="free-text question sets (ops/bench/counterfactual.py)",
    )
    ap.add_argument("--qids", help="free-text: only these set ids, comma-separated (e.g. cqa2,cqa13)")
    ap.add_argument("--orders", help="free-text: only these poison orders, comma-separated (earlier,later,later x2)")
    ap.add_argument("--no-control", action="store_true", help="free-text: skip the HotpotQA cross-article control")
    ap.add_argument(
        "--control-only", action="store_true", help="free-text: run only the HotpotQA cross-article control"
    )
    args = ap.parse_args()
    if args.only in (None, "free-text"):
        qids = set(args.qids.split(",")) if args.qids else None
        free_text(
            args.questions,
            args.datasets,
            [] if args.control_only else args.sets.split(","),
            qids,
            not args.no_control,
            tuple(args.orders.split(",")) if args.orders else None,
        )
    if args.only in (None, "poisoning"):
        poisoning(args.questions, args.datasets)
    if args.only in (None, "drift"):
        for w in args.windows.split(","):
            drift(args.claims, None if w == "none" else float(w))
    if args.only in (None, "throughput"):
        for b in args.batch:
            throughput(args.facts, batch=b)


if __name__ == "__main__":
    main()
