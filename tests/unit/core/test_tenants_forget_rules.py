"""The pure rules of tenants and forgetting (``core.tenants``, ``core.forget``)."""

from __future__ import annotations

import json

import pytest

from crp_stream.core.forget import forget_target, forgets_input, forgotten_needles
from crp_stream.core.tenants import (
    is_tenant_name,
    scoped_claim_key,
    scoped_id_parts,
    scoped_key,
    tenant_name,
    unscoped_key,
)


def test_the_default_tenant_changes_no_id_or_key() -> None:
    assert tenant_name(None) == "default"
    assert scoped_id_parts(None, "s", "d") == scoped_id_parts("default", "s", "d") == ("s", "d")
    assert scoped_claim_key(None, "api|limit") == "api|limit"
    assert scoped_key("default", "doc") == "doc"


def test_a_named_tenant_never_shares_a_key() -> None:
    assert scoped_id_parts("acme", "s") == ("acme", "s")
    assert scoped_claim_key("acme", "api|limit") != scoped_claim_key("globex", "api|limit")
    # a default claim key has one unescaped "|"; a named tenant's has two
    assert scoped_claim_key("acme", "api|limit").count("|") == 2
    assert unscoped_key(scoped_key("acme", "doc")) == ("acme", "doc")
    assert unscoped_key("doc") == ("default", "doc")


@pytest.mark.parametrize("name, ok", [("acme", True), ("a.b_c-1", True), ("a|b", False), ("", False), ("-a", False)])
def test_tenant_names(name: str, ok: bool) -> None:
    assert is_tenant_name(name) is ok


def test_forget_targets() -> None:
    assert forget_target("all") == ("all", None)
    assert forget_target("document:d1") == ("document", "d1")
    assert forget_target("source:hr") == ("source", "hr")
    for bad in ("everything", "document:", "fact:x"):
        with pytest.raises(ValueError):
            forget_target(bad)


def test_which_inputs_a_forget_names() -> None:
    doc = {"tenant": "acme", "source": "hr", "document_id": "d1", "event_id": "e1"}
    assert forgets_input(doc, "acme", "document", "d1")
    assert not forgets_input(doc, "globex", "document", "d1")  # another tenant's document of that id
    assert forgets_input(doc, "acme", "source", "hr") and forgets_input(doc, "acme", "all", None)
    assert forgets_input({"source": "hr", "event_id": "e1"}, "default", "document", "e1")  # no document_id
    assert not forgets_input({"source": "hr", "event_id": "e1"}, "acme", "all", None)


def test_needles_cover_the_text_as_json_writes_it() -> None:
    text = 'Zoë said "hi"'
    needles = forgotten_needles(["f1"], [text])
    assert b"f1" in needles and text.encode() in needles
    assert any(n in json.dumps({"t": text}).encode() for n in needles if n != b"f1")
    assert any(n in json.dumps({"t": text}, ensure_ascii=False).encode() for n in needles if n != b"f1")
