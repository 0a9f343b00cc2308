"""runtime/heap.settle: the collector of a long-running process."""

from __future__ import annotations

import gc

from crp_stream.runtime import heap


def test_settle_freezes_what_is_alive_and_makes_young_collections_rarer() -> None:
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        gc.set_threshold(700, threshold[1], threshold[2])  # CPython's default: an in-process run may have settled
        kept = [[i] for i in range(10)]  # tracked objects alive now: frozen by settle
        heap.settle()
        assert gc.get_freeze_count() >= frozen + len(kept)
        assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, threshold[1], threshold[2])
    finally:
        gc.set_threshold(*threshold)
        if frozen == 0:  # leave the heap as this test found it
            gc.unfreeze()
