"""Configuration: flags, then ``CRP_*`` environment variables, then an optional TOML file, then defaults.

A bad value raises ``ConfigError`` with one line that names the setting; the CLI prints it without a
traceback. Nothing here imports a backend library.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from crp_stream.core.durations import parse_duration
from crp_stream.core.recency import DEFAULT_TTL_SECONDS
from crp_stream.core.tenants import is_tenant_name, partition_trust
from crp_stream.events.topics import DEFAULT_PREFIX, INPUT_TOPICS

SOURCE_TYPES = (
    "regulatory",
    "official",
    "version_specific",
    "news",
    "community",
    "unverified",
    "user",
    "telemetry",
)

# Trust of a source that the configuration does not name, by its declared type (crp-stream choice).
DEFAULT_TRUST_BY_TYPE: dict[str, float] = {
    "regulatory": 0.9,
    "official": 0.8,
    "version_specific": 0.7,
    "news": 0.5,
    "user": 0.5,
    "telemetry": 0.4,
    "community": 0.3,
    "unverified": 0.1,
}


# Kafka client security (runtime/kafka/security.py turns these into client arguments; docs/security.md)
KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
KAFKA_TEXT_KEYS = (
    "kafka_sasl_username",
    "kafka_sasl_password",
    "kafka_ssl_cafile",
    "kafka_ssl_certfile",
    "kafka_ssl_keyfile",
    "kafka_oauth_token_file",
    "kafka_oauth_token_command",
)
INFINITE_RETENTION_MS = -1


class ConfigError(ValueError):
    """A setting is missing or malformed; the message is one line naming it."""


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path(".crp")
    database_url: str | None = None
    broker: str | None = None  # None: the embedded log; kafka://host:port otherwise
    qdrant: str | None = None  # None: embedded qdrant-edge under data_dir; http(s)://... for a server
    embedder: str = "default"
    # openai:BASE_URL#MODEL (fabric/embedders/http.py): texts a request, requests in flight, seconds a
    # request, retries of a 429 / 5xx / connection error (exponential backoff, Retry-After honoured)
    embedder_batch: int = 64
    embedder_concurrency: int = 4
    embedder_timeout: float = 30.0
    embedder_retries: int = 5
    topic_prefix: str = DEFAULT_PREFIX
    # the five input topics under another prefix: a second pipeline (shadow run, crash or rebuild
    # check) reads the same inputs, with the same broker stamps, and writes its own outputs
    input_topic_prefix: str | None = None
    instance_id: str | None = None  # Kafka static group membership: a restart keeps its partitions
    max_record_bytes: int = 1024 * 1024
    max_facts_per_document: int = 1000
    trust: Mapping[str, float] = field(default_factory=dict)
    # a (tenant, source) pair's own trust; without one the source's (``core.tenants.partition_trust``)
    tenant_trust: Mapping[tuple[str, str], float] = field(default_factory=dict)
    ttl_by_type: Mapping[str, float | None] = field(default_factory=lambda: dict(DEFAULT_TTL_SECONDS))
    auto_quarantine: bool = False
    # Partition agreement counts only a source's records within this many seconds of its newest one
    # (None: all records, the default). docs/arbiter.md: P7D ends stale serving sooner.
    agreement_window: float | None = None
    expire_after_ttls: float | None = None  # None: TTL only decays recency (SPEC-027 §3.2), never hides
    min_relevance: float | None = None  # None: the model's calibrated value, else the seed's 0.55
    edge_threshold: float | None = None
    edge_k: int = 20
    contradiction_threshold: float | None = None
    partitions: int = 4
    metrics_port: int | None = None
    signing_keys: Mapping[str, str] = field(default_factory=dict)
    unsigned_policy: str = "deadletter"  # deadletter | untrusted (only when signing_keys is set)
    untrusted_trust: float = 0.05
    batch_size: int = 200  # embedded runtime: records per transaction (latency vs throughput)
    # ingest micro-batch: at most this many new facts (their similarity among themselves is one
    # matrix product, batch_facts^2 float64: 32 MB at 2,000)
    batch_facts: int = 2000
    # Kafka worker, ingest and arbiter: a micro-batch is what the consumer has delivered, up to this
    # many records; after its first record a batch waits at most batch_linger_ms for more (0: none)
    kafka_batch_max: int = 256
    batch_linger_ms: int = 0
    # The in-process ANN cache (fabric/vectors/ann.py): candidates come from it once the index holds this many
    # points; above ann_max_points (memory: ~1.6 KB a point at 384-d) exact search serves again.
    ann_min_points: int = 20_000
    ann_max_points: int = 2_000_000
    # the ANN cache kept beside the embedded vector store between runs (fabric/vectors/ann_snapshot.py): a restart
    # reads the graph back and checks it against the store instead of building it (~20 min at 1M points)
    ann_snapshot: bool = True
    # W3C trace context from each input to the records it causes, a span per handler batch
    # (processors/tracing.py): off | on (needs the otel extra) | auto (on when it is installed)
    tracing: str = "off"
    # per-process caches, each bounded: candidates' rows and vectors (~2.5 KB a fact at 384-d), the
    # similarity graph's adjacency lists, the arbiter's claim index (member facts, ~1.5 KB a fact)
    cache_facts: int = 100_000
    cache_graph_nodes: int = 500_000
    cache_claim_facts: int = 200_000
    # the text memos of the screens and the arbiter (core/memo.py): entries per unit of weight
    cache_texts: int = 50_000
    # Kafka worker: a window request waits at most this long (seconds) for the inputs appended before it
    # to be ingested and arbitrated (the event-time barrier, docs/kafka.md); 0 turns the barrier off
    barrier_wait: float = 2.0
    # Kafka clients: how every client (worker, CLI, console, rebuild, crp_stream.client) authenticates
    kafka_security_protocol: str = "PLAINTEXT"
    kafka_sasl_mechanism: str | None = None
    kafka_sasl_username: str | None = None
    kafka_sasl_password: str | None = field(default=None, repr=False)
    kafka_ssl_cafile: str | None = None  # None: the system's CAs
    kafka_ssl_certfile: str | None = None  # a client certificate (mutual TLS), with kafka_ssl_keyfile
    kafka_ssl_keyfile: str | None = None
    kafka_oauth_token_file: str | None = None  # OAUTHBEARER: the token, read again at every connection
    kafka_oauth_token_command: str | None = None  # OAUTHBEARER: a command printing the token
    # Kafka topics as created (runtime/kafka/topics.py): the inputs that are the source of truth keep
    # every record (retention.ms=-1); the others (window requests and every output) keep this long
    replication_factor: int = 1
    derived_retention_ms: int = INFINITE_RETENTION_MS
    # threads of numpy's BLAS in a long-running process (runtime/threads.py): its products are a few
    # hundred rows, and a second thread only spins between them, a core taken from the broker and the
    # database beside it; 0 leaves the library's own choice
    blas_threads: int = 1

    @property
    def database(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'fabric.sqlite').resolve()}"

    @property
    def ann_snapshot_dir(self) -> Path | None:
        """Beside the embedded vector store it caches (``<store>.ann``): each worker's own copy."""
        spec = self.vectors
        return Path(spec.removeprefix("edge:") + ".ann") if self.ann_snapshot and spec.startswith("edge:") else None

    @property
    def log_path(self) -> Path:
        return self.data_dir / "log.sqlite"

    @property
    def vectors(self) -> str:
        return self.qdrant or f"edge:{(self.data_dir / 'vectors').resolve()}"

    def topic(self, base: str) -> str:
        """``base`` is a contract name such as ``crp.documents``; the prefix may replace ``crp.``."""
        prefix = self.topic_prefix
        if self.input_topic_prefix is not None and base in INPUT_TOPICS:
            prefix = self.input_topic_prefix
        return prefix + base.removeprefix(DEFAULT_PREFIX)

    def base_topic(self, topic: str) -> str:
        if self.input_topic_prefix is not None and topic.startswith(self.input_topic_prefix):
            base = DEFAULT_PREFIX + topic.removeprefix(self.input_topic_prefix)
            if base in INPUT_TOPICS:
                return base
        return DEFAULT_PREFIX + topic.removeprefix(self.topic_prefix)

    def trust_for(self, source: str, source_type: str, claimed: float | None, tenant: str | None = None) -> float:
        """Configured trust wins (the tenant's for its source, else the source's); a producer's claim
        may lower, never raise, its type's default."""
        configured = partition_trust(tenant, source, self.tenant_trust, self.trust)
        if configured is not None:
            return configured
        default = DEFAULT_TRUST_BY_TYPE.get(source_type, 0.1)
        return default if claimed is None else min(claimed, default)


