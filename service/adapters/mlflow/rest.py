"""Searching runs through MLflow's REST API read as plain JSON. `MlflowClient.search_runs`
turns each page of JSON into protobuf messages (in pure Python) and those into entities,
which costs about as much as the server takes to answer (docs/architecture.md, "Measured
reasons"). The same request decoded by `json.loads` yields the
same values. It goes through MLflow's own `http_request` with the client's host
credentials, so authentication, TLS settings, timeouts and retries are the client's.

The runs come back shaped like MLflow's entities (`run.info.run_id`, `run.data.tags`, ...)
so the adapter reads either; a client without a REST store (not possible for the http(s)
URIs the service accepts) falls back to `search_runs`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient
from mlflow.utils.rest_utils import http_request, verify_rest_response

SEARCH_ENDPOINT = "/api/2.0/mlflow/runs/search"


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    experiment_id: str
    status: str
    start_time: int  # ms since the epoch; 0 when MLflow has none (as the entity says)
    end_time: int | None  # None while running (MLflow's 0)


@dataclass(frozen=True)
class RunData:
    params: dict[str, str]
    tags: dict[str, str]
    metrics: dict[str, float]  # each metric's latest value, as search results carry it


@dataclass(frozen=True)
class ListedRun:
    info: RunInfo
    data: RunData


class RunsPage(list[Any]):
    """One page of runs and the token of the next (None after the last)."""

    def __init__(self, runs: Sequence[Any], token: str | None) -> None:
        super().__init__(runs)
        self.token = token


Search = Callable[[list[str], str, list[str] | None, int, str | None], RunsPage]


def searcher(client: MlflowClient) -> Search:
    """search(experiment_ids, filter, order_by, max_results, page_token) -> RunsPage."""
    host_creds = getattr(getattr(client, "_tracking_client", None), "store", None)
    get_creds = getattr(host_creds, "get_host_creds", None)
    if get_creds is None:
        return _client_search(client)

    def search(
        experiment_ids: list[str],
        filter_string: str,
        order_by: list[str] | None,
        max_results: int,
        page_token: str | None,
    ) -> RunsPage:
        body: dict[str, Any] = {
            "experiment_ids": experiment_ids,
            "filter": filter_string,
            "run_view_type": "ACTIVE_ONLY",
            "max_results": max_results,
        }
        if order_by:
            body["order_by"] = order_by
        if page_token:
            body["page_token"] = page_token
        response = http_request(get_creds(), SEARCH_ENDPOINT, "POST", json=body)  # type: ignore[no-untyped-call]
        response = verify_rest_response(response, SEARCH_ENDPOINT)
        return page_of(response.json())

    return search


def page_of(document: Mapping[str, Any]) -> RunsPage:
    """A SearchRuns response (JSON) as a page of runs."""
    runs = [_run(run) for run in document.get("runs", ())]
    return RunsPage(runs, document.get("next_page_token") or None)


def _run(run: Mapping[str, Any]) -> ListedRun:
    info, data = run.get("info", {}), run.get("data", {})
    end = int(info.get("end_time") or 0)
    return ListedRun(
        info=RunInfo(
            run_id=str(info.get("run_id") or info.get("run_uuid") or ""),
            experiment_id=str(info.get("experiment_id", "")),
            status=str(info.get("status", "")),
            start_time=int(info.get("start_time") or 0),  # int64 may arrive as a string
            end_time=end or None,
        ),
        data=RunData(
            params=_pairs(data.get("params", ())),
            tags=_pairs(data.get("tags", ())),
            # float() also reads protobuf's "NaN" / "Infinity" spellings
            metrics={
                item["key"]: float(item.get("value", 0.0)) for item in data.get("metrics", ())
            },
        ),
    )


def _pairs(items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {str(item["key"]): str(item.get("value", "")) for item in items}


def _client_search(client: MlflowClient) -> Search:
    def search(
        experiment_ids: list[str],
        filter_string: str,
        order_by: list[str] | None,
        max_results: int,
        page_token: str | None,
    ) -> RunsPage:
        page = client.search_runs(
            experiment_ids=experiment_ids,
            filter_string=filter_string,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=max_results,
            order_by=order_by,
            page_token=page_token,
        )
        return RunsPage(list(page), page.token)

    return search
