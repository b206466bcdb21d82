"""Use cases of the loop: the reconcile pass, import, launch, refit, and reading the
history, accuracy, factor sets, running runs and passes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from service.domain.errors import InputError, NotFoundError
from service.domain.records import ACCURACY_ALIASES, Reconciliation, RunningProjection
from service.ports import RunSource
from service.usecases.registry import RegistryCases
from service.usecases.results import FactorHistory, FactorsAnswer, Jobs

if TYPE_CHECKING:
    from service.usecases.importing import ImportOutcome
    from service.usecases.launch import LaunchOutcome
    from service.usecases.nightly.passes import PassOutcome
    from service.usecases.refit import InPass, RefitOutcome


class LoopCases(RegistryCases):
    """The pass, import, launch, refit and the history they build."""

    def reconcile(
        self,
        *,
        trigger: str,
        since: str | None = None,
        full: bool = False,
        on_progress: Callable[[int], None] | None = None,
    ) -> PassOutcome:
        """The one pass every entry point runs (CLI, API, scheduler): pull, compare, store,
        refit. `since` (a date or a duration back from now) or `full` rescan older runs."""
        if since is not None and full:
            raise InputError("since and full are alternatives; give one")
        return self._pass(
            self._adapters.run_source(),
            trigger=trigger,
            since=self._since(since),
            full=full,
            on_progress=on_progress,
        )

    def _pass(
        self,
        source: RunSource,
        *,
        trigger: str,
        since: datetime | None = None,
        full: bool = False,
        on_progress: Callable[[int], None] | None = None,
    ) -> PassOutcome:
        from service.usecases.nightly import passes as reconcile

        options = reconcile.PassOptions(
            lookback=timedelta(hours=self.policy.lookback_hours),
            since=since,
            full=full,
            trigger=trigger,
            write_back=self.policy.write_back_tags,
        )
        return reconcile.run_pass(
            self._adapters.unit_of_work(),
            source,
            self._adapters.pass_lock(),
            self.clock,
            options,
            refit=self._refit_in_pass(),
            on_progress=on_progress,
        )

    def import_runs(
        self,
        *,
        experiments: tuple[str, ...] = (),
        since: str | None = None,
        gpu: str | None = None,
        gpus: int | None = None,
        precision: str | None = None,
        dry_run: bool = False,
    ) -> ImportOutcome:
        """Learn from past runs: a retrospective estimate (the published prior, dated at the
        run's start) for each finished, unlinked run whose configuration is complete (from
        the run, else these flags), linked and reconciled by an ordinary pass before this
        returns. Importing twice imports nothing new."""
        from service.usecases import importing

        source = self._adapters.run_source()  # one source: its metric-history cache serves both
        options = importing.ImportOptions(
            experiments=experiments,
            since=self._since(since),
            gpu=gpu,
            gpus=gpus,
            precision=precision,
            dry_run=dry_run,
        )
        return importing.import_runs(
            self._adapters.unit_of_work(),
            source,
            self.catalog,
            self._adapters.prior(),
            options,
            now=self.clock.now(),
            reconcile=lambda: self._pass(source, trigger="import"),
        )

    def launch(
        self, estimate_id: str, command: tuple[str, ...], *, experiment: str | None = None
    ) -> LaunchOutcome:
        """Run `command` inside an MLflow run linked to the estimate (service/usecases/launch.py)."""
        from service.usecases import launch

        return launch.launch(
            self._adapters.reader(),
            self._adapters.launch_runs(),
            launch.LaunchOptions(estimate_id, command, experiment),
            configured_experiments=self.policy.experiments,
        )

    def refit(self, *, force: bool = False) -> RefitOutcome:
        """One refit now, in its own transaction."""
        from service.usecases.refit import refit

        with self._adapters.unit_of_work() as uow:
            outcome = refit(
                uow, self._adapters.prior(), self.fit_parameters, self.clock.now(), force=force
            )
            uow.commit()
        return outcome

    def _refit_in_pass(self) -> InPass:
        """Every pass ends with a refit, in the pass's transaction."""
        from service.usecases.refit import InPass

        return InPass(self._adapters.prior(), self.fit_parameters, self._adapters.unit_of_work)

    def history(
        self, *, since: str | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[Reconciliation]:
        from service.usecases import queries

        return queries.history(
            self._adapters.reader(),
            since=self._since(since),
            gpu=self._gpu_name(gpu),
            limit=limit,
        )

    def accuracy(self, *, by: str | None = None, since: str | None = None) -> dict[str, object]:
        from service.usecases import accuracy

        return accuracy.accuracy(
            self._adapters.reader(),
            self._adapters.prior(),
            self.fit_parameters,
            by=ACCURACY_ALIASES.get(by, by) if by is not None else None,
            since=self._since(since),
        )

    def factors(self, version: int | None = None) -> FactorsAnswer:
        """The active factor set, or the one pinned by `version`."""
        from service.calibration import model as factor_model

        with self._adapters.reader() as uow:
            active = uow.factor_sets.active()
            chosen = active if version is None else uow.factor_sets.get(version)
        if chosen is None and version is not None:
            raise NotFoundError(f"no factor set with version {version}")
        prior = self._adapters.prior()
        return FactorsAnswer(
            factor_set=chosen,
            active_version=None if active is None else active.version,
            prior_segments=[factor_model.prior_factors(prior)],
            prior_sources=list(prior.sources),
        )

    def activate_factor_set(self, version: int) -> FactorsAnswer:
        """Make `version` active now (recorded as its activation time). It stays active
        until a newer set passes the refit's gate against it, or another is activated."""
        with self._adapters.unit_of_work() as uow:
            if uow.factor_sets.get(version) is None:
                raise NotFoundError(f"no factor set with version {version}")
            uow.factor_sets.activate(version, self.clock.now())
            uow.commit()
        return self.factors(version)

    def factor_history(self) -> FactorHistory:
        with self._adapters.reader() as uow:
            active = uow.factor_sets.active()
            sets = uow.factor_sets.all()
        return FactorHistory(sets, None if active is None else active.version)

    def running(self) -> list[RunningProjection]:
        from service.usecases import running

        return running.running(
            self._adapters.reader(), self._adapters.run_source(), self.clock.now()
        )

    def jobs(self, limit: int = 20) -> Jobs:
        from service.usecases import queries

        passes = queries.passes(self._adapters.reader(), limit)
        return Jobs(self.policy.schedule, self.policy.timezone, passes)