def _float(name: str, raw: Any, lo: float | None = None, hi: float | None = None) -> float:
    try:
        v = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {raw!r} is not a number") from None
    if v != v or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ConfigError(f"{name}: {raw!r} is out of range [{lo}, {hi}]")
    return v


def _int(name: str, raw: Any, lo: int, hi: int) -> int:
    try:
        v = int(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: {raw!r} is not an integer") from None
    if not lo <= v <= hi:
        raise ConfigError(f"{name}: {v} is out of range [{lo}, {hi}]")
    return v


def _bool(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    s = str(raw).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name}: {raw!r} is not a boolean (true/false)")


def _choice(name: str, raw: Any, choices: tuple[str, ...]) -> str:
    v = str(raw).strip().upper()
    if v not in choices:
        raise ConfigError(f"{name}: {raw!r} is not one of {', '.join(choices)}")
    return v


def _retention_ms(name: str, raw: Any) -> int:
    """``infinite`` / ``none`` / ``-1`` (keep every record) or an ISO 8601 duration such as ``P30D``."""
    text = str(raw).strip()
    if text.lower() in ("infinite", "none", "-1"):
        return INFINITE_RETENTION_MS
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc} (or 'infinite')") from None
    if seconds is None:
        return INFINITE_RETENTION_MS
    if seconds < 60:
        raise ConfigError(f"{name}: {text!r} is shorter than a minute")
    return int(seconds * 1000)


