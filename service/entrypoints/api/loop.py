"""Routes over the loop: reconcile, refit, history, accuracy, spend, factors, jobs, running,
forecast.
Each returns a document of service.presenters.json_loop_documents (the spend's:
json_money_documents), which FastAPI validates the answer against and publishes as the
route's response schema."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from service.domain.records import ACCURACY_GROUPINGS, HISTORY_SORTS, SEARCH_MAX_CHARS
from service.domain.spending import SPEND_GROUPINGS
from service.entrypoints.api.deps import GUARDED, App
from service.presenters import json_forecast_documents as forecastdoc
from service.presenters import json_loop, json_views, money
from service.presenters import json_loop_documents as loopdoc
from service.presenters import json_money_documents as moneydoc

router = APIRouter(tags=["the loop"])
SORTS = "^(" + "|".join(HISTORY_SORTS) + ")$"
# 409 from POST /v1/reconcile: the pass found the lock taken (its outcome, status "locked"),
# or lost it midway (the ErrorMessage every route's 409 has).
LOCKED: dict[int | str, dict[str, object]] = {
    409: {
        "description": "Another pass holds the lock: this one did nothing (its outcome, "
        'status "locked"); or this pass lost the lock midway and was rolled back',
        "content": {
            "application/json": {
                "schema": {
                    "anyOf": [
                        {"$ref": "#/components/schemas/PassOutcome"},
                        {"$ref": "#/components/schemas/ErrorMessage"},
                    ]
                }
            }
        },
    }
}


@router.get("/v1/history", summary="Predicted against observed, per estimate")
def history(
    app: App,
    since: str | None = None,
    gpu: str | None = None,
    precision: Annotated[
        str | None, Query(max_length=32, description="with gpu: a segment")
    ] = None,
    limit: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    sort: Annotated[
        str, Query(description="newest, oldest, worst or best (|error|)", pattern=SORTS)
    ] = "newest",
    q: Annotated[
        str | None,
        Query(
            max_length=SEARCH_MAX_CHARS,
            description="only rows whose estimate id, label, run ids, GPU or precision "
            "contain this (case-insensitive)",
        ),
    ] = None,
) -> loopdoc.HistoryPage:
    page = app.queries.history_page(
        since=since, gpu=gpu, search=q, sort=sort, limit=limit, offset=offset, precision=precision
    )
    return json_views.history_page_view(page)


@router.get("/v1/accuracy", summary="Prediction accuracy, raw and calibrated")
def accuracy(
    app: App,
    by: Annotated[
        str | None,
        Query(
            description=", ".join(ACCURACY_GROUPINGS) + "; gpu is an alias of gpu_type",
            json_schema_extra={"enum": [*ACCURACY_GROUPINGS, "gpu"]},
        ),
    ] = None,
    since: str | None = None,
) -> loopdoc.Accuracy:
    return json_loop.accuracy_view(app.queries.accuracy(by=by, since=since))


@router.get("/v1/spend", summary="Money planned against spent, per group and currency")
def spend(
    app: App,
    by: Annotated[
        str | None,
        Query(
            description="experiment (MLflow experiment id), gpu or month (UTC, of the run's end)",
            json_schema_extra={"enum": list(SPEND_GROUPINGS)},
        ),
    ] = None,
    since: str | None = None,
    gpu: str | None = None,
) -> moneydoc.Spend:
    return money.spend_view(app.queries.spend(by=by, since=since, gpu=gpu))


@router.get("/v1/factors", summary="The active (or a pinned) factor set, per segment")
def factors(
    app: App,
    version: int | None = None,
    factor_set: Annotated[int | None, Query(description="The same as version")] = None,
) -> loopdoc.Factors:
    return json_loop.factors_view(
        app.factor_sets.show(version if version is not None else factor_set)
    )


@router.post(
    "/v1/factors/{version}/activate",
    dependencies=GUARDED,
    summary="Make this factor set the active one (a rollback or a roll forward)",
)
def activate_factors(app: App, version: int) -> loopdoc.Factors:
    return json_loop.factors_view(app.factor_sets.activate(version))


@router.get("/v1/factors/history", summary="Every factor set, oldest first")
def factor_history(app: App) -> loopdoc.FactorHistory:
    return json_loop.factor_history_view(app.factor_sets.history())


@router.post("/v1/refit", dependencies=GUARDED, summary="Refit the factors now")
def refit(app: App, force: bool = False) -> loopdoc.Refit:
    return json_loop.refit_view(app.loop.refit(force=force))


@router.post(
    "/v1/reconcile",
    dependencies=GUARDED,
    summary="Run one reconcile pass now",
    responses=LOCKED,
)
def reconcile(
    app: App, response: Response, since: str | None = None, full: bool = False
) -> loopdoc.PassOutcome:
    outcome = app.loop.reconcile(trigger="api", since=since, full=full)
    if outcome.status == "locked":
        response.status_code = 409
    return json_loop.outcome_view(outcome)


@router.get("/v1/jobs", summary="Recent reconcile passes and the schedule")
def jobs(app: App, limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> loopdoc.Jobs:
    return json_loop.jobs_view(app.queries.jobs(limit))


@router.get("/v1/running", summary="Linked runs still RUNNING, projected")
def running(app: App) -> loopdoc.RunningList:
    return json_views.running_list_view(app.queries.running())


@router.post(
    "/v1/forecast",
    dependencies=GUARDED,
    summary="Forecast linked RUNNING runs now and tag them reckon.eta* (the hourly job, once)",
    responses={
        409: {
            "description": "Another forecast run holds the lock: this one did nothing",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/ForecastRun"}}
            },
        }
    },
)
def forecast(app: App, response: Response) -> forecastdoc.ForecastRun:
    done = app.loop.forecast()
    if done.locked:
        response.status_code = 409
    return json_loop.forecast_view(done)
