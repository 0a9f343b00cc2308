"""Poison in free text: true statements, the same statements with one span swapped, distractors.

Question sets, each run in its own fabric (one window of 5 facts, the default embedder's vectors
carried in the records, as ``retrieval_quality.py`` does):

- the true passages from ``official_docs`` (official, trust 0.8);
- the same passages with the answer swapped, from ``community_notes`` (community, trust 0.3), and in
  the "two partitions" order also from ``forum_posts`` (community, trust 0.3);
- four distractors from ``newswire`` (news, trust 0.5).

Sets come from three generators:

- ``counterfactual``: HotpotQA gold paragraphs (any corpus would do). In the sentence holding a
  supporting fact, a span (the answer when it is a name or number, else the first name or number
  the question does not mention) is swapped, wherever it occurs in the paragraph, for another span
  of the same kind (year, number, name of as many words) drawn from the same corpus. The query is
  that sentence with the span replaced by "what".
- ``poisonedrag``: PoisonedRAG's 5 adversarial passages per question (the false answer); the true
  passages are the same texts with the false answer replaced by the correct one.
- ``conflictqa``: ConflictQA's claim and negated claim (``memory_answer`` / ``counter_answer``): a
  negation flip; the query is the question.

Poison is published 30 days before the true passages ("earlier"), 30 days after ("later"), or 30
days after from two partitions ("later x2"). Flat top-5 (cosine, the same vectors) is the baseline.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from ops.bench._common import MINILM_PRECOMPUTED, EmbeddingCache, Pipeline, document, scratch, window_request

DAY = 86_400 * 1_000_000
T0 = 1_767_225_600_000_000 + 400 * DAY
TRUST = {"official_docs": 0.8, "community_notes": 0.3, "forum_posts": 0.3, "newswire": 0.5}
ORDERS = {"earlier": (-30 * DAY, 1), "later": (30 * DAY, 1), "later x2": (30 * DAY, 2)}
CONTESTS = ("CONTRADICTION_RESOLVED", "CONTRADICTION_UNRESOLVED")
VERDICTS = ("STALE_HIGH_TRUST", "POISONING_CANDIDATE", "DRIFT_UNDETERMINED")

_NAME = re.compile(r"\b[A-Z][\w'’.\-]*[\w](?: [A-Z][\w'’.\-]*[\w]){0,2}\b")
_NUMBER = re.compile(r"(?<![\w.,])\d[\d,]*(?:\.\d+)?(?![\w])")
_SKIP_NAMES = frozenset({"The", "A", "An", "He", "She", "It", "They", "In", "On", "At", "His", "Her", "This"})


@dataclass
class QSet:
    qid: str
    query: str
    true_docs: list[list[str]]
    poison_docs: list[list[str]]
    distractors: list[str]
    meta: dict[str, Any] = field(default_factory=dict)


def _kind(span: str) -> str:
    if re.fullmatch(r"1\d{3}|20\d{2}", span):
        return "year"
    if _NUMBER.fullmatch(span):
        return f"number{len(span)}"
    return f"name{len(span.split())}"


def _spans(text: str) -> list[str]:
    """Names (capitalised runs of 1-3 words, not a lone sentence-initial word) and whole numbers."""
    out = [m.group(0) for m in _NUMBER.finditer(text) if "." not in m.group(0)]
    for m in _NAME.finditer(text):
        words = m.group(0).split()
        while words and words[0] in _SKIP_NAMES:
            words = words[1:]
        if m.start() == 0 and len(words) == 1:
            continue  # capitalised only because it opens the sentence
        if words and not any("'" in w or "’" in w for w in words):
            out.append(" ".join(words))
    return out


def _swap(text: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![\w]){re.escape(old)}(?![\w])", new, text)


def counterfactual(datasets: Path, n: int, seed: int = 14) -> list[QSet]:
    rows = [
        json.loads(line)
        for line in (datasets / "hotpotqa" / "hotpotqa_dev_distractor_hard_100.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.strip()
    ]
    pool: dict[str, set[str]] = {}
    for r in rows:
        for _title, sents in r["context"]:
            for s in sents:
                for span in _spans(s):
                    pool.setdefault(_kind(span), set()).add(span)
    pools = {k: sorted(v) for k, v in pool.items()}
    rng = random.Random(seed)
    out: list[QSet] = []
    for qi, r in enumerate(rows):
        paras = {t: [s.strip() for s in ss if s.strip()] for t, ss in r["context"]}
        gold = [(t, k) for t, ks, *_ in r["supporting_facts"] for k in ks if t in paras and k < len(paras[t])]
        gold.sort(key=lambda tk: r["answer"] not in paras[tk[0]][tk[1]])  # the answer's sentence first
        if not gold:
            continue
        title, k = gold[0]
        sent = paras[title][k]
        spans = _spans(sent)
        target = (
            r["answer"]
            if r["answer"] in spans
            else next((s for s in spans if s.lower() not in r["question"].lower()), None)
        )
        if target is None:
            continue
        choices = [x for x in pools.get(_kind(target), []) if x != target and x not in " ".join(paras[title])]
        if not choices:
            continue
        new = rng.choice(choices)
        true_doc = paras[title]
        poison_doc = [_swap(s, target, new) for s in true_doc]
        others = [ss[0] for t, ss in paras.items() if t not in {g[0] for g in gold} and ss]
        out.append(
            QSet(
                f"cf{qi}",
                _swap(sent, target, "what"),
                [true_doc],
                [poison_doc],
                others[:4],
                {"old": target, "new": new, "kind": _kind(target)},
            )
        )
        if len(out) >= n:
            break
    return out


def _heldout_swaps(
    prefix: str, questions: list[tuple[str, str, list[str]]], corpus: dict[str, str], n: int, seed: int = 15
) -> list[QSet]:
    """``counterfactual`` on a corpus the text rules were not read against: per question (question,
    answer, supporting titles), the first supporting sentence that holds the answer (else a name or
    number the question does not mention) is swapped in its whole paragraph for a span of the same
    kind drawn from the corpus. Distractors: the first sentences of the next four paragraphs that
    support nothing of the question."""
    from crp_stream.core.sentences import split_sentences

    titles = sorted(corpus)
    pool: dict[str, set[str]] = {}
    for t in titles:
        for span in _spans(corpus[t]):
            pool.setdefault(_kind(span), set()).add(span)
    pools = {k: sorted(v) for k, v in pool.items()}
    rng = random.Random(seed)
    out: list[QSet] = []
    for qi, (question, answer, support) in enumerate(questions):
        paras = {t: split_sentences(corpus[t]) for t in support if t in corpus}
        found = [(t, k, sent) for t, ss in paras.items() for k, sent in enumerate(ss)]
        found.sort(key=lambda x: answer not in x[2])
        for title, _k, sent in found:
            spans = _spans(sent)
            target = answer if answer in spans else next((x for x in spans if x.lower() not in question.lower()), None)
            if target is None:
                continue
            choices = [x for x in pools.get(_kind(target), []) if x != target and x not in corpus[title]]
            if choices:
                break
        else:
            continue
        new = rng.choice(choices)
        true_doc = paras[title]
        at = titles.index(title)
        near = (titles[(at + d) % len(titles)] for d in range(1, len(titles)))
        others = [split_sentences(corpus[t])[0] for t in islice((t for t in near if t not in support), 4)]
        out.append(
            QSet(
                f"{prefix}{qi}",
                _swap(sent, target, "what"),
                [true_doc],
                [[_swap(x, target, new) for x in true_doc]],
                others,
                {"old": target, "new": new, "kind": _kind(target)},
            )
        )
        if len(out) >= n:
            break
    return out


def heldout_2wiki(datasets: Path, n: int) -> list[QSet]:
    """Held out: 2WikiMultihopQA's questions and corpus (HippoRAG's 1,000-question release)."""
    d = datasets / "2wikimultihopqa"
    qs = json.loads((d / "hipporag_2wiki_1000_questions.json").read_text(encoding="utf-8"))
    corpus = {c["title"]: c["text"] for c in json.loads((d / "hipporag_2wiki_corpus.json").read_text(encoding="utf-8"))}
    return _heldout_swaps("w", [(q["question"], q["answer"], list(q["supporting_facts"])) for q in qs], corpus, n)


def heldout_musique(datasets: Path, n: int) -> list[QSet]:
    """Held out: MuSiQue's 100 training questions (HippoRAG's release), their supporting paragraphs."""
    d = datasets / "musique"
    qs = json.loads((d / "hipporag_musique_train100.json").read_text(encoding="utf-8"))
    corpus = {
        c["title"]: c["text"]
        for c in json.loads((d / "hipporag_musique_train100_corpus.json").read_text(encoding="utf-8"))
    }
    questions = [(q["question"], q["answer"], [p["title"] for p in q["paragraphs"] if p["is_supporting"]]) for q in qs]
    return _heldout_swaps("m", questions, corpus, n)


def heldout_poisonedrag(datasets: Path, n: int) -> list[QSet]:
    """Held out: PoisonedRAG's sets after the ``n`` the rules were read against."""
    return poisonedrag(datasets, 2 * n)[n:]


