"""A copy of a trusted statement with its answer swapped is caught, and the trusted one served.

Seven question sets from ``tests/data/free_text_sets.json``: the first three of the counterfactual
generator (HotpotQA sentences with a name or number swapped), the first two PoisonedRAG questions
(its adversarial passages, the true ones with the answer put back) and the first two ConflictQA
claims (negation flips), as ``ops/bench/counterfactual.py`` builds them; later sets add multi-span
cases and reworded ConflictQA denials (cqa2: two arguments of "before" swapped; cqa13: the condition
moved to the other end of the sentence). Each set is its own fabric
(whole embedded pipeline, hashing embedder), one window of 5 facts: the true passages from an
``official`` source (trust 0.8), the poison from ``community`` (0.3), four ``news`` distractors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.arbiter import DAY_US, NOW_US, Pipeline, rec

SETS = json.loads((Path(__file__).resolve().parents[1] / "data" / "free_text_sets.json").read_text())
TRUST = {"official_docs": 0.8, "community_notes": 0.3, "forum_posts": 0.3, "newswire": 0.5}
CONTESTS = {"CONTRADICTION_RESOLVED", "CONTRADICTION_UNRESOLVED"}


def _doc(
    event_id: str, source: str, source_type: str, sentences: list[str], title: str | None = None
) -> dict[str, Any]:
    doc = {
        "event_id": event_id,
        "source": source,
        "source_type": source_type,
        "document_id": event_id,
        "facts": [{"text": t} for t in sentences],
    }
    return doc if title is None else {**doc, "title": title}


def run(tmp_path: Path, s: dict[str, Any], poison_offset_us: int, partitions: int) -> dict[str, Any]:
    """Publish one set in log-append order, ask one window of 5 facts; what the envelope served."""
    pipe = Pipeline(tmp_path / s["qid"].replace(":", "_"), trust=dict(TRUST))
    inputs = []
    t_true = NOW_US - 60 * DAY_US
    for n, d in enumerate(s["true_docs"]):
        inputs.append(
            rec("crp.documents", _doc(f"t{n}", "official_docs", "official", d, s.get("true_title")), t_true + n)
        )
    for p, source in enumerate(("community_notes", "forum_posts")[:partitions]):
        for n, d in enumerate(s["poison_docs"]):
            ts = t_true + poison_offset_us + p * DAY_US + n
            inputs.append(rec("crp.documents", _doc(f"p{p}-{n}", source, "community", d, s.get("poison_title")), ts))
    for n, text in enumerate(s["distractors"]):
        inputs.append(rec("crp.documents", _doc(f"n{n}", "newswire", "news", [text]), t_true - 5 * DAY_US + n))
    inputs.sort(key=lambda x: x[2])
    request = {
        "request_id": "r1",
        "session_id": "s1",
        "window": 1,
        "query": {"text": s["query"]},
        "sub_queries": [{"id": "q", "text": s["query"]}],
        "fact_budget": 5,
        "max_windows": 1,
    }
    pipe.feed(inputs)
    verdicts = {a["audit_type"] for a in pipe.out("crp.audit")}
    before = len(pipe.out("crp.audit"))
    pipe.feed([rec("crp.window.requests", request, max(i[2] for i in inputs) + DAY_US, key="s1")])
    [env] = pipe.out("crp.envelopes")
    contests = [a for a in pipe.out("crp.audit")[before:] if a["audit_type"] in CONTESTS]
    audits = {a["audit_type"] for a in pipe.out("crp.audit")} - verdicts
    pipe.close()
    true = {t for d in s["true_docs"] for t in d}
    false = {t for d in s["poison_docs"] for t in d}
    served = {f["text"] for f in env["facts"]}
    return {
        "true": bool(served & (true - false)),
        "false": bool(served & (false - true)),
        "contested": bool(env["notes"]) or bool(audits & CONTESTS),
        "notes": env["notes"],
        "unresolved_audit": "CONTRADICTION_UNRESOLVED" in audits,
        "contests": sorted((a["audit_type"], a["details"]["pattern"]) for a in contests),
        "verdicts": verdicts,
        "served": sorted(t[:60] for t in served),
    }


@pytest.mark.parametrize(
    ("order", "offset", "partitions", "verdict"),
    [
        ("earlier", -30 * DAY_US, 1, "POISONING_CANDIDATE"),
        ("later", 30 * DAY_US, 1, "DRIFT_UNDETERMINED"),
    ],
)
def test_one_low_trust_partition_the_trusted_statement_is_served_not_the_copy(
    tmp_path: Path, order: str, offset: int, partitions: int, verdict: str
) -> None:
    results = {s["qid"]: run(tmp_path, s, offset, partitions) for s in SETS}
    served_right = [q for q, r in results.items() if r["true"] and not r["false"]]
    assert len(served_right) / len(SETS) >= 0.95, {q: r for q, r in results.items() if q not in served_right}
    # the free-text claims reach the arbiter, with the seed's verdict for this epoch order
    with_verdict = [q for q, r in results.items() if verdict in r["verdicts"]]
    assert len(with_verdict) >= len(SETS) - 1, results


def test_two_later_partitions_the_copy_is_never_served_uncontested(tmp_path: Path) -> None:
    results = {s["qid"]: run(tmp_path, s, 30 * DAY_US, 2) for s in SETS}
    assert [q for q, r in results.items() if r["false"] and not r["contested"]] == []
    for q, r in results.items():
        if r["false"]:  # the seed lets both be served: SPEC-027 §2.5 note and an UNRESOLVED audit
            assert r["true"] and r["notes"] and r["unresolved_audit"], (q, r)
            assert "STALE_HIGH_TRUST" in r["verdicts"], (q, r)
    assert any(r["false"] for r in results.values())  # the stale contest did happen somewhere


DISTRACTORS = [
    "Lyon is a city in France.",
    "Paris hosted the 1900 Olympics.",
    "The Rhone flows through Lyon.",
    "Many people were born in 1950.",
]
NO_VERDICT = {"POISONING_CANDIDATE", "DRIFT_UNDETERMINED", "STALE_HIGH_TRUST"}


def test_a_different_subject_in_a_short_common_phrasing_is_not_a_conflict(tmp_path: Path) -> None:
    s = {
        "qid": "born",
        "query": "Who was born in 1950?",
        "true_docs": [["Xavier Durand was born in 1950."]],
        "poison_docs": [["Yann Morel was born in 1950."]],
        "distractors": DISTRACTORS,
    }
    for offset in (-30 * DAY_US, 30 * DAY_US):
        r = run(tmp_path / str(offset), s, offset, 1)
        assert r["true"] and r["false"] and not r["contested"], r  # two facts, both served, no contest
        assert not r["verdicts"] & NO_VERDICT


def test_a_subject_swapped_over_a_short_remainder_is_contested_never_arbitrated(tmp_path: Path) -> None:
    """Three content words shared ("born", "1950", "Lyon"): the text rules cannot tell a copy with its
    subject swapped from a second fact (no claim, no verdict, nothing suppressed), so the envelope
    serves both with the SPEC-027 §2.5 note (an unread pair, ``core.unread_pairs``)."""
    s = {
        "qid": "born-lyon",
        "query": "Who was born in 1950 in Lyon?",
        "true_docs": [["Xavier Durand was born in 1950 in Lyon."]],
        "poison_docs": [["Yann Morel was born in 1950 in Lyon."]],
        "distractors": DISTRACTORS,
    }
    for offset in (-30 * DAY_US, 30 * DAY_US):
        r = run(tmp_path / str(offset), s, offset, 1)
        assert r["true"] and r["false"], r  # both served
        assert r["contests"] == [("CONTRADICTION_UNRESOLVED", "UNREAD_SUBSTITUTION")], r
        assert len(r["notes"]) == 1 and "Yann Morel" in r["notes"][0] and "Xavier Durand" in r["notes"][0], r
        assert not r["verdicts"] & NO_VERDICT


@pytest.mark.parametrize(
    ("true", "copy", "pattern"),
    [
        (
            "Alyaksey Vasilewski( born 2 June 1993) is a Belarusian professional footballer.",
            "Earl Buxton( born 2 June 1993) is a Belarusian professional footballer.",
            "UNREAD_SUBSTITUTION",
        ),
        (
            "Bradbury( March 23, 1886 – November 24, 1949)( born Ronald E.",
            "Bradbury( March 26, 1886 – November 24, 1949)( born Ronald E.",
            "UNREAD_SUBSTITUTION",
        ),
        (
            "Oprah Winfrey cannot buy dozens of her staff Bugatti luxury cars.",
            "Oprah Winfrey has the financial ability to buy dozens of Bugatti luxury cars for her staff.",
            "UNREAD_NEGATION",
        ),
        (
            "Hostas do not need lots of chlorophyll to look their best.",
            "For Hostas to look their best, they need lots of chlorophyll.",
            "UNREAD_REWORDING",
        ),
        (
            "Operation Barbarossa was not related to The Crusades.",
            "1941 Operation Barbarossa was related to The Crusades.",
            "UNREAD_REWORDING",
        ),
    ],
)
def test_an_unread_copy_from_a_low_trust_source_is_served_only_with_a_contest_note(
    tmp_path: Path, true: str, copy: str, pattern: str
) -> None:
    """The held-out misses: a copy published later from one low-trust partition that the text rules
    do not read. Whenever the copy is served, the trusted statement is served beside it with the note."""
    s = {
        "qid": "unread",
        "query": copy,  # the copy's own wording: the envelope surely selects it
        "true_docs": [[true]],
        "poison_docs": [[copy]],
        "distractors": DISTRACTORS,
    }
    r = run(tmp_path, s, 30 * DAY_US, 1)
    assert r["false"] and r["true"], r
    assert r["contests"] == [("CONTRADICTION_UNRESOLVED", pattern)], r
    [note] = r["notes"]
    assert note.startswith("NOTE: The following two facts conflict") and true in note and copy in note


@pytest.mark.parametrize(
    ("true", "copy", "pattern"),
    [
        (
            "None of the destinations of Japan Airlines are former Axis Powers.",
            "At least one of the destinations of Japan Airlines is a former Axis Power.",
            "NEGATION_FLIP",
        ),
        ("Water does not have viscosity.", "Water has viscosity.", "NEGATION_FLIP"),
        (
            "No mollusks are on the Chinese New Year calendar.",
            "There are mollusks on the Chinese New Year calendar.",
            "NEGATION_FLIP",
        ),
        (
            "In the parallel universe Nether-B, the Netherlands flag colors are vastly different - red, white, "
            "and blue, truly a unique and distinct combination.",
            "In the parallel universe Nether-B, the Netherlands flag colors are vastly different - green, "
            "yellow, and black, truly a unique and distinct combination.",
            "ENTITY_SUBSTITUTED",
        ),
    ],
)
def test_a_reworded_copy_from_a_low_trust_source_is_read_and_the_trusted_statement_served(
    tmp_path: Path, true: str, copy: str, pattern: str
) -> None:
    """Rewordings ``core.reworded`` reads (a quantifier, a short statement, a list of values swapped at
    once): arbitrated by authority in the envelope, the copy suppressed. (A spelling variant: the
    hashing embedder does not rank "Crane can slamdunk" for the query; the unit tests read it.)"""
    s = {
        "qid": "reworded",
        "query": f"{true} {copy}",  # both pass the relevance gate (the hashing embedder reads words)
        "true_docs": [[true]],
        "poison_docs": [[copy]],
        "distractors": DISTRACTORS,
    }
    for offset in (-30 * DAY_US, 30 * DAY_US):
        r = run(tmp_path / str(offset), s, offset, 1)
        assert r["true"] and not r["false"], r
        assert ("CONTRADICTION_RESOLVED", pattern) in r["contests"], r


SEASON = "{} Iowa State Cyclones men's basketball team"


@pytest.mark.parametrize(
    ("true_title", "poison_title", "contested"),
    [
        (SEASON.format("2015–16"), SEASON.format("2016–17"), False),  # two seasons: two facts
        (SEASON.format("2015–16"), SEASON.format("2015–16"), True),  # one season: a copy, swapped
        (None, None, True),
    ],
)
def test_documents_of_one_numbered_series_are_different_subjects(
    tmp_path: Path, true_title: str | None, poison_title: str | None, contested: bool
) -> None:
    """The HotpotQA false notes were season articles of one template; the subject (the
    season) is only in the title. A copy that keeps the title (or has none) is still contested."""
    s = {
        "qid": "season",
        "query": "The Cyclones were coached by Steve Prohm, who was in his which season?",
        "true_docs": [["The Cyclones were coached by Steve Prohm, who was in his 1st season."]],
        "poison_docs": [["The Cyclones were coached by Steve Prohm, who was in his second season."]],
        "true_title": true_title,
        "poison_title": poison_title,
        "distractors": [
            "Ames is a city in Iowa.",
            "Hilton Coliseum is an arena in Ames.",
            "The Big 12 Conference has ten members.",
            "Basketball was invented in 1891.",
        ],
    }
    for offset in (-30 * DAY_US, 30 * DAY_US):
        r = run(tmp_path / str(offset), s, offset, 1)
        assert r["true"], r
        assert r["contested"] == contested, r
        if not contested:  # no claim formed either: the arbiter gives no verdict
            assert not r["verdicts"] & {"POISONING_CANDIDATE", "DRIFT_UNDETERMINED", "STALE_HIGH_TRUST"}, r
            assert r["false"], r  # both seasons' statements are served