def parse_pairs(name: str, raw: str) -> dict[str, str]:
    """``a=1,b=2`` -> {"a": "1", "b": "2"}."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        if "=" not in part:
            raise ConfigError(f"{name}: {part!r} is not of the form name=value")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _trust_map(name: str, raw: Mapping[str, Any]) -> dict[str, float]:
    return {k: _float(f"{name}.{k}", v, 0.0, 1.0) for k, v in raw.items()}


def _tenant_trust_map(name: str, raw: Any) -> dict[tuple[str, str], float]:
    """``[tenant_trust.TENANT]`` tables of source = trust, or ``TENANT:SOURCE=trust,...`` (a tenant name
    holds no ``:``, so the first one ends it; the source may hold any)."""
    pairs: dict[tuple[str, str], Any] = {}
    if isinstance(raw, Mapping):
        for tenant, table in raw.items():
            if not isinstance(table, Mapping):
                raise ConfigError(f"{name}.{tenant}: expected a table of source = trust")
            pairs.update({(str(tenant), str(src)): v for src, v in table.items()})
    else:
        for key, v in parse_pairs(name, str(raw)).items():
            tenant, sep, src = key.partition(":")
            if not sep or not src:
                raise ConfigError(f"{name}: {key!r} is not TENANT:SOURCE")
            pairs[(tenant, src)] = v
    for tenant, _src in pairs:
        if not is_tenant_name(tenant):
            raise ConfigError(f"{name}: {tenant!r} is not a tenant name (letters, digits, '.', '_', '-')")
    return {k: _float(f"{name}.{k[0]}:{k[1]}", v, 0.0, 1.0) for k, v in pairs.items()}


def _ttl_map(name: str, raw: Mapping[str, Any], base: Mapping[str, float | None]) -> dict[str, float | None]:
    out = dict(base)
    for k, v in raw.items():
        if k not in SOURCE_TYPES:
            raise ConfigError(f"{name}: {k!r} is not a source type ({', '.join(SOURCE_TYPES)})")
        try:
            out[k] = parse_duration(str(v))
        except ValueError as exc:
            raise ConfigError(f"{name}.{k}: {exc}") from None
    return out


def load_settings(flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Merge defaults < TOML file (CRP_CONFIG / --config) < environment < flags."""
    env = os.environ if env is None else env
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    s = Settings()
    file_path = flags.get("config") or env.get("CRP_CONFIG")
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if file_path:
        try:
            with open(file_path, "rb") as fh:
                layers.append((str(file_path), tomllib.load(fh)))
        except OSError as exc:
            raise ConfigError(f"config file {file_path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {file_path}: invalid TOML: {exc}") from None
    env_layer: dict[str, Any] = {}
    for key, value in env.items():
        if key.startswith("CRP_") and key not in ("CRP_CONFIG",) and not key.startswith("CRP_TEST_"):
            env_layer[key[4:].lower()] = value
    layers.append(("environment", env_layer))
    layers.append(("flag", flags))
    for origin, layer in layers:
        s = _apply(s, layer, origin)
    if s.broker:
        problem = kafka_problem(s)
        if problem:
            raise ConfigError(problem)
    return s


