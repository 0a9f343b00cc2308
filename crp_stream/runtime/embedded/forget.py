"""The embedded log forgets too: after a ``forget`` commits, the records that carry what it removed
are deleted from the log, or ``rebuild`` would ingest them again (docs/security.md "Forgetting").

Which records: the forgotten tenant's document or telemetry inputs the command names
(``core.forget.forgets_input``; another document that says the same is kept), and any output
(facts, envelopes, audit events, dead letters) whose bytes carry a forgotten fact's id or text.
Operator commands stay: they quote no text, and a ``forget`` replayed by ``rebuild`` finds
nothing left to remove.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from crp_stream.config import Settings
from crp_stream.core.forget import forgets_input
from crp_stream.events import topics
from crp_stream.fabric.fabric import Fabric
from crp_stream.fabric.sql import db
from crp_stream.fabric.sql.records.forget import Forgotten
from crp_stream.runtime.embedded.log import EmbeddedLog, LogRecord

log = logging.getLogger(__name__)


def erase_forgotten(log_: EmbeddedLog, fabric: Fabric, items: Sequence[Forgotten]) -> int:
    """Remove the forgotten records from ``log_`` and leave no page of them in the fabric's SQLite
    files; returns how many records went."""
    settings = fabric.settings
    gone = 0
    for f in items:
        until = log_.seq_of(settings.topic(f.topic), f.offset)
        if until is None:
            continue
        gone += log_.erase(until, _picker(settings, f))
    db.scrub(fabric.engine)
    fabric.vectors.flush()
    log.info("forget: %d records removed from the log", gone)
    return gone


def _picker(settings: Settings, f: Forgotten) -> _Doomed:
    return _Doomed(
        {settings.topic(topics.DOCUMENTS), settings.topic(topics.TELEMETRY)},
        settings.topic(topics.OPERATOR_COMMANDS),
        f,
    )


class _Doomed:
    def __init__(self, inputs: set[str], commands: str, f: Forgotten) -> None:
        self.inputs, self.commands, self.f = inputs, commands, f

    def __call__(self, r: LogRecord) -> bool:
        if r.topic == self.commands:
            return False
        if r.topic in self.inputs:
            try:
                value = json.loads(r.value)
            except ValueError:
                value = None
            # an input only by what the command names: another document saying the same stays
            return isinstance(value, dict) and forgets_input(value, self.f.tenant, self.f.kind, self.f.target)
        return any(n in r.value for n in self.f.needles)
