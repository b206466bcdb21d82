"""Routes over the planning and registry use cases: estimate, save, show, list. Each returns a
document of service.presenters.json_documents, which FastAPI validates the answer against and
publishes as the route's response schema."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, TypeAdapter

from service.domain.inputs import parse_inputs
from service.domain.units import parse_duration_seconds
from service.entrypoints.api.deps import GUARDED, App
from service.entrypoints.api.models import EstimateBody, EstimateQuery, PlanQuery
from service.presenters import json_documents as doc
from service.presenters import json_views

router = APIRouter(tags=["planning"])


# The hot route (docs/contract.md §7: p99 within 2x of an empty route). Given factors make
# an estimate pure arithmetic (about 0.1 ms), answered on the event loop; fitted ones read
# the factor set, in a worker thread. Either way the answer is checked against its document
# here and returned as a response, so FastAPI does not hop to another thread to validate it
# (the schema is still published).
ESTIMATE_ANSWER: TypeAdapter[doc.GivenAnswer | doc.CalibratedAnswer] = TypeAdapter(
    doc.GivenAnswer | doc.CalibratedAnswer
)


@router.get(
    "/v1/estimate",
    summary="Compute an estimate (no side effects)",
    response_model=doc.GivenAnswer | doc.CalibratedAnswer,
)
async def get_estimate(app: App, query: Annotated[EstimateQuery, Query()]) -> JSONResponse:
    values = query.model_dump()
    inputs = parse_inputs(values)
    calibrated, pinned = values["calibrated"], values["factor_set"]

    def answered() -> JSONResponse:
        answer = app.planning.estimate(inputs, calibrated=calibrated, factor_set=pinned)
        return JSONResponse(ESTIMATE_ANSWER.validate_python(json_views.answer_view(answer)))

    if calibrated or pinned is not None:
        return await run_in_threadpool(answered)
    return answered()


@router.post(
    "/v1/estimates", status_code=201, dependencies=GUARDED, summary="Compute and store an estimate"
)
def post_estimate(app: App, body: EstimateBody) -> doc.SavedAnswer | doc.CalibratedSavedAnswer:
    values = body.model_dump()
    saved = app.planning.save(
        parse_inputs(values),
        calibrated=values["calibrated"],
        factor_set=values["factor_set"],
        label=values["label"],
        deadline=values["deadline"],
    )
    return json_views.saved_answer_view(saved)


@router.get("/v1/estimates/{estimate_id}", summary="One stored estimate and its runs")
def get_saved(app: App, estimate_id: str) -> doc.SavedEstimate | doc.ExternalEstimate:
    return json_views.detail_view(app.registry.estimate_detail(estimate_id))


@router.get("/v1/estimates", summary="Stored estimates, newest first")
def list_saved(app: App, limit: Annotated[int, Query(ge=1, le=10_000)] = 50) -> doc.EstimateList:
    return json_views.estimates_view(app.registry.list_estimates(limit=limit))


@router.get("/v1/hardware", summary="The GPU catalog: names, aliases, peak FLOP/s, sources")
def get_hardware(app: App) -> doc.Hardware:
    return json_views.hardware_view(app.planning.hardware())


@router.get("/v1/plan", summary="The fewest GPUs whose wall time meets a deadline")
def get_plan(
    app: App,
    query: Annotated[PlanQuery, Query()],
) -> doc.Plan | doc.CalibratedPlan:
    values = query.model_dump()
    answer = app.planning.plan(
        parse_inputs(values, gpus=1),
        parse_duration_seconds(values["deadline"]),
        values["multiple_of"],
        calibrated=values["calibrated"],
        confidence=values["confidence"],
        factor_set=values["factor_set"],
    )
    return json_views.plan_answer_view(answer)


@router.get("/v1/sensitivity", summary="Wall time as the inputs vary")
def get_sensitivity(
    app: App, query: Annotated[EstimateQuery, Query()]
) -> doc.Sensitivity | doc.CalibratedSensitivity:
    values = query.model_dump()
    table = app.planning.sensitivity(
        parse_inputs(values), {}, calibrated=values["calibrated"], factor_set=values["factor_set"]
    )
    return json_views.sensitivity_view(table)


class LinkBody(BaseModel):
    """POST /v1/estimates/{id}/runs: link this MLflow run (`force`: without asking MLflow)."""

    run_id: str = Field(min_length=1)
    force: bool = False


@router.post(
    "/v1/estimates/{estimate_id}/runs",
    status_code=201,
    dependencies=GUARDED,
    summary="Link an MLflow run to the estimate (404 if the run does not exist)",
)
def link_run(
    app: App, estimate_id: str, body: LinkBody
) -> doc.LinkedEstimate | doc.LinkedExternalEstimate:
    created = app.registry.link(estimate_id, body.run_id, force=body.force)
    return json_views.linked_view(app.registry.estimate_detail(estimate_id), created)


@router.delete(
    "/v1/estimates/{estimate_id}/runs/{run_id}",
    dependencies=GUARDED,
    summary="Unlink a run (its reckon.estimate_id tag is removed unless force)",
)
def unlink_run(app: App, estimate_id: str, run_id: str, force: bool = False) -> doc.Unlinked:
    return json_views.unlinked_view(app.registry.unlink(estimate_id, run_id, force=force))
