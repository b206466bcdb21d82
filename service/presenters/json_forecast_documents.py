"""The JSON document of the forecast job (`reckon forecast --json`, POST /v1/forecast) as a
TypedDict, under the rules of json_loop_documents.py (forbids undeclared keys, keys in the
order the view emits them)."""

from __future__ import annotations

from pydantic import with_config
from typing_extensions import TypedDict

from service.presenters.json_loop_documents import FORBID, Running, TagsOwed


@with_config(FORBID)
class ForecastRun(TypedDict):
    """One forecast run: each RUNNING run forecast and tagged, at risk, tags written, owed."""

    # `forecasts`: each linked RUNNING run (`reckon.eta*` tagged when it has a projection);
    # `locked`: another forecast run held the lock, and this one did nothing.

    locked: bool
    holder: str | None
    forecasts: list[Running]
    at_risk: int
    tags_written: int
    tags: TagsOwed
