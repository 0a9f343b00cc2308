"""Record the decisions of the text rules before their fast paths into tests/data/text_rule_decisions.jsonl.gz.

``python -m ops.record_text_decisions`` runs the modules kept in ``tests/support/text_rules_before``
(``crp_stream.core``'s conflicts, substitution and polarity at 8d84df9) on every input the
equivalence tests used: the real texts (the free-text conflict sets, the HotpotQA sample, the curated
statements of the unit tests), mutations of them, and seeded samples in place of the hypothesis draws.
One JSON line per input: ``{"kind", "input", "old"}``; tuples are written as lists.
"""

from __future__ import annotations

import ast
import base64
import gzip
import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.text_rules_before import conflicts as old_conflicts
from tests.support.text_rules_before import polarity as old_polarity
from tests.support.text_rules_before import substitution as old_substitution

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
UNIT = ROOT / "tests" / "unit"
OUT = DATA / "text_rule_decisions.jsonl.gz"

# Words the rules read: negators, antonyms, prefixed words, relations, predicate verbs, uniqueness,
# conditions, passives, numbers with units, names, possessives, hyphens, abbreviations, repeats.
_VOCAB_TEXT = (
    "the a an of in on at by for to and or is are was were be been has have had did do does not no never "
    "n't isn't cannot can't won't neither nor either none still anymore longer only outside inside "
    "under over below above less more after before lower higher false true disabled enabled lost won "
    "possible impossible able unable known unknown legal illegal regular irregular agree disagree "
    "than beat beats defeated precedes older larger first largest only acquired founded capital won "
    "Norway U.S. Apple Facebook Instagram Paris Rome Berlin Denver-Pitkin Denver-Boulder Fairfax's "
    "Montgomery's Texas Tech University Austin Keith Richards Rock star song written found Beatles "
    "If When Unless you we it they saw see seen uses used play plays played director producer "
    "collected medals team city 39 40 2018 2019 1,000 1000 120 ms 0.12 s 5% 2 GiB 1 krps v3.5 us-east-1"
)
VOCAB = _VOCAB_TEXT.split()
TEMPLATES = [
    "Fact {n} about topic {t}: value {v}.",
    "Topic {t} area {v}: record {n} says the palace river.",
    "fact {n} of the benchmark corpus",
]
NUMBER_TEMPLATES = [
    "Fact {} about topic {}: value {}.",
    "The {} team won {} games and {} titles.",
    "In {}, the bridge was {} long and carried {} cars.",
    "Latency is {} at {} and {} at peak.",
]
# (a number, one written otherwise within the unit tolerance, a different one)
NUMBERS = [("12", "12.0", "112"), ("1000 rps", "1 krps", "100 rps"), ("700 ms", "0.7 s", "70 ms"), ("5%", "5.0%", "6%")]
PIECES = ["a", "Z", "U.S.", "n't", "can't", "Won't", "cannot", "1", "2,5", "3.75", "10%", "²", "Σ", "é", "_", "-", ".",
          ",", "'", "’", " ", "  ", "isn't", "e.g.", "x-ray", "(", ")", "İ", "ß"]  # fmt: skip
SOURCES = [("s1", "s2"), ("s1", "s1"), ("", "s2"), ("s1", "")]


def plain(x: Any) -> Any:
    """A decision as JSON: tuples (named or not) become lists."""
    if isinstance(x, tuple | list):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    return x


