"""The ANN cache kept on disk (fabric/vectors/ann_snapshot.py): read back, it answers as the cache it was; a
snapshot behind the store, torn or foreign never serves a point the store does not hold as it is."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from crp_stream.fabric.vectors import ann_snapshot
from crp_stream.fabric.vectors.ann import AnnCache
from crp_stream.fabric.vectors.port import VectorItem
from tests.unit.fabric.vectors.test_ann import NOW, clustered

EXCLUDED = ("quarantined", "expired", "superseded")


def points(vecs: np.ndarray, prefix: str = "f") -> list[ann_snapshot.Point]:
    return [
        (f"{prefix}{i:05d}", v, "stale" if i % 7 == 0 else "active", NOW + 50 if i % 11 == 0 else None)
        for i, v in enumerate(vecs)
    ]


def restore(directory: Path, dim: int, pts: list[ann_snapshot.Point]) -> AnnCache | None:
    """``ann_snapshot.restore`` over a store that holds ``pts``, scanned in its own order (not the
    fact ids'), a chunk at a time."""
    order = np.random.default_rng(len(pts)).permutation(len(pts)).tolist()
    scanned = [pts[i] for i in order]
    return ann_snapshot.restore(directory, dim, (scanned[s : s + 700] for s in range(0, len(scanned), 700)))


def built(pts: list[ann_snapshot.Point]) -> AnnCache:
    ann = AnnCache(pts[0][1].shape[0])
    ann.add([p[0] for p in pts], np.stack([p[1] for p in pts]), [p[2] for p in pts], [p[3] for p in pts])
    return ann


def hits(ann: AnnCache, queries: np.ndarray, k: int = 20, at: float | None = NOW) -> list[list[tuple[str, float]]]:
    found = ann.search(queries, k, EXCLUDED, at, None)
    assert found is not None
    return found


def test_read_back_it_answers_exactly_as_the_cache_it_was(tmp_path: Path) -> None:
    pts = points(clustered(2500))
    ann = built(pts)
    ann_snapshot.save(ann, tmp_path)
    back = restore(tmp_path, 32, pts)
    assert back is not None and back.added == 0 and len(back) == len(ann)
    queries = clustered(40, seed=8)
    assert hits(back, queries) == hits(ann, queries)
    assert hits(back, queries, at=NOW + 51) == hits(ann, queries, at=NOW + 51)  # the expiries came back
    assert back.alive_fraction(EXCLUDED, NOW) == ann.alive_fraction(EXCLUDED, NOW)
    # statuses come from the store's scan, not the snapshot: a point quarantined since is not served
    moved = [(f, v, "quarantined" if f == pts[3][0] else s, e) for f, v, s, e in pts]
    again = restore(tmp_path, 32, moved)
    assert again is not None
    assert pts[3][0] not in {f for row in hits(again, pts[3][1][None, :], 50) for f, _ in row}


def test_a_snapshot_behind_the_store_keeps_only_what_still_holds(tmp_path: Path) -> None:
    vecs = clustered(2500)
    pts = points(vecs)
    ann_snapshot.save(built(pts), tmp_path)
    rng = np.random.default_rng(4)
    rewritten = rng.normal(size=32).astype(np.float32)
    rewritten /= np.linalg.norm(rewritten)
    now = [p for p in pts if p[0] != "f00010"]  # gone from the store
    now[20] = (now[20][0], rewritten, "active", None)  # written again with another vector
    now.append(("new", vecs[5], "active", None))  # written after the snapshot
    back = restore(tmp_path, 32, now)
    assert back is not None
    assert back.added == 2 and len(back) == len(now)  # the rewritten point and the new one
    served = {f for row in hits(back, vecs, 30) for f, _ in row}
    assert "f00010" not in served
    top = hits(back, np.stack([rewritten, vecs[5]]), 2)
    assert top[0][0][0] == now[20][0] and top[0][0][1] == pytest.approx(1.0, abs=1e-6)
    assert {top[1][0][0], top[1][1][0]} == {"f00005", "new"}
    # every served score is the cosine of the store's vector, never the snapshot's old one
    store = {f: v for f, v, _s, _e in now}
    q = clustered(5, seed=12)
    for qi, row in zip(q, hits(back, q), strict=True):
        for f, score in row:
            assert score == pytest.approx(float(store[f] @ qi), abs=1e-5)


def test_a_torn_or_foreign_snapshot_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pts = points(clustered(1500))
    ann_snapshot.save(built(pts), tmp_path)
    assert restore(tmp_path / "none", 32, pts) is None  # no snapshot: quietly built
    assert restore(tmp_path, 16, pts) is None  # another dimension
    # another index's slot file beside this graph (a crash between the two replaces): no slot holds
    meta = json.loads((tmp_path / ann_snapshot.SLOTS_FILE).read_text())
    (tmp_path / ann_snapshot.SLOTS_FILE).write_text(json.dumps({**meta, "slots": [f"x{i}" for i in range(1500)]}))
    assert restore(tmp_path, 32, pts) is None
    with caplog.at_level(logging.WARNING):
        (tmp_path / ann_snapshot.INDEX_FILE).write_bytes(b"not an index")
        assert restore(tmp_path, 32, pts) is None
    assert "unreadable" in caplog.text


def test_a_fabric_reads_its_cache_back_at_the_next_start(tmp_path: Path) -> None:
    from crp_stream.config import Settings
    from crp_stream.runtime.embedded import open_fabric

    vecs = clustered(1500)
    ids = [f"f{i:05d}" for i in range(1500)]
    settings = Settings(data_dir=tmp_path, embedder="precomputed:m-32", ann_min_points=1000)
    fabric = open_fabric(settings)
    try:
        fabric.vectors.upsert([VectorItem(f, v, "active", None) for f, v in zip(ids[:1200], vecs[:1200], strict=True)])
        first = fabric.vectors.ann()
        assert first is not None and (tmp_path / "vectors.ann" / ann_snapshot.INDEX_FILE).exists()  # saved once built
        fabric.vectors.upsert([VectorItem(f, v, "active", None) for f, v in zip(ids[1200:], vecs[1200:], strict=True)])
        expected = [fabric.vectors.search(q, 10, NOW) for q in vecs[::50]]
    finally:
        fabric.close()  # saves the 300 points written since
    again = open_fabric(settings)
    try:
        ann = again.vectors.ann()
        assert ann is not None and ann.added == 0 and len(ann) == 1500  # read back whole, nothing built
        assert [again.vectors.search(q, 10, NOW) for q in vecs[::50]] == expected
    finally:
        again.close()
    off = open_fabric(Settings(data_dir=tmp_path, embedder="precomputed:m-32", ann_min_points=1000, ann_snapshot=False))
    try:
        ann = off.vectors.ann()
        assert ann is not None and ann.added == 1500  # built from the store, the snapshot unread
    finally:
        off.close()
