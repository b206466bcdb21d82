"""What every group of use cases shares: the settings' policy, the adapters (as
factories), and the parsing every entry point needs (dates, GPU names, the factor set a
calibrated answer uses)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from service.domain.errors import InputError, NoDatabaseYet
from service.domain.hardware import Catalog
from service.domain.inputs import RawInputs
from service.domain.units import parse_since
from service.domain.values import DEFAULT_HALF_LIFE_DAYS
from service.ports import Clock, LaunchRuns, PassLock, RunSource, SchemaAdmin, UnitOfWork

if TYPE_CHECKING:
    from service.calibration.model import FactorSet, FitParameters, Prior, SegmentFactors


@dataclass(frozen=True)
class Policy:
    """What the settings decide for the use cases (built from `Settings` by bootstrap)."""

    lookback_hours: float = 48.0
    write_back_tags: bool = True
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS
    schedule: str = "0 2 * * *"
    timezone: str = "UTC"
    api_token: str | None = None  # the bearer token the API's state-changing routes require
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


class Core:
    """The state every use case reads; the groups in this package add the use cases."""

    def __init__(self, adapters: Adapters, policy: Callable[[], Policy]) -> None:
        self._adapters = adapters
        self._policy = policy

    @cached_property
    def policy(self) -> Policy:
        """Read on first use: the catalog-only commands never load the settings."""
        return self._policy()

    @property
    def clock(self) -> Clock:
        return self._adapters.clock

    @property
    def catalog(self) -> Catalog:
        return self._adapters.catalog()

    def close(self) -> None:
        self._adapters.close()

    def _chosen_factor_set(self, inputs: RawInputs, version: int | None) -> FactorSet | None:
        """The factor set a calibrated answer uses: the pinned `version`, else the active
        one; None (the published prior) before any set, or before anything was saved."""
        if inputs.factors_given:
            raise InputError("calibrated estimates use fitted factors; drop utilization/overhead")
        from service.calibration import calibrated as calibrated_use_case

        try:
            return calibrated_use_case.chosen_factor_set(self._adapters.reader(), version)
        except NoDatabaseYet:
            if version is not None:
                raise
            return None

    def _segments(self, chosen: FactorSet | None) -> Mapping[str, SegmentFactors]:
        from service.calibration import model as factor_model

        if chosen is not None:
            return chosen.segments
        return {factor_model.PRIOR_KEY: factor_model.prior_factors(self._adapters.prior())}

    @property
    def fit_parameters(self) -> FitParameters:
        from service.calibration.model import FitParameters

        return FitParameters(half_life_days=self.policy.half_life_days)

    def _since(self, text: str | None) -> datetime | None:
        return None if text is None else parse_since(text, self.clock.now())

    def _gpu_name(self, gpu: str | None) -> str | None:
        return None if gpu is None else self.catalog.resolve(gpu).name
