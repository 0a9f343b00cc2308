"""core.graph_rank: title keys and mentions, walk levels."""

from __future__ import annotations

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


def test_a_text_that_names_a_title_holds_every_indexed_word_of_its_key() -> None:
    """``title_words`` of any text that ``names_title`` a key include ``key_words(key)``: the facts
    found under one of the key's words include every fact that names it, whatever the case, the
    punctuation between the words or letters that change length when lowercased."""
    cases = [
        ("The Bridge on the River Kwai (film)", "He starred in THE BRIDGE ON THE RIVER KWAI, in 1957."),
        ("Ada Lovelace", "A letter to Ada—Lovelace survives."),
        ("İstanbul Technical University", "She studied at İstanbul Technical University."),
        ("I Can't See Myself Leaving You", "The song I Can'T See Myself Leaving You charted."),
        ("Michael Jackson (writer)", "He admired Michael Jackson, the British author."),
    ]
    for title, text in cases:
        key = gr.title_key(title)
        assert key is not None and gr.names_title(text, key)
        words = gr.key_words(key)
        assert words and set(words) <= set(gr.title_words(text)), (title, words, gr.title_words(text))
    assert gr.key_words("the who") == []  # common and short words only: found by a scan
    assert gr.title_words("It is the one of the best") == ["best"]
    assert gr.title_words("x" * 65 + " word") == ["word"]  # longer than the column


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
