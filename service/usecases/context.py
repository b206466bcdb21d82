"""What every area of use cases shares: the settings' policy, the adapters (as factories,
so nothing opens until a use case needs it), and the readings several areas make (dates,
GPU names, the factor set a calibrated answer uses). Holds no use case itself."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from service.domain.errors import InputError, NoDatabaseYet, NotFoundError
from service.domain.hardware import Catalog
from service.domain.inputs import RawInputs
from service.domain.prices import PriceTable
from service.domain.units import parse_since
from service.domain.values import DEFAULT_HALF_LIFE_DAYS
from service.ports import Clock, LaunchRuns, PassLock, RunSource, SchemaAdmin, UnitOfWork

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from service.calibration.model import FactorSet, FitParameters, Prior, SegmentFactors


@dataclass(frozen=True)
class Policy:
    """What the settings decide for the use cases (built from `Settings` by bootstrap)."""

    lookback_hours: float = 48.0
    write_back_tags: bool = True
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    schedule: str = "0 2 * * *"
    running_schedule: str = "0 * * * *"  # RECKON_RUNNING_SCHEDULE: the forecast job
    timezone: str = "UTC"
    api_token: str | None = None  # the bearer token the API's state-changing routes require
    max_request_bytes: int = 1_048_576  # larger request bodies are refused unread (413)
    experiments: tuple[str, ...] = ()  # RECKON_EXPERIMENTS (launch's default experiment)
    mlflow_tracking_uri: str | None = None  # where the MLflow UI lives too, when it is http(s)


@dataclass(frozen=True)
class Adapters:
    """The ports, as factories: each call to `unit_of_work()` is one new transaction."""

    catalog: Callable[[], Catalog]
    unit_of_work: Callable[[], UnitOfWork]  # for writes: an embedded database is created
    reader: Callable[[], UnitOfWork]  # for reads: a missing database is NoDatabaseYet
    run_source: Callable[[], RunSource]
    pass_lock: Callable[[], PassLock]
    launch_runs: Callable[[], LaunchRuns]
    schema: Callable[[], SchemaAdmin]
    prior: Callable[[], Prior]
    clock: Clock
    close: Callable[[], None] = lambda: None
    # RECKON_PRICES_FILE, read (None: not set); a bad file raises InputError when first read.
    prices: Callable[[], PriceTable | None] = lambda: None
    # The forecast job's own lock (never the pass's); None: no lock (one process only).
    forecast_lock: Callable[[], PassLock] | None = None


class Context:
    """The state every area reads. One instance per `Reckon`, shared by its areas."""

    def __init__(self, adapters: Adapters, policy: Callable[[], Policy]) -> None:
        self.adapters = adapters
        self._policy = policy

    @cached_property
    def policy(self) -> Policy:
        """Read on first use: the catalog-only commands never load the settings."""
        return self._policy()

    @property
    def clock(self) -> Clock:
        return self.adapters.clock

    @property
    def catalog(self) -> Catalog:
        return self.adapters.catalog()

    @property
    def prices(self) -> PriceTable | None:
        return self.adapters.prices()

    def close(self) -> None:
        self.adapters.close()

    @property
    def fit_parameters(self) -> FitParameters:
        from service.calibration.model import FitParameters

        return FitParameters(half_life_days=self.policy.half_life_days)

    def since(self, text: str | None) -> datetime | None:
        return None if text is None else parse_since(text, self.clock.now())

    def gpu_name(self, gpu: str | None) -> str | None:
        return None if gpu is None else self.catalog.resolve(gpu).name

    def chosen_factor_set(self, inputs: RawInputs, version: int | None) -> FactorSet | None:
        """The factor set a calibrated answer uses: the pinned `version`, else the active
        one; None (the published prior) before any set is active. With no database at all
        the prior answers too (a planner may ask before any loop ran), but never silently:
        one warning names the file, since a command run from another folder than the one
        whose relative default URL holds the history would drop what the loop learned."""
        if inputs.factors_given:
            raise InputError("calibrated estimates use fitted factors; drop utilization/overhead")
        try:
            with self.adapters.reader() as uow:
                return uow.factor_sets.active() if version is None else pinned(uow, version)
        except NoDatabaseYet as error:
            if version is not None:
                raise
            log.warning(
                "reckon: warning: no database at %s, so nothing a refit learned: the published "
                "prior answered (set RECKON_DATABASE_URL to the database that holds the history)",
                error.where or "the configured URL",
            )
            return None

    def segments(self, chosen: FactorSet | None) -> Mapping[str, SegmentFactors]:
        from service.calibration import model

        if chosen is not None:
            return chosen.segments
        return {model.PRIOR_KEY: model.prior_factors(self.adapters.prior())}


def pinned(uow: UnitOfWork, version: int) -> FactorSet:
    """Factor set `version`, inside the caller's transaction; NotFoundError if there is none."""
    chosen = uow.factor_sets.get(version)
    if chosen is None:
        raise NotFoundError(f"no factor set with version {version}")
    return chosen
