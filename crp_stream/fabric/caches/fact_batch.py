"""A batch of cached facts as envelope assembly reads it: ids, row dicts, vectors and numeric columns
(``Batch``, ``Columns``), and the fields the fact cache keeps (``FIELDS``, ``HEAD_FIELDS``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

# The columns assembly reads; ``status`` is filled in per call from the store.
FIELDS = (
    "fact_id",
    "source",
    "source_type",
    "trust",
    "importance",
    "epoch_us",
    "modified_at_us",
    "ttl_s",
    "expires_at_us",
    "text",
    "subject",
    "attribute",
    "value",
    "unit",
)

# A fact's fields in ``core.conflicts.FactView``'s order, up to ``importance`` (the rest change per request):
# kept per cached fact as one tuple (``Batch.heads``), so a request's views read no row dict
HEAD_FIELDS = (
    "fact_id",
    "text",
    "subject",
    "attribute",
    "value",
    "unit",
    "source",
    "source_type",
    "trust",
    "importance",
)
head_of = itemgetter(*HEAD_FIELDS)

READ_FIELDS = (*FIELDS, "status")  # a fact not known yet: its status and its row in one statement
NEVER = np.iinfo(np.int64).max  # ``expires_at_us`` of a fact that never expires


class Columns(NamedTuple):
    """Numeric columns of a batch of facts, aligned with its ids: what scoring reads for every
    candidate, as arrays instead of a pass over row dicts."""

    importance: npt.NDArray[np.float64]
    modified_at_us: npt.NDArray[np.float64]  # as floats, as ``np.fromiter`` over the rows gives them
    ttl_s: npt.NDArray[np.float64]  # ``inf``: never expires (``core.recency.ttl_or_inf``)
    epoch_us: npt.NDArray[np.int64]
    expires_at_us: npt.NDArray[np.int64]  # ``NEVER``: no hard expiry

    def take(self, at: npt.NDArray[np.intp]) -> Columns:
        """The rows ``at`` of every column."""
        return Columns(
            self.importance[at], self.modified_at_us[at], self.ttl_s[at], self.epoch_us[at], self.expires_at_us[at]
        )


class Batch(NamedTuple):
    ids: list[str]
    rows: list[dict[str, Any]]  # the cache's own dicts: read them, never mutate them
    vecs: npt.NDArray[np.float32]
    cols: Columns
    # the current status of each fact (a row's own ``status`` may be older); None: read the rows'
    status: list[str] | None = None
    heads: list[tuple[Any, ...]] | None = None  # ``HEAD_FIELDS`` of each row; None: read the rows
    # ``core.ngram.gram_hash_array`` of each text, where the cache holds it (facts it preloaded)
    grams: list[npt.NDArray[np.int64] | None] | None = None


class Loaded(NamedTuple):
    """Facts just read from the store, in the order read: vectors and ``numbers``."""

    vecs: npt.NDArray[np.float32]
    num: npt.NDArray[np.float64]
    whole: npt.NDArray[np.int64]


def numbers(rows: Sequence[dict[str, Any]]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """The ``Columns`` of rows: (importance, modified_at_us, ttl_s) as floats, (epoch_us, expires_at_us)."""
    num = np.array(
        [(r["importance"], r["modified_at_us"], math.inf if r["ttl_s"] is None else r["ttl_s"]) for r in rows],
        dtype=np.float64,
    ).reshape(-1, 3)
    whole = np.array(
        [(r["epoch_us"], NEVER if r["expires_at_us"] is None else r["expires_at_us"]) for r in rows], dtype=np.int64
    ).reshape(-1, 2)
    return num, whole


def joined(parts: list[Batch]) -> Batch:
    """One batch of the parts' facts, in order."""
    cols = Columns(*(np.concatenate([getattr(p.cols, f) for p in parts]) for f in Columns._fields))
    return Batch(
        [f for p in parts for f in p.ids],
        [r for p in parts for r in p.rows],
        np.concatenate([p.vecs for p in parts]),
        cols,
        [st for p in parts for st in p.status or []],
        [h for p in parts for h in p.heads or []],
        [g for p in parts for g in p.grams or []],
    )


__all__ = [
    "FIELDS",
    "HEAD_FIELDS",
    "NEVER",
    "READ_FIELDS",
    "Batch",
    "Columns",
    "Loaded",
    "head_of",
    "joined",
    "numbers",
]