def kafka_problem(s: Settings) -> str | None:
    """What makes the Kafka client settings inconsistent (one line), or None."""
    protocol, mechanism = s.kafka_security_protocol, s.kafka_sasl_mechanism
    sasl, tls = protocol.startswith("SASL_"), protocol.endswith("SSL")
    if not sasl:
        for name in ("kafka_sasl_mechanism", "kafka_sasl_username", "kafka_sasl_password"):
            if getattr(s, name):
                return f"{name} is set but kafka_security_protocol is {protocol} (SASL_SSL or SASL_PLAINTEXT uses it)"
    if not tls:
        for name in ("kafka_ssl_cafile", "kafka_ssl_certfile", "kafka_ssl_keyfile"):
            if getattr(s, name):
                return f"{name} is set but kafka_security_protocol is {protocol} (SSL or SASL_SSL uses it)"
    if s.kafka_ssl_keyfile and not s.kafka_ssl_certfile:
        return "kafka_ssl_keyfile needs kafka_ssl_certfile (the client certificate it belongs to)"
    if not sasl:
        return None
    if mechanism is None:
        return f"kafka_sasl_mechanism: required with {protocol} (one of {', '.join(KAFKA_MECHANISMS)})"
    if mechanism == "OAUTHBEARER":
        if bool(s.kafka_oauth_token_file) == bool(s.kafka_oauth_token_command):
            return "OAUTHBEARER needs exactly one of kafka_oauth_token_file, kafka_oauth_token_command"
        return None
    for name in ("kafka_sasl_username", "kafka_sasl_password"):
        if not getattr(s, name):
            return f"{name}: required with {mechanism} (env CRP_{name.upper()} or [kafka] in the TOML file)"
    return None


_SIMPLE = {"broker", "qdrant", "embedder", "topic_prefix", "input_topic_prefix", "instance_id", "unsigned_policy"}


