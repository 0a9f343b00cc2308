"""The ANN cache kept on disk between runs: a restart reads the HNSW graph back instead of building it
(the build took ~20 minutes at 1M points, at every start).

The vector store stays the truth; a snapshot is only a head start. At start-up the store is scanned
(ids, statuses and expiries; the vectors a chunk at a time), and a slot of the snapshot is kept only
where the store still holds its fact with bitwise the same vector. The store's other points are then
added, as writes are, and the slots whose fact is gone or was written again are never returned (HNSW
keeps no deletes; the cache already bars replaced slots). A stale, torn or foreign snapshot therefore
costs build time, never a wrong answer.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import faiss
import numpy as np

from crp_stream.fabric.vectors.ann import AnnCache, Vector, stored_vectors

log = logging.getLogger(__name__)

FORMAT = 1
INDEX_FILE = "hnsw.faiss"
SLOTS_FILE = "slots.json"
_CHUNK = 10_000
# more dead slots than this share of the snapshot: a new build is smaller and searches faster
MAX_DEAD_SHARE = 0.5

Point = tuple[str, Vector, str, float | None]  # (fact_id, unit vector, status, expires_at), as ``_scan``
Meta = tuple[str, str, float | None]  # (fact_id, status, expires_at), as ``_scan_meta``
Fetch = Callable[[Sequence[str]], dict[str, Vector]]  # the store's vectors of some facts (``get_vectors``)


def save(ann: AnnCache, directory: Path) -> None:
    """Write the graph and its slots' fact ids; each file is replaced whole (``os.replace``), and a
    pair torn by a crash between the two is caught by ``restore``'s check of every slot."""
    directory.mkdir(parents=True, exist_ok=True)
    # a name of this process's own: two processes saving at once never write into one file
    index_tmp, slots_tmp = (directory / f"{name}.{os.getpid()}.tmp" for name in (INDEX_FILE, SLOTS_FILE))
    faiss.write_index(ann.index, str(index_tmp))
    slots_tmp.write_text(json.dumps({"format": FORMAT, "dim": ann.dim, "slots": ann.slot_names()}))
    os.replace(index_tmp, directory / INDEX_FILE)
    os.replace(slots_tmp, directory / SLOTS_FILE)


def restore(directory: Path, dim: int, meta: Sequence[Meta], fetch: Fetch) -> AnnCache | None:
    """The cache of the store's points (``meta``: its scan without vectors, in fact_id order; ``fetch``:
    the store's vectors of some of them) on the snapshot's graph, or None when there is no usable
    snapshot (missing, unreadable, another dimension, or mostly dead). The vectors are read a chunk
    at a time: never every point's at once (1.8 GiB of arrays at 1M facts)."""
    try:
        saved = json.loads((directory / SLOTS_FILE).read_text())
        index = faiss.read_index(str(directory / INDEX_FILE))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RuntimeError) as exc:  # faiss reports a bad file as RuntimeError
        log.warning("ANN snapshot in %s is unreadable (%s): building the cache from the store", directory, exc)
        return None
    slots = saved.get("slots") if isinstance(saved, dict) else None
    if (
        not isinstance(index, faiss.IndexHNSWFlat)
        or saved.get("format") != FORMAT
        or saved.get("dim") != dim
        or index.d != dim
        or not isinstance(slots, list)
        or len(slots) != index.ntotal
    ):
        log.warning("ANN snapshot in %s does not fit this index: building the cache from the store", directory)
        return None
    at = {p[0]: i for i, p in enumerate(meta)}
    # per slot, the scanned point it holds (-1: none), first claim wins
    point_of = np.fromiter(
        (at.get(f, -1) if isinstance(f, str) else -1 for f in slots), dtype=np.int64, count=len(slots)
    )
    del at
    _, first = np.unique(point_of, return_index=True)
    unique = np.zeros(len(slots), dtype=bool)
    unique[first] = True
    point_of[~unique] = -1
    stored = stored_vectors(index)
    for start in range(0, len(slots), _CHUNK):  # bitwise the same vector, or the slot is dead
        part = point_of[start : start + _CHUNK]
        held = np.flatnonzero(part >= 0)
        if held.size:
            found, scanned = in_order([meta[i] for i in part[held].tolist()], fetch, dim)
            same = np.zeros(held.size, dtype=bool)
            if found:
                have = {p[0] for p in found}
                keep = np.fromiter((meta[i][0] in have for i in part[held].tolist()), dtype=bool, count=held.size)
                same[keep] = (stored[start + held[keep]] == scanned).all(axis=1)
            part[held[~same]] = -1
    live = point_of >= 0
    if len(slots) and np.count_nonzero(~live) > MAX_DEAD_SHARE * len(slots):
        log.info("ANN snapshot in %s is mostly out of date: building the cache from the store", directory)
        return None
    names: list[str | None] = [None] * len(slots)
    statuses: list[str] = ["active"] * len(slots)
    expires_of: list[float | None] = [None] * len(slots)
    for s, i in zip(np.flatnonzero(live).tolist(), point_of[live].tolist(), strict=True):
        names[s], statuses[s], expires_of[s] = meta[i]
    ann = AnnCache.adopt(index, names, statuses, expires_of)
    covered = np.zeros(len(meta), dtype=bool)
    covered[point_of[live]] = True
    missing = np.flatnonzero(~covered).tolist()
    added = add_all(ann, [meta[i] for i in missing], fetch, dim)
    log.info(
        "ANN cache read back from %s: %d points kept, %d added, %d dead slots",
        directory,
        int(np.count_nonzero(live)),
        added,
        int(np.count_nonzero(~live)),
    )
    return ann


def in_order(part: Sequence[Meta], fetch: Fetch, dim: int) -> tuple[list[Meta], Vector]:
    """The points of ``part`` whose vector the store holds, in order, and those vectors (n x dim)."""
    got = fetch([p[0] for p in part])
    kept = [p for p in part if p[0] in got]
    if not kept:
        return [], np.zeros((0, dim), dtype=np.float32)
    return kept, np.stack([got[p[0]] for p in kept]).astype(np.float32, copy=False)


def add_all(ann: AnnCache, meta: Sequence[Meta], fetch: Fetch, dim: int) -> int:
    """Add the points of ``meta`` to ``ann`` in its order, a chunk of vectors read at a time; returns
    how many were added (a point whose vector the store no longer holds is not)."""
    added = 0
    for start in range(0, len(meta), _CHUNK):
        kept, vecs = in_order(meta[start : start + _CHUNK], fetch, dim)
        if kept:
            ann.add([p[0] for p in kept], vecs, [p[1] for p in kept], [p[2] for p in kept], threads=0)
            added += len(kept)
    return added
