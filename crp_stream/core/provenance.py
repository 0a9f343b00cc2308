"""Record signatures: trust is bound to a key the producer holds, not to a name it writes.

Seed ``002_ce3d030fd7bbcd69.txt`` (Operational Effect) accepts a blind spot because "epoch spoofing
requires write access to provenance metadata, which is a strictly higher privilege than writing record
content". Here the provenance that matters (which source a record speaks for) is proven by an
HMAC-SHA256 over the record's raw value bytes with that source's key: writing content to a topic does
not give the key. The epoch itself is the log-append time and never comes from the record.

Pure functions: bytes and strings in, a decision out; the caller supplies the keys.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

SIGNATURE_HEADER = "crp-signature"


def sign_value(key: str, value: bytes) -> str:
    """The ``crp-signature`` of ``value`` under ``key``: lowercase hex HMAC-SHA256 over the raw bytes.

    The key is the configured string, used as its UTF-8 bytes (an operator pastes it as text).
    """
    return hmac.new(key.encode("utf-8"), value, hashlib.sha256).hexdigest()


def signature_matches(key: str, value: bytes, signature: str) -> bool:
    """True when ``signature`` is the HMAC of ``value`` under ``key``; constant-time comparison."""
    expected = sign_value(key, value)
    return hmac.compare_digest(expected.encode("ascii"), signature.strip().lower().encode("ascii", "replace"))


def source_is_proven(keys: Mapping[str, str], source: str, value: bytes, signatures: Sequence[bytes]) -> str | None:
    """SEED-002 Operational Effect: a record speaks for ``source`` only when it carries exactly one
    ``crp-signature`` that is the HMAC of its value under that source's key.

    Returns None when proven, else the reason (without any key material), e.g.
    ``"no signing key is configured for it"`` or ``"the signature does not match its content"``.
    """
    key = keys.get(source)
    if key is None:
        return "no signing key is configured for it"
    if not signatures:
        return f"the record carries no {SIGNATURE_HEADER} header"
    if len(signatures) > 1:
        return f"the record carries {len(signatures)} {SIGNATURE_HEADER} headers, expected one"
    try:
        text = signatures[0].decode("ascii")
    except UnicodeDecodeError:
        return f"the {SIGNATURE_HEADER} header is not hex text"
    if len(text.strip()) != 64 or any(c not in "0123456789abcdefABCDEF" for c in text.strip()):
        return f"the {SIGNATURE_HEADER} header is not 64 hex digits (HMAC-SHA256)"
    if not signature_matches(key, value, text):
        return "the signature does not match its content and the source's key"
    return None


__all__ = ["SIGNATURE_HEADER", "sign_value", "signature_matches", "source_is_proven"]
