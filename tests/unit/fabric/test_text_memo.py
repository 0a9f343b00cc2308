"""The screens' text memos are bounded by ``cache_texts`` and never change a result."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from crp_stream.config import Settings, load_settings
from crp_stream.core import conflicts, memo, near_copies, ngram, polarity, substitution
from crp_stream.fabric.fabric import Fabric

TEXTS = [f"The bridge over river {i} opened in {1900 + i} and is {i % 7} km long." for i in range(60)]


@pytest.fixture(autouse=True)
def _default_size() -> None:
    yield
    memo.configure(memo.DEFAULT_TEXTS)


def test_every_memo_of_core_is_registered_and_bounded() -> None:
    held = memo.stats()
    for module in (conflicts, near_copies, ngram, polarity, substitution):
        names = [k for k in held if k.startswith(module.__name__ + ".")]
        assert names, f"{module.__name__} has no registered text memo"
    assert all(bound >= 1 for _size, bound in held.values())


def test_the_bound_follows_the_setting_and_results_do_not_change() -> None:
    before = [substitution.aligned_substitution(a, b) for a, b in itertools.pairwise(TEXTS)]
    tokens = [substitution._tokens(t) for t in TEXTS]
    memo.configure(10)
    held = memo.stats()
    assert held["crp_stream.core.substitution._tokens"] == (0, 10)  # emptied, new bound
    assert held["crp_stream.core.ngram._gram_set"][1] == 2  # weight 0.2
    assert held["crp_stream.core.conflicts._duplicate_keys"][1] == 20  # weight 2
    after = [substitution.aligned_substitution(a, b) for a, b in itertools.pairwise(TEXTS)]
    assert after == before
    assert [substitution._tokens(t) for t in TEXTS] == tokens
    size, bound = memo.stats()["crp_stream.core.substitution._tokens"]
    assert bound == 10 and 0 < size <= 10  # 60 texts went through a memo of 10
    # near_copies reads token sets through substitution's current memo, not a stale binding
    assert near_copies._token_hashes(TEXTS[0]).shape[0] == len(substitution._token_set(TEXTS[0]))


def test_a_fabric_applies_cache_texts(tmp_path: Path) -> None:
    f = Fabric(Settings(data_dir=tmp_path, embedder="hashing", cache_texts=123))
    try:
        assert memo.stats()["crp_stream.core.polarity._stems"][1] == 123
    finally:
        f.close()


def test_cache_texts_from_the_environment_and_a_bad_value() -> None:
    assert load_settings(env={"CRP_CACHE_TEXTS": "777"}).cache_texts == 777
    with pytest.raises(Exception, match="CRP_CACHE_TEXTS"):
        load_settings(env={"CRP_CACHE_TEXTS": "0"})
    with pytest.raises(ValueError, match="cache_texts"):
        memo.configure(0)