def heldout_conflictqa(datasets: Path, n: int) -> list[QSet]:
    """Held out: ConflictQA's claims after the first ``n``."""
    return conflictqa(datasets, 2 * n)[n:]


def poisonedrag(datasets: Path, n: int) -> list[QSet]:
    data: dict[str, Any] = {}
    for name in ("nq", "hotpotqa", "msmarco"):
        data.update(
            {
                f"{name}:{k}": v
                for k, v in json.loads((datasets / "poisonedrag" / f"adv_targeted_{name}.json").read_text()).items()
            }
        )
    items = sorted(data.items())
    sets = []
    for i, (qid, q) in enumerate(items):
        wrong, right = str(q["incorrect answer"]), str(q["correct answer"])
        adv = [t for t in q["adv_texts"] if wrong in t]
        if not adv:
            continue
        true = [[_swap(t, wrong, right)] for t in adv]
        if any(t == [a] for t, a in zip(true, adv, strict=True)):
            continue  # the answer is not spelled out ("yes"/"no"): no swapped copy to find
        others = [
            _swap(t, str(o["incorrect answer"]), str(o["correct answer"]))
            for _, o in items[i + 1 : i + 5] + items[: max(0, i + 5 - len(items))]
            for t in o["adv_texts"][:1]
        ]
        sets.append(QSet(qid, q["question"], true, [[t] for t in adv], others[:4], {"old": right, "new": wrong}))
        if len(sets) >= n:
            break
    return sets


