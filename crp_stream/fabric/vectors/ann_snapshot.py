"""The ANN cache kept on disk between runs: a restart reads the HNSW graph back instead of building it
(the build took ~20 minutes at 1M points, at every start).

The vector store stays the truth; a snapshot is only a head start. At start-up the store is scanned
a chunk at a time, and a slot of the snapshot is kept only
where the store still holds its fact with bitwise the same vector. The store's other points are then
added, as writes are, and the slots whose fact is gone or was written again are never returned (HNSW
keeps no deletes; the cache already bars replaced slots). A stale, torn or foreign snapshot therefore
costs build time, never a wrong answer.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
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
PAGE_OUT_EVERY = 100_000  # points of a scan read back between two ``paged`` page-outs

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


def restore(directory: Path, dim: int, chunks: Iterable[Sequence[Point]]) -> AnnCache | None:
    """The cache of the store's points (``chunks``: its scan, a chunk at a time, in any order) on the
    snapshot's graph, or None when there is no usable snapshot (missing, unreadable, another
    dimension, or mostly dead). Only the vectors of points the snapshot does not hold as they are
    stay beside the graph: never every point's at once (1.8 GiB of arrays at 1M facts)."""
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
    n = len(slots)
    slot_of: dict[str, int] = {}
    for i, f in enumerate(slots):
        if isinstance(f, str):
            slot_of.setdefault(f, i)  # a fact in two slots: the first claim wins
    stored = stored_vectors(index)
    live = np.zeros(n, dtype=bool)
    names: list[str | None] = [None] * n
    statuses: list[str] = ["active"] * n
    expires_of: list[float | None] = [None] * n
    rest: list[Point] = []  # points the snapshot does not hold as they are: added after it
    for chunk in chunks:
        at = np.fromiter((slot_of.get(p[0], -1) for p in chunk), dtype=np.int64, count=len(chunk))
        held = np.flatnonzero(at >= 0)
        same = np.zeros(len(chunk), dtype=bool)
        if held.size:  # bitwise the same vector, or the slot is dead
            scanned = np.stack([chunk[k][1] for k in held.tolist()]).astype(np.float32, copy=False)
            same[held] = (stored[at[held]] == scanned).all(axis=1)
        for k, point in enumerate(chunk):
            if same[k]:
                s = int(at[k])
                live[s] = True
                names[s], statuses[s], expires_of[s] = point[0], point[2], point[3]
            else:
                rest.append(point)
    del slot_of
    if n and np.count_nonzero(~live) > MAX_DEAD_SHARE * n:
        log.info("ANN snapshot in %s is mostly out of date: building the cache from the store", directory)
        return None
    ann = AnnCache.adopt(index, names, statuses, expires_of)
    rest.sort(key=lambda p: p[0])  # in fact_id order, as a build adds them
    for start in range(0, len(rest), _CHUNK):
        part = rest[start : start + _CHUNK]
        ann.add(
            [p[0] for p in part], np.stack([p[1] for p in part]), [p[2] for p in part], [p[3] for p in part], threads=0
        )
    log.info(
        "ANN cache read back from %s: %d points kept, %d added, %d dead slots",
        directory,
        int(np.count_nonzero(live)),
        len(rest),
        int(np.count_nonzero(~live)),
    )
    return ann


def paged(chunks: Iterable[list[Point]], page_out: Callable[[], None]) -> Iterator[list[Point]]:
    """``chunks`` as they come, calling ``page_out`` every ``PAGE_OUT_EVERY`` points read: the store's
    scan brings the pages of its files in again, and the ANN cache, not they, will serve."""
    read = 0
    for chunk in chunks:
        yield chunk
        if (read + len(chunk)) // PAGE_OUT_EVERY != read // PAGE_OUT_EVERY:
            page_out()
        read += len(chunk)


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
