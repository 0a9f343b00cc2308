"""Sealed inputs are opened at the edge, before validation (``core.sealing``, docs/security.md
"The log forgets"). A record whose key ``forget`` destroyed is forgotten: nothing happens to it, no
dead letter (it would only repeat ciphertext). A record sealed wrongly is rejected with the reason."""

from __future__ import annotations

import json
from collections.abc import Callable

from crp_stream import events
from crp_stream.core.sealing import SEALED, seal_key_id, sealing_scope
from crp_stream.events import Rejected, topics
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.fabric.sealing import SealError, encrypt, fact_nonce, open_value

SEALABLE = frozenset({topics.DOCUMENTS, topics.TELEMETRY})
_MARK = b'"' + SEALED.encode() + b'"'


def open_sealed(topic: str, raw: bytes, uow: UnitOfWork) -> bytes | None:
    """``raw`` as it is when not sealed; opened when sealed; None when its key was destroyed."""
    if topic not in SEALABLE or _MARK not in raw:
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        return raw  # validation gives the reason
    if not isinstance(value, dict) or not isinstance(value.get(SEALED), dict) or "data" not in value[SEALED]:
        return raw
    scope = sealing_scope(value)
    if scope is None:
        raise Rejected("sealed: a sealed record needs source and document_id (or event_id)")
    key_id = value[SEALED].get("key")
    if key_id != seal_key_id(*scope):
        raise Rejected("sealed.key: not the key of this record's tenant, source and document")
    issued, key = uow.repo.sealing_key(key_id)
    if not issued:
        raise Rejected(f"sealed.key: {key_id!r} was not issued by this fabric")
    if key is None:
        return None
    try:
        opened = open_value(value, bytes(key))
    except SealError as exc:
        raise Rejected(str(exc)) from None
    return json.dumps(opened, ensure_ascii=False).encode()


def sealing_of(
    event: events.DocumentPublished | events.TelemetryObserved, uow: UnitOfWork
) -> Callable[[str, str], str] | None:
    """For an input that came sealed: how ingest seals each fact's text on ``crp.facts`` (its
    document's key, a nonce derived from the fact id, so a replay writes the same bytes)."""
    mark = getattr(event, SEALED, None)
    key_id = mark.get("key") if isinstance(mark, dict) else None
    scope = sealing_scope({k: getattr(event, k, None) for k in ("tenant", "source", "document_id", "event_id")})
    if not isinstance(key_id, str) or scope is None or key_id != seal_key_id(*scope):
        return None
    _issued, key = uow.repo.sealing_key(key_id)
    if key is None:
        return None
    k = bytes(key)

    def seal(fact_id: str, text: str) -> str:
        s = encrypt(text.encode(), key_id, k, fact_nonce(fact_id))
        return f"{s['key']}:{s['nonce']}:{s['data']}"

    return seal
