"""core.provenance: the HMAC that binds a record to its source's key."""

from __future__ import annotations

import hashlib
import hmac

from crp_stream.core.provenance import sign_value, signature_matches, source_is_proven

KEY = "k3y-of-vendor-docs"
VALUE = b'{"event_id":"e1","source":"vendor_docs"}'


def test_signature_is_hex_hmac_sha256_of_the_raw_value() -> None:
    assert sign_value(KEY, VALUE) == hmac.new(KEY.encode(), VALUE, hashlib.sha256).hexdigest()
    assert len(sign_value(KEY, VALUE)) == 64


def test_signature_matches_only_the_same_key_and_bytes() -> None:
    sig = sign_value(KEY, VALUE)
    assert signature_matches(KEY, VALUE, sig)
    assert signature_matches(KEY, VALUE, sig.upper())  # hex case does not matter
    assert not signature_matches("another-key", VALUE, sig)
    assert not signature_matches(KEY, VALUE + b" ", sig)  # one byte more: not the signed content
    assert not signature_matches(KEY, VALUE.replace(b"e1", b"e2"), sig)


def test_source_is_proven_reasons() -> None:
    keys = {"vendor_docs": KEY}
    good = sign_value(KEY, VALUE).encode()
    assert source_is_proven(keys, "vendor_docs", VALUE, [good]) is None
    assert source_is_proven(keys, "community", VALUE, [good]) == "no signing key is configured for it"
    assert "carries no crp-signature" in (source_is_proven(keys, "vendor_docs", VALUE, []) or "")
    assert "2 crp-signature headers" in (source_is_proven(keys, "vendor_docs", VALUE, [good, good]) or "")
    assert "not 64 hex digits" in (source_is_proven(keys, "vendor_docs", VALUE, [b"zz" * 32]) or "")
    assert "not hex text" in (source_is_proven(keys, "vendor_docs", VALUE, [b"\xff" * 64]) or "")
    forged = sign_value("guessed", VALUE).encode()
    assert "does not match" in (source_is_proven(keys, "vendor_docs", VALUE, [forged]) or "")


def test_reasons_never_contain_the_key() -> None:
    keys = {"vendor_docs": KEY}
    for sigs in ([], [b"00" * 32], [sign_value("x", VALUE).encode()]):
        assert KEY not in (source_is_proven(keys, "vendor_docs", VALUE, sigs) or "")
