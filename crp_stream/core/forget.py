"""Forgetting: what ``crp-stream forget`` removes, and which records of a log carry it.

CONTRACT "forget": an operator command ``forget`` names its tenant and a target: ``document:ID`` (a
document of the tenant, of any source; a document without ``document_id`` is named by its event id),
``source:S`` (every fact of the source in the tenant) or ``all`` (every fact of the tenant).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from crp_stream.core.tenants import tenant_name

FORGET_KINDS = ("document", "source", "all")


def forget_target(target_id: str) -> tuple[str, str | None]:
    """CONTRACT "forget": ``(kind, name)`` of a command's ``target_id``; ValueError names what is wrong."""
    if target_id == "all":
        return "all", None
    kind, sep, name = target_id.partition(":")
    if not sep or kind not in ("document", "source"):
        raise ValueError(f"{target_id!r} is not document:ID, source:NAME or all")
    if not name:
        raise ValueError(f"{target_id!r} names no {kind}")
    return kind, name


def forgets_input(value: Mapping[str, Any], tenant: str, kind: str, name: str | None) -> bool:
    """CONTRACT "forget": whether a document or telemetry input (its decoded JSON) is forgotten by
    ``forget`` of ``(tenant, kind, name)``: the log keeps no record a rebuild would ingest again."""
    raw_tenant = value.get("tenant")
    if tenant_name(raw_tenant if isinstance(raw_tenant, str) else None) != tenant:
        return False
    if kind == "all":
        return True
    if kind == "source":
        return value.get("source") == name
    doc = value.get("document_id")
    return doc == name if doc is not None else value.get("event_id") == name


def forgotten_needles(fact_ids: Iterable[str], texts: Iterable[str]) -> list[bytes]:
    """CONTRACT "forget": what no record may carry once forgotten: a forgotten fact's id, and its text
    as UTF-8 and as JSON writes it (escaped, with and without ``ensure_ascii``)."""
    out: set[bytes] = {f.encode() for f in fact_ids}
    for text in texts:
        out.add(text.encode())
        out.add(json.dumps(text)[1:-1].encode())
        out.add(json.dumps(text, ensure_ascii=False)[1:-1].encode())
    return sorted(n for n in out if n)
