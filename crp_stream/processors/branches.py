"""Fan-out branches' selections (SPEC-027 §1.3, §1.6): every branch selects its facts, no fact in two."""

from __future__ import annotations

from typing import SupportsFloat, TypedDict

import numpy as np

from crp_stream import events
from crp_stream.core import fanout
from crp_stream.core.calibration import Thresholds
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.processors import assembly


class Assignment(TypedDict):
    """A fact several branches wanted, and the branch it went to (SPEC-027 §1.6)."""

    fact_id: str
    branch: int
    wanted_by: list[int]
    score: float


def select_branches(
    uow: UnitOfWork, ev: events.WindowRequested, th: Thresholds, branches: list[assembly.Candidates]
) -> tuple[list[assembly.Selection], list[Assignment]]:
    """Select every branch's facts so that no fact is in two branches (SPEC-027 §1.3, §1.6).

    A candidate several branches retrieved belongs to the branch that scores it higher (its
    partition pulls it harder); the others never select it. Facts outside every candidate set
    (connectors reached through the graph) are settled the same way once selected: the lower
    scoring branch drops the fact and selects again, until the branches are disjoint.
    """
    owners = shared_owners(branches)
    exclude: list[set[str]] = []
    eligible: list[list[int]] = []
    for b, c in enumerate(branches):
        elig, members = assembly.collapse_duplicates(c)
        eligible.append(elig)
        dups = {c.ids[m] for rep, g in members.items() for m in g if m != rep}
        exclude.append(dups | {f for f, o in owners.items() if o != b})

    def pick(b: int) -> assembly.Selection:
        return assembly.select(uow, branches[b], eligible[b], ev.fact_budget, ev.policy, th, exclude[b])

    sels = [pick(b) for b in range(len(branches))]
    id_sets = [set(c.ids) for c in branches]
    wanted = {f: {b for b, ids in enumerate(id_sets) if f in ids} for f in owners}
    while len(branches) > 1:
        chosen = [{branches[b].ids[i] for i in sel.chosen()} for b, sel in enumerate(sels)]
        both = sorted({f for b in range(len(sels)) for f in chosen[b] if sum(f in ch for ch in chosen) > 1})
        if not both:
            break
        redo: set[int] = set()
        for f in both:
            holders = [b for b in range(len(sels)) if f in chosen[b]]
            owner = max(holders, key=lambda b: (score(branches[b], f), -b))
            owners[f] = owner
            wanted[f] = wanted.get(f, set()) | set(holders)
            for b in holders:
                if b != owner:
                    exclude[b].add(f)
                    redo.add(b)
        for b in sorted(redo):
            sels[b] = pick(b)
    shared = [
        Assignment(
            fact_id=f,
            branch=owners[f],
            wanted_by=sorted(wanted[f]),
            score=_r(score(branches[owners[f]], f)),
        )
        for f in sorted(owners)
        if len(wanted.get(f, ())) > 1
    ]
    return sels, shared


def score(c: assembly.Candidates, fact_id: str) -> float:
    return float(c.score[c.ids.index(fact_id)])


def shared_owners(branches: list[assembly.Candidates]) -> dict[str, int]:
    """SPEC-027 §1.6: a fact two branches want goes to the branch that scores it higher."""
    if len(branches) < 2:
        return {}
    all_ids = sorted({f for c in branches for f in c.ids})
    col = {f: i for i, f in enumerate(all_ids)}
    m = np.full((len(branches), len(all_ids)), -np.inf)
    for b, c in enumerate(branches):
        for i, f in enumerate(c.ids):
            m[b, col[f]] = c.score[i]
    owner = fanout.assign_shared_facts(m)
    return {f: int(owner[col[f]]) for f in all_ids}


def _r(x: SupportsFloat) -> float:
    return round(float(x), 6)
