"""Sealed inputs: the text of a document or an observation encrypted with a key of its own, so that
``forget`` destroys the key and the bytes a Kafka broker keeps can no longer be read
(docs/security.md "The log forgets: sealed records").

A sealed record is an ordinary ``crp.documents`` / ``crp.telemetry`` value whose text-carrying fields
(``title``, ``section``, ``text`` and every fact's ``text``) are moved into the optional field
``sealed``: ``{"key": KEY_ID, "nonce": B64, "data": B64}``. Everything else (tenant, source, document
id, event id, subjects, embeddings) stays readable, so a record can be routed and forgotten without
its key. One key per (tenant, source, document): a document without ``document_id`` and an
observation use their ``event_id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from crp_stream.core.ids import derive_id
from crp_stream.core.tenants import scoped_id_parts, tenant_name

SEALED = "sealed"
SEALED_FIELDS = ("title", "section", "text")  # a record's own text; each fact's ``text`` as well


def sealing_scope(value: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """CONTRACT "sealed": the ``(tenant, source, document)`` a record's key belongs to, or None when
    the record names no source or no event id (it cannot be sealed; validation says why)."""
    tenant, source = value.get("tenant"), value.get("source")
    document = value.get("document_id")
    if document is None:
        document = value.get("event_id")
    if not isinstance(source, str) or not isinstance(document, str) or not source or not document:
        return None
    return tenant_name(tenant if isinstance(tenant, str) else None), source, document


def seal_key_id(tenant: str, source: str, document: str) -> str:
    """CONTRACT "sealed": a key's id, derived from its scope (one key per tenant, source and document)."""
    return derive_id("sealing-key", *scoped_id_parts(tenant, source, document))


def split_text(value: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """CONTRACT "sealed": ``(outer, inner)``: the record without its text, and the text it held
    (``inner["facts"]`` lists each fact's text in order, None for a fact without one)."""
    outer = {k: v for k, v in value.items() if k not in SEALED_FIELDS}
    inner = {k: value[k] for k in SEALED_FIELDS if k in value}
    facts = value.get("facts")
    if isinstance(facts, list):
        inner["facts"] = [f.get("text") if isinstance(f, dict) else None for f in facts]
        outer["facts"] = [{k: v for k, v in f.items() if k != "text"} if isinstance(f, dict) else f for f in facts]
    return outer, inner


def join_text(outer: Mapping[str, Any], inner: Mapping[str, Any]) -> dict[str, Any]:
    """CONTRACT "sealed": the record ``split_text`` was made of (``sealed`` itself left out).
    ValueError when the inner part does not fit the outer one."""
    value = {k: v for k, v in outer.items() if k != SEALED}
    for k in SEALED_FIELDS:
        if k in inner:
            value[k] = inner[k]
    texts = inner.get("facts")
    facts = value.get("facts")
    if texts is not None:
        if not isinstance(facts, list) or not isinstance(texts, list) or len(facts) != len(texts):
            raise ValueError("its sealed text does not match its facts")
        value["facts"] = [
            {**f, "text": x} if isinstance(f, dict) and x is not None else f for f, x in zip(facts, texts, strict=True)
        ]
    return value


def key_forgotten(scope: tuple[str, str, str], tenant: str, kind: str, target: str | None) -> bool:
    """CONTRACT "forget": whether ``forget`` of ``(tenant, kind, target)`` destroys the key of
    ``scope`` = ``(tenant, source, document)``: the tenant's document (of any source), its source,
    or every key of the tenant."""
    if scope[0] != tenant:
        return False
    if kind == "all":
        return True
    return scope[1] == target if kind == "source" else scope[2] == target
