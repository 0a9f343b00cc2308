"""The short-statement screen (``reworded.short_statement_pairs``) counts content words before it
stems them and skips a set of one source: the same keys and pairs as stemming every text."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from crp_stream.core import reworded
from crp_stream.core.reworded import SHORT_STATEMENT, _content, _tokens, short_statement_pairs
from tests.support.text_decisions import recorded

# words the screen reads: stop words, quantifiers, negators, possessives, compounds, contractions
_VOCAB_TEXT = (
    "the a an of is are was has have had not no never n't isn't cannot can't none nobody some several "
    "many all every least at there than it's one's Carol's water viscosity crane cranes slam dunk "
    "slam-dunk slamdunk Norway Paris capital won lost team city 39 2019 U.S. red white blue"
)
VOCAB = _VOCAB_TEXT.split()


def _key_by_stems(text: str) -> str | None:
    content = _content(_tokens(text))
    return "".join(content) if SHORT_STATEMENT[0] <= len(content) <= SHORT_STATEMENT[1] + 1 else None


def _pairs_by_stems(texts: list[str], sources: list[str], inside: int | None = None) -> set[tuple[int, int]]:
    return reworded.same_key_pairs(
        [_key_by_stems(t) if s else None for t, s in zip(texts, sources, strict=True)], sources, inside
    )


def _corpus_texts() -> list[str]:
    texts: set[str] = set()
    for kind, records in recorded().items():
        for rec in records:
            x = rec["input"]
            if kind in ("pair", "text_conflict"):
                texts.update((x["a"], x["b"]))
            elif "text" in x:
                texts.add(x["text"])
    texts.update(("Carol's cat", "It's raining", "one's own boat", "Water has viscosity", "Nobody's home"))
    return sorted(texts)


def test_short_keys_of_the_recorded_texts() -> None:
    texts = _corpus_texts()
    assert len(texts) > 5_000
    short = 0
    for t in texts:
        want = _key_by_stems(t)
        assert reworded._short_key(t) == want, t
        short += want is not None
    assert short > 100  # the corpus holds short statements too


def test_short_pairs_of_recorded_texts_match() -> None:
    texts = _corpus_texts()
    rng = random.Random(5)
    for _ in range(200):
        pick = rng.sample(texts, 40) + rng.sample([t for t in texts if _key_by_stems(t)], 20)
        rng.shuffle(pick)
        for sources in (
            [rng.choice(["s1", "s2", "s3", ""]) for _ in pick],
            ["s1"] * len(pick),
            [rng.choice(["s1", ""]) for _ in pick],
            [""] * len(pick),
        ):
            for inside in (None, 10, 0):
                assert short_statement_pairs(pick, sources, inside) == _pairs_by_stems(pick, sources, inside)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=7), min_size=2, max_size=12), st.data())
def test_generated_statements(words: list[list[str]], data: st.DataObject) -> None:
    texts = [" ".join(w) for w in words]
    sources = data.draw(st.lists(st.sampled_from(["s1", "s2", ""]), min_size=len(texts), max_size=len(texts)))
    for t in texts:
        assert reworded._short_key(t) == _key_by_stems(t)
    assert short_statement_pairs(texts, sources) == _pairs_by_stems(texts, sources)
