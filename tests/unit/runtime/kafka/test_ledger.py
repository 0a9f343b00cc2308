"""The Kafka worker's partition ledger: claims, generations, and an offset that only moves forward."""

from __future__ import annotations

from crp_stream.runtime.kafka.ledger import PartitionLedger


def test_a_partition_is_claimed_once_per_generation_and_released_on_revocation() -> None:
    ledger = PartitionLedger()
    slot = ("ingest", "crp.documents", 2)
    assert ledger.unclaimed(slot, 1)
    ledger.claim(slot, 40, 1)
    assert not ledger.unclaimed(slot, 1) and ledger.holds(slot)
    assert ledger.unclaimed(slot, 2)  # came back in another generation: its offset is loaded again
    ledger.release("crp.documents", 2)
    assert not ledger.holds(slot) and ledger.unclaimed(slot, 1)


def test_the_offset_only_moves_forward_and_not_after_a_release() -> None:
    ledger = PartitionLedger()
    slot = ("retrieval", "crp.window.requests", 0)
    ledger.claim(slot, 10, 3)
    ledger.advance(slot, 14)
    ledger.advance(slot, 12)  # an older batch's commit finishing late
    assert ledger.offset(slot) == 14
    ledger.release("crp.window.requests", 0)
    ledger.advance(slot, 20)  # revoked meanwhile: claimed again from the fabric if it returns
    assert not ledger.holds(slot)


def test_positions_name_only_the_held_partitions_of_a_group() -> None:
    ledger = PartitionLedger()
    ledger.claim(("arbiter", "crp.facts", 0), 5, 1)
    ledger.claim(("arbiter", "crp.facts", 2), 9, 1)
    ledger.claim(("ingest", "crp.facts", 1), 7, 1)
    assert ledger.positions("arbiter", "crp.facts", [0, 1, 2]) == {0: 5, 2: 9}