def _literals(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if len(node.value.split()) >= 3 and "\n" not in node.value and len(node.value) < 400:
            out.append(node.value)
    return out


def real_texts() -> tuple[list[list[str]], list[tuple[str, str]]]:
    groups: list[list[str]] = []
    pairs: list[tuple[str, str]] = []
    for case in json.loads((DATA / "free_text_sets.json").read_text()):
        docs = [s for d in case["true_docs"] + case["poison_docs"] for s in d] + list(case["distractors"])
        groups.append(list(dict.fromkeys(docs)))
        for true_doc, poison_doc in zip(case["true_docs"], case["poison_docs"], strict=False):
            pairs += [(x, y) for x, y in zip(true_doc, poison_doc, strict=False) if x != y]
    for q in json.loads((DATA / "hotpotqa_ci10.json").read_text()):
        sents = [s.strip() for p in q["paragraphs"] for s in (p[1] if isinstance(p, list) else p["sentences"])]
        groups.append([s for s in sents if s])
    curated = []
    for name in ("test_substitution.py", "test_polarity.py", "test_conflicts.py", "test_near_copies.py"):
        curated += _literals(UNIT / name)
    groups.append(list(dict.fromkeys(curated)))
    return groups, pairs


def mutate(text: str, rng: random.Random) -> str:
    """One edit of the kinds the rules look for (or a random one)."""
    words = text.split()
    if not words:
        return text
    k = rng.randrange(len(words))
    kind = rng.randrange(8)
    if kind == 0:  # a span swapped for a word or name
        words[k : k + rng.randint(1, 3)] = rng.sample(VOCAB, rng.randint(1, 3))
    elif kind == 1:  # a negation
        words.insert(k, rng.choice(["not", "never", "no", "did not", "cannot"]))
    elif kind == 2:  # a number changed
        nums = [i for i, w in enumerate(words) if any(c.isdigit() for c in w)]
        at = rng.choice(nums) if nums else k
        words[at] = str(rng.randint(0, 3000)) + rng.choice(["", "", " ms", "%"])
    elif kind == 3:  # two words exchanged (an argument swap)
        j = rng.randrange(len(words))
        words[k], words[j] = words[j], words[k]
    elif kind == 4:  # a leading condition
        return f"If {' '.join(rng.sample(VOCAB, 3))}, {text[:1].lower()}{text[1:]}"
    elif kind == 5:  # every occurrence of a word replaced
        w = words[k]
        new = rng.choice(VOCAB)
        words = [new if x == w else x for x in words]
    elif kind == 6:  # an antonym or a prefix
        words[k] = rng.choice(["un", "in", "dis", "im"]) + words[k].lower()
    else:  # a word deleted
        del words[k]
    return " ".join(words)


def generated_pair(rng: random.Random) -> tuple[str, str]:
    """The hypothesis strategy of the generated statements, drawn from a seeded generator."""
    a = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 18)))
    words = a.split()
    for _ in range(rng.randint(0, 4)):
        kind, at, w = rng.randint(0, 5), rng.randint(0, 40), rng.choice(VOCAB)
        k = at % (len(words) + 1)
        if kind == 0 and words:
            words[k % len(words)] = w
        elif kind == 1:
            words.insert(k, w)
        elif kind == 2 and words:
            del words[k % len(words)]
        elif kind == 3 and words:  # every occurrence of one word
            old = words[k % len(words)]
            words = [w if x == old else x for x in words]
        elif kind == 4 and len(words) > 1:
            j = (k + 1 + at) % len(words)
            i = k % len(words)
            words[i], words[j] = words[j], words[i]
        elif kind == 5:
            words.insert(0, f"If {w} {w},")
    end = rng.choice(["", ".", "!"])
    return a + end, " ".join(words) + end


def pair_record(a: str, b: str, how: int) -> dict[str, Any]:
    """Every public decision on one pair of statements (sources chosen by ``how``)."""
    sa, sb = SOURCES[how % 4]
    va, vb = old_conflicts.FactView("a", a, source=sa), old_conflicts.FactView("b", b, source=sb)
    (la, oa), (lb, ob) = old_substitution._tokens(a), old_substitution._tokens(b)
    old = {
        "aligned_substitution": old_substitution.aligned_substitution(a, b),
        "aligned_substitution_1": old_substitution.aligned_substitution(a, b, 1),
        "copied_statement_conflict": [old_substitution.copied_statement_conflict(a, b, s) for s in (False, True)],
        "slot_claim": [old_substitution.slot_claim(a, b, s) for s in (False, True)],
        "values_conflict": old_conflicts.values_conflict(va, vb),
        "same_claim": old_conflicts._same_claim(va, vb),
        "polarity_flip": old_polarity.polarity_flip(la, lb, oa, ob),
    }
    return {"kind": "pair", "input": {"a": a, "b": b, "how": how % 4}, "old": old}


