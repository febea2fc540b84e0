"""The open routes, for operators: liveness and the Prometheus metrics (tag ``ops``)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from ..deps import ServiceDep
from ..models import TEXT_OK, json_response

__all__ = ["healthz", "metrics", "router"]

router = APIRouter(tags=["ops"])


@router.get("/healthz", summary="Liveness: 200 once the data folder is open")
async def healthz(service: ServiceDep) -> Response:
    """
    \f
    Answers once the service is open (its dependency is the 503 before).
    """
    return json_response({"status": "ok"})


@router.get(
    "/metrics",
    summary="Prometheus text: requests, latency, tool calls, open runs",
    response_class=Response,
    responses={200: {**TEXT_OK[200], "description": "Prometheus text format 0.0.4"}},
)
async def metrics(service: ServiceDep) -> Response:
    """
    \f
    The service's counters as Prometheus text.
    """
    return PlainTextResponse(
        service.metrics.text(service.runs.open_runs),
        media_type="text/plain; version=0.0.4",
    )