def conflictqa(datasets: Path, n: int) -> list[QSet]:
    rows = [
        json.loads(line)
        for line in (datasets / "conflictqa" / "conflictQA-strategyQA-chatgpt.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.strip()
    ]
    sets = []
    for i, r in enumerate(rows[:n]):
        others = [rows[(i + d) % len(rows)]["memory_answer"] for d in range(1, 5)]
        sets.append(QSet(f"cqa{i}", r["question"], [[r["memory_answer"]]], [[r["counter_answer"]]], others))
    return sets


GENERATORS = {
    "counterfactual": counterfactual,
    "poisonedrag": poisonedrag,
    "conflictqa": conflictqa,
    "heldout-2wiki": heldout_2wiki,
    "heldout-musique": heldout_musique,
    "heldout-poisonedrag": heldout_poisonedrag,
    "heldout-conflictqa": heldout_conflictqa,
}


@dataclass
class Tally:
    sets: int = 0
    false_served: int = 0
    uncontested: int = 0
    true_served: int = 0
    trusted_only: int = 0
    noted: int = 0
    flat_false: int = 0
    flat_true: int = 0
    flat_trusted_only: int = 0
    verdicts: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def _texts(s: QSet) -> tuple[set[str], set[str]]:
    """(true statements, false statements): the sentences that differ between the two versions."""
    true = {t for d in s.true_docs for t in d}
    false = {t for d in s.poison_docs for t in d}
    return true - false, false - true


def run_set(s: QSet, order: str, cache: EmbeddingCache, budget: int, tally: Tally) -> None:
    offset, partitions = ORDERS[order]
    true_texts, false_texts = _texts(s)
    docs: list[tuple[int, str, str, list[str]]] = []  # (ts, source, source type, sentences)
    t_true = T0
    for d in s.true_docs:
        docs.append((t_true, "official_docs", "official", d))
    for p, source in enumerate(("community_notes", "forum_posts")[:partitions]):
        for d in s.poison_docs:
            docs.append((t_true + offset + p * DAY, source, "community", d))
    for d in s.distractors:
        docs.append((t_true - 5 * DAY, "newswire", "news", [d]))
    docs.sort(key=lambda x: x[0])
    every = [t for *_, d in docs for t in d]
    vecs = cache.embed([*every, s.query])
    qv, fv = vecs[-1], vecs[:-1]
    # flat top-k over the same sentences and vectors
    top = np.lexsort((np.arange(len(every)), -(fv @ qv)))[:budget]
    flat = {every[i] for i in top}
    f_false, f_true = bool(flat & false_texts), bool(flat & true_texts)
    tally.flat_false += f_false
    tally.flat_true += f_true
    tally.flat_trusted_only += f_true and not f_false
    with scratch("crp-bench-cf-") as tmp:
        p = Pipeline(tmp, embedder=MINILM_PRECOMPUTED, trust=dict(TRUST))
        audits: Counter[str] = Counter()
        at = 0
        for n, (ts, source, stype, sents) in enumerate(docs):
            p.now = ts
            outs = p.publish(
                "crp.documents",
                source,
                document(
                    f"{s.qid}-{n}", source, list(zip(sents, fv[at : at + len(sents)], strict=True)), source_type=stype
                ),
            )
            at += len(sents)
            audits.update(v.get("audit_type", "") for t, v in outs if t == "crp.audit")
        p.now = max(ts for ts, *_ in docs) + DAY
        req = window_request(
            f"r-{s.qid}", f"s-{s.qid}", 1, s.query, qv, [("q", s.query, qv)], budget, False, max_windows=1
        )
        outs = p.publish("crp.window.requests", f"s-{s.qid}", req)
        p.close()
    env = next(v for t, v in outs if t == "crp.envelopes")
    served = {f["text"] for f in env["facts"]}
    contested = bool(env["notes"]) or any(v.get("audit_type") in CONTESTS for t, v in outs if t == "crp.audit")
    is_false, is_true = bool(served & false_texts), bool(served & true_texts)
    tally.sets += 1
    tally.false_served += is_false
    tally.uncontested += is_false and not contested
    tally.true_served += is_true
    tally.trusted_only += is_true and not is_false
    tally.noted += bool(env["notes"])
    tally.verdicts.update(k for k in audits.elements() if k in VERDICTS)
    if is_false and (not contested or order != "later x2") and len(tally.examples) < 3:
        tally.examples.append(f"{s.qid}: {sorted(served & false_texts)[0][:110]!r} contested={contested}")
    if is_false and not contested:  # every uncontested failure, with the two texts
        tally.failures.append(
            f"{s.qid} [{order}]: served false {sorted(served & false_texts)!r}; "
            f"true {sorted(true_texts)!r}; true served: {is_true}"
        )


def sets_of(name: str, datasets: Path, n: int) -> Iterator[QSet]:
    yield from GENERATORS[name](datasets, n)


def run(
    datasets: Path,
    n: int,
    names: list[str],
    budget: int = 5,
    qids: set[str] | None = None,
    orders: tuple[str, ...] = tuple(ORDERS),
) -> dict[tuple[str, str], Tally]:
    """Every set of ``names`` (the first ``n`` of each generator), or only those whose id is in ``qids``."""
    cache = EmbeddingCache("arbiter-counterfactual")
    results: dict[tuple[str, str], Tally] = {}
    from crp_stream.core.conflicts import FactView, values_conflict
    from crp_stream.core.reworded import reworded_conflict
    from crp_stream.core.unread_pairs import unread_pair

    for name in names:
        sets = [s for s in sets_of(name, datasets, n) if qids is None or s.qid in qids]
        if not sets:
            continue
        pairs = [
            (a, b)
            for s in sets
            for da, db in zip(s.true_docs, s.poison_docs, strict=True)
            for a, b in zip(da, db, strict=True)
            if a != b
        ]
        declined = [
            (a, b)
            for a, b in pairs
            if not values_conflict(FactView("t", a, source="official_docs"), FactView("p", b, source="community_notes"))
        ]
        reworded = [(a, b) for a, b in declined if reworded_conflict(a, b)]
        unread = sum(1 for a, b in declined if (a, b) not in reworded and unread_pair(a, b))
        print(
            f"{name}: {len(pairs) - len(declined)}/{len(pairs)} swapped statement pairs read as contradictions "
            f"(text rules alone), {len(reworded)} more read as reworded, {unread} more contested as unread copies"
        )
        for order in orders:
            tally = Tally()
            for s in sets:
                run_set(s, order, cache, budget, tally)
            results[(name, order)] = tally
            print_row(name, order, tally)
    return results


def pct(x: int, n: int) -> str:
    return f"{100 * x / n:.0f}%" if n else "-"


def print_header() -> None:
    print(
        f"{'set':<15}{'poison':<10}{'n':>4} | {'flat: false':>11}{'trusted only':>13} | {'false':>6}"
        f"{'uncontested':>12}{'true':>6}{'trusted only':>13}{'noted':>6} | verdicts"
    )


def print_row(name: str, order: str, t: Tally) -> None:
    print(
        f"{name:<15}{order:<10}{t.sets:>4} | {pct(t.flat_false, t.sets):>11}{pct(t.flat_trusted_only, t.sets):>13} | "
        f"{pct(t.false_served, t.sets):>6}{pct(t.uncontested, t.sets):>12}{pct(t.true_served, t.sets):>6}"
        f"{pct(t.trusted_only, t.sets):>13}{pct(t.noted, t.sets):>6} | {dict(sorted(t.verdicts.items()))}",
        flush=True,
    )
    for e in t.examples:
        print(f"    e.g. {e}")
    for f in t.failures:
        print(f"    uncontested: {f}")


def different_facts(datasets: Path) -> tuple[int, int, int, list[str], list[str], list[str]]:
    """Control: HotpotQA sentences of different articles, read as if each article were its own source
    (the harder case: the copy rule only applies across sources). Returns (pairs, pairs the text rules
    read as contradictions, of which by the copy rule, examples, the pairs contested as unread copies
    besides, ``core.unread_pairs``, the pairs read as reworded contradictions besides,
    ``core.reworded``)."""
    from crp_stream.core.conflicts import FactView, values_conflict
    from crp_stream.core.copied_statements import copied_statement_conflict
    from crp_stream.core.reworded import reworded_conflict
    from crp_stream.core.unread_pairs import unread_pair

    rows = [
        json.loads(line)
        for line in (datasets / "hotpotqa" / "hotpotqa_dev_distractor_hard_100.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.strip()
    ]
    pairs = flagged = by_copy = 0
    examples: list[str] = []
    unread: list[str] = []
    reworded: list[str] = []
    for r in rows:
        facts = [
            FactView(f"{j}.{k}", s.strip(), source=f"article{j}")
            for j, (_t, sents) in enumerate(r["context"])
            for k, s in enumerate(sents)
            if s.strip()
        ]
        for x, a in enumerate(facts):
            for b in facts[x + 1 :]:
                if a.source == b.source:
                    continue
                pairs += 1
                if not values_conflict(a, b):
                    if reworded_conflict(a.text, b.text):
                        reworded.append(f"{a.text[:70]!r} / {b.text[:70]!r}")
                    elif unread_pair(a.text, b.text):
                        unread.append(f"{a.text[:70]!r} / {b.text[:70]!r}")
                else:
                    flagged += 1
                    if copied_statement_conflict(a.text, b.text, same_source=False):
                        by_copy += 1
                        if len(examples) < 4:
                            examples.append(f"{a.text[:70]!r} / {b.text[:70]!r}")
    return pairs, flagged, by_copy, examples, unread, reworded
