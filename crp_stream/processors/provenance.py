"""Admission of documents and telemetry by proven provenance (docs/security.md).

With ``signing_keys`` configured, a record speaks for the source it names only when its
``crp-signature`` header is the HMAC-SHA256 of its value under that source's key. Otherwise:

- ``unsigned_policy = "deadletter"`` (default): ``Rejected("source 'x' is not proven: ...")``, so the
  record is dead-lettered with an EVENT_REJECTED audit event, like any other bad input;
- ``unsigned_policy = "untrusted"``: the record is ingested at ``untrusted_trust`` under the single
  provenance partition ``unproven`` (never under the source it claims: an unproven record must not
  join, supersede or refresh that source's facts), and an EVENT_REJECTED audit event with
  ``action: "ingested as untrusted"`` names the claimed source.

Without signing keys every record is admitted as it claims (the development default).
"""

from __future__ import annotations

from dataclasses import dataclass

from crp_stream import events
from crp_stream.core.ids import derive_id
from crp_stream.core.provenance import SIGNATURE_HEADER, source_is_proven
from crp_stream.events import Rejected
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors.base import Emitter, Record
from crp_stream.processors.effects import audit

UNPROVEN_SOURCE = "unproven"


@dataclass(frozen=True)
class Admission:
    event: (
        events.DocumentPublished | events.TelemetryObserved
    )  # the event to ingest (relabelled to the ``unproven`` partition when not proven)
    trust: float | None  # the trust to record instead of the configured one, or None
    unproven: str | None = None  # why the claimed source is not proven (ingested as ``unproven``)
    claimed: events.DocumentPublished | events.TelemetryObserved | None = None  # the event as sent


def admit(event: events.DocumentPublished | events.TelemetryObserved, record: Record, uow: UnitOfWork) -> Admission:
    """Check the claimed source's signature; dead-letter (raise) or downgrade an unproven record.
    Writes nothing: a downgraded record's audit event is ``audit_unproven``'s, at its write."""
    settings = uow.settings
    keys = settings.signing_keys
    if not keys:
        return Admission(event, None)
    signatures = [value for name, value in record.headers if name.lower() == SIGNATURE_HEADER]
    why = source_is_proven(keys, event.source, record.value, signatures)
    if why is None:
        return Admission(event, None)
    reason = f"source {event.source!r} is not proven: {why}"
    if settings.unsigned_policy != "untrusted":
        raise Rejected(reason)
    trust = float(settings.untrusted_trust)
    relabelled = event.model_copy(update={"source": UNPROVEN_SOURCE, "trust": None})
    return Admission(relabelled, trust, reason, event)


def audit_unproven(admission: Admission, record: Record, uow: UnitOfWork, out: Emitter) -> None:
    """The EVENT_REJECTED audit event of a record ingested as untrusted (nothing for a proven one)."""
    claimed = admission.claimed
    if admission.unproven is None or claimed is None:
        return
    audit(
        uow,
        out,
        derive_id(out.cause, "audit", "unproven"),
        "EVENT_REJECTED",
        claimed.source,
        record.ts_us,
        {
            "topic": record.topic,
            "offset": record.offset,
            "event_id": claimed.event_id,
            "reason": admission.unproven,
            "action": "ingested as untrusted",
            "claimed_source": claimed.source,
            "recorded_source": UNPROVEN_SOURCE,
            "trust": admission.trust,
        },
    )


__all__ = ["UNPROVEN_SOURCE", "Admission", "admit", "audit_unproven"]
