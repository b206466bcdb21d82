"""MLflow calls with Reckon's own retry budget on top of the client's: transient failures
are retried with exponential backoff, every other failure becomes one UnavailableError
line without credentials; experiments are looked up by name or id here too."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import requests
from mlflow.entities import ViewType
from mlflow.exceptions import MlflowException

from service.adapters.mlflow.support import NotFound, is_not_found, is_transient, redact
from service.domain.errors import UnavailableError

log = logging.getLogger(__name__)

T = TypeVar("T")


class MlflowCalls:
    """One tracking server's client (`uri` is its credential-free address, for messages)."""

    def __init__(self, client: Any, uri: str, retries: int, backoff_seconds: float) -> None:
        self._client = client
        self._uri = uri
        self._retries = retries
        self._backoff_seconds = backoff_seconds

    def resolve_experiment(self, name_or_id: str) -> str:
        """A name first, then an id; a deleted experiment is as good as missing."""
        experiment = self.call(
            f"look up experiment {name_or_id!r}",
            lambda: self._client.get_experiment_by_name(name_or_id),
        )
        if experiment is None:
            try:
                experiment = self.call(
                    f"look up experiment {name_or_id!r}",
                    lambda: self._client.get_experiment(name_or_id),
                    not_found_ok=True,
                )
            except NotFound:
                experiment = None
        if experiment is None or experiment.lifecycle_stage != "active":
            raise UnavailableError(f"MLflow experiment {name_or_id!r} not found at {self._uri}")
        return str(experiment.experiment_id)

    def active_experiment_ids(self) -> list[str]:
        ids: list[str] = []
        token: str | None = None
        while True:
            page = self.call(
                "list experiments",
                partial(
                    self._client.search_experiments,
                    view_type=ViewType.ACTIVE_ONLY,
                    max_results=1000,
                    page_token=token,
                ),
            )
            ids.extend(str(experiment.experiment_id) for experiment in page)
            if not page.token:
                return ids
            token = page.token

    def call(
        self,
        what: str,
        call: Callable[[], T],
        *,
        not_found_ok: bool = False,
        retries: int | None = None,
    ) -> T:
        """Run one MLflow call, retrying transient failures with exponential backoff."""
        budget = self._retries if retries is None else retries
        attempt = 0
        while True:
            try:
                return call()
            except (MlflowException, requests.RequestException, OSError) as error:
                if not_found_ok and is_not_found(error):
                    raise NotFound from error
                if attempt >= budget or not is_transient(error):
                    raise UnavailableError(self.message(what, error)) from error
                delay = self._backoff_seconds * 2**attempt
                log.warning(
                    "MLflow %s failed (%s); retry %d of %d in %.1f s",
                    what,
                    self.reason(error),
                    attempt + 1,
                    budget,
                    delay,
                )
                time.sleep(delay)
                attempt += 1

    def message(self, what: str, error: Exception) -> str:
        return f"MLflow at {self._uri}: cannot {what}: {self.reason(error)}"

    @staticmethod
    def reason(error: Exception) -> str:
        text = error.message if isinstance(error, MlflowException) else str(error)
        line = " ".join(redact(str(text)).split())  # one line, no credentials
        return line if len(line) <= 300 else line[:297] + "..."
