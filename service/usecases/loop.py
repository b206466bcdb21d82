"""The loop's actions: the reconcile pass, import, launch and refit, with the adapters and
the policy wired in. Each use case itself lives in its own module (nightly/, importing.py,
launch.py, refit.py); the methods here only hand it what it needs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from service.domain.errors import InputError
from service.ports import RunSource
from service.usecases.context import Context

if TYPE_CHECKING:
    from service.usecases.refit import InPass
    from service.usecases.results.loop import (
        ForecastRun,
        ImportOutcome,
        LaunchOutcome,
        PassOutcome,
        RefitOutcome,
    )


class Loop:
    """The pass, import, launch and refit."""

    def __init__(self, context: Context) -> None:
        self._context = context

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
            self._context.adapters.run_source(),
            trigger=trigger,
            since=self._context.since(since),
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
        from service.usecases.nightly import passes

        options = passes.PassOptions(
            lookback=timedelta(hours=self._context.policy.lookback_hours),
            since=since,
            full=full,
            trigger=trigger,
            write_back=self._context.policy.write_back_tags,
            # read only when a run trained in another precision than planned
            peaks=lambda gpu, precision: self._context.catalog.known_peak(gpu, precision),
        )
        return passes.run_pass(
            self._context.adapters.unit_of_work(),
            source,
            self._context.adapters.pass_lock(),
            self._context.clock,
            options,
            refit=self._refit_in_pass(),
            on_progress=on_progress,
        )

    def forecast(self) -> ForecastRun:
        """The forecast job (`reckon forecast`, RECKON_RUNNING_SCHEDULE): every linked run
        still RUNNING forecast and tagged `reckon.eta*` through the outbox, under its own
        lock (service.usecases.forecast)."""
        from service.usecases import forecast

        c = self._context
        lock = c.adapters.forecast_lock
        return forecast.forecast(
            c.adapters.reader(),
            c.adapters.unit_of_work(),
            c.adapters.run_source(),
            None if lock is None else lock(),
            c.clock.now(),
            write=c.policy.write_back_tags,
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

        # one source: its metric-history cache serves the import and its pass
        source = self._context.adapters.run_source()
        options = importing.ImportOptions(
            experiments=experiments,
            since=self._context.since(since),
            gpu=gpu,
            gpus=gpus,
            precision=precision,
            dry_run=dry_run,
        )
        return importing.import_runs(
            self._context.adapters.unit_of_work(),
            source,
            self._context.catalog,
            self._context.adapters.prior(),
            options,
            now=self._context.clock.now(),
            reconcile=lambda: self._pass(source, trigger="import"),
        )

    def launch(
        self,
        estimate_id: str,
        command: tuple[str, ...],
        *,
        experiment: str | None = None,
        precision: str | None = None,
    ) -> LaunchOutcome:
        """Run `command` inside an MLflow run linked to the estimate
        (service/usecases/launch.py)."""
        from service.usecases import launch

        return launch.launch(
            self._context.adapters.reader(),
            self._context.adapters.launch_runs(),
            launch.LaunchOptions(estimate_id, command, experiment, precision),
            configured_experiments=self._context.policy.experiments,
        )

    def refit(self, *, force: bool = False) -> RefitOutcome:
        """One refit now, in its own transaction."""
        from service.usecases.refit import refit

        with self._context.adapters.unit_of_work() as uow:
            outcome = refit(
                uow,
                self._context.adapters.prior(),
                self._context.fit_parameters,
                self._context.clock.now(),
                force=force,
            )
            uow.commit()
        return outcome

    def _refit_in_pass(self) -> InPass:
        """Every pass ends with a refit, in the pass's transaction."""
        from service.usecases.refit import InPass

        return InPass(
            self._context.adapters.prior(),
            self._context.fit_parameters,
            self._context.adapters.unit_of_work,
        )
