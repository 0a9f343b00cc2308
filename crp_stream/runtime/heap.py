"""The cyclic collector of a long-running process (``crp-stream run``, the Kafka worker), set once at
start-up, after the process has built what it keeps."""

from __future__ import annotations

import gc

# Young collections every 10,000 net container allocations instead of CPython's 700: a batch's decoded
# events, rows and outputs live until the batch ends, and at 700 each was walked by several young
# collections and then again in the middle generation (the arbiter: 183 young and 17 middle collections
# per 10,000 records, 6-8% of its CPU; at 10,000: 9 young ones, ~3%). Safe: only garbage in
# reference cycles waits for the collector, at most ~10,000 young objects of it (a few MB), and the older
# generations keep CPython's thresholds.
YOUNG_THRESHOLD = 10_000


def settle() -> None:
    """What is alive now (modules, classes, the fabric) lives as long as the process: frozen out of the
    collector's sight, a full collection scans only what the process allocates later (57 ms -> 3 ms);
    and the young generation's threshold raised (``YOUNG_THRESHOLD``)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
