"""Sealed records (``core.sealing``): their keys in the database, AES-256-GCM-SIV from ``cryptography``.

GCM-SIV because the worker seals a fact's text on ``crp.facts`` with a nonce derived from the fact id
(a replay writes the same bytes); a repeated nonce under SIV reveals only that two plaintexts are
equal, never the key stream. The key id is the associated data: a ciphertext moved under another
key id does not open. Producers seal with a random nonce (``Sealer``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, select, update

from crp_stream.core.sealing import SEALED, join_text, key_forgotten, seal_key_id, sealing_scope, split_text
from crp_stream.fabric.sql import tables as t

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

NONCE_BYTES = 12
KEY_BITS = 256


class SealError(ValueError):
    """A sealed record that cannot be opened; the message names the field."""


def _cipher(key: bytes) -> AESGCMSIV:
    # imported on first use: a deployment that never seals does not load the library
    from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

    return AESGCMSIV(key)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def encrypt(plain: bytes, key_id: str, key: bytes, nonce: bytes) -> dict[str, str]:
    """The ``sealed`` field for ``plain``: ``{"key", "nonce", "data"}``."""
    data = _cipher(key).encrypt(nonce, plain, key_id.encode())
    return {"key": key_id, "nonce": _b64(nonce), "data": _b64(data)}


def decrypt(sealed: Mapping[str, Any], key: bytes) -> bytes:
    key_id, nonce, data = sealed.get("key"), sealed.get("nonce"), sealed.get("data")
    if not isinstance(key_id, str) or not isinstance(nonce, str) or not isinstance(data, str):
        raise SealError("sealed: needs the strings key, nonce and data")
    from cryptography.exceptions import InvalidTag

    try:
        return _cipher(key).decrypt(
            base64.b64decode(nonce, validate=True), base64.b64decode(data, validate=True), key_id.encode()
        )
    except (ValueError, InvalidTag):
        raise SealError("sealed.data: does not open with its key (altered, or sealed under another key id)") from None


def seal_value(value: Mapping[str, Any], key_id: str, key: bytes, nonce: bytes) -> dict[str, Any]:
    """A document or observation with its text moved into ``sealed``."""
    outer, inner = split_text(value)
    plain = json.dumps(inner, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
    return {**outer, SEALED: encrypt(plain, key_id, key, nonce)}


def open_value(value: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The record ``seal_value`` sealed, with ``sealed`` reduced to ``{"key": KEY_ID}`` (so ingest
    seals the facts' text on ``crp.facts`` with the same key)."""
    sealed = value[SEALED]
    try:
        inner = json.loads(decrypt(sealed, key))
        if not isinstance(inner, dict):
            raise ValueError("not an object")
        opened = join_text(value, inner)
    except ValueError as exc:
        raise SealError(f"sealed.data: {exc}") from None
    opened[SEALED] = {"key": sealed["key"]}
    return opened


def fact_nonce(fact_id: str) -> bytes:
    """A fact's text on ``crp.facts`` is sealed with a nonce derived from its id: replays agree."""
    return hashlib.sha256(f"fact-nonce\x1f{fact_id}".encode()).digest()[:NONCE_BYTES]


class SealingRecords:
    conn: Connection

    def sealing_key(self, key_id: str) -> tuple[bool, bytes | None]:
        """``(issued, key)``: a destroyed key was issued and is None."""
        row = self.conn.execute(select(t.sealing_keys.c.key).where(t.sealing_keys.c.key_id == key_id)).first()
        return (False, None) if row is None else (True, row.key)

    def destroy_sealing_keys(self, tenant: str, kind: str, target: str | None) -> int:
        """``forget``: the keys of the tenant's document, source or every key of the tenant become NULL."""
        k = t.sealing_keys.c
        q = select(k.key_id, k.tenant, k.source, k.document).where((k.tenant == tenant) & k.key.is_not(None))
        doomed = [
            r.key_id
            for r in self.conn.execute(q)
            if key_forgotten((r.tenant, r.source, r.document), tenant, kind, target)
        ]
        for key_id in doomed:
            self.conn.execute(update(t.sealing_keys).where(k.key_id == key_id).values(key=None))
        return len(doomed)


class Sealer:
    """A producer's side: the key of a record's (tenant, source, document), made on first use, and
    the record sealed with a random nonce. Needs the fabric's database (the workers read the keys)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def key(self, tenant: str, source: str, document: str) -> tuple[str, bytes]:
        key_id = seal_key_id(tenant, source, document)
        with self.engine.begin() as conn:
            row = conn.execute(select(t.sealing_keys.c.key).where(t.sealing_keys.c.key_id == key_id)).first()
            if row is not None:
                if row.key is None:
                    raise SealError(f"the key of {source}/{document} (tenant {tenant}) was destroyed by forget")
                return key_id, bytes(row.key)
            key = os.urandom(KEY_BITS // 8)
            conn.execute(
                t.sealing_keys.insert().values(key_id=key_id, tenant=tenant, source=source, document=document, key=key)
            )
            return key_id, key

    def seal(self, value: Mapping[str, Any]) -> dict[str, Any]:
        scope = sealing_scope(value)
        if scope is None:
            raise SealError("a sealed record needs source and document_id or event_id")
        key_id, key = self.key(*scope)
        return seal_value(value, key_id, key, os.urandom(NONCE_BYTES))


def open_fact_text(sealed: str, key: bytes) -> str:
    """The text of a ``FactRecorded`` whose ``sealed`` is ``KEY_ID:NONCE:DATA``."""
    key_id, _, rest = sealed.partition(":")
    nonce, _, data = rest.partition(":")
    return decrypt({"key": key_id, "nonce": nonce, "data": data}, key).decode()