def pairs() -> Iterator[tuple[str, str, int]]:
    """The pairs of the equivalence tests, in their order and with their seeds."""
    groups, known = real_texts()
    rng = random.Random(12)
    checked = 0
    for x, y in known:  # true and poisoned copies
        yield x, y, checked
        yield y, x, checked + 1
        checked += 2
    for group in groups:  # neighbours within a group of related statements
        sample = group if len(group) <= 40 else rng.sample(group, 40)
        for i, x in enumerate(sample):
            for y in sample[i + 1 : i + 12]:
                yield x, y, checked
                checked += 1
    rng = random.Random(3)
    for group in groups:  # mutations
        for text in group[:60]:
            for _ in range(4):
                other = mutate(text, rng)
                if rng.random() < 0.3:
                    other = mutate(other, rng)
                yield text, other, rng.randrange(4)
                yield other, text, rng.randrange(4)
    rng = random.Random(5)
    for template in TEMPLATES:
        texts = [
            template.format(n=rng.randint(0, 120_000), t=rng.randint(0, 63), v=rng.randint(0, 999)) for _ in range(150)
        ]
        texts += [template.format(n=n, t=n % 3, v=n % 7) for n in range(30)]  # repeated numbers
        for i, x in enumerate(texts):
            for y in texts[i + 1 : i + 15]:
                yield x, y, i
    rng = random.Random(7)
    for _ in range(3000):  # in place of the hypothesis draws
        a, b = generated_pair(rng)
        how = rng.randrange(4)
        yield a, b, how
        yield b, a, how
    for group in groups:  # case and a full stop
        for text in group[:30]:
            yield text, text.upper(), 0
            yield text, text.rstrip(".") + ".", 1


def token_texts() -> Iterator[str]:
    """In place of the hypothesis draws of the tokenizer's test: joined pieces and arbitrary characters."""
    rng = random.Random(11)
    alphabet = [chr(c) for c in itertools.chain(range(32, 127), range(0xA0, 0x250), range(0x370, 0x400))]
    alphabet += ["’", "‘", "İ", "ß", "²", "\t", "\n", "\u200b", "\u2019", "ﬁ", "Ⅻ", "٣", "①"]
    for _ in range(1500):
        yield "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))
        yield "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))


def _fact(f: old_conflicts.FactView) -> dict[str, Any]:
    return {k: v for k, v in f._asdict().items() if v != old_conflicts.FactView._field_defaults.get(k, object())}


def _array(v: np.ndarray[Any, Any]) -> dict[str, Any]:
    return {"dtype": str(v.dtype), "shape": list(v.shape), "b64": base64.b64encode(v.tobytes()).decode()}


