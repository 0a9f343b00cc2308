"""How ``--qdrant`` names a Qdrant server (REST or gRPC, a collection), and that opening one sends
nothing to it: a fabric opens while the server is down (docs/vector-stores.md)."""

from __future__ import annotations

import time

import pytest

from crp_stream.config import ConfigError
from crp_stream.fabric.fabric import open_vector_index
from crp_stream.fabric.vectors.qdrant import DEFAULT_COLLECTION, QdrantVectorIndex, ServerSpec, version_note
from tests.support.services import free_port


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("http://10.0.0.5:6333", ServerSpec("10.0.0.5", 6333)),
        ("http://qdrant", ServerSpec("qdrant", 6333)),
        ("https://q.example.org/", ServerSpec("q.example.org", 6333, tls=True)),
        ("grpc://qdrant:7334", ServerSpec("qdrant", 7334, grpc=True)),
        ("grpc://qdrant", ServerSpec("qdrant", 6334, grpc=True)),
        ("grpcs://q.example.org:443", ServerSpec("q.example.org", 443, grpc=True, tls=True)),
        ("http://h:1?collection=facts_v2", ServerSpec("h", 1, collection="facts_v2")),
        ("grpc://h:2?collection=a-b", ServerSpec("h", 2, grpc=True, collection="a-b")),
    ],
)
def test_server_specs(spec: str, expected: ServerSpec) -> None:
    assert ServerSpec.parse(spec) == expected
    assert ServerSpec.parse("http://h").collection == DEFAULT_COLLECTION


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("grpc://h:6334/prefix", "no path"),
        ("http://h:6333?grpc=1", "unknown option 'grpc'"),
        ("http://h:6333?collection=", "collection must be"),
        ("http://h:6333?collection=a/b", "collection must be"),
        ("grpc://h:notaport", "notaport"),
        ("tcp://h:6334", "is not http"),
    ],
)
def test_bad_server_specs_name_what_is_wrong(spec: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        ServerSpec.parse(spec)


def test_a_bad_spec_is_a_config_error_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"^qdrant: .*unknown option 'grpc'"):
        open_vector_index("http://127.0.0.1:6333?grpc=1")
    with pytest.raises(ConfigError, match=r"grpc\(s\)://HOST:PORT"):
        open_vector_index("qdrant:6333")


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_opening_a_server_index_contacts_nothing(scheme: str) -> None:
    """Nobody listens on the port: opening still succeeds, at once; the first call fails instead (the
    runtime's vector guard reports it as transient and retries)."""
    t0 = time.monotonic()
    index = open_vector_index(f"{scheme}://127.0.0.1:{free_port()}?collection=c1")
    assert time.monotonic() - t0 < 2.0
    assert isinstance(index, QdrantVectorIndex)
    assert index.collection == "c1" and not index.is_local
    with pytest.raises(Exception) as failed:
        _ = index.dim
    assert not isinstance(failed.value, ValueError | TypeError | KeyError)  # not a caller's error: transient
    index.close()
    with pytest.raises(RuntimeError, match="closed"):
        index.flush()


def test_supported_server_versions() -> None:
    assert version_note("1.19.0") is None
    assert version_note("1.20.3") is None
    note = version_note("1.12.6")
    assert note is not None and "1.12.6" in note and "1.19" in note
    assert version_note("2.19.0") is not None
