"""Drive the whole embedded pipeline with chosen log-append times, for the arbiter scenarios.

``Pipeline`` is ``crp_stream.testing.Pipeline`` with the scenarios' settings: a test publishes more
records (operator commands) and looks at the fabric between steps.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from crp_stream import testing
from crp_stream.config import Settings
from crp_stream.processors.base import dt_to_us

DAY_US = 86_400 * 1_000_000
NOW_US = dt_to_us(datetime(2026, 11, 13, tzinfo=UTC))
TRUST = {"vendor_docs": 0.9, "field_telemetry": 0.4, "community_notes": 0.2}
SUBJECT, ATTRIBUTE = "upstream api", "rate limit"

Input = tuple[str, str | None, int, bytes]


def iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def settings(tmp_path: Path, **kw: Any) -> Settings:
    trust = kw.pop("trust", dict(TRUST))
    return Settings(data_dir=tmp_path, embedder="hashing", trust=trust, **kw)


def document(
    source: str,
    source_type: str,
    event_id: str,
    value: str,
    *,
    document_id: str | None = None,
    subject: str = SUBJECT,
    attribute: str = ATTRIBUTE,
    unit: str = "rps",
    **extra: Any,
) -> dict[str, Any]:
    text = f"The {subject} {attribute} is {value} {unit}."
    return {
        "event_id": event_id,
        "source": source,
        "source_type": source_type,
        "document_id": document_id or event_id,
        "facts": [{"text": text, "subject": subject, "attribute": attribute, "value": value, "unit": unit}],
        **extra,
    }


def telemetry(
    event_id: str,
    value: str,
    at_us: int,
    *,
    source: str = "field_telemetry",
    subject: str = SUBJECT,
    attribute: str = ATTRIBUTE,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "source": source,
        "observed_at": iso(at_us),
        "subject": subject,
        "attribute": attribute,
        "value": value,
        "unit": "rps",
        **extra,
    }


def rec(topic: str, value: dict[str, Any], ts_us: int, key: str | None = None) -> Input:
    return (
        topic,
        key if key is not None else value.get("source"),
        ts_us,
        json.dumps(value, separators=(",", ":")).encode(),
    )


def seed_incident(**telemetry_extra: Any) -> list[Input]:
    """The seed's incident: vendor_docs (0.9) says 1000 rps, refreshed four months ago; 47 of 50
    field_telemetry records (0.4) say 250 rps two weeks ago; community_notes (0.2) says 250."""
    out = [
        rec(
            "crp.documents",
            document("vendor_docs", "official", "vendor-1", "1000", document_id="limits"),
            NOW_US - 120 * DAY_US,
        )
    ]
    for i in range(3):
        t = NOW_US - 20 * DAY_US + i * 1_000_000
        out.append(rec("crp.telemetry", telemetry(f"tele-old-{i}", "1000", t, **telemetry_extra), t))
    for i in range(47):
        t = NOW_US - 14 * DAY_US + i * 1_000_000
        out.append(rec("crp.telemetry", telemetry(f"tele-{i:02d}", "250", t, **telemetry_extra), t))
    out.append(
        rec("crp.documents", document("community_notes", "community", "community-1", "250"), NOW_US - 10 * DAY_US)
    )
    return out


class Pipeline(testing.Pipeline):
    """``crp_stream.testing.Pipeline`` with the scenarios' settings and operator shortcuts."""

    def __init__(self, tmp_path: Path, **settings_kw: Any):
        super().__init__(settings(tmp_path, **settings_kw))
        self.records = self.outputs

    def command(
        self,
        command: str,
        target_id: str,
        ts_us: int,
        actor: str | None = "alice",
        command_id: str | None = None,
        **extra: Any,
    ) -> Pipeline:
        value: dict[str, Any] = {
            "command_id": command_id or f"cmd-{command}-{target_id}-{ts_us}",
            "command": command,
            "target_id": target_id,
            **extra,
        }
        if actor is not None:
            value["actor"] = actor
        return self.feed([rec("crp.operator.commands", value, ts_us, key="ops")])

    def audits(self, audit_type: str) -> list[dict[str, Any]]:
        return [a for a in self.out("crp.audit") if a["audit_type"] == audit_type]

    def statuses(self, source: str) -> dict[str, str]:
        with self.uow() as uow:
            return {f["fact_id"]: f["status"] for f in uow.repo.all_facts() if f["source"] == source}

    def claim(self, subject: str = SUBJECT, attribute: str = ATTRIBUTE) -> dict[str, Any] | None:
        from crp_stream.core.claim_values import claim_key

        with self.uow() as uow:
            return uow.repo.get_claim(claim_key(subject, attribute))
