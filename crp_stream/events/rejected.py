"""The one error for a record that cannot be applied: at the edge (decoding) or in a handler."""

from __future__ import annotations

from typing import Any


class Rejected(Exception):
    """A record that cannot be applied; ``reason`` names the field and what was wrong and goes to the
    dead-letter topic verbatim. ``audit_type`` and ``details`` shape the audit event that goes with it."""

    def __init__(self, reason: str, audit_type: str = "EVENT_REJECTED", details: dict[str, Any] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.audit_type = audit_type
        self.details = details or {}
