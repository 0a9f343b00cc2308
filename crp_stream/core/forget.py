"""Forgetting: what ``crp-stream forget`` removes, and which records of a log carry it.

CONTRACT "forget": an operator command ``forget`` names its tenant and a target: ``document:ID`` (a
document of the tenant, of any source; a document without ``document_id`` is named by its event id),
``source:S`` (every fact of the source in the tenant) or ``all`` (every fact of the tenant).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
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


def forget_of(value: Any) -> tuple[str, str, str | None] | None:
    """CONTRACT "forget": ``(tenant, kind, target)`` of an operator command's decoded JSON when it is a
    well-formed ``forget``, else None (the operator handler gives such a command its reason)."""
    if not isinstance(value, dict) or value.get("command") != "forget":
        return None
    raw_tenant, target_id = value.get("tenant"), value.get("target_id")
    if not isinstance(target_id, str) or (raw_tenant is not None and not isinstance(raw_tenant, str)):
        return None
    try:
        kind, name = forget_target(target_id)
    except ValueError:
        return None
    return tenant_name(raw_tenant), kind, name


def replay_keeps(values: Sequence[tuple[bool, Any]]) -> list[bool]:
    """CONTRACT "forget": which records of a log, in replay order, a rebuild applies. ``values`` holds
    ``(is_input, decoded JSON)`` per record: a document or telemetry input that a later ``forget``
    names is left out (a forgotten input never enters the fabric again, not even until its command
    is replayed); everything else is kept."""
    keeps = [True] * len(values)
    later: list[tuple[str, str, str | None]] = []
    for i in range(len(values) - 1, -1, -1):
        is_input, value = values[i]
        if not is_input:
            f = forget_of(value)
            if f is not None:
                later.append(f)
        elif later and isinstance(value, dict):
            keeps[i] = not any(forgets_input(value, *f) for f in later)
    return keeps
