"""Provenance that cannot be forged: signed sources, the unsigned policy, the sign command,
and the epoch, which is the log-append time whatever the payload claims."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crp_stream import cli
from crp_stream.config import Settings
from crp_stream.core.provenance import SIGNATURE_HEADER, sign_value
from crp_stream.processors.base import rfc3339
from crp_stream.replay_format import ReplayRecord
from crp_stream.runtime.embedded import open_fabric
from crp_stream.testing import replay as replay_records

MODEL = "prov-model"
T0 = 1_790_000_000 * 1_000_000
VENDOR_KEY = "vendor-docs-signing-key-0001"
TELE_KEY = "field-telemetry-key-0002"
KEYS = {"vendor_docs": VENDOR_KEY, "field_telemetry": TELE_KEY}


def vec(axis: int) -> list[float]:
    v = np.zeros(8)
    v[axis] = 1.0
    v[7] = 0.1
    return [float(x) for x in v / np.linalg.norm(v)]


def doc(event_id: str, source: str = "vendor_docs", text: str = "The limit is 1000 rps.", **kw: Any) -> bytes:
    return json.dumps(
        {
            "event_id": event_id,
            "source": source,
            "source_type": "official",
            "embedding_model": MODEL,
            "document_id": "limits",
            "facts": [{"text": text, "embedding": vec(0)}],
            **kw,
        }
    ).encode()


def tele(event_id: str, **kw: Any) -> bytes:
    return json.dumps(
        {
            "event_id": event_id,
            "source": "field_telemetry",
            "observed_at": "2026-11-01T00:00:00Z",
            "subject": "api",
            "attribute": "limit",
            "value": 250,
            "unit": "rps",
            "embedding": vec(1),
            "embedding_model": MODEL,
            **kw,
        }
    ).encode()


def signed(topic: str, raw: bytes, key: str, ts: int = T0) -> ReplayRecord:
    return (topic, "k", ts, raw, ((SIGNATURE_HEADER, sign_value(key, raw).encode()),))


def run(tmp_path: Path, records: list[ReplayRecord], **kw: Any) -> list[dict[str, Any]]:
    kw.setdefault("signing_keys", KEYS)
    s = Settings(embedder=f"precomputed:{MODEL}", **kw)
    return [json.loads(x) for x in replay_records(records, s, tmp_path / "run")]


def of(out: list[dict[str, Any]], topic: str) -> list[dict[str, Any]]:
    return [o["value"] for o in out if o["topic"] == topic]


def facts(tmp_path: Path) -> list[dict[str, Any]]:
    fabric = open_fabric(Settings(data_dir=tmp_path / "run", embedder=f"precomputed:{MODEL}"))
    try:
        with fabric.unit_of_work() as uow:
            return uow.repo.all_facts()
    finally:
        fabric.close()


def audit_rows(tmp_path: Path) -> list[dict[str, Any]]:
    fabric = open_fabric(Settings(data_dir=tmp_path / "run", embedder=f"precomputed:{MODEL}"))
    try:
        with fabric.unit_of_work() as uow:
            return uow.repo.audit()
    finally:
        fabric.close()


def test_signed_records_are_ingested_under_their_source(tmp_path: Path) -> None:
    out = run(
        tmp_path,
        [signed("crp.documents", doc("e1"), VENDOR_KEY), signed("crp.telemetry", tele("t1"), TELE_KEY, T0 + 1)],
        trust={"vendor_docs": 0.9},
    )
    assert of(out, "crp.deadletter") == []
    recorded = {f["source"]: f for f in of(out, "crp.facts")}
    assert set(recorded) == {"vendor_docs", "field_telemetry"}
    assert recorded["vendor_docs"]["trust"] == 0.9


@pytest.mark.parametrize(
    ("case", "record", "why"),
    [
        ("unsigned", ("crp.documents", "k", T0, doc("e1")), "carries no crp-signature header"),
        ("wrong key", signed("crp.documents", doc("e1"), "a-guessed-key"), "does not match"),
        (
            "tampered",
            (
                "crp.documents",
                "k",
                T0,
                doc("e1", text="The limit is 5 rps."),
                ((SIGNATURE_HEADER, sign_value(VENDOR_KEY, doc("e1")).encode()),),
            ),
            "does not match",
        ),
        ("other source's key", signed("crp.documents", doc("e1"), TELE_KEY), "does not match"),
        (
            "no key for source",
            signed("crp.documents", doc("e1", source="community"), VENDOR_KEY),
            "no signing key is configured",
        ),
        ("unsigned telemetry", ("crp.telemetry", "k", T0, tele("t1")), "carries no crp-signature header"),
    ],
)
def test_unproven_source_is_deadlettered_with_an_audit_event(
    tmp_path: Path, case: str, record: ReplayRecord, why: str
) -> None:
    good = signed("crp.documents", doc("good", text="A proven fact.", document_id="other"), VENDOR_KEY, T0 + 5)
    out = run(tmp_path, [record, good])
    dead = of(out, "crp.deadletter")
    assert len(dead) == 1, case
    source = json.loads(record[3])["source"]
    assert dead[0]["reason"].startswith(f"source {source!r} is not proven: ") and why in dead[0]["reason"]
    audits = [a for a in of(out, "crp.audit") if a["audit_type"] == "EVENT_REJECTED"]
    assert len(audits) == 1 and "is not proven" in audits[0]["details"]["reason"]
    assert [f["text"] for f in facts(tmp_path)] == ["A proven fact."]  # the next record still lands
    for k in KEYS.values():
        assert k not in json.dumps(out)


def test_untrusted_policy_ingests_in_the_unproven_partition(tmp_path: Path) -> None:
    real = signed("crp.documents", doc("real"), VENDOR_KEY)
    # a forger writes "vendor_docs" on the same document: it must neither supersede nor join it
    forged = ("crp.documents", "vendor_docs", T0 + 10, doc("forged", text="The limit is 5 rps.", trust=1.0))
    out = run(tmp_path, [real, forged], unsigned_policy="untrusted", untrusted_trust=0.05)
    assert of(out, "crp.deadletter") == []
    by_text = {f["text"]: f for f in facts(tmp_path)}
    assert by_text["The limit is 1000 rps."]["source"] == "vendor_docs"
    assert by_text["The limit is 1000 rps."]["status"] == "active"  # not superseded by the forgery
    assert by_text["The limit is 5 rps."]["source"] == "unproven"
    assert by_text["The limit is 5 rps."]["trust"] == 0.05
    audit = [a for a in of(out, "crp.audit") if a["audit_type"] == "EVENT_REJECTED"]
    assert len(audit) == 1
    d = audit[0]["details"]
    assert d["action"] == "ingested as untrusted" and d["claimed_source"] == "vendor_docs"
    assert d["recorded_source"] == "unproven" and "is not proven" in d["reason"]
    rows = audit_rows(tmp_path)  # the audit log itself keeps it too
    assert [r["details"]["action"] for r in rows if r["audit_type"] == "EVENT_REJECTED"] == ["ingested as untrusted"]


def test_without_signing_keys_every_source_is_taken_as_claimed(tmp_path: Path) -> None:
    out = run(tmp_path, [("crp.documents", "k", T0, doc("e1"))], signing_keys={})
    assert of(out, "crp.deadletter") == [] and of(out, "crp.facts")[0]["source"] == "vendor_docs"


# --- the epoch is the log-append time ---------------------------------------------------------------------

CLAIMS = {
    "epoch": "1999-01-01T00:00:00Z",
    "ingested_at": "1999-01-01T00:00:00Z",
    "timestamp": 915148800,
    "ts": "1999-01-01T00:00:00Z",
    "log_append_time": "1999-01-01T00:00:00Z",
}


def test_payload_time_claims_never_set_the_epoch(tmp_path: Path) -> None:
    d = json.loads(doc("e1"))
    d.update(CLAIMS)
    d["facts"][0].update(CLAIMS)  # on the fact too
    t = json.loads(tele("t1"))
    t.update(CLAIMS)
    headers = (("crp-epoch", b"1999-01-01T00:00:00Z"), ("timestamp", b"915148800"))
    out = run(
        tmp_path,
        [
            ("crp.documents", "k", T0, json.dumps(d).encode(), headers),
            ("crp.telemetry", "k", T0 + 7, json.dumps(t).encode(), headers),
        ],
        signing_keys={},
    )
    recorded = sorted(of(out, "crp.facts"), key=lambda f: f["epoch"])
    assert [f["epoch"] for f in recorded] == [rfc3339(T0), rfc3339(T0 + 7)]
    assert sorted(r["epoch_us"] for r in facts(tmp_path)) == [T0, T0 + 7]


def test_epoch_is_the_append_time_through_publish_and_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = json.loads(doc("e1"))
    d.update(CLAIMS)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"topic": "crp.documents", "key": "k", "value": d}) + "\n")
    monkeypatch.delenv("CRP_SIGNING_KEYS", raising=False)
    data = tmp_path / "run"
    assert cli.main(["publish", "--data", str(data), str(src)]) == 0
    assert cli.main(["run", "--until-idle", "--data", str(data), "--embedder", f"precomputed:{MODEL}"]) == 0
    from crp_stream.runtime.embedded.log import EmbeddedLog

    log_ = EmbeddedLog(data / "log.sqlite", lambda: 0)
    appended = next(log_.iter_topic("crp.documents")).ts_us
    recorded = [json.loads(r.value) for r in log_.iter_topic("crp.facts")]
    log_.close()
    assert recorded[0]["epoch"] == rfc3339(appended)
    assert [r["epoch_us"] for r in facts(tmp_path)] == [appended]
    assert appended > 1_700_000_000 * 1_000_000  # the wall clock at append, not 1999


# --- crp-stream sign ----------------------------------------------------------------------------------


def test_sign_command_output_replays_as_proven(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"topic": "crp.documents", "key": "vendor_docs", "ts": "2026-10-01T00:00:00Z", "value": json.loads(doc("e1"))},
        {
            "topic": "crp.documents",
            "key": "community",
            "ts": "2026-10-01T00:00:01Z",
            "value": json.loads(doc("e2", source="community", text="Another fact here.", document_id="c")),
        },
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    monkeypatch.setenv("VENDOR_KEY", VENDOR_KEY)
    assert cli.main(["sign", "--source", "vendor_docs", "--key-env", "VENDOR_KEY", str(src)]) == 0
    captured = capsys.readouterr()
    assert VENDOR_KEY not in captured.out + captured.err
    assert "signed 1 records" in captured.err
    signed_file = tmp_path / "signed.jsonl"
    signed_file.write_text(captured.out)
    first, second = (json.loads(x) for x in captured.out.splitlines())
    assert isinstance(first["value"], str) and len(first["headers"][SIGNATURE_HEADER]) == 64
    assert "headers" not in second  # another source's line is left as it was

    monkeypatch.setenv("CRP_SIGNING_KEYS", f"vendor_docs={VENDOR_KEY}")
    out = tmp_path / "out.jsonl"
    assert cli.main(["replay", str(signed_file), "--out", str(out), "--embedder", f"precomputed:{MODEL}"]) == 0
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["value"]["source"] for r in records if r["topic"] == "crp.facts"] == ["vendor_docs"]
    dead = [r["value"]["reason"] for r in records if r["topic"] == "crp.deadletter"]
    assert dead == ["source 'community' is not proven: no signing key is configured for it"]
    # publish carries the same bytes and header into the log
    data = tmp_path / "pub"
    assert cli.main(["publish", "--data", str(data), str(signed_file)]) == 0
    assert cli.main(["run", "--until-idle", "--data", str(data), "--embedder", f"precomputed:{MODEL}"]) == 0
    assert VENDOR_KEY not in "".join(capsys.readouterr())
    from crp_stream.runtime.embedded.log import EmbeddedLog

    log_ = EmbeddedLog(data / "log.sqlite", lambda: 0)
    sources = [json.loads(r.value)["source"] for r in log_.iter_topic("crp.facts")]
    log_.close()
    assert sources == ["vendor_docs"]


def test_sign_refuses_a_missing_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    (tmp_path / "x.jsonl").write_text("")
    assert cli.main(["sign", "--source", "s", "--key-env", "NO_SUCH_KEY_VAR", str(tmp_path / "x.jsonl")]) == 2
    assert "NO_SUCH_KEY_VAR is not set" in capsys.readouterr().err


def test_a_producer_cannot_borrow_another_records_identity(tmp_path: Path) -> None:
    """``crp-id`` names our own outputs' ids; on an input topic a producer's copy of it is ignored,
    or the second record's outputs would get the first one's ids and be dropped as duplicates."""
    from crp_stream.core.ids import derive_id

    first_cause = derive_id("crp.documents", "0", "0")
    forged = (("crp-id", first_cause.encode()),)
    out = run(
        tmp_path,
        [
            ("crp.documents", "k", T0, doc("e1")),
            ("crp.documents", "k", T0 + 1, doc("e2", text="Another fact.", document_id="x"), forged),
        ],
        signing_keys={},
    )
    assert sorted(f["origin_event_id"] for f in of(out, "crp.facts")) == ["e1", "e2"]
