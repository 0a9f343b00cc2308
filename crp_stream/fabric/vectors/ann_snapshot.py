"""The ANN cache kept on disk between runs: a restart reads the HNSW graph back instead of building it
(the build took ~20 minutes at 1M points, at every start).

The vector store stays the truth; a snapshot is only a head start. At start-up the store is scanned
as before, and a slot of the snapshot is kept only where the store still holds its fact with bitwise
the same vector. The store's other points are then added, as writes are, and the slots whose fact is
gone or was written again are never returned (HNSW keeps no deletes; the cache already bars replaced
slots). A stale, torn or foreign snapshot therefore costs build time, never a wrong answer.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
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


def restore(directory: Path, dim: int, points: Sequence[Point]) -> AnnCache | None:
    """The cache of ``points`` (the store's scan) on the snapshot's graph, or None when there is no
    usable snapshot (missing, unreadable, another dimension, or mostly dead)."""
    try:
        meta = json.loads((directory / SLOTS_FILE).read_text())
        index = faiss.read_index(str(directory / INDEX_FILE))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RuntimeError) as exc:  # faiss reports a bad file as RuntimeError
        log.warning("ANN snapshot in %s is unreadable (%s): building the cache from the store", directory, exc)
        return None
    slots = meta.get("slots") if isinstance(meta, dict) else None
    if (
        not isinstance(index, faiss.IndexHNSWFlat)
        or meta.get("format") != FORMAT
        or meta.get("dim") != dim
        or index.d != dim
        or not isinstance(slots, list)
        or len(slots) != index.ntotal
    ):
        log.warning("ANN snapshot in %s does not fit this index: building the cache from the store", directory)
        return None
    at = {p[0]: i for i, p in enumerate(points)}
    # per slot, the scanned point it holds (-1: none), first claim wins
    point_of = np.fromiter(
        (at.get(f, -1) if isinstance(f, str) else -1 for f in slots), dtype=np.int64, count=len(slots)
    )
    _, first = np.unique(point_of, return_index=True)
    unique = np.zeros(len(slots), dtype=bool)
    unique[first] = True
    point_of[~unique] = -1
    stored = stored_vectors(index)
    for start in range(0, len(slots), _CHUNK):  # bitwise the same vector, or the slot is dead
        part = point_of[start : start + _CHUNK]
        held = np.flatnonzero(part >= 0)
        if held.size:
            scanned = np.stack([points[i][1] for i in part[held].tolist()]).astype(np.float32, copy=False)
            same = (stored[start + held] == scanned).all(axis=1)
            part[held[~same]] = -1
    live = point_of >= 0
    if len(slots) and np.count_nonzero(~live) > MAX_DEAD_SHARE * len(slots):
        log.info("ANN snapshot in %s is mostly out of date: building the cache from the store", directory)
        return None
    names: list[str | None] = [None] * len(slots)
    statuses: list[str] = ["active"] * len(slots)
    expires_of: list[float | None] = [None] * len(slots)
    for s, i in zip(np.flatnonzero(live).tolist(), point_of[live].tolist(), strict=True):
        fid, _v, status, exp = points[i]
        names[s], statuses[s], expires_of[s] = fid, status, exp
    ann = AnnCache.adopt(index, names, statuses, expires_of)
    covered = np.zeros(len(points), dtype=bool)
    covered[point_of[live]] = True
    missing = np.flatnonzero(~covered).tolist()
    for start in range(0, len(missing), _CHUNK):
        part_points = [points[i] for i in missing[start : start + _CHUNK]]
        ann.add(
            [p[0] for p in part_points],
            np.stack([p[1] for p in part_points]),
            [p[2] for p in part_points],
            [p[3] for p in part_points],
            threads=0,
        )
    log.info(
        "ANN cache read back from %s: %d points kept, %d added, %d dead slots",
        directory,
        int(np.count_nonzero(live)),
        len(missing),
        int(np.count_nonzero(~live)),
    )
    return ann
