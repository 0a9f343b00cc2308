"""Retrieval quality through the real pipeline: multi-hop recall (HotpotQA, 2WikiMultiHopQA) and
novelty across windows (MuSiQue), each against flat baselines computed in the same run.

    .venv/bin/python -m ops.bench.retrieval_quality all                      # everything, default sizes
    .venv/bin/python -m ops.bench.retrieval_quality hotpotqa --questions 10  # quick
    .venv/bin/python -m ops.bench.retrieval_quality 2wiki --questions 1000   # HippoRAG's full set (~20 min)
    .venv/bin/python -m ops.bench.retrieval_quality musique --budget 5

Datasets are read from ``--datasets`` (default ``../shared/datasets`` next to the repository), never
copied. Texts are embedded once with the default embedder (all-MiniLM-L6-v2, int8 ONNX) and cached in
``~/.cache/crp-stream/bench``; the records then carry those vectors and the pipeline runs with
``--embedder precomputed:all-MiniLM-L6-v2-onnx-int8``, so it sees exactly the default embedder's vectors
and uses that model's calibrated thresholds. ``--live-embedder`` runs the default embedder inside the
pipeline instead (slow; to check that both give the same envelopes).

What runs is what ships: every record goes through the embedded runtime (ingest, arbiter, retrieval
handlers) of a fresh fabric on a scratch directory, as ``crp-stream replay`` does; envelopes are read
from ``crp.envelopes``.

- hotpotqa: per question, its 10 paragraphs are the fabric (one document each, one fact per sentence);
  a window request (query = sub-query = the question) per budget (5, 10, 20) with graph retrieval off
  (CDR) and on (CDGR). Supporting-fact recall = share of supporting sentences in the envelope; "all" =
  share of questions with every supporting sentence in. Flat top-k: cosine top-k over the same vectors.
- 2wiki: one fabric of the 6,119-passage corpus (a document per passage, sentence facts, split as
  ingest splits text). A passage is recalled if any of its sentences is in the envelope (budget
  ``--wiki-budget``, 20); passages are ranked by first appearance in the envelope's *rank order*
  (anchors by CDR score, each connector right after the best anchor it bridges) and, as a second
  figure, in the envelope's packed (primacy-recency) order. Baselines: flat sentence top-k (passages by
  first appearance), and flat passage-level retrieval (a passage embedded as "title\\ntext").
- musique: per question, its 20 paragraphs are the fabric; the decomposition hops are the sub-queries
  ("#k" replaced by hop k's answer, ">>" by a space) and each hop's gold paragraph is its sub-topic.
  5 windows of ``--budget`` facts; after each, a report addresses the hops whose gold paragraph
  appeared in that window (depth 1.0) and quotes the envelope's facts as output text. Per window:
  facts repeated from earlier windows and sub-topic recall so far. Baselines over the same vectors:
  flat relevance (top-k by cosine to the question, the same every window), MMR (lambda 0.5, the same
  every window) and MMR with memory (earlier windows' facts count as already selected).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crp_stream.core.sentences import split_sentences
from crp_stream.processors.doc_graph import embedding_text
from ops.bench._common import (
    DEFAULT_DATASETS,
    MINILM_PRECOMPUTED,
    EmbeddingCache,
    Pipeline,
    code_version,
    document,
    scratch,
    window_request,
)
from ops.bench.quality_wiki import wiki2

BUDGETS = (5, 10, 20)


def log(msg: str) -> None:
    sys.stdout.flush()
    print(msg, file=sys.stderr, flush=True)


class Run:
    """One pipeline per question (or corpus), with the vectors carried or embedded live."""

    def __init__(self, live: bool):
        self.live = live

    def pipeline(self, tmp: Path) -> Pipeline:
        return Pipeline(tmp, embedder="default" if self.live else MINILM_PRECOMPUTED)

    def v(self, x: np.ndarray) -> np.ndarray | None:
        return None if self.live else x


def fact_map(outputs: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, str]]:
    """(fact_id, origin_event_id, text) of every FactRecorded, in emission order (= position order)."""
    return [
        (v["fact_id"], v["origin_event_id"], v["text"])
        for t, v in outputs
        if t == "crp.facts" and v.get("type") == "FactRecorded"
    ]


def publish_doc(
    pipe: Pipeline,
    event_id: str,
    source: str,
    texts: list[str],
    vecs: list[np.ndarray | None],
    title: str | None = None,
) -> dict[str, int]:
    """Publish one document; returns fact_id -> position of its sentence."""
    outs = pipe.publish(
        "crp.documents", source, document(event_id, source, list(zip(texts, vecs, strict=True)), title=title)
    )
    pending: dict[str, list[int]] = defaultdict(list)
    for pos, t in enumerate(texts):
        pending[t].append(pos)
    out = {}
    for fid, origin, text in fact_map(outs):
        if origin == event_id and pending[text]:
            out[fid] = pending[text].pop(0)
    return out


def audits(outs: list[tuple[str, dict[str, Any]]]) -> Counter[str]:
    return Counter(v.get("audit_type", "") for t, v in outs if t == "crp.audit")


SHOW_NOTES = False  # --show-notes: print every contest note's audit (the texts it set against each other)


def show_notes(label: str, outs: list[tuple[str, dict[str, Any]]]) -> None:
    texts = {f["fact_id"]: f.get("text", "") for t, v in outs if t == "crp.envelopes" for f in v.get("facts", [])}
    for t, v in outs:
        if t == "crp.audit" and str(v.get("audit_type", "")).startswith("CONTRADICTION_UNRESOLVED"):
            d = v.get("details") or {}
            said = " | ".join(texts.get(f, f) for f in d.get("facts", []))
            print(f"  NOTE {label} {d.get('pattern')}: {said}"[:1500], flush=True)


def flat_topk(vecs: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    s = vecs @ q
    return [int(i) for i in np.lexsort((np.arange(len(s)), -s))[:k]]


# --- HotpotQA --------------------------------------------------------------------------------------


def hotpotqa(datasets: Path, n: int, run: Run, budgets: Sequence[int]) -> dict[str, Any]:
    rows = [
        json.loads(line)
        for line in (datasets / "hotpotqa" / "hotpotqa_dev_distractor_hard_100.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.strip()
    ][:n]
    cache = EmbeddingCache("hotpotqa")
    res: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    audit_total: Counter[str] = Counter()
    via_total: Counter[str] = Counter()
    swaps: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    t0 = time.perf_counter()
    for qi, row in enumerate(rows):
        paras = [(title, [s.strip() for s in sents]) for title, sents in row["context"]]
        title_idx = {title: j for j, (title, _) in enumerate(paras)}
        gold = {
            (title_idx[t], k)
            for t, ks, *_ in row["supporting_facts"]
            for k in ks
            if t in title_idx and k < len(paras[title_idx[t]][1]) and paras[title_idx[t]][1][k]
        }
        facts = [(j, k, s) for j, (_, sents) in enumerate(paras) for k, s in enumerate(sents) if s]
        vecs = cache.embed([s for _, _, s in facts] + [row["question"]])
        qv, fv = vecs[-1], vecs[:-1]
        cv = cache.embed([embedding_text(paras[j][0], s) for j, _, s in facts])  # what ingest embeds
        pv = cache.embed([f"{t}\n{' '.join(x for x in ss if x)}" for t, ss in paras])
        index = {(j, k): i for i, (j, k, _) in enumerate(facts)}
        for b in budgets:
            got = {(facts[i][0], facts[i][1]) for i in flat_topk(fv, qv, b)}
            res["flat sentences"][b].append(_sp(row, gold, got, len(got), 0, 0))
            got = {(facts[i][0], facts[i][1]) for i in flat_topk(cv, qv, b)}
            res["flat 'title: sentence'"][b].append(_sp(row, gold, got, len(got), 0, 0))
            fill = [(j, k) for j in flat_topk(pv, qv, len(paras)) for k, x in enumerate(paras[j][1]) if x][:b]
            res["flat passages"][b].append(_sp(row, gold, set(fill), len(fill), 0, 0))
        with scratch("crp-bench-hotpot-") as tmp:
            pipe = run.pipeline(tmp)
            where: dict[str, tuple[int, int]] = {}
            for j, (title, sents) in enumerate(paras):
                texts = [s for s in sents if s]
                ks = [k for k, s in enumerate(sents) if s]
                if not texts:
                    continue
                pos = publish_doc(
                    pipe, f"hq{qi}-p{j}", "hotpotqa", texts, [run.v(cv[index[(j, k)]]) for k in ks], title=title
                )
                where.update({fid: (j, ks[p]) for fid, p in pos.items()})
            for b in budgets:
                sets: dict[bool, set[tuple[int, int]]] = {}
                for graph in (False, True):
                    sid = f"hq{qi}-b{b}-{'on' if graph else 'off'}"
                    req = window_request(
                        sid,
                        sid,
                        1,
                        row["question"],
                        run.v(qv),
                        [("q", row["question"], run.v(qv))],
                        b,
                        graph,
                        max_windows=1,
                    )
                    outs = pipe.publish("crp.window.requests", sid, req)
                    audit_total.update(audits(outs))
                    if SHOW_NOTES:
                        show_notes(f"hq{qi} budget {b} graph {graph}", outs)
                    env = next(v for t, v in outs if t == "crp.envelopes")
                    got = {where[f["fact_id"]] for f in env["facts"] if f["fact_id"] in where}
                    conns = [where.get(f["fact_id"]) for f in env["facts"] if f["role"] == "connector"]
                    via_total.update(f["via"] for f in env["facts"] if graph and f["role"] == "connector")
                    name = "CDGR (graph on)" if graph else "CDR (graph off)"
                    res[name][b].append(
                        _sp(row, gold, got, len(env["facts"]), len(conns), sum(1 for c in conns if c in gold))
                    )
                    sets[graph] = got
                # SPEC-025 §6 checked fact by fact: what CDGR admitted against what it displaced from CDR
                swaps[b][0] += len(sets[True] - sets[False])
                swaps[b][1] += len((sets[True] - sets[False]) & gold)
                swaps[b][2] += len((sets[False] - sets[True]) & gold)
            pipe.close()
        if (qi + 1) % 10 == 0:
            log(f"  hotpotqa {qi + 1}/{len(rows)} questions, {time.perf_counter() - t0:.0f} s")
    print_hotpot(rows, res, budgets, audit_total, cache)
    print("  connectors by via: " + ", ".join(f"{k} {v}" for k, v in sorted(via_total.items())))
    for b in budgets:
        n, won, lost = swaps[b]
        print(
            f"  budget {b}: CDGR replaced {n} of CDR's facts; supporting among those it took in: {won}, "
            f"among those it let go: {lost}"
        )
    return res


def _sp(
    row: dict[str, Any], gold: set[tuple[int, int]], got: set[tuple[int, int]], facts: int, conns: int, gold_conns: int
) -> dict[str, Any]:
    hit = len(gold & got)
    return {
        "type": row["type"],
        "recall": hit / len(gold),
        "all": hit == len(gold),
        "facts": facts,
        "connectors": conns,
        "gold_connectors": gold_conns,
    }


def print_hotpot(
    rows: list[dict[str, Any]],
    res: dict[str, dict[int, list[dict[str, Any]]]],
    budgets: Sequence[int],
    audit_total: Counter[str],
    cache: EmbeddingCache,
) -> None:
    types = Counter(r["type"] for r in rows)
    print(
        f"\nHotpotQA distractor (dev, hard): {len(rows)} questions ({types['bridge']} bridge, "
        f"{types['comparison']} comparison); split: TUNE (dev100 is the tuning set; held-out questions judge)"
        f"\n  fabric per question = its 10 paragraphs, one titled document each, facts = sentences embedded as "
        f"'title: sentence'; embedder all-MiniLM-L6-v2 int8 ({cache.computed} texts embedded now, the rest cached)"
        f"\n  flat passages = paragraphs ranked by cosine of 'title\\ntext', their sentences taken in order up to "
        f"the budget"
    )
    print(
        f"  {'budget':>6}  {'method':<24}{'SP recall':>10}{'bridge':>8}{'compar.':>8}{'all SP':>8}"
        f"{'facts':>7}{'conn.':>7}{'gold conn.':>11}"
    )
    for b in budgets:
        for name in ("flat sentences", "flat 'title: sentence'", "flat passages", "CDR (graph off)", "CDGR (graph on)"):
            xs = res[name][b]
            if not xs:
                continue

            def mean(key: str, xs: list[dict[str, Any]] = xs) -> float:
                return statistics.mean(float(x[key]) for x in xs)

            def typed(t: str, xs: list[dict[str, Any]] = xs) -> str:
                sel = [x["recall"] for x in xs if x["type"] == t]
                return f"{statistics.mean(sel):8.3f}" if sel else f"{'-':>8}"

            print(
                f"  {b:>6}  {name:<24}{mean('recall'):10.3f}{typed('bridge')}{typed('comparison')}"
                f"{mean('all'):8.0%}{mean('facts'):7.1f}{mean('connectors'):7.2f}{mean('gold_connectors'):11.2f}"
            )
    said = ", ".join(f"{k} {v}" for k, v in sorted(audit_total.items())) or "none (no contest note)"
    print("  audit events from the envelopes: " + said)


# --- MuSiQue: novelty across windows ---------------------------------------------------------------


def hop_texts(decomp: list[dict[str, Any]]) -> list[str]:
    out = []
    for h in decomp:
        text = re.sub(r"#(\d+)", lambda m: str(decomp[int(m.group(1)) - 1]["answer"]), h["question"])
        out.append(text.replace(" >> ", " ").strip())
    return out


def mmr(vecs: np.ndarray, q: np.ndarray, k: int, lam: float, selected: Sequence[int] = ()) -> list[int]:
    """Maximal marginal relevance: lam x cos(query) - (1 - lam) x max cos to what is already selected."""
    rel = vecs @ q
    chosen: list[int] = []
    pool = list(selected)
    red = np.max(vecs @ vecs[pool].T, axis=1) if pool else np.zeros(len(vecs))
    taken = np.zeros(len(vecs), dtype=bool)  # picked in this window; earlier picks only weigh on redundancy
    for _ in range(min(k, len(vecs))):
        score = lam * rel - (1.0 - lam) * red
        score[taken] = -np.inf
        if not np.isfinite(score).any():
            break
        i = int(np.argmax(score))
        chosen.append(i)
        taken[i] = True
        red = np.maximum(red, vecs @ vecs[i])
    return chosen


def musique(datasets: Path, n: int, run: Run, budget: int, windows: int = 5) -> dict[str, Any]:
    rows = json.loads((datasets / "musique" / "hipporag_musique_train100.json").read_text(encoding="utf-8"))[:n]
    cache = EmbeddingCache("musique")
    methods = (
        "flat relevance",
        "MMR (lambda 0.5)",
        "MMR + memory",
        "MMR + memory, 'title: sentence'",
        "CDR (graph off)",
        "CDGR (graph on)",
    )
    # per method, per window: lists over questions
    rep: dict[str, list[list[float]]] = {m: [[] for _ in range(windows)] for m in methods}
    rec: dict[str, list[list[float]]] = {m: [[] for _ in range(windows)] for m in methods}
    size: dict[str, list[list[float]]] = {m: [[] for _ in range(windows)] for m in methods}
    addressed_w: dict[str, list[list[float]]] = {m: [[] for _ in range(windows)] for m in methods}
    uniq: dict[str, list[float]] = defaultdict(list)
    status: dict[str, Counter[str]] = defaultdict(Counter)
    t0 = time.perf_counter()
    for qi, row in enumerate(rows):
        paras = {p["idx"]: split_sentences(p["paragraph_text"]) for p in row["paragraphs"]}
        titles = {p["idx"]: p["title"] for p in row["paragraphs"]}
        facts = [(pidx, s) for pidx, ss in paras.items() for s in ss]
        hops = hop_texts(row["question_decomposition"])
        gold = [h["paragraph_support_idx"] for h in row["question_decomposition"]]
        vecs = cache.embed([s for _, s in facts] + [row["question"], *hops])
        fv, qv, hv = vecs[: len(facts)], vecs[len(facts)], vecs[len(facts) + 1 :]
        cv = cache.embed([embedding_text(titles[p], s) for p, s in facts])  # what ingest embeds
        para_of = [p for p, _ in facts]

        def score(name: str, per_window: list[list[int]], para_of: list[int] = para_of, gold: list[int] = gold) -> None:
            seen: set[int] = set()
            covered: set[int] = set()
            for w, ids in enumerate(per_window):
                rep[name][w].append(sum(1 for i in ids if i in seen))
                size[name][w].append(len(ids))
                paras_w = {para_of[i] for i in ids}
                addressed_w[name][w].append(sum(1 for g in gold if g in paras_w))
                covered |= {h for h, g in enumerate(gold) if g in paras_w}
                rec[name][w].append(len(covered) / len(gold))
                seen.update(ids)
            uniq[name].append(len(seen))

        flat = flat_topk(fv, qv, budget)
        score("flat relevance", [flat] * windows)
        plain = mmr(fv, qv, budget, 0.5)
        score("MMR (lambda 0.5)", [plain] * windows)
        memory: list[list[int]] = []
        for _ in range(windows):
            memory.append(mmr(fv, qv, budget, 0.5, [i for ids in memory for i in ids]))
        score("MMR + memory", memory)
        memory = []
        for _ in range(windows):
            memory.append(mmr(cv, qv, budget, 0.5, [i for ids in memory for i in ids]))
        score("MMR + memory, 'title: sentence'", memory)
        with scratch("crp-bench-musique-") as tmp:
            pipe = run.pipeline(tmp)
            where: dict[str, int] = {}
            row_of = {(p, s): i for i, (p, s) in enumerate(facts)}
            for pidx, ss in paras.items():
                if not ss:
                    continue
                pos = publish_doc(
                    pipe,
                    f"mq{qi}-p{pidx}",
                    "musique",
                    ss,
                    [run.v(cv[row_of[(pidx, s)]]) for s in ss],
                    title=titles[pidx],
                )
                where.update({fid: row_of[(pidx, ss[p])] for fid, p in pos.items()})
            for graph in (False, True):
                name = "CDGR (graph on)" if graph else "CDR (graph off)"
                sid = f"mq{qi}-{'on' if graph else 'off'}"
                subs = [(f"hop{h + 1}", t, run.v(hv[h])) for h, t in enumerate(hops)]
                per_window: list[list[int]] = []
                done: set[int] = set()
                for w in range(1, windows + 1):
                    req = window_request(
                        f"{sid}-w{w}",
                        sid,
                        w,
                        row["question"],
                        run.v(qv),
                        subs if w == 1 else None,
                        budget,
                        graph,
                        max_windows=windows,
                    )
                    env = pipe.request(req)
                    status[name][env["status"]] += 1
                    ids = [where[f["fact_id"]] for f in env["facts"]]
                    per_window.append(ids)
                    shown = {para_of[i] for i in ids}
                    hit = [h for h, g in enumerate(gold) if g in shown]
                    done |= set(hit)
                    closing = pipe.report(
                        {
                            "session_id": sid,
                            "window": w,
                            "addressed": [{"id": f"hop{h + 1}", "depth": 1.0} for h in hit],
                            "output_text": " ".join(f["text"] for f in env["facts"]) or "-",
                            "completeness": len(done) / len(gold),
                        }
                    )
                    if closing is not None:  # the loop exited (task-complete): no further window
                        status[name][closing["status"] + " (closing)"] += 1
                        per_window += [[] for _ in range(windows - w)]
                        break
                score(name, per_window)
            pipe.close()
        if (qi + 1) % 10 == 0:
            log(f"  musique {qi + 1}/{len(rows)} questions, {time.perf_counter() - t0:.0f} s")
    hops_n = Counter(len(r["question_decomposition"]) for r in rows)
    print(
        f"\nMuSiQue (train, answerable): {len(rows)} questions ({hops_n[2]} 2-hop, {hops_n[3]} 3-hop, "
        f"{hops_n[4]} 4-hop), fabric per question = its 20 paragraphs, facts = sentences; {windows} windows "
        f"of budget {budget}; sub-topic = a hop's gold paragraph"
    )
    header = "".join(f"{'w' + str(w + 1):>8}" for w in range(windows))

    def table(title: str, data: dict[str, list[list[float]]], fmt: str) -> None:
        print(f"  {title:<44}{header}")
        for m in methods:
            print(f"    {m:<42}" + "".join(format(statistics.mean(data[m][w]), fmt) for w in range(windows)))

    table("sub-topic recall after the window", rec, "8.3f")
    table("facts repeated from earlier windows", rep, "8.2f")
    table("sub-queries addressed in the window", addressed_w, "8.2f")
    table("envelope size", size, "8.1f")
    print(f"  {'over the ' + str(windows) + ' windows':<44}{'unique':>8}{'repeats':>8}{'repeat %':>9}")
    for m in methods:
        total_rep = statistics.mean(sum(rep[m][w][q] for w in range(windows)) for q in range(len(rows)))
        total = statistics.mean(sum(size[m][w][q] for w in range(windows)) for q in range(len(rows)))
        print(f"    {m:<42}{statistics.mean(uniq[m]):8.1f}{total_rep:8.1f}{100 * total_rep / max(total, 1e-9):8.0f}%")
    print(
        "  (means per question; 'addressed' = hops whose gold paragraph has a sentence in that window's envelope,"
        " as reported back)"
    )
    for m, c in status.items():
        print(f"  {m} window statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    return {"recall": rec, "repeats": rep}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("hotpotqa", "2wiki", "musique", "all"), nargs="?", default="all")
    ap.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    ap.add_argument(
        "--questions",
        type=int,
        default=None,
        help="questions per dataset (default: hotpotqa 100, 2wiki 500, musique 100; 2wiki has 1000)",
    )
    ap.add_argument("--budget", type=int, default=5, help="musique: facts per window")
    ap.add_argument("--wiki-budget", type=int, default=20, help="2wiki: envelope fact budget")
    ap.add_argument("--live-embedder", action="store_true", help="embed inside the pipeline (slow)")
    ap.add_argument("--rebuild", action="store_true", help="2wiki: rebuild the cached corpus fabric")
    ap.add_argument("--show-notes", action="store_true", help="print each CONTRADICTION_UNRESOLVED audit")
    a = ap.parse_args()
    global SHOW_NOTES
    SHOW_NOTES = a.show_notes
    run = Run(a.live_embedder)
    t0 = time.perf_counter()
    print(f"crp-stream {code_version()}; datasets {a.datasets}")
    if a.what in ("hotpotqa", "all"):
        hotpotqa(a.datasets, a.questions or 100, run, BUDGETS)
    if a.what in ("2wiki", "all"):
        wiki2(a.datasets, a.questions or 1000, run, a.wiki_budget, a.rebuild, publish_doc, flat_topk, log)
    if a.what in ("musique", "all"):
        musique(a.datasets, a.questions or 100, run, a.budget)
    log(f"done in {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
