"""The API's request models, derived from the one declaration of the estimate inputs
(`service.domain.inputs.ESTIMATE_INPUTS`, then `MEMORY_INPUTS`): the same names and defaults as
the CLI's options, as query parameters of GET /v1/estimate, /v1/plan and /v1/sensitivity and as
the body of POST /v1/estimates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, create_model

from service.domain.inputs import ESTIMATE_INPUTS, MEMORY_INPUTS, InputField

_TYPES: dict[str, Any] = {"count": str | float, "text": str, "int": int, "float": float}


def _field(spec: InputField) -> tuple[Any, Any]:
    """The field as FastAPI declares it. The bounds are stated in the schema (`spec.schema`)
    and checked by the domain, which words the 422 the same for the CLI and the API."""
    annotation = _TYPES[spec.kind]
    description = spec.help + (f" Default: {spec.shown_default}." if spec.shown_default else "")
    extra: dict[str, Any] | None = dict(spec.schema) if spec.schema else None
    if spec.required:
        return annotation, Field(description=description, json_schema_extra=extra)
    if spec.default is not None:
        return annotation, Field(
            default=spec.default, description=description, json_schema_extra=extra
        )
    return annotation | None, Field(default=None, description=description, json_schema_extra=extra)


_CALIBRATION: dict[str, Any] = {
    "calibrated": (bool, Field(default=False, description="Use the active factor set.")),
    "factor_set": (
        int | None,
        Field(default=None, description="Pin this factor set version (implies calibrated)."),
    ),
}

_PLAN: dict[str, Any] = {
    "deadline": (str, Field(description="Wall-clock deadline: 30d, 3.5d, 3d8h, P3DT8H.")),
    "multiple_of": (
        int,
        Field(default=1, ge=1, description="Round the GPU count up to a multiple of this."),
    ),
    "confidence": (
        float | None,
        Field(
            default=None,
            gt=0,
            lt=1,
            description="Calibrated: meet the deadline at this quantile (default 0.5).",
        ),
    ),
}

if TYPE_CHECKING:  # built at run time from the declaration; to the type checker, models
    EstimateQuery = BaseModel
    EstimateBody = BaseModel
    PlanQuery = BaseModel
else:
    EstimateQuery = create_model(
        "EstimateQuery",
        __doc__="GET /v1/estimate: the inputs of `reckon estimate`.",
        **{spec.name: _field(spec) for spec in (*ESTIMATE_INPUTS, *MEMORY_INPUTS)},
        **_CALIBRATION,
    )
    EstimateBody = create_model(
        "EstimateBody",
        __doc__="POST /v1/estimates: the inputs of `reckon estimate`, plus a label and a deadline.",
        **{spec.name: _field(spec) for spec in (*ESTIMATE_INPUTS, *MEMORY_INPUTS)},
        **_CALIBRATION,
        label=(str | None, Field(default=None, max_length=200, description="A short note.")),
        deadline=(
            str | None,
            Field(
                default=None,
                max_length=64,
                description="When the run must finish: a date or ISO 8601 time (UTC unless "
                "it says), or a duration from now (7d); stored as a UTC time. A linked run "
                "whose P90 finish is after it is at risk.",
            ),
        ),
    )
    PlanQuery = create_model(
        "PlanQuery",
        __doc__="GET /v1/plan: the inputs of `reckon plan` (the GPU count is the answer).",
        **{
            spec.name: _field(spec)
            for spec in (*ESTIMATE_INPUTS, *MEMORY_INPUTS)
            if spec.name != "gpus"
        },
        **_CALIBRATION,
        **_PLAN,
    )
