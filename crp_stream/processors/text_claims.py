"""Claims of facts that carry no subject/attribute: high similarity plus a value conflict.

A text fact joins a claim when a neighbour in the similarity graph (cosine above the fabric's
contradiction threshold) already belongs to one, or when a neighbour contradicts it
(``core.conflicts.values_conflict``: a changed number, a substituted entity, a negation flip). The
claim's key (``sim:`` + a derived id) is written on the member facts, so later evaluations load the
claim like any ``subject|attribute`` claim. Values inside a claim are classes of mutually
non-conflicting texts, labelled by their earliest member.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from crp_stream.core.conflicts import FactView, values_conflict
from crp_stream.core.copied_statements import slot_claim
from crp_stream.core.graph_rank import EDGE_KINDS
from crp_stream.core.ids import derive_id
from crp_stream.core.sibling_titles import numbered_sibling_titles
from crp_stream.core.substitution import near_copy
from crp_stream.core.tenants import scoped_id_parts
from crp_stream.fabric.fabric import UnitOfWork
from crp_stream.fabric.sql.rows import FactRow

SIM_PREFIX = "sim:"
_SIMILARITY = EDGE_KINDS.index("similarity")
LABEL_MAX = 1000
_WS = re.compile(r"\s+")


def is_text_fact(row: FactRow) -> bool:
    return not row.get("subject") or not row.get("attribute")


def _view(row: FactRow) -> FactView:
    return FactView(
        fact_id=row["fact_id"],
        text=row["text"],
        source=row["source"],
        source_type=row["source_type"],
        trust=float(row["trust"]),
        status=row["status"],
        epoch_seconds=row["epoch_us"] / 1e6,
    )


def _threshold(uow: UnitOfWork) -> float:
    return float(uow.fabric.thresholds().contradiction_threshold)


def similar(uow: UnitOfWork, fid: str) -> dict[str, float]:
    """``{neighbour: cosine}`` of a fact's similarity edges, from the fabric's graph cache (ingest has
    just written them there; a miss is read from the store)."""
    return similar_many(uow, [fid])[fid]


def similar_many(uow: UnitOfWork, fact_ids: Sequence[str]) -> dict[str, dict[str, float]]:
    """``similar`` of several facts, the misses read in one query."""
    graph = uow.repo.sync_graph(uow.fabric.graph)
    names = graph.names
    out: dict[str, dict[str, float]] = {}
    for fid, (nb, weight, kind) in zip(fact_ids, graph.rows(uow.repo, graph.index(fact_ids)), strict=True):
        sim = kind == _SIMILARITY
        out[fid] = {names[j]: w for j, w in zip(nb[sim].tolist(), weight[sim].tolist(), strict=True) if names[j] != fid}
    return out


def assign_text_claim(uow: UnitOfWork, row: FactRow) -> str | None:
    """The claim of a newly recorded text fact, writing its key on the new members; None if no claim.

    Peers are its graph neighbours above the contradiction threshold, and any neighbour
    from another source that is a copy of it with one span swapped (``core.copied_statements.slot_claim``:
    a swapped name can lower the cosine of a short sentence). A claim found by a slot is keyed by its
    template ("{} acquired instagram"), so every copy of the statement joins the same claim."""
    fid = row["fact_id"]
    threshold = _threshold(uow)
    adjacent = similar(uow, fid)
    if not adjacent:
        return None
    # a neighbour of a later record of the same micro-batch is not there yet for this record: it is
    # judged, and finds this fact, when the runtime releases its own record
    hidden = uow.unreleased
    rows = [
        r
        for r in uow.repo.facts_by_ids(adjacent, copies=False).values()  # read here, before any write
        if r["fact_id"] not in hidden
        and is_text_fact(r)
        and (r["claim_key"] is None or str(r["claim_key"]).startswith(SIM_PREFIX))
    ]
    # aligned only when the envelope would check the pair too: above the contradiction cosine or a
    # near copy (the alignment was 70% of ingest when run against every neighbour)
    slots = {
        r["fact_id"]: slot_claim(row["text"], r["text"], r["source"] == row["source"])
        if adjacent[r["fact_id"]] > threshold or near_copy(row["text"], r["text"])
        else None
        for r in rows
    }
    peers = [r for r in rows if adjacent[r["fact_id"]] > threshold or slots[r["fact_id"]] is not None]
    if peers:  # two documents of one numbered series: two subjects
        titles = uow.repo.fact_titles([fid, *(p["fact_id"] for p in peers)])
        peers = [p for p in peers if not numbered_sibling_titles(titles.get(fid), titles.get(p["fact_id"]))]
        kept = {p["fact_id"] for p in peers}
        slots = {f: s for f, s in slots.items() if f in kept}
    if not peers:
        return None
    existing = sorted({str(p["claim_key"]) for p in peers if p["claim_key"]})
    templates = sorted({s[0] for s in slots.values() if s is not None})
    if existing:
        key = existing[0]
    elif templates:
        key = SIM_PREFIX + derive_id("text-claim", *scoped_id_parts(row.get("tenant"), templates[0]))
    else:
        mine = _view(row)
        if not any(values_conflict(mine, _view(p)) for p in peers):
            return None
        key = SIM_PREFIX + derive_id("text-claim", fid)
    members = [fid, *sorted(p["fact_id"] for p in peers if p["claim_key"] is None)]
    uow.repo.set_claim_key(members, key)
    return key


def label(text: str) -> str:
    norm = _WS.sub(" ", text).strip().lower()
    return norm[:LABEL_MAX]


def text_values(rows: Sequence[FactRow]) -> dict[str, str]:
    """fact_id -> value label: each fact joins the first (earliest) class it does not contradict.

    A class that differs from the earliest one in one span is labelled by that span (the
    claim's slot, e.g. "facebook" / "apple"); otherwise by its earliest statement."""
    labels = _text_classes(rows)
    reps: dict[str, FactRow] = {}
    for r in sorted(rows, key=lambda r: (r["epoch_us"], r["fact_id"])):
        reps.setdefault(labels[r["fact_id"]], r)
    names = list(reps)
    rename: dict[str, str] = {}
    if len(names) > 1:
        first = reps[names[0]]
        for name in names[1:]:
            other = reps[name]
            found = slot_claim(first["text"], other["text"], first["source"] == other["source"])
            if found is not None:
                rename.setdefault(names[0], found[1] or "(affirmed)")
                rename[name] = found[2] or "(affirmed)"
    if len(set(rename.values())) != len(rename):
        rename = {}  # two classes would share a label: keep the statements
    return {fid: rename.get(name, name) for fid, name in labels.items()}


def _text_classes(rows: Sequence[FactRow]) -> dict[str, str]:
    ordered = sorted(rows, key=lambda r: (r["epoch_us"], r["fact_id"]))
    classes: list[tuple[FactView, str]] = []
    out: dict[str, str] = {}
    for r in ordered:
        view = _view(r)
        for rep, name in classes:
            if values_conflict(rep, view) is None:
                out[r["fact_id"]] = name
                break
        else:
            name = label(r["text"])
            taken = {n for _, n in classes}
            if name in taken:  # a different value spelled alike: keep the classes apart
                name = f"{name} #{len(classes) + 1}"
            classes.append((view, name))
            out[r["fact_id"]] = name
    return out


def claim_text(rows: Sequence[FactRow]) -> str:
    """A readable subject for a text claim: its earliest statement."""
    first = min(rows, key=lambda r: (r["epoch_us"], r["fact_id"]))
    return label(first["text"])
