"""Sealed records: the rules (which text moves, whose key, which forget destroys it), the cipher
round trip, and a forgotten input left out of a rebuild's replay."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine

from crp_stream.core.forget import forget_of, replay_keeps
from crp_stream.core.sealing import join_text, key_forgotten, seal_key_id, sealing_scope, split_text
from crp_stream.fabric.sealing import Sealer, SealError, encrypt, fact_nonce, open_fact_text, open_value, seal_value
from crp_stream.fabric.sql import db

DOC = {
    "tenant": "acme",
    "event_id": "e1",
    "source": "hr",
    "document_id": "person-17",
    "title": "Badge register",
    "facts": [{"text": "Erika's badge is 4711.", "subject": "badge"}, {"text": "Second."}],
}


def test_split_moves_every_text_and_join_restores_the_record() -> None:
    outer, inner = split_text(DOC)
    assert "Erika" not in json.dumps(outer) and "Badge register" not in json.dumps(outer)
    assert outer["facts"][0] == {"subject": "badge"} and outer["tenant"] == "acme"
    assert join_text(outer, inner) == DOC
    with pytest.raises(ValueError, match="does not match"):
        join_text(outer, {"facts": ["only one"]})


def test_scope_and_key_ids_are_per_tenant_source_and_document() -> None:
    assert sealing_scope(DOC) == ("acme", "hr", "person-17")
    assert sealing_scope({"source": "hr", "event_id": "e9"}) == ("default", "hr", "e9")
    assert sealing_scope({"event_id": "e9"}) is None
    ids = {seal_key_id("acme", "hr", "d"), seal_key_id("globex", "hr", "d"), seal_key_id("acme", "hr2", "d")}
    assert len(ids) == 3 and seal_key_id("acme", "hr", "d") == seal_key_id("acme", "hr", "d")


def test_forget_destroys_only_its_tenants_keys() -> None:
    scope = ("acme", "hr", "person-17")
    assert key_forgotten(scope, "acme", "document", "person-17")
    assert key_forgotten(scope, "acme", "source", "hr") and key_forgotten(scope, "acme", "all", None)
    assert not key_forgotten(scope, "globex", "all", None)
    assert not key_forgotten(scope, "acme", "document", "person-18")
    assert not key_forgotten(scope, "acme", "source", "finance")


def test_sealed_values_open_only_with_their_key() -> None:
    key, other = b"k" * 32, b"o" * 32
    key_id = seal_key_id("acme", "hr", "person-17")
    sealed = seal_value(DOC, key_id, key, b"n" * 12)
    assert "4711" not in json.dumps(sealed)
    assert open_value(sealed, key) == {**DOC, "sealed": {"key": key_id}}
    with pytest.raises(SealError, match="does not open"):
        open_value(sealed, other)
    moved = {**sealed, "sealed": {**sealed["sealed"], "key": seal_key_id("globex", "hr", "person-17")}}
    with pytest.raises(SealError, match="does not open"):
        open_value(moved, key)  # the key id is authenticated


def test_fact_text_seals_deterministically() -> None:
    key = b"k" * 32
    a = encrypt(b"Erika", "kid", key, fact_nonce("f1"))
    assert a == encrypt(b"Erika", "kid", key, fact_nonce("f1")) != encrypt(b"Erika", "kid", key, fact_nonce("f2"))
    assert open_fact_text(f"kid:{a['nonce']}:{a['data']}", key) == "Erika"


def test_sealer_issues_one_key_per_document_and_refuses_a_destroyed_one(tmp_path: object) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/f.sqlite")
    db.upgrade(engine)
    sealer = Sealer(engine)
    first = sealer.key("acme", "hr", "person-17")
    assert sealer.key("acme", "hr", "person-17") == first and sealer.key("acme", "hr", "x") != first
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE sealing_keys SET key = NULL WHERE document = 'person-17'")
    with pytest.raises(SealError, match="destroyed by forget"):
        sealer.seal(DOC)
    with pytest.raises(SealError, match="needs source"):
        sealer.seal({"text": "x"})


def test_a_rebuild_leaves_out_inputs_a_later_forget_names() -> None:
    forget = {"tenant": "acme", "command": "forget", "target_id": "document:person-17", "actor": "dpo"}
    assert forget_of(forget) == ("acme", "document", "person-17")
    assert forget_of({**forget, "target_id": "nonsense"}) is None
    assert forget_of({"command": "resolve_refresh", "target_id": "r1"}) is None
    globex = {**DOC, "tenant": "globex"}
    later_doc = {**DOC, "event_id": "e3"}
    values = [(True, DOC), (True, globex), (False, forget), (True, later_doc)]
    # forgotten before its command; another tenant's same document and a later document stay
    assert replay_keeps(values) == [False, True, True, True]
    assert replay_keeps([(True, DOC), (False, {**forget, "tenant": None, "target_id": "all"})]) == [True, True]
