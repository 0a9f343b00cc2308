"""The fabric: facts by source and status, topics with offsets and lag, the model id and its thresholds;
and ``forget`` in two steps: a preview of what goes (counts, never text), then a confirmation that
publishes the operator command (docs/console.md "Forget")."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from crp_stream.console.app import Console, Problem, Target
from crp_stream.core.forget import forget_target
from crp_stream.core.tenants import DEFAULT_TENANT, is_tenant_name


class Refused(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem[2])
        self.problem = problem


def target_of(kind: str, name: str) -> str:
    """The ``target_id`` of the forget form's kind and name (``core.forget.forget_target`` checks it)."""
    return "all" if kind == "all" else f"{kind}:{name.strip()}"


def routes(console: Console) -> list[Route]:
    backend = console.backend

    def load(tenant: str | None) -> dict[str, Any]:
        with backend.repo() as repo:
            counts = repo.fact_counts_of(tenant)
            names = {s for s, _st, _n in counts}
            if tenant is None:
                sources = {s["source"]: dict(s) for s in repo.sources() if s["source"] in names}
            else:
                sources = {s: {"trust": tr} for s, tr in repo.source_trust_of(tenant).items()}
            edges = repo.edge_count() if tenant is None else None
            tenants = repo.tenants() if tenant is None else [tenant]
        statuses = sorted({state for _s, state, _n in counts})
        by_source: dict[str, dict[str, int]] = {}
        for source, state, n in counts:
            by_source.setdefault(source, {})[state] = n
        whole = tenant is None  # another tenant's topics and vectors are not a tenant reader's business
        return {
            "statuses": statuses,
            "by_source": sorted(by_source.items()),
            "sources": sources,
            "edges": edges,
            "tenants": tenants,
            "topics": backend.topics() if whole else [],
            "model": backend.model(),
            "vectors": backend.vector_count() if whole else None,
        }

    def preview(tenant: str, kind: str, name: str | None) -> dict[str, Any]:
        with backend.repo() as repo:
            facts = repo.forgettable(tenant, kind, name)
        return {
            "facts": len(facts),
            "documents": len({r["document_id"] for r in facts if r["document_id"] is not None}),
            "sources": sorted({str(r["source"]) for r in facts}),
        }

    async def index(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        return console.page(
            request, "fabric.html", **await console.call(load, tenant), done=request.query_params.get("done")
        )

    def asked(form: Any, tenant: str | None) -> tuple[str, str, str | None]:
        """(tenant, target_id, the kind's name) of a forget form; ``Refused`` says what is wrong."""
        who = str(form.get("forget_tenant") or tenant or DEFAULT_TENANT).strip()
        if not is_tenant_name(who):
            raise Refused((400, "Bad tenant", f"{who!r} is not a tenant name; nothing was published."))
        if tenant is not None and who != tenant:
            raise Refused((403, "Not allowed", f"this token acts for tenant {tenant} only; nothing was published."))
        target_id = target_of(str(form.get("kind") or ""), str(form.get("name") or ""))
        try:
            _kind, name = forget_target(target_id)
        except ValueError as exc:
            raise Refused((400, "Bad target", f"{exc}; nothing was published.")) from None
        return who, target_id, name

    async def forget_preview(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        try:
            who, target_id, name = asked(request.query_params, tenant)
        except Refused as exc:
            return console.error(request, *exc.problem)
        kind, _name = forget_target(target_id)
        found = await console.call(preview, who, kind, name)
        return console.page(request, "forget_confirm.html", forget_tenant=who, target_id=target_id, **found)

    async def forget(request: Request) -> Response:
        form = await request.form()
        confirmed = form.get("confirm") == "yes"
        target_id = target_of(str(form.get("kind") or ""), str(form.get("name") or ""))

        async def check(tenant: str | None) -> tuple[Target | None, Problem | None]:
            if not confirmed:
                return None, (
                    400,
                    "Not confirmed",
                    "Tick the confirmation: forget cannot be undone. Nothing was published.",
                )
            try:
                who, _target, name = asked(form, tenant)
            except Refused as exc:
                return None, exc.problem
            source = name if target_id.startswith("source:") else None
            return (str(source or who), str(who)), None

        return await console.act(
            request, action="fabric.forget", target_id=target_id, check=check, command="forget", done_url="/fabric"
        )

    return [
        Route("/fabric", index),
        Route("/fabric/forget", forget_preview),
        Route("/fabric/forget", forget, methods=["POST"]),
    ]
