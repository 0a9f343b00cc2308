"""Refresh requests: open and resolved, each with its claim's evidence by partition and a timeline."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from crp_stream.console.app import Console, Problem, Target
from crp_stream.console.evidence import partitions, timeline_svg
from crp_stream.core.tenants import DEFAULT_TENANT
from crp_stream.events import Command
from crp_stream.fabric.sql.repository import Repository

STATUSES = ("open", "resolved", "rejected", "all")
DECISIONS: dict[str, Command] = {
    "resolve": "resolve_refresh",
    "acknowledge": "acknowledge_refresh",
    "reject": "reject_refresh",
}
HISTORY_SCAN = 5000  # audit rows searched for a request's history


def history(repo: Repository, claim_key: str, ids: set[str]) -> list[dict[str, Any]]:
    """The audit events about one claim or one of ``ids``, oldest first."""
    return [
        dict(a)
        for a in repo.audit_query(limit=HISTORY_SCAN)
        if a["details"].get("claim") == claim_key
        or ids & {a["details"].get(k) for k in ("request_id", "candidate_id", "target_id")}
    ]


def owner(owners: dict[str, str], claim_key: str) -> str:
    """The tenant of a claim's request or candidate: the tenant of the claim's facts."""
    return owners.get(claim_key, DEFAULT_TENANT)


def routes(console: Console) -> list[Route]:
    backend = console.backend

    def load_list(status: str, tenant: str | None) -> list[dict[str, Any]]:
        with backend.repo() as repo:
            rows = repo.refresh_requests(None if status == "all" else status)
            owners = repo.tenant_owners() if tenant is not None else {}
        return [dict(r) for r in rows if tenant is None or owner(owners, r["claim_key"]) == tenant]

    def load_one(request_id: str, tenant: str | None) -> dict[str, Any] | None:
        with backend.repo() as repo:
            req = repo.refresh_request(request_id)
            if req is None:
                return None
            of = owner(repo.tenant_owners(), req["claim_key"])
            if tenant is not None and of != tenant:
                return None  # another tenant's: not found, as if it did not exist
            facts = repo.facts_for_claim(req["claim_key"])
            past = history(repo, req["claim_key"], {request_id})
            acks = [
                a
                for a in past
                if a["audit_type"] == "REFRESH_ACKNOWLEDGED" and a["details"].get("request_id") == request_id
            ]
            return {"req": dict(req), "parts": partitions(facts), "history": past, "acks": acks, "owner": of}

    async def index(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        status = request.query_params.get("status", "open")
        if status not in STATUSES:
            return console.error(request, 400, "Bad filter", f"status must be one of {', '.join(STATUSES)}")
        rows = await console.call(load_list, status, tenant)
        return console.page(request, "refresh_list.html", rows=rows, status=status, statuses=STATUSES)

    async def show(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        rid = request.path_params["request_id"]
        found = await console.call(load_one, rid, tenant)
        if found is None:
            return console.error(request, 404, "No such refresh request", f"There is no refresh request {rid!r}.")
        return console.page(
            request,
            "refresh_detail.html",
            **found,
            done=request.query_params.get("done"),
            svg=timeline_svg(found["parts"], highlight=found["req"]["source"]),
        )

    async def decide(request: Request) -> Response:
        rid, decision = request.path_params["request_id"], request.path_params["decision"]
        if decision not in DECISIONS:
            return console.error(request, 404, "No such action", f"{decision!r} is not resolve, acknowledge or reject.")

        async def check(tenant: str | None) -> tuple[Target | None, Problem | None]:
            found = await console.call(load_one, rid, tenant)
            if found is None:
                return None, (
                    404,
                    "No such refresh request",
                    f"There is no refresh request {rid!r}; nothing was published.",
                )
            req = found["req"]
            if req["status"] != "open":
                return None, (
                    409,
                    "Already decided",
                    f"Refresh request {rid} is already {req['status']}"
                    f"{' by ' + req['resolved_by'] if req['resolved_by'] else ''}; nothing was published.",
                )
            return (str(req["source"]), str(found["owner"])), None

        return await console.act(
            request,
            action=f"refresh.{decision}",
            target_id=rid,
            check=check,
            command=DECISIONS[decision],
            done_url=f"/refresh/{rid}",
        )

    return [
        Route("/refresh", index),
        Route("/refresh/{request_id}", show),
        Route("/refresh/{request_id}/{decision}", decide, methods=["POST"]),
    ]
