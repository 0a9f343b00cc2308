"""core.graph_rank: title keys and mentions, walk levels, personalised PageRank, estimates, admission."""

from __future__ import annotations

import numpy as np
import pytest

from crp_stream.core import graph_rank as gr


def test_title_key_drops_the_disambiguation_and_case() -> None:
    assert gr.title_key("Michael Jackson (writer)") == "michael jackson"
    assert gr.title_key("I Can't See Myself Leaving You") == "i can't see myself leaving you"
    assert gr.title_key("It") is None  # too short to name a document
    assert gr.title_key(None) is None
    assert gr.title_key("one two three four five six seven eight nine") is None  # longer than any span


def test_a_text_names_a_title_on_word_boundaries() -> None:
    key = gr.title_key("Michael Jackson (writer)")
    assert key is not None
    assert gr.names_title("He admired Michael Jackson, the British author.", key)
    assert not gr.names_title("He admired Michael Jacksonville.", key)
    # one word counts only where the text capitalises it
    assert gr.names_title("They crossed the Bridge at dawn", "bridge")
    assert not gr.names_title("they crossed a bridge at dawn", "bridge")


def test_mention_spans_are_the_lookup_keys_of_the_titles_named() -> None:
    spans = gr.mention_spans("The performer of song I Can'T See Myself Leaving You")
    assert "i can't see myself leaving you" in spans
    assert spans == sorted(set(spans))
    assert all(len(s) >= gr.MIN_TITLE_CHARS for s in spans)


def test_walk_levels_report_the_depth_actually_walked() -> None:
    # chain 0-1-2-3, both directions
    src = [0, 1, 1, 2, 2, 3]
    dst = [1, 0, 2, 1, 3, 2]
    level, depth = gr.walk_levels([0], src, dst, 3)
    assert level.tolist() == [0, 1, 2, 3] and depth == 3
    level, depth = gr.walk_levels([0], src, dst, 2)
    assert level.tolist() == [0, 1, 2, -1] and depth == 2
    level, depth = gr.walk_levels([1], src, dst, 3)  # two hops reach everything: depth 2, not 3
    assert depth == 2
    _, depth = gr.walk_levels([0], [], [], 3)
    assert depth == 0


def test_personalised_pagerank_restarts_at_the_seeds_and_follows_weights() -> None:
    # star: 0 - 1 (weight 1.0), 0 - 2 (weight 0.25)
    src, dst, w = [0, 1, 0, 2], [1, 0, 2, 0], [1.0, 1.0, 0.25, 0.25]
    r = gr.personalized_pagerank(3, src, dst, w, [1.0, 0.0, 0.0])
    assert r[0] > r[1] > r[2] > 0
    assert r[1] == pytest.approx(4 * r[2])  # the mass splits by weight
    assert r.sum() == pytest.approx(1.0)  # no sink: nothing leaves
    assert gr.personalized_pagerank(3, src, dst, w, [0.0, 0.0, 0.0]).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        gr.personalized_pagerank(3, src, dst, w, [1.0])


def test_pagerank_is_the_same_whatever_the_edge_order_given_sorted() -> None:
    rng = np.random.default_rng(7)
    n = 30
    s = rng.integers(0, n, 200)
    d = rng.integers(0, n, 200)
    w = rng.random(200)
    order = np.lexsort((d, s))
    seed = rng.random(n)
    a = gr.personalized_pagerank(n, s[order], d[order], w[order], seed)
    b = gr.personalized_pagerank(n, s[order], d[order], w[order], seed)
    assert a.tobytes() == b.tobytes()


def test_seed_weights_are_a_softmax_of_the_scores() -> None:
    w = gr.seed_weights([0.70, 0.65, 0.50])
    assert w.sum() == pytest.approx(1.0)
    assert w[1] / w[0] == pytest.approx(np.exp(-1.0))
    assert gr.seed_weights([]).size == 0


def test_estimate_adds_the_graph_to_relevance_under_the_cdr_factor() -> None:
    est = gr.connector_estimate([0.5, 0.3, 0.1], [0.2, 0.1, 0.0], [1.0, 0.2, 1.0], graph_weight=0.5)
    assert est.tolist() == pytest.approx([0.5 + 0.5, 0.3 + 0.2 * 0.5 * 0.5, 0.1])
    assert gr.connector_estimate([0.4], [0.0], [1.0]).tolist() == [0.4]


def test_admission_keeps_the_seeds_and_admits_a_connector_only_over_a_lower_anchor() -> None:
    anchors = [0.9, 0.8, 0.5, 0.4, 0.3]  # CDR order
    keep, conns = gr.admit_connectors(anchors, [0.45, 0.2], fixed=2, slots=2)
    assert keep == [0, 1, 2] and conns == [0]  # 0.45 beats the anchor at 0.4, not the one at 0.5
    keep, conns = gr.admit_connectors(anchors, [0.4], fixed=2, slots=2)
    assert keep == [0, 1, 2, 3] and conns == []  # a tie goes to the anchor
    keep, conns = gr.admit_connectors([0.2, 0.1], [0.95, 0.9], fixed=1, slots=1)
    assert keep == [0] and conns == [0]  # seeds stay whatever a connector is worth
