"""``acknowledge_refresh`` and ``reject_refresh`` (the console's refresh buttons) on the seed's
incident, through the whole embedded pipeline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.arbiter import DAY_US, NOW_US, Pipeline, document, rec, seed_incident


@pytest.fixture
def pipe(tmp_path: Path) -> Iterator[Pipeline]:
    p = Pipeline(tmp_path)
    p.feed(seed_incident())
    yield p
    p.close()


def test_acknowledge_is_audited_and_keeps_the_request_open_for_the_arbiter(pipe: Pipeline) -> None:
    [req] = pipe.out("crp.refresh.requests")
    pipe.command("acknowledge_refresh", req["request_id"], NOW_US, actor="erin", reason="ticket VEN-12")
    [ack] = pipe.audits("REFRESH_ACKNOWLEDGED")
    assert (ack["details"]["request_id"], ack["details"]["actor"], ack["details"]["reason"]) == (
        req["request_id"],
        "erin",
        "ticket VEN-12",
    )
    with pipe.uow() as uow:
        assert uow.repo.refresh_request(req["request_id"])["status"] == "open"  # type: ignore[index]
    assert set(pipe.statuses("vendor_docs").values()) == {"stale"}
    # the vendor catches up: the arbiter still resolves the acknowledged request
    pipe.feed(
        [
            rec(
                "crp.documents",
                document("vendor_docs", "official", "vendor-2", "250", document_id="limits"),
                NOW_US + DAY_US,
            )
        ]
    )
    [res] = pipe.audits("REFRESH_RESOLVED")
    assert res["details"]["request_id"] == req["request_id"] and res["details"]["resolved_by"] == "arbiter"


def test_reject_closes_the_request_and_returns_the_stale_facts(pipe: Pipeline) -> None:
    [req] = pipe.out("crp.refresh.requests")
    stale = sorted(f for f, s in pipe.statuses("vendor_docs").items() if s == "stale")
    assert stale
    pipe.command("reject_refresh", req["request_id"], NOW_US, actor="frank", reason="the vendor value holds")
    [rej] = pipe.audits("REFRESH_REJECTED")
    assert rej["details"]["actor"] == "frank" and rej["details"]["fact_ids"] == stale
    assert set(pipe.statuses("vendor_docs").values()) == {"active"}
    changes = [f for f in pipe.out("crp.facts", "FactStatusChanged") if f["fact_id"] in stale]
    assert changes[-1]["status"] == "active" and "the vendor value holds" in changes[-1]["reason"]
    with pipe.uow() as uow:
        row = uow.repo.refresh_request(req["request_id"])
        assert row is not None and (row["status"], row["resolved_by"]) == ("rejected", "frank")
        assert uow.repo.refresh_requests("open") == []
    # a decided request takes no further command; the reason names who decided
    pipe.command("resolve_refresh", req["request_id"], NOW_US + 1, actor="gil", command_id="late")
    pipe.command("acknowledge_refresh", req["request_id"], NOW_US + 2, actor="gil", command_id="late-ack")
    reasons = [d["reason"] for d in pipe.out("crp.deadletter")]
    assert reasons == [f"target_id: refresh request {req['request_id']!r} is already rejected by frank"] * 2


def test_unknown_request_is_rejected_for_both_commands(pipe: Pipeline) -> None:
    pipe.command("acknowledge_refresh", "nope", NOW_US)
    pipe.command("reject_refresh", "nope", NOW_US)
    assert [d["reason"] for d in pipe.out("crp.deadletter")] == ["target_id: no refresh request 'nope'"] * 2
    assert pipe.audits("REFRESH_ACKNOWLEDGED") == pipe.audits("REFRESH_REJECTED") == []
