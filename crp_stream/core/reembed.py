"""The rules a change of embedding model follows (``crp-stream reembed``)."""

from __future__ import annotations

from collections.abc import Sequence

from crp_stream.core.edges import edges_past_k


def rebuilt_similarity_edges(
    fact_ids: Sequence[str], neighbours: Sequence[Sequence[tuple[str, float]]], k: int
) -> list[tuple[str, str, float]]:
    """SPEC-025 §1.3 for a fabric whose vectors were all computed again by another model: each fact
    links to its nearest neighbours (``neighbours[i]`` of ``fact_ids[i]``, at most ``k`` at or above
    the edge threshold), in both directions; each fact then keeps its ``k`` strongest similarity edges.
    Returns the directed ``(src, dst, weight)`` rows, sorted by ``(src, dst)``."""
    pairs: dict[tuple[str, str], float] = {}
    for a, hits in zip(fact_ids, neighbours, strict=True):
        for b, w in hits:
            if a != b:  # the first weight of a pair wins (a cosine is symmetric up to rounding)
                pairs.setdefault((a, b), float(w))
                pairs.setdefault((b, a), float(w))
    keys = sorted(pairs)
    drop = set(edges_past_k([a for a, _b in keys], [b for _a, b in keys], [pairs[p] for p in keys], k))
    return [(a, b, pairs[(a, b)]) for n, (a, b) in enumerate(keys) if n not in drop]


def session_model(session_model_id: str, active_model_id: str | None) -> str | None:
    """SPEC-024 §2.5 across a reembed: a session's windows are embedded and searched with the model
    the session started on. Returns that model when it is not the active one (None: the active one
    serves it)."""
    if active_model_id is None or session_model_id == active_model_id:
        return None
    return session_model_id


__all__ = ["rebuilt_similarity_edges", "session_model"]