def _apply(s: Settings, layer: Mapping[str, Any], origin: str) -> Settings:
    changes: dict[str, Any] = {}
    kafka = layer.get("kafka")
    if isinstance(kafka, Mapping):  # a [kafka] table of the TOML file: its keys are the kafka_* settings
        layer = {**{k: v for k, v in layer.items() if k != "kafka"}, **{f"kafka_{k}": v for k, v in kafka.items()}}
    for raw_key, value in layer.items():
        key = raw_key.replace("-", "_")
        label = f"{origin} {raw_key}" if origin != "environment" else f"CRP_{raw_key.upper()}"
        if key == "data":
            changes["data_dir"] = Path(str(value))
        elif key in ("database", "database_url"):
            changes["database_url"] = str(value)
        elif key in _SIMPLE:
            changes[key] = str(value)
        elif key == "max_record_bytes":
            changes[key] = _int(label, value, 1024, 64 * 1024 * 1024)
        elif key in ("max_facts", "max_facts_per_document"):
            changes["max_facts_per_document"] = _int(label, value, 1, 100_000)
        elif key == "tracing":
            changes[key] = _choice(label, value, ("OFF", "ON", "AUTO")).lower()
        elif key == "partitions":
            changes[key] = _int(label, value, 1, 1024)
        elif key == "batch_size":
            changes[key] = _int(label, value, 1, 100_000)
        elif key == "embedder_batch":
            changes[key] = _int(label, value, 1, 10_000)
        elif key == "embedder_concurrency":
            changes[key] = _int(label, value, 1, 64)
        elif key == "embedder_retries":
            changes[key] = _int(label, value, 0, 100)
        elif key == "embedder_timeout":
            changes[key] = _float(label, value, 0.1, 3600.0)
        elif key == "batch_facts":
            changes[key] = _int(label, value, 1, 20_000)
        elif key == "kafka_batch_max":
            changes[key] = _int(label, value, 1, 100_000)
        elif key == "batch_linger_ms":
            changes[key] = _int(label, value, 0, 60_000)
        elif key in ("ann_min_points", "ann_max_points"):
            changes[key] = _int(label, value, 0, 1_000_000_000)
        elif key in ("cache_facts", "cache_graph_nodes", "cache_claim_facts", "cache_texts"):
            changes[key] = _int(label, value, 1, 100_000_000)
        elif key == "edge_k":
            changes[key] = _int(label, value, 1, 200)
        elif key == "blas_threads":
            changes[key] = _int(label, value, 0, 1024)
        elif key == "metrics_port":
            changes[key] = _int(label, value, 0, 65535)
        elif key in ("min_relevance", "edge_threshold", "contradiction_threshold"):
            changes[key] = _float(label, value, -1.0, 1.0)
        elif key == "agreement_window":
            try:
                changes[key] = parse_duration(str(value))
            except ValueError as exc:
                raise ConfigError(f"{label}: {exc}") from None
        elif key == "expire_after_ttls":
            changes[key] = None if str(value).lower() == "none" else _float(label, value, 1.0, 1000.0)
        elif key == "barrier_wait":
            changes[key] = _float(label, value, 0.0, 600.0)
        elif key == "untrusted_trust":
            changes[key] = _float(label, value, 0.0, 1.0)
        elif key in ("ann_snapshot", "auto_quarantine"):
            changes[key] = _bool(label, value)
        elif key == "trust":
            raw = value if isinstance(value, Mapping) else parse_pairs(label, str(value))
            changes["trust"] = {**s.trust, **_trust_map(label, raw)}
        elif key == "tenant_trust":
            changes["tenant_trust"] = {**s.tenant_trust, **_tenant_trust_map(label, value)}
        elif key == "ttl":
            raw = value if isinstance(value, Mapping) else parse_pairs(label, str(value))
            changes["ttl_by_type"] = _ttl_map(label, raw, s.ttl_by_type)
        elif key == "kafka_security_protocol":
            changes[key] = _choice(label, value, KAFKA_PROTOCOLS)
        elif key == "kafka_sasl_mechanism":
            changes[key] = _choice(label, value, KAFKA_MECHANISMS)
        elif key in KAFKA_TEXT_KEYS:
            changes[key] = str(value) or None
        elif key == "replication_factor":
            changes[key] = _int(label, value, 1, 32)
        elif key == "derived_retention":
            changes["derived_retention_ms"] = _retention_ms(label, value)
        elif key == "signing_keys":
            raw = value if isinstance(value, Mapping) else parse_pairs(label, str(value))
            changes["signing_keys"] = {k: str(v) for k, v in raw.items()}
        elif origin == "flag":
            continue  # other CLI flags are the command's own
        elif origin != "environment":
            raise ConfigError(f"{origin}: unknown setting {raw_key!r}")
    s = replace(s, **changes)
    if s.unsigned_policy not in ("deadletter", "untrusted"):
        raise ConfigError(f"unsigned_policy: {s.unsigned_policy!r} is not one of deadletter, untrusted")
    if s.broker is not None and s.broker and not s.broker.startswith("kafka://"):
        raise ConfigError(f"broker: {s.broker!r} must look like kafka://HOST:PORT")
    return s
