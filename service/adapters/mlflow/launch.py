"""Adapter: the few MLflow calls `reckon launch` makes (service/usecases/launch.py), behind the
`LaunchRuns` port. mlflow-skinny's client is imported only when one is built; any MLflow
failure becomes one UnavailableError line without the URL's credentials."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.adapters.mlflow.support import short_reason
from service.domain.errors import InputError, UnavailableError
from service.domain.records import ESTIMATE_TAG
from service.domain.redaction import public_url, redact


class MlflowLaunchRuns:
    """The few MLflow calls launch makes (mlflow-skinny's client, imported here only). Any
    MLflow failure becomes one UnavailableError line."""

    def __init__(self, tracking_uri: str) -> None:
        from mlflow.tracking import MlflowClient

        self.tracking_uri = tracking_uri
        self._client = _Guarded(MlflowClient(tracking_uri=tracking_uri), tracking_uri)

    def experiment_id(self, name: str) -> str:
        experiment = self._client.get_experiment_by_name(name)
        if experiment is None:
            return str(self._client.create_experiment(name))
        if experiment.lifecycle_stage != "active":
            raise InputError(f"MLflow experiment {name!r} is deleted; restore it or pick another")
        return str(experiment.experiment_id)

    def create(self, experiment_id: str, tags: Mapping[str, str], started_ms: int) -> str:
        run = self._client.create_run(experiment_id, start_time=started_ms, tags=dict(tags))
        return str(run.info.run_id)

    def end(self, run_id: str, status: str) -> None:
        self._client.set_terminated(run_id, status)

    def delete(self, run_id: str) -> None:
        self._client.set_terminated(run_id, "KILLED")
        self._client.delete_run(run_id)

    def is_empty(self, run_id: str) -> bool:
        data = self._client.get_run(run_id).data
        return not data.metrics and not data.params

    def others_for(
        self, experiment_id: str, estimate_id: str, run_id: str, started_ms: int
    ) -> list[tuple[str, str]]:
        """Runs tagged for the estimate that started after launch did, other than its own, in
        any active experiment (Lightning logs to its own experiment name by default)."""
        experiments = [experiment_id] + [
            str(item.experiment_id)
            for item in self._client.search_experiments(max_results=1000)
            if str(item.experiment_id) != experiment_id
        ]
        found = self._client.search_runs(
            experiments,
            filter_string=(
                f"tags.`{ESTIMATE_TAG}` = '{estimate_id}' AND attributes.start_time >= {started_ms}"
            ),
            max_results=100,
        )
        return [(r.info.run_id, r.info.status) for r in found if r.info.run_id != run_id]


class _Guarded:
    """An MlflowClient whose every call raises UnavailableError (one line) on failure."""

    def __init__(self, client: Any, uri: str) -> None:
        self._client = client
        self._uri = public_url(uri) or redact(uri)  # never print user:password@

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            from mlflow.exceptions import MlflowException

            try:
                return method(*args, **kwargs)
            except (MlflowException, OSError) as error:
                text = error.message if isinstance(error, MlflowException) else str(error)
                line = short_reason(text)
                raise UnavailableError(f"MLflow at {self._uri}: {name} failed: {line}") from None

        return call
