"""2WikiMultiHopQA passage recall through the real pipeline (part of ops/bench/retrieval_quality.py).

One fabric of the 6,119-passage corpus (a titled document per passage, sentence facts split as
ingest splits text, embedded as "title: sentence"), built through the runtime once and cached. Every
question is a window request (query = sub-query = the question), graph off and on. A passage is
recalled if any of its sentences is in the envelope; passages are ranked by first appearance in the
envelope's *rank order* (the ``rank`` every fact carries) and, second, in its packed order. The 1,000
questions are split 500/500 by id (sorted ids: the first half tunes, the second half reports).
Baselines in the same run: flat passages ("title\\ntext"), flat sentences, flat "title: sentence".
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from crp_stream.core.sentences import split_sentences
from crp_stream.processors.doc_graph import embedding_text
from ops.bench._common import CACHE_DIR, EmbeddingCache, Pipeline, scratch, window_request

FABRIC_VERSION = "v3"  # v3: titled documents, "title: sentence" vectors, typed edges keyed by kind


def wiki2(
    datasets: Path, n: int, run: Any, budget: int, rebuild: bool, publish_doc: Any, flat_topk: Any, log: Any
) -> dict[str, Any]:
    base = datasets / "2wikimultihopqa"
    corpus = json.loads((base / "hipporag_2wiki_corpus.json").read_text(encoding="utf-8"))
    questions = json.loads((base / "hipporag_2wiki_1000_questions.json").read_text(encoding="utf-8"))
    questions = sorted(questions, key=lambda q: q["id"])
    half = len(questions) // 2
    split = {q["id"]: ("tune" if i < half else "report") for i, q in enumerate(questions)}
    questions = questions[:n] if n < len(questions) else questions
    cache = EmbeddingCache("2wikimultihopqa")
    sents = [split_sentences(p["text"]) or [p["title"]] for p in corpus]
    flat_facts = [(pi, s) for pi, ss in enumerate(sents) for s in ss]
    t0 = time.perf_counter()
    fv = cache.embed([s for _, s in flat_facts])
    cv = cache.embed([embedding_text(corpus[pi]["title"], s) for pi, s in flat_facts])
    pv = cache.embed([f"{p['title']}\n{p['text']}" for p in corpus])
    qv = cache.embed([q["question"] for q in questions])
    log(
        f"  2wiki: {len(flat_facts):,} sentence facts of {len(corpus):,} passages embedded/loaded in "
        f"{time.perf_counter() - t0:.0f} s"
    )
    title_of = [p["title"] for p in corpus]
    fact_passage = np.array([pi for pi, _ in flat_facts])
    res: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    for qi, q in enumerate(questions):
        gold = set(q["supporting_facts"])
        part = res[split[q["id"]]]
        part["flat passages ('title\\ntext'), top 5"].append(
            _at_k([title_of[i] for i in flat_topk(pv, qv[qi], 5)], gold)
        )
        for name, vecs in (("flat sentences", fv), ("flat 'title: sentence'", cv)):
            ranked = [title_of[fact_passage[i]] for i in flat_topk(vecs, qv[qi], budget)]
            part[f"{name}, top {budget}"].append(_at_k(_first_seen(ranked), gold))
    with scratch("crp-bench-2wiki-") as tmp:
        pipe, where, how = _wiki_fabric(tmp, corpus, sents, cv, run, rebuild, publish_doc, log)
        log(f"  2wiki fabric: {how}")
        t0 = time.perf_counter()
        for qi, q in enumerate(questions):
            gold = set(q["supporting_facts"])
            part = res[split[q["id"]]]
            for graph in (False, True):
                sid = f"w{qi}-{'on' if graph else 'off'}"
                req = window_request(
                    sid,
                    sid,
                    1,
                    q["question"],
                    run.v(qv[qi]),
                    [("q", q["question"], run.v(qv[qi]))],
                    budget,
                    graph,
                    max_windows=1,
                )
                env = pipe.request(req)
                name = "CDGR (graph on)" if graph else "CDR (graph off)"
                facts = env["facts"]
                ranked = sorted(facts, key=lambda f: f["rank"])
                part[name + ", rank order"].append(
                    _at_k(_first_seen([title_of[where[f["fact_id"]]] for f in ranked]), gold)
                )
                part[name + ", packed order"].append(
                    _at_k(_first_seen([title_of[where[f["fact_id"]]] for f in facts]), gold)
                )
            if (qi + 1) % 50 == 0:
                log(f"  2wiki {qi + 1}/{len(questions)} questions, {time.perf_counter() - t0:.0f} s")
        pipe.close()
    print(
        f"\n2WikiMultiHopQA (HippoRAG's 1,000-question setting): {len(questions)} questions over one fabric of "
        f"{len(corpus):,} passages / {len(flat_facts):,} sentence facts (titled documents, 'title: sentence' "
        f"vectors); envelope budget {budget}; embedder all-MiniLM-L6-v2 int8; split 500/500 by sorted id"
    )
    for name in ("tune", "report"):
        xs0 = res.get(name)
        if not xs0:
            continue
        count = len(next(iter(xs0.values())))
        print(f"  split: {name.upper()} ({count} questions)")
        print(f"    {'method':<42}{'R@2':>7}{'R@5':>7}{'R@env':>7}{'passages':>10}")
        for method, xs in xs0.items():
            print(
                f"    {method:<42}{statistics.mean(x['r2'] for x in xs):7.3f}"
                f"{statistics.mean(x['r5'] for x in xs):7.3f}{statistics.mean(x['rall'] for x in xs):7.3f}"
                f"{statistics.mean(x['n'] for x in xs):10.1f}"
            )
    return res


def _wiki_fabric(
    tmp: Path,
    corpus: list[dict[str, str]],
    sents: list[list[str]],
    cv: np.ndarray,
    run: Any,
    rebuild: bool,
    publish_doc: Any,
    log: Any,
) -> tuple[Pipeline, dict[str, int], str]:
    """The corpus fabric, built through the runtime once and then reused from the cache directory."""
    cached = CACHE_DIR / f"2wiki-fabric-{'live' if run.live else 'precomputed'}-{FABRIC_VERSION}"
    if cached.is_dir() and not rebuild:
        shutil.copytree(cached, tmp, dirs_exist_ok=True)
        pipe = run.pipeline(tmp)
        where = {k: int(v) for k, v in json.loads((tmp / "where.json").read_text()).items()}
        return pipe, where, f"reused from {cached} (--rebuild to rebuild)"
    pipe = run.pipeline(tmp)
    where: dict[str, int] = {}
    t0 = time.perf_counter()
    row = 0
    n_facts = sum(len(ss) for ss in sents)
    for pi, ss in enumerate(sents):
        vecs = [run.v(cv[row + k]) for k in range(len(ss))]
        row += len(ss)
        for fid in publish_doc(pipe, f"wiki-{pi}", "2wiki", ss, vecs, title=corpus[pi]["title"]):
            where[fid] = pi
        if (pi + 1) % 1000 == 0:
            log(f"  2wiki ingest {pi + 1:,}/{len(sents):,} passages, {time.perf_counter() - t0:.0f} s")
    took = time.perf_counter() - t0
    (tmp / "where.json").write_text(json.dumps(where))
    pipe.close()
    shutil.rmtree(cached, ignore_errors=True)
    shutil.copytree(tmp, cached.with_suffix(".tmp"), dirs_exist_ok=True)
    cached.with_suffix(".tmp").rename(cached)
    pipe = run.pipeline(tmp)
    return pipe, where, f"built through the runtime in {took:.0f} s ({n_facts / took:.0f} facts/s)"


def _first_seen(titles: list[str]) -> list[str]:
    return list(dict.fromkeys(titles))


def _at_k(ranked: list[str], gold: set[str]) -> dict[str, float]:
    return {
        "r2": len(gold & set(ranked[:2])) / len(gold),
        "r5": len(gold & set(ranked[:5])) / len(gold),
        "rall": len(gold & set(ranked)) / len(gold),
        "n": float(len(ranked)),
    }
