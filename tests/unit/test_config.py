"""Configuration layers and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from crp_stream.config import ConfigError, load_settings


def test_layers_flags_over_env_over_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('embedder = "hashing"\n[trust]\nvendor_docs = 0.9\nfield = 0.4\n[ttl]\ntelemetry = "P7D"\n')
    s = load_settings({"config": str(cfg), "embedder": "precomputed:m"}, env={"CRP_TRUST": "field=0.3"})
    assert s.embedder == "precomputed:m"
    assert s.trust == {"vendor_docs": 0.9, "field": 0.3}
    assert s.ttl_by_type["telemetry"] == 7 * 86400


def test_configured_trust_wins_and_claims_only_lower_it() -> None:
    s = load_settings({}, env={"CRP_TRUST": "vendor=0.9"})
    assert s.trust_for("vendor", "unverified", 0.1) == 0.9
    assert s.trust_for("unknown", "community", 0.99) == 0.3
    assert s.trust_for("unknown", "community", 0.05) == 0.05


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"CRP_TRUST": "vendor=1.5"}, "out of range"),
        ({"CRP_TRUST": "vendor"}, "name=value"),
        ({"CRP_MAX_RECORD_BYTES": "lots"}, "not an integer"),
        ({"CRP_AUTO_QUARANTINE": "perhaps"}, "not a boolean"),
        ({"CRP_TTL": "blog=P1D"}, "not a source type"),
        ({"CRP_TTL": "news=P-1D"}, "CRP_TTL.news"),
        ({"CRP_BROKER": "localhost:9092"}, "kafka://"),
        ({"CRP_BLAS_THREADS": "-1"}, "CRP_BLAS_THREADS: -1 is out of range"),
    ],
)
def test_bad_settings_give_one_line(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_settings({}, env=env)
    assert fragment in str(exc.value)
    assert "\n" not in str(exc.value)


def test_bad_config_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("trust = [")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings({"config": str(bad)}, env={})
    with pytest.raises(ConfigError, match="No such file"):
        load_settings({"config": str(tmp_path / "missing.toml")}, env={})


def test_input_topic_prefix_moves_only_the_input_topics() -> None:
    from crp_stream.events import INPUT_TOPICS, OUTPUT_TOPICS

    s = load_settings({}, env={"CRP_TOPIC_PREFIX": "shadow.", "CRP_INPUT_TOPIC_PREFIX": "prod."})
    for base in INPUT_TOPICS:
        assert s.topic(base).startswith("prod.") and s.base_topic(s.topic(base)) == base
    for base in OUTPUT_TOPICS:
        assert s.topic(base).startswith("shadow.") and s.base_topic(s.topic(base)) == base
    plain = load_settings({}, env={"CRP_TOPIC_PREFIX": "app1."})
    assert plain.topic("crp.documents") == "app1.documents" and plain.base_topic("app1.facts") == "crp.facts"


def test_blas_threads_default_to_one() -> None:
    assert load_settings({}, env={}).blas_threads == 1
    assert load_settings({}, env={"CRP_BLAS_THREADS": "0"}).blas_threads == 0


def test_caches_and_the_ann_threshold_are_settings() -> None:
    s = load_settings({}, env={"CRP_CACHE_FACTS": "500", "CRP_CACHE_GRAPH_NODES": "700", "CRP_ANN_MIN_POINTS": "10"})
    assert (s.cache_facts, s.cache_graph_nodes, s.ann_min_points) == (500, 700, 10)
    with pytest.raises(ConfigError, match="CRP_CACHE_FACTS"):
        load_settings({}, env={"CRP_CACHE_FACTS": "0"})
