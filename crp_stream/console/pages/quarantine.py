"""Quarantine candidates: the suspect partition beside the others of the same claim; approve or reject.

Approve publishes ``confirm_quarantine`` (the candidate's facts are quarantined); reject publishes
``release_quarantine`` (the candidate is closed as released, its facts stay or become active).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from crp_stream.console.app import Console, Problem, Target
from crp_stream.console.evidence import partitions, timeline_svg
from crp_stream.console.pages.refresh import history, owner
from crp_stream.events import Command

STATUSES = ("pending", "confirmed", "released", "all")
DECISIONS: dict[str, tuple[Command, str]] = {  # form action -> (command, status it may not already have)
    "approve": ("confirm_quarantine", "confirmed"),
    "reject": ("release_quarantine", "released"),
}


def routes(console: Console) -> list[Route]:
    backend = console.backend

    def load_list(status: str, tenant: str | None) -> list[dict[str, Any]]:
        with backend.repo() as repo:
            rows = repo.candidates(None if status == "all" else status)
            owners = repo.tenant_owners() if tenant is not None else {}
        return [dict(c) for c in rows if tenant is None or owner(owners, c["claim_key"]) == tenant]

    def load_one(candidate_id: str, tenant: str | None) -> dict[str, Any] | None:
        with backend.repo() as repo:
            cand = repo.candidate(candidate_id)
            if cand is None:
                return None
            of = owner(repo.tenant_owners(), cand["claim_key"])
            if tenant is not None and of != tenant:
                return None  # another tenant's: not found, as if it did not exist
            parts = partitions(repo.facts_for_claim(cand["claim_key"]))
            return {
                "cand": dict(cand),
                "parts": parts,
                "suspect": [p for p in parts if p.source == cand["source"]],
                "others": [p for p in parts if p.source != cand["source"]],
                "history": history(repo, cand["claim_key"], {candidate_id}),
                "owner": of,
            }

    async def index(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        status = request.query_params.get("status", "pending")
        if status not in STATUSES:
            return console.error(request, 400, "Bad filter", f"status must be one of {', '.join(STATUSES)}")
        rows = await console.call(load_list, status, tenant)
        return console.page(request, "quarantine_list.html", rows=rows, status=status, statuses=STATUSES)

    async def show(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        cid = request.path_params["candidate_id"]
        found = await console.call(load_one, cid, tenant)
        if found is None:
            return console.error(request, 404, "No such candidate", f"There is no quarantine candidate {cid!r}.")
        return console.page(
            request,
            "quarantine_detail.html",
            **found,
            done=request.query_params.get("done"),
            svg=timeline_svg(found["parts"], highlight=found["cand"]["source"]),
        )

    async def decide(request: Request) -> Response:
        cid, decision = request.path_params["candidate_id"], request.path_params["decision"]
        if decision not in DECISIONS:
            return console.error(request, 404, "No such action", f"{decision!r} is not approve or reject.")
        command, final = DECISIONS[decision]

        async def check(tenant: str | None) -> tuple[Target | None, Problem | None]:
            found = await console.call(load_one, cid, tenant)
            if found is None:
                return None, (
                    404,
                    "No such candidate",
                    f"There is no quarantine candidate {cid!r}; nothing was published.",
                )
            cand = found["cand"]
            if cand["status"] == final:
                return None, (
                    409,
                    "Already decided",
                    f"Candidate {cid} is already {final}"
                    f"{' by ' + cand['decided_by'] if cand['decided_by'] else ''}; nothing was published.",
                )
            return (str(cand["source"]), str(found["owner"])), None

        return await console.act(
            request,
            action=f"quarantine.{decision}",
            target_id=cid,
            check=check,
            command=command,
            done_url=f"/quarantine/{cid}",
        )

    return [
        Route("/quarantine", index),
        Route("/quarantine/{candidate_id}", show),
        Route("/quarantine/{candidate_id}/{decision}", decide, methods=["POST"]),
    ]
