"""The arbiter's cases (seed 002), replayed through the embedded runtime with chosen log-append times."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crp_stream.testing import replay as replay_records
from tests.support.arbiter import (
    DAY_US,
    NOW_US,
    Pipeline,
    document,
    rec,
    seed_incident,
    settings,
    telemetry,
)


@pytest.fixture
def pipe(tmp_path: Path) -> Iterator[Pipeline]:
    p = Pipeline(tmp_path)
    yield p
    p.close()


def _lines(lines: list[str], topic: str) -> list[dict]:
    return [json.loads(line)["value"] for line in lines if json.loads(line)["topic"] == topic]


def poisoning_inputs(same_epoch: bool = False, **extra: object) -> list:
    """Low-trust records older than (or as old as) the trusted vendor record, which says 1000 rps."""
    t_low = NOW_US - 30 * DAY_US
    t_vendor = t_low if same_epoch else NOW_US - 5 * DAY_US
    return [
        rec("crp.telemetry", telemetry("bad-1", "250", t_low, **extra), t_low),
        rec("crp.telemetry", telemetry("bad-2", "250", t_low, **extra), t_low),
        rec("crp.documents", document("community_notes", "community", "cn-bad", "250", **extra), t_low),
        rec("crp.documents", document("vendor_docs", "official", "vendor-1", "1000"), t_vendor),
    ]


# --- the seed's incident ------------------------------------------------------------------------------


def test_seed_incident_replay_gives_stale_high_trust_and_one_refresh_request(tmp_path: Path) -> None:
    lines = replay_records(seed_incident(), settings(tmp_path / "s"), tmp_path / "w")
    requests = _lines(lines, "crp.refresh.requests")
    assert len(requests) == 1
    req = requests[0]
    assert req["source"] == "vendor_docs"
    assert (req["stale_value"], req["observed_value"]) == ("1000 rps", "250 rps")
    assert req["corroborating_partitions"] == 1
    assert len(req["evidence"]) == 48  # 47 telemetry + 1 community record
    assert req["high_trust_epoch"] < req["divergent_epoch"]
    assert _lines(lines, "crp.quarantine.candidates") == []
    audits = [a["audit_type"] for a in _lines(lines, "crp.audit")]
    assert "STALE_HIGH_TRUST" in audits and "REFRESH_REQUESTED" in audits
    assert "FACT_QUARANTINED" not in audits and "POISONING_CANDIDATE" not in audits
    stale = [v for v in _lines(lines, "crp.facts") if v["type"] == "FactStatusChanged"]
    assert [v["status"] for v in stale] == ["stale"]
    # same input, same bytes
    again = replay_records(seed_incident(), settings(tmp_path / "s"), tmp_path / "w2")
    assert again == lines


def test_seed_incident_marks_vendor_facts_stale_and_never_quarantines(pipe: Pipeline) -> None:
    pipe.feed(seed_incident())
    assert set(pipe.statuses("vendor_docs").values()) == {"stale"}
    assert "quarantined" not in pipe.statuses("field_telemetry").values()
    claim = pipe.claim()
    assert claim is not None and claim["verdict"] == "STALE_HIGH_TRUST"
    assert claim["details"]["high_trust_source"] == "vendor_docs"
    with pipe.uow() as uow:
        assert [r["source"] for r in uow.repo.refresh_requests("open")] == ["vendor_docs"]
        assert uow.repo.candidates() == []
        assert uow.vectors.get_vectors(list(pipe.statuses("vendor_docs")))  # still indexed, as stale


# --- poisoning ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("same_epoch", [False, True], ids=["older", "as-old"])
def test_poisoning_gives_candidates_and_no_quarantine_without_confirm(pipe: Pipeline, same_epoch: bool) -> None:
    pipe.feed(poisoning_inputs(same_epoch))
    claim = pipe.claim()
    assert claim is not None and claim["verdict"] == "POISONING_CANDIDATE"
    cands = pipe.out("crp.quarantine.candidates")
    assert sorted(c["source"] for c in cands) == ["community_notes", "field_telemetry"]
    assert all(c["value"] == "250 rps" for c in cands)
    assert len(pipe.audits("POISONING_CANDIDATE")) == 2
    assert pipe.out("crp.refresh.requests") == []
    assert pipe.audits("FACT_QUARANTINED") == []
    for source in ("field_telemetry", "community_notes", "vendor_docs"):
        assert set(pipe.statuses(source).values()) == {"active"}
    with pipe.uow() as uow:
        assert {c["status"] for c in uow.repo.candidates()} == {"pending"}


# --- no corroboration ---------------------------------------------------------------------------------


def test_no_corroboration_gives_drift_undetermined_and_nothing_else(pipe: Pipeline) -> None:
    t0 = NOW_US - 60 * DAY_US
    inputs = [rec("crp.documents", document("vendor_docs", "official", "vendor-1", "1000"), t0)]
    inputs += [rec("crp.telemetry", telemetry(f"t{i}", "250", NOW_US + i), NOW_US + i) for i in range(5)]
    pipe.feed(inputs)
    undetermined = pipe.audits("DRIFT_UNDETERMINED")
    assert len(undetermined) == 1
    details = undetermined[0]["details"]
    assert "uncorroborated" in details["reason"] and "refuses to act" in details["reason"]
    assert details["divergent_sources"] == ["field_telemetry"]
    assert pipe.out("crp.refresh.requests") == [] and pipe.out("crp.quarantine.candidates") == []
    assert pipe.out("crp.facts", "FactStatusChanged") == []
    assert {a["audit_type"] for a in pipe.out("crp.audit")} == {"DRIFT_UNDETERMINED"}
    assert pipe.out("crp.deadletter") == []


# --- epoch spoofing -----------------------------------------------------------------------------------


SPOOF = {
    "epoch": "2030-01-01T00:00:00Z",
    "ingested_at": "2030-01-01T00:00:00Z",
    "timestamp": 1893456000,
    "ingestion_epoch": 1893456000,
}


def _verdict_outputs(p: Pipeline) -> list:
    return [p.out(t) for t in ("crp.refresh.requests", "crp.quarantine.candidates", "crp.audit")]


def test_epoch_spoofing_in_the_payload_changes_nothing(tmp_path: Path) -> None:
    plain = Pipeline(tmp_path / "plain").feed(poisoning_inputs())
    spoofed = Pipeline(tmp_path / "spoofed").feed(poisoning_inputs(**SPOOF))
    try:
        assert spoofed.claim()["verdict"] == plain.claim()["verdict"] == "POISONING_CANDIDATE"  # type: ignore[index]
        assert _verdict_outputs(spoofed) == _verdict_outputs(plain)
        # the producer's observed_at / modified_at claims feed recency, never the epoch
        facts = spoofed.out("crp.facts", "FactRecorded")
        assert {f["epoch"] for f in facts if f["source"] != "vendor_docs"} == {"2026-10-14T00:00:00.000000Z"}
    finally:
        plain.close()
        spoofed.close()


def test_spoofed_modified_at_and_observed_at_do_not_make_poison_fresher(pipe: Pipeline) -> None:
    late = "2030-01-01T00:00:00Z"
    t_low = NOW_US - 30 * DAY_US
    tele = telemetry("bad-1", "250", t_low)
    tele["observed_at"] = late
    pipe.feed(
        [
            rec("crp.telemetry", tele, t_low),
            rec("crp.documents", document("community_notes", "community", "cn", "250", modified_at=late), t_low),
            rec("crp.documents", document("vendor_docs", "official", "vendor-1", "1000"), NOW_US),
        ]
    )
    assert pipe.claim()["verdict"] == "POISONING_CANDIDATE"  # type: ignore[index]
    assert pipe.out("crp.refresh.requests") == []


# --- refresh resolves ---------------------------------------------------------------------------------


def test_refresh_resolves_when_vendor_publishes_the_new_value(pipe: Pipeline) -> None:
    pipe.feed(seed_incident())
    [req] = pipe.out("crp.refresh.requests")
    pipe.feed(
        [
            rec(
                "crp.documents",
                document("vendor_docs", "official", "vendor-2", "250", document_id="limits"),
                NOW_US + DAY_US,
            )
        ]
    )
    resolved = pipe.audits("REFRESH_RESOLVED")
    assert len(resolved) == 1
    assert resolved[0]["details"]["request_id"] == req["request_id"]
    assert resolved[0]["details"]["resolved_by"] == "arbiter"
    claim = pipe.claim()
    assert claim is not None and claim["verdict"] == "CONSENSUS_OK"
    assert claim["details"]["high_trust_value"] == "250 rps"
    with pipe.uow() as uow:
        assert uow.repo.refresh_requests("open") == []
        assert uow.repo.refresh_request(req["request_id"])["resolved_by"] == "arbiter"
    assert len(pipe.out("crp.refresh.requests")) == 1
    # the new version is active; the old 1000 rps record stays out of the way (ingest supersedes only
    # active sentences, so it keeps its stale status) and no longer speaks for vendor_docs
    assert sorted(pipe.statuses("vendor_docs").values()) == ["active", "stale"]


def test_refresh_resolves_with_a_new_vendor_document_too(pipe: Pipeline) -> None:
    pipe.feed(seed_incident())
    pipe.feed(
        [
            rec(
                "crp.documents",
                document("vendor_docs", "official", "vendor-3", "250 req/s", unit="rps"),
                NOW_US + DAY_US,
            )
        ]
    )
    assert len(pipe.audits("REFRESH_RESOLVED")) == 1
    assert pipe.claim()["verdict"] == "CONSENSUS_OK"  # type: ignore[index]
    # the old 1000 rps record stays stale: it no longer speaks for vendor_docs
    assert sorted(pipe.statuses("vendor_docs").values()) == ["active", "stale"]


# --- idempotency --------------------------------------------------------------------------------------


def test_repeating_inputs_files_no_second_request(pipe: Pipeline) -> None:
    inputs = seed_incident()
    pipe.feed(inputs)
    n_out = len(pipe.records)
    later = NOW_US + 1_000_000
    pipe.feed([(t, k, later, raw) for t, k, _ts, raw in inputs[-5:]])  # redelivered records
    assert len(pipe.records) == n_out
    # a new corroborating record (new event) changes nothing the arbiter does either
    pipe.feed([rec("crp.telemetry", telemetry("tele-new", "250", later), later)])
    assert len(pipe.out("crp.refresh.requests")) == 1
    assert len(pipe.audits("STALE_HIGH_TRUST")) == 1
    assert [r.topic for r in pipe.records[n_out:]] == ["crp.facts"]  # only the FactRecorded


def test_repeating_poisoning_inputs_files_no_second_candidate(pipe: Pipeline) -> None:
    inputs = poisoning_inputs()
    pipe.feed(inputs)
    pipe.feed([(t, k, NOW_US, raw) for t, k, _ts, raw in inputs])
    pipe.feed([rec("crp.documents", document("community_notes", "community", "cn-bad-copy", "250"), NOW_US)])
    assert len(pipe.out("crp.quarantine.candidates")) == 2
    with pipe.uow() as uow:
        assert len(uow.repo.candidates()) == 2


# --- operator workflow --------------------------------------------------------------------------------


def test_confirm_then_release_round_trip_with_actor_in_audit(pipe: Pipeline) -> None:
    pipe.feed(poisoning_inputs())
    tele = next(c for c in pipe.out("crp.quarantine.candidates") if c["source"] == "field_telemetry")
    pipe.command("confirm_quarantine", tele["candidate_id"], NOW_US, actor="alice", reason="looks injected")
    assert set(pipe.statuses("field_telemetry").values()) == {"quarantined"}
    [q] = pipe.audits("FACT_QUARANTINED")
    assert q["details"]["actor"] == "alice" and q["details"]["reason"] == "looks injected"
    assert sorted(q["details"]["fact_ids"]) == sorted(tele["fact_ids"])
    changed = pipe.out("crp.facts", "FactStatusChanged")
    assert {c["status"] for c in changed} == {"quarantined"} and len(changed) == 2
    with pipe.uow() as uow:
        assert uow.repo.candidate(tele["candidate_id"])["decided_by"] == "alice"

    pipe.command("release_quarantine", tele["candidate_id"], NOW_US + 1, actor="bob")
    assert set(pipe.statuses("field_telemetry").values()) == {"active"}
    [r] = pipe.audits("QUARANTINE_RELEASED")
    assert r["details"]["actor"] == "bob" and sorted(r["details"]["fact_ids"]) == sorted(tele["fact_ids"])
    with pipe.uow() as uow:
        assert uow.repo.candidate(tele["candidate_id"])["status"] == "released"
        history = [a["audit_type"] for a in uow.repo.audit(limit=1000)]
    assert history.count("FACT_QUARANTINED") == 1 and history.count("QUARANTINE_RELEASED") == 1
    # the released facts are again a poisoning candidate, but the decided candidate is not refiled
    assert len(pipe.out("crp.quarantine.candidates")) == 2
    assert pipe.out("crp.deadletter") == []


def test_release_a_single_fact(pipe: Pipeline) -> None:
    pipe.feed(poisoning_inputs())
    tele = next(c for c in pipe.out("crp.quarantine.candidates") if c["source"] == "field_telemetry")
    pipe.command("confirm_quarantine", tele["candidate_id"], NOW_US)
    fid = tele["fact_ids"][0]
    pipe.command("release_quarantine", fid, NOW_US + 1, actor="carol")
    assert pipe.statuses("field_telemetry")[fid] == "active"
    assert pipe.audits("QUARANTINE_RELEASED")[0]["details"]["fact_ids"] == [fid]


def test_operator_resolves_a_refresh_request(pipe: Pipeline) -> None:
    pipe.feed(seed_incident())
    [req] = pipe.out("crp.refresh.requests")
    pipe.command("resolve_refresh", req["request_id"], NOW_US, actor="dana", reason="vendor ticket filed")
    [res] = pipe.audits("REFRESH_RESOLVED")
    assert res["details"]["actor"] == "dana" and res["details"]["reason"] == "vendor ticket filed"
    with pipe.uow() as uow:
        assert uow.repo.refresh_request(req["request_id"])["status"] == "resolved"
    pipe.command("resolve_refresh", req["request_id"], NOW_US + 1, actor="dana", command_id="again")
    [dead] = pipe.out("crp.deadletter")
    assert "already resolved by dana" in dead["reason"]


@pytest.mark.parametrize("actor", [None, "   "], ids=["missing", "blank"])
def test_command_without_actor_is_dead_lettered(pipe: Pipeline, actor: str | None) -> None:
    pipe.feed(poisoning_inputs())
    cand = pipe.out("crp.quarantine.candidates")[0]
    pipe.command("confirm_quarantine", cand["candidate_id"], NOW_US, actor=actor)
    [dead] = pipe.out("crp.deadletter")
    assert dead["topic"] == "crp.operator.commands" and "actor" in dead["reason"]
    assert pipe.audits("FACT_QUARANTINED") == []
    assert "quarantined" not in pipe.statuses(cand["source"]).values()
    assert pipe.audits("EVENT_REJECTED")


def test_unknown_target_is_rejected_with_reason(pipe: Pipeline) -> None:
    pipe.command("confirm_quarantine", "no-such-candidate", NOW_US)
    pipe.command("resolve_refresh", "no-such-request", NOW_US)
    pipe.command("release_quarantine", "no-such-thing", NOW_US)
    reasons = [d["reason"] for d in pipe.out("crp.deadletter")]
    assert reasons == [
        "target_id: no quarantine candidate 'no-such-candidate'",
        "target_id: no refresh request 'no-such-request'",
        "target_id: no quarantine candidate or fact 'no-such-thing'",
    ]


def test_auto_quarantine_policy_quarantines_and_says_so(tmp_path: Path) -> None:
    pipe = Pipeline(tmp_path, auto_quarantine=True)
    try:
        pipe.feed(poisoning_inputs())
        assert set(pipe.statuses("field_telemetry").values()) == {"quarantined"}
        assert set(pipe.statuses("community_notes").values()) == {"quarantined"}
        assert set(pipe.statuses("vendor_docs").values()) == {"active"}
        quarantined = pipe.audits("FACT_QUARANTINED")
        assert len(quarantined) == 2
        assert all(q["details"]["policy"] == "auto-quarantine policy" for q in quarantined)
        assert all("auto-quarantine policy" in a["details"]["action"] for a in pipe.audits("POISONING_CANDIDATE"))
        claim = pipe.claim()
        assert claim is not None and claim["verdict"] == "CONSENSUS_OK"
        # releasing undoes the policy's decision, and the policy does not quarantine it again
        cand = pipe.out("crp.quarantine.candidates")[0]
        pipe.command("release_quarantine", cand["candidate_id"], NOW_US, actor="erin")
        assert set(pipe.statuses(cand["source"]).values()) == {"active"}
        assert len(pipe.audits("FACT_QUARANTINED")) == 2
    finally:
        pipe.close()


def test_auto_quarantine_never_applies_to_drift(tmp_path: Path) -> None:
    pipe = Pipeline(tmp_path, auto_quarantine=True)
    try:
        pipe.feed(seed_incident())
        assert pipe.audits("FACT_QUARANTINED") == []
        assert pipe.claim()["verdict"] == "STALE_HIGH_TRUST"  # type: ignore[index]
    finally:
        pipe.close()


def test_withdrawn_corroboration_brings_the_trusted_value_back(pipe: Pipeline) -> None:
    """After STALE_HIGH_TRUST the corroborating partition corrects itself (its document now agrees
    with vendor_docs): the verdict falls back to DRIFT_UNDETERMINED, the arbiter refuses to act, and
    the high-trust records it had marked stale return to active."""
    t0 = NOW_US - 60 * DAY_US
    pipe.feed(
        [
            rec("crp.documents", document("vendor_docs", "official", "vendor-1", "1000"), t0),
            rec("crp.telemetry", telemetry("t1", "250", NOW_US - DAY_US), NOW_US - DAY_US),
            rec("crp.documents", document("community_notes", "community", "cn-1", "250", document_id="notes"), NOW_US),
        ]
    )
    assert pipe.claim()["verdict"] == "STALE_HIGH_TRUST"  # type: ignore[index]
    assert set(pipe.statuses("vendor_docs").values()) == {"stale"}
    pipe.feed(
        [
            rec(
                "crp.documents",
                document("community_notes", "community", "cn-2", "1000", document_id="notes"),
                NOW_US + DAY_US,
            )
        ]
    )
    assert pipe.claim()["verdict"] == "DRIFT_UNDETERMINED"  # type: ignore[index]
    assert set(pipe.statuses("vendor_docs").values()) == {"active"}
    assert len(pipe.audits("DRIFT_UNDETERMINED")) == 1
    with pipe.uow() as uow:  # the request stays open: the vendor did not refresh, an operator decides
        assert len(uow.repo.refresh_requests("open")) == 1


# --- claims without subject/attribute -----------------------------------------------------------------


def _text_doc(source: str, source_type: str, event_id: str, value: str) -> dict:
    text = f"The documented rate limit of the upstream billing API for a single account is {value} requests per second."
    return {"event_id": event_id, "source": source, "source_type": source_type, "document_id": event_id, "text": text}


def test_text_facts_form_a_claim_by_similarity_and_value_conflict(pipe: Pipeline) -> None:
    pipe.feed(
        [
            rec("crp.documents", _text_doc("vendor_docs", "official", "v1", "1000"), NOW_US - 120 * DAY_US),
            rec("crp.documents", _text_doc("field_telemetry", "telemetry", "f1", "250"), NOW_US - 14 * DAY_US),
            rec("crp.documents", _text_doc("community_notes", "community", "c1", "250"), NOW_US - 10 * DAY_US),
        ]
    )
    [req] = pipe.out("crp.refresh.requests")
    assert req["source"] == "vendor_docs" and req["attribute"] == "statement"
    assert "1000" in str(req["stale_value"]) and "250" in str(req["observed_value"])
    assert set(pipe.statuses("vendor_docs").values()) == {"stale"}
    assert pipe.out("crp.quarantine.candidates") == []
    with pipe.uow() as uow:
        keys = {f["claim_key"] for f in uow.repo.all_facts()}
    assert len(keys) == 1 and next(iter(keys)).startswith("sim:")


def test_unrelated_text_facts_form_no_claim(pipe: Pipeline) -> None:
    doc = {"event_id": "w", "source": "community_notes", "source_type": "community", "text": "Paris is sunny."}
    pipe.feed(
        [
            rec("crp.documents", _text_doc("vendor_docs", "official", "v1", "1000"), NOW_US - DAY_US),
            rec("crp.documents", doc, NOW_US),
        ]
    )
    assert pipe.out("crp.audit") == [] and pipe.out("crp.refresh.requests") == []
    with pipe.uow() as uow:
        assert {f["claim_key"] for f in uow.repo.all_facts()} == {None}


# --- the verdicts govern retrieval --------------------------------------------------------------------


def _ask(p: Pipeline, ts: int) -> list[dict]:
    request = {
        "request_id": "r1",
        "session_id": "s1",
        "window": 1,
        "query": {"text": "What is the rate limit of the upstream api?"},
        "sub_queries": [{"id": "q1", "text": "upstream api rate limit"}],
    }
    p.feed([rec("crp.window.requests", request, ts, key="s1")])
    [envelope] = p.out("crp.envelopes")
    return [f["text"] for f in envelope["facts"]]


def test_seed_incident_envelope_carries_250_not_1000(pipe: Pipeline) -> None:
    pipe.feed(seed_incident())
    texts = _ask(pipe, NOW_US + 1)
    assert any("250 rps" in t for t in texts)
    assert not any("1000" in t for t in texts)


def test_poisoning_envelope_serves_the_trusted_value(pipe: Pipeline) -> None:
    pipe.feed(poisoning_inputs())
    texts = _ask(pipe, NOW_US + 1)
    assert any("1000 rps" in t for t in texts)
    assert not any("250" in t for t in texts)


def test_no_corroboration_envelope_serves_the_trusted_value_with_the_conflict_logged(pipe: Pipeline) -> None:
    t0 = NOW_US - 60 * DAY_US
    pipe.feed(
        [rec("crp.documents", document("vendor_docs", "official", "vendor-1", "1000"), t0)]
        + [rec("crp.telemetry", telemetry(f"t{i}", "250", NOW_US + i), NOW_US + i) for i in range(5)]
    )
    texts = _ask(pipe, NOW_US + DAY_US)
    assert any("1000 rps" in t for t in texts)
    assert not any("250" in t for t in texts)
    [logged] = pipe.audits("DRIFT_UNDETERMINED")  # the conflict, logged by the arbiter
    assert (logged["details"]["high_trust_value"], logged["details"]["divergent_value"]) == ("1000 rps", "250 rps")


def test_a_lagging_low_trust_source_after_a_vendor_refresh_is_filed_for_review_with_its_reason(
    pipe: Pipeline,
) -> None:
    """The vendor said 1000 rps, then refreshed to 250; community notes keep saying 1000 after the
    vendor's first record but before its refresh. Not fresher than the vendor, no corroboration:
    the seed's boundary files a poisoning candidate for review, never settles it by itself. Its
    reason says the value is the vendor's own earlier one; nothing is quarantined; 250 is served."""
    pipe.feed(
        [
            rec(
                "crp.documents",
                document("vendor_docs", "official", "v1", "1000", document_id="limits"),
                NOW_US - 60 * DAY_US,
            ),
            rec("crp.documents", document("community_notes", "community", "c1", "1000"), NOW_US - 30 * DAY_US),
            rec("crp.documents", document("vendor_docs", "official", "v2", "250", document_id="limits"), NOW_US),
        ]
    )
    assert pipe.claim()["verdict"] == "POISONING_CANDIDATE"  # type: ignore[index]
    [candidate] = pipe.out("crp.quarantine.candidates")
    assert candidate["source"] == "community_notes" and candidate["value"] == "1000 rps"
    assert "Lagging behind a refresh? vendor_docs itself asserted '1000 rps' until" in candidate["reason"]
    [audit] = pipe.audits("POISONING_CANDIDATE")
    assert audit["details"]["action"] == "quarantine review: an operator must confirm_quarantine"
    assert "release the candidate if so" in audit["details"]["reason"]
    assert set(pipe.statuses("community_notes").values()) == {"active"}  # divergence alone never quarantines
    texts = _ask(pipe, NOW_US + DAY_US)
    assert any("250 rps" in t for t in texts) and not any("1000" in t for t in texts)
