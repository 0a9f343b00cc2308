"""The consumer groups a Kafka worker process runs: one per handler, chosen with ``--groups``."""

from __future__ import annotations

from collections.abc import Sequence

from crp_stream.config import ConfigError
from crp_stream.processors import HANDLER_GROUPS

GROUPS = HANDLER_GROUPS


def parse_groups(raw: str | Sequence[str] | None) -> tuple[str, ...]:
    items = [g.strip() for g in (raw.split(",") if isinstance(raw, str) else raw or GROUPS) if g.strip()]
    unknown = sorted(set(items) - set(GROUPS))
    if unknown or not items:
        raise ConfigError(f"groups: {', '.join(unknown) or '(none)'} not among {', '.join(GROUPS)}")
    return tuple(g for g in GROUPS if g in items)


__all__ = ["GROUPS", "parse_groups"]
