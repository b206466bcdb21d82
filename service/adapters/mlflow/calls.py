"""MLflow calls with Reckon's own retry budget on top of the client's: transient failures
are retried with exponential backoff, every other failure becomes one UnavailableError
line without credentials; experiments are looked up by name or id here too."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import requests
from mlflow.entities import RunTag, ViewType
from mlflow.exceptions import MlflowException

from service.adapters.mlflow.support import (
    NotFound,
    is_denied,
    is_not_found,
    is_transient,
    short_reason,
)
from service.domain.errors import AccessDenied, NotFoundError, UnavailableError

log = logging.getLogger(__name__)

T = TypeVar("T")


class MlflowCalls:
    """One tracking server's client (`uri` is its credential-free address, for messages)."""

    def __init__(self, client: Any, uri: str, retries: int, backoff_seconds: float) -> None:
        self._client = client
        self._uri = uri
        self._retries = retries
        self._backoff_seconds = backoff_seconds

    def resolve_experiment(self, name_or_id: str) -> str | None:
        """The id of an active experiment by name, then by id; None when MLflow has none
        (a deleted experiment is as good as missing). An outage still raises."""
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
            return None
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
                # INFO: the server's log shows each retry; a command shows the one line
                # it ends with, if the retries do not help.
                log.info(
                    "MLflow %s failed (%s); retry %d of %d in %.1f s",
                    what,
                    self.reason(error),
                    attempt + 1,
                    budget,
                    delay,
                )
                time.sleep(delay)
                attempt += 1

    def tag_run(self, run_id: str, tags: Mapping[str, str]) -> None:
        """Set tags on one run, without a retry: the write-back stops at the first outage
        and its outbox retries on the next pass, so an outage costs one wait, not one per
        run. MLflow's refusals are told apart: 401/403 is AccessDenied (kept, retried once
        permission is granted); any other 4xx (the run is gone, deleted, or refuses these
        tags) is NotFoundError, as it never will take them."""
        if not tags:
            return
        run_tags = [RunTag(key, str(value)) for key, value in tags.items()]
        try:
            self._client.log_batch(run_id, tags=run_tags, synchronous=True)
        except (MlflowException, requests.RequestException, OSError) as error:
            if is_transient(error):
                raise UnavailableError(self.message(f"set tags on run {run_id}", error)) from None
            if is_denied(error):
                raise AccessDenied(
                    f"MLflow at {self._uri} denies tagging run {run_id} "
                    f"({self.reason(error)}): the account Reckon signs in with needs EDIT "
                    "permission on the run's experiment"
                ) from None
            raise NotFoundError(
                f"MLflow at {self._uri} refuses tags on run {run_id}: {self.reason(error)}"
            ) from None

    def message(self, what: str, error: Exception) -> str:
        return f"MLflow at {self._uri}: cannot {what}: {self.reason(error)}"

    @staticmethod
    def reason(error: Exception) -> str:
        text = error.message if isinstance(error, MlflowException) else str(error)
        return short_reason(text)  # no credentials, one short line