def envelope_records() -> Iterator[dict[str, Any]]:
    """The contradictions of ``detect_envelope_contradictions`` on the pools of test_conflicts (seed 12)."""
    rng = np.random.default_rng(12)
    for trial in range(40):
        n, d = int(rng.integers(2, 100)), int(rng.choice([3, 16, 384]))
        v = rng.standard_normal((n, d))
        v[n // 2 :] = v[: n - n // 2] + rng.choice([0.0, 1e-9, 0.02, 0.3]) * rng.standard_normal((n - n // 2, d))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        v *= rng.choice([1.0, 1.0 + 1e-7, 3.0])
        if trial % 2:
            v = v.astype(np.float32)
        pool = rng.permutation(n)[: int(rng.integers(2, n + 1))]
        sub = v[pool]
        m = len(pool)
        facts = [old_conflicts.FactView(str(i), f"Service {i % 5} limit is {i % 3} rps.") for i in range(m)]
        inside = int(rng.integers(0, m + 1))
        old = old_conflicts.detect_envelope_contradictions(facts, sub, inside=inside)
        yield {
            "kind": "envelope",
            "input": {"facts": [_fact(f) for f in facts], "vecs": _array(sub), "inside": inside},
            "old": plain(old),
        }


def same_claim_records() -> Iterator[dict[str, Any]]:
    """The groups of ``same_claim_duplicates`` on the free texts of test_conflicts (seed 26)."""
    rng = np.random.default_rng(26)
    texts = ["Port is 80.", "port  is 80.", "PORT is 80.", "Port is 8080.", "The cache holds 5 GB.", "Alpha beta."]
    claims: list[dict[str, Any]] = [
        {},
        {},
        {},
        {"subject": "svc", "attribute": "port", "value": 80},
        {"subject": "svc"},
        {"value": 0},
        {"value": ""},
        {"value": False},
        {"subject": "svc", "attribute": "port"},
    ]
    for trial in range(200):
        n = int(rng.integers(1, 12))
        facts = [
            old_conflicts.FactView(
                str(i), str(rng.choice(texts)) if trial % 3 else f"Fact {i} text.", **claims[int(rng.integers(0, 9))]
            )
            if trial % 4
            else old_conflicts.FactView(str(i), str(texts[i % len(texts)]) + f" {i}")
            for i in range(n)
        ]
        v = rng.standard_normal((n, 8))
        v[n // 2 :] = v[: n - n // 2] + rng.choice([0.0, 0.01, 1.0]) * rng.standard_normal((n - n // 2, 8))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        yield {
            "kind": "same_claim_duplicates",
            "input": {"facts": [_fact(f) for f in facts], "vecs": _array(v)},
            "old": plain(old_conflicts.same_claim_duplicates(facts, v)),
        }


def records() -> Iterator[dict[str, Any]]:
    for a, b, how in pairs():
        rec = pair_record(a, b, how)
        rec["old"] = plain(rec["old"])
        yield rec
    groups, _ = real_texts()
    rng = random.Random(8)
    for group in groups:
        for text in group[:40] + [mutate(t, rng) for t in group[:20]]:
            low, orig = old_substitution._tokens(text)
            old = {"content": old_polarity._content(low, orig), "stems": [old_polarity.stem(w) for w in low]}
            yield {"kind": "content", "input": {"text": text}, "old": plain(old)}
    for template in NUMBER_TEMPLATES:  # every combination (the hypothesis test drew 300 of them)
        for choice in itertools.product(range(len(NUMBERS)), range(3), repeat=3):
            slots = [(NUMBERS[choice[2 * s]], choice[2 * s + 1]) for s in range(3)]
            a = template.format(*(n[0] for n, _ in slots))
            b = template.format(*(n[k] for n, k in slots))
            for x, y in ((a, b), (b, a)):
                yield {"kind": "text_conflict", "input": {"a": x, "b": y}, "old": old_conflicts._text_conflict(x, y)}
    for text in token_texts():
        yield {"kind": "tokens", "input": {"text": text}, "old": plain(old_substitution._tokens.__wrapped__(text))}
    yield from envelope_records()
    yield from same_claim_records()


def main() -> None:
    counts: dict[str, int] = {}
    seen: set[str] = set()
    with gzip.GzipFile(OUT, "wb", mtime=0) as raw:  # mtime 0: the same inputs give the same bytes
        for rec in records():
            line = json.dumps(rec, ensure_ascii=False, sort_keys=True)
            if line in seen:
                continue  # a repeated input decides once
            seen.add(line)
            raw.write(line.encode() + b"\n")
            counts[rec["kind"]] = counts.get(rec["kind"], 0) + 1
    print(f"{OUT.relative_to(ROOT)}: {sum(counts.values())} decisions {counts}, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main()
