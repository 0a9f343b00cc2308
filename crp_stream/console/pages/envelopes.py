"""The envelope inspector: a session's windows in order, coverage and residual after each, every fact's
role, score and extra fields (``via``, ``bridges`` ...), the contradictions resolved, and the headers."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from crp_stream.console.app import Console
from crp_stream.core.tenants import DEFAULT_TENANT
from crp_stream.events.topics import ENVELOPES, WINDOW_REPORTS

FACT_FIELDS = (
    "fact_id",
    "role",
    "score",
    "relevance",
    "novelty",
    "recency",
    "authority",
    "source",
    "source_type",
    "support",
    "epoch",
    "modified_at",
    "text",
)
CONFLICT_TYPES = ("CONTRADICTION_RESOLVED", "CONTRADICTION_UNRESOLVED")


def _decode(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def window_view(
    env: dict[str, Any],
    rec_headers: list[tuple[str, str]],
    conflicts: list[dict[str, Any]],
    report: dict[str, Any] | None,
) -> dict[str, Any]:
    headers = env.get("headers") or {}
    facts = []
    for f in env.get("facts", []):
        extra = {k: v for k, v in f.items() if k not in FACT_FIELDS}  # via, bridges, later fields
        facts.append({**{k: f.get(k) for k in FACT_FIELDS}, "extra": extra})
    return {
        "window": env.get("window"),
        "branch": env.get("branch"),
        "status": env.get("status"),
        "request_id": env.get("request_id"),
        "coverage": headers.get("CRP-Context-Coverage-Score"),
        "depth": headers.get("CRP-Context-Coverage-Depth"),
        "residual": env.get("residual_anchor"),
        "notes": env.get("notes", []),
        "facts": facts,
        "headers": sorted(headers.items()),
        "record_headers": rec_headers,
        "conflicts": conflicts,
        "completeness": report.get("completeness") if report else None,
    }


def routes(console: Console) -> list[Route]:
    backend = console.backend

    def owners(tenant: str | None) -> dict[str, str]:
        if tenant is None:
            return {}
        with backend.repo() as repo:
            return repo.tenant_owners()

    def sessions(tenant: str | None) -> list[tuple[str, int]]:
        of = owners(tenant)
        counts = Counter(
            r.key
            for r in backend.records(ENVELOPES, limit=100_000)
            if r.key and (tenant is None or of.get(r.key, DEFAULT_TENANT) == tenant)
        )
        return sorted(counts.items())

    def load(session_id: str, tenant: str | None) -> dict[str, Any] | None:
        if tenant is not None and owners(tenant).get(session_id, DEFAULT_TENANT) != tenant:
            return None  # another tenant's session: not found
        recs = backend.records(ENVELOPES, key=session_id)
        if not recs:
            return None
        reports = {}
        for r in backend.records(WINDOW_REPORTS, key=session_id):
            value = _decode(r.value)
            if value is not None:
                reports[(value.get("window"), value.get("branch"))] = value
        with backend.repo() as repo:
            audits: list[dict[str, Any]] = [
                dict(a) for a in repo.audit_query(key=session_id, limit=5000) if a["audit_type"] in CONFLICT_TYPES
            ]
            state = repo.get_session(session_id)
        windows = []
        for r in recs:
            env = _decode(r.value)
            if env is None:
                continue
            conflicts = [a for a in audits if a["details"].get("window") == env.get("window")]
            # the embedded log keeps an output's derived id in a column; Kafka carries it as the crp-id header
            hdrs = [("crp-id", r.record_id)] if r.record_id else []
            hdrs += [(k, v.decode("utf-8", "replace")) for k, v in r.headers if k != "crp-id"]
            windows.append(window_view(env, hdrs, conflicts, reports.get((env.get("window"), env.get("branch")))))
        st: dict[str, Any] = state["state"] if state else {}
        summary = {
            "window_count": state["window_count"] if state else None,
            "max_windows": state["max_windows"] if state else None,
            "coverage": len(st.get("coverage", []) or []),
            "residual": st.get("residual") or [],
        }
        return {"session_id": session_id, "windows": windows, "summary": summary}

    async def index(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        return console.page(request, "envelopes.html", sessions=await console.call(sessions, tenant))

    async def show(request: Request) -> Response:
        tenant, stop = console.viewing(request)
        if stop is not None:
            return stop
        sid = request.path_params["session_id"]
        found = await console.call(load, sid, tenant)
        if found is None:
            return console.error(request, 404, "No such session", f"No envelope was assembled for session {sid!r}.")
        return console.page(request, "envelope_session.html", **found)

    return [Route("/envelopes", index), Route("/envelopes/{session_id}", show)]
