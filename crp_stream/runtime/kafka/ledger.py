"""Where the worker stands on each input partition it holds: the fabric offset and the generation.

A slot is ``(group, contract topic, partition)``. A partition is claimed on its first record after an
assignment (the fabric's offset loaded, the outbox produced again: ``KafkaWorker.claim_partition``)
and released when it is revoked; a record below the slot's offset was applied already. The offset
only moves forward while the slot is held.
"""

from __future__ import annotations

from collections.abc import Iterable

Slot = tuple[str, str, int]  # (group, contract topic, partition)


class PartitionLedger:
    def __init__(self) -> None:
        self._committed: dict[Slot, int] = {}  # fabric offset, as loaded and advanced
        self._generation: dict[Slot, int | None] = {}

    def unclaimed(self, slot: Slot, generation: int | None) -> bool:
        """The partition is new to this worker, or came back in another generation."""
        return self._generation.get(slot, -1) != generation or slot not in self._committed

    def claim(self, slot: Slot, committed: int, generation: int | None) -> None:
        self._committed[slot] = committed
        self._generation[slot] = generation

    def holds(self, slot: Slot) -> bool:
        return slot in self._committed

    def offset(self, slot: Slot) -> int:
        """The next offset to apply on a held slot."""
        return self._committed[slot]

    def advance(self, slot: Slot, to: int) -> None:
        """Move a held slot forward to ``to`` (never back); a slot revoked meanwhile stays released."""
        if slot in self._committed:
            self._committed[slot] = max(self._committed[slot], to)

    def release(self, base: str, partition: int) -> None:
        """A revoked partition: claimed again (offset and outbox reloaded) if it comes back."""
        for slot in [s for s in self._committed if s[1:] == (base, partition)]:
            self._committed.pop(slot, None)
            self._generation.pop(slot, None)

    def positions(self, group: str, base: str, parts: Iterable[int]) -> dict[int, int]:
        """The held partitions of ``parts`` and their offsets."""
        return {p: self._committed[(group, base, p)] for p in parts if (group, base, p) in self._committed}


__all__ = ["PartitionLedger", "Slot"]
