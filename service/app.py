"""The application object: every use case Reckon offers is one method of `Reckon`, with
typed arguments and a typed result (frozen dataclasses; presenters turn them into text or
JSON). The CLI, the API and the scheduler call these methods and nothing below them. The
methods own the transaction boundaries; the adapters arrive as small factories from
`service.bootstrap`, so nothing is opened until a use case needs it.

Why some imports sit inside methods: `reckon estimate` must start in well under 0.3 s
(DESIGN §7), so the refit's numerics (numpy) and the pass load only where they are used."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from service import estimates
from service.domain import (
    ACCURACY_ALIASES,
    DEFAULT_HALF_LIFE_DAYS,
    ESTIMATE_TAG,
    FactorSource,
    InputError,
    NoDatabaseYet,
    NotFoundError,
    Plan,
    ReckonError,
    Reconciliation,
    RunningProjection,
    SavedEstimate,
    SchemaStatus,
    UnavailableError,
)
from service.hardware import Catalog, GpuSpec
from service.inputs import RawInputs
from service.ports import Clock, LaunchRuns, PassLock, RunSource, SchemaAdmin, UnitOfWork
from service.results import (
    Answer,
    EstimateDetail,
    FactorHistory,
    FactorsAnswer,
    Health,
    Jobs,
    PlanAnswer,
    ReportData,
    SavedAnswer,
    Sensitivity,
    Unlinked,
)
from service.units import parse_since

if TYPE_CHECKING:
    from service.factor_model import FactorSet, FitParameters, Prior, SegmentFactors
    from service.importing import ImportOutcome
    from service.launch import LaunchOutcome
    from service.queries import Snapshot
    from service.reconcile import PassOutcome
    from service.refit import RefitOutcome


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


class Reckon:
    """The use cases. Built by `service.bootstrap.build(settings)`; `close()` releases
    whatever adapters were opened."""

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

    # --- planning: catalog only, no database -----------------------------------------------

    def hardware(self) -> list[GpuSpec]:
        return self.catalog.gpus()

    def estimate(
        self, inputs: RawInputs, *, calibrated: bool = False, factor_set: int | None = None
    ) -> Answer:
        """With the given factors (else the defaults), or with fitted ones when `calibrated`
        or a pinned `factor_set` is asked for; both at once is an error, not a choice."""
        request = estimates.build_request(self.catalog, inputs)
        if not (calibrated or factor_set is not None):
            source: FactorSource = "given" if inputs.factors_given else "default"
            return Answer(estimates.compute(self.catalog, request), source)
        from service import calibrated as calibrated_use_case

        chosen = self._chosen_factor_set(inputs, factor_set)
        answer = calibrated_use_case.calibrated(
            self.catalog, request, chosen, self._adapters.prior()
        )
        return Answer(answer.estimate, answer.factors.level, answer)

    def _chosen_factor_set(self, inputs: RawInputs, version: int | None) -> FactorSet | None:
        """The factor set a calibrated answer uses: the pinned `version`, else the active
        one; None (the published prior) before any set, or before anything was saved."""
        if inputs.factors_given:
            raise InputError("calibrated estimates use fitted factors; drop utilization/overhead")
        from service import calibrated as calibrated_use_case

        try:
            return calibrated_use_case.chosen_factor_set(self._adapters.reader(), version)
        except NoDatabaseYet:
            if version is not None:
                raise
            return None

    def _segments(self, chosen: FactorSet | None) -> Mapping[str, SegmentFactors]:
        from service import factor_model

        if chosen is not None:
            return chosen.segments
        return {factor_model.PRIOR_KEY: factor_model.prior_factors(self._adapters.prior())}

    def save(
        self,
        inputs: RawInputs,
        *,
        calibrated: bool = False,
        factor_set: int | None = None,
        label: str | None = None,
    ) -> SavedAnswer:
        """Estimate and store it as an immutable prediction."""
        answer = self.estimate(inputs, calibrated=calibrated, factor_set=factor_set)
        fitted = answer.calibrated
        saved = estimates.save(
            self._adapters.unit_of_work(),
            answer.estimate,
            now=self.clock.now(),
            label=label,
            interval=None if fitted is None else fitted.interval,
            factor_set_version=None if fitted is None else fitted.factor_set,
            factor_source=answer.factor_source,
        )
        return SavedAnswer(answer, saved)

    def plan(
        self,
        inputs: RawInputs,
        deadline_seconds: float,
        multiple_of: int = 1,
        *,
        calibrated: bool = False,
        confidence: float | None = None,
        factor_set: int | None = None,
    ) -> PlanAnswer:
        """The fewest GPUs (a multiple of `multiple_of`) whose wall time meets the deadline;
        `inputs.gpus` is ignored. Calibrated, "meets" means at quantile `confidence` of the
        predictive distribution (default 0.5: the P50); 0.9 asks to be 90% sure."""
        request = estimates.build_request(self.catalog, inputs)
        wants = calibrated or factor_set is not None or confidence is not None
        if not wants:
            return PlanAnswer(estimates.plan(self.catalog, request, deadline_seconds, multiple_of))
        from service import planning

        chosen = self._chosen_factor_set(inputs, factor_set)
        peak = self.catalog.peak_flops(request.hardware.gpu, request.hardware.precision)
        answer = planning.calibrated_plan(
            request, peak, self._segments(chosen), deadline_seconds,
            0.5 if confidence is None else confidence, multiple_of,
        )  # fmt: skip
        plan = Plan(deadline_seconds, answer.gpus, answer.multiple_of, answer.wall.estimate)
        return PlanAnswer(plan, answer, None if chosen is None else chosen.version)

    def sensitivity(
        self,
        inputs: RawInputs,
        vary: Mapping[str, list[str]],
        *,
        calibrated: bool = False,
        factor_set: int | None = None,
    ) -> Sensitivity:
        """The seed's table (and the variables named in `vary`); calibrated, each row has
        its P10/P50/P90 from its own segment's factors."""
        request = estimates.build_request(self.catalog, inputs)
        base, rows = estimates.sensitivity(self.catalog, request, dict(vary))
        if not (calibrated or factor_set is not None):
            return Sensitivity(base, rows)
        from service import planning

        chosen = self._chosen_factor_set(inputs, factor_set)
        variations = estimates.variations(self.catalog, request, dict(vary))
        ranged = planning.calibrated_sensitivity(
            request, self.catalog.peak_flops, self._segments(chosen), variations
        )
        return Sensitivity(base, rows, ranged, None if chosen is None else chosen.version)

    # --- the registry ---------------------------------------------------------------------

    def record(
        self,
        *,
        predicted_seconds: float,
        gpu: str,
        gpus: int,
        precision: str,
        label: str | None = None,
    ) -> SavedEstimate:
        """A planner's own prediction: a duration and the run configuration."""
        return estimates.record_external(
            self._adapters.unit_of_work(),
            self.catalog,
            predicted_seconds=predicted_seconds,
            gpu=gpu,
            gpus=gpus,
            precision=precision,
            now=self.clock.now(),
            label=label,
        )

    def link(self, estimate_id: str, run_id: str, *, force: bool = False) -> bool:
        """True when a new link was made, False when it already existed. The run must exist
        in MLflow (NotFoundError otherwise; UnavailableError when MLflow cannot say), unless
        `force` links it unchecked (a run on a server Reckon cannot reach yet)."""
        if not run_id.strip():
            raise InputError("run id must not be empty")
        self.estimate_detail(estimate_id)  # an unknown estimate fails before asking MLflow
        if not force and not self._adapters.run_source().runs_by_id([run_id.strip()]):
            raise NotFoundError(f"no MLflow run {run_id!r} (link it anyway with --force)")
        return estimates.link(
            self._adapters.unit_of_work(), estimate_id, run_id, now=self.clock.now()
        )

    def unlink(self, estimate_id: str, run_id: str, *, force: bool = False) -> Unlinked:
        """Undo a link, and remove the run's reckon.estimate_id tag when it names this
        estimate (else the next pass would link it again); MLflow is asked first, so an
        outage changes nothing (UnavailableError) unless `force` skips MLflow. The
        estimate's reconciliation is recomputed from its remaining runs."""
        with self._adapters.reader() as uow:
            if uow.links.estimate_for_run(run_id) != estimate_id:
                raise NotFoundError(f"run {run_id} is not linked to estimate {estimate_id}")
        tag_removed = False
        if not force:
            source = self._adapters.run_source()
            tagged = [run for run in source.runs_by_id([run_id]) if run.estimate_id == estimate_id]
            if tagged:
                source.delete_tag(run_id, ESTIMATE_TAG)
                tag_removed = True
        result = estimates.unlink(
            self._adapters.unit_of_work(), estimate_id, run_id, now=self.clock.now()
        )
        return Unlinked(estimate_id, run_id, tag_removed, result)

    def estimate_detail(self, estimate_id: str) -> EstimateDetail:
        saved, run_ids = estimates.show(self._adapters.reader(), estimate_id)
        return EstimateDetail(saved, run_ids)

    def list_estimates(self, *, limit: int = 50, gpu: str | None = None) -> list[SavedEstimate]:
        return estimates.list_saved(self._adapters.reader(), limit=limit, gpu=self._gpu_name(gpu))

    # --- the loop: reconcile, refit, read the history ---------------------------------------

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
        from service import reconcile

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
            refit=self._refit_in_pass,
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
        from service import importing

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
        """Run `command` inside an MLflow run linked to the estimate (service/launch.py)."""
        from service import launch

        return launch.launch(
            self._adapters.reader(),
            self._adapters.launch_runs(),
            launch.LaunchOptions(estimate_id, command, experiment),
            configured_experiments=self.policy.experiments,
        )

    def refit(self, *, force: bool = False) -> RefitOutcome:
        """One refit now, in its own transaction."""
        from service.refit import refit

        with self._adapters.unit_of_work() as uow:
            outcome = refit(
                uow, self._adapters.prior(), self.fit_parameters, self.clock.now(), force=force
            )
            uow.commit()
        return outcome

    def _refit_in_pass(self, uow: UnitOfWork, _pass_id: int, now: datetime) -> int | None:
        """Every pass ends with a refit, in the pass's transaction; returns the active set."""
        from service.refit import refit

        refit(uow, self._adapters.prior(), self.fit_parameters, now)
        active = uow.factor_sets.active()
        return None if active is None else active.version

    @property
    def fit_parameters(self) -> FitParameters:
        from service.factor_model import FitParameters

        return FitParameters(half_life_days=self.policy.half_life_days)

    def history(
        self, *, since: str | None = None, gpu: str | None = None, limit: int | None = None
    ) -> list[Reconciliation]:
        from service import queries

        return queries.history(
            self._adapters.reader(),
            since=self._since(since),
            gpu=self._gpu_name(gpu),
            limit=limit,
        )

    def accuracy(self, *, by: str | None = None, since: str | None = None) -> dict[str, object]:
        from service import accuracy

        return accuracy.accuracy(
            self._adapters.reader(),
            self._adapters.prior(),
            self.fit_parameters,
            by=ACCURACY_ALIASES.get(by, by) if by is not None else None,
            since=self._since(since),
        )

    def factors(self, version: int | None = None) -> FactorsAnswer:
        """The active factor set, or the one pinned by `version`."""
        from service import factor_model

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
        from service import running

        return running.running(
            self._adapters.reader(), self._adapters.run_source(), self.clock.now()
        )

    def jobs(self, limit: int = 20) -> Jobs:
        from service import queries

        passes = queries.passes(self._adapters.reader(), limit)
        return Jobs(self.policy.schedule, self.policy.timezone, passes)

    # --- operations ------------------------------------------------------------------------

    def health(self) -> Health:
        """Readiness: the database must answer; MLflow is reported, not required."""
        database = self._check(self._ping_database)
        return Health(database=database, mlflow=self._check(self._ping_mlflow))

    def _ping_database(self) -> None:
        with self._adapters.reader() as uow:
            uow.passes.recent(1)

    def _ping_mlflow(self) -> None:
        self._adapters.run_source().ping()

    @staticmethod
    def _check(probe: Callable[[], None]) -> str:
        try:
            probe()
        except ReckonError as error:
            return str(error)
        return "ok"

    def mlflow_ui_url(self) -> str | None:
        """Where the MLflow UI is, for links to runs: the tracking server's http(s) address
        without credentials, query or fragment; None for a file store or no MLflow at all."""
        parts = urlsplit(self.policy.mlflow_tracking_uri or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))

    def metrics(self) -> Snapshot:
        from service import queries

        return queries.snapshot(self._adapters.reader())

    def report(self) -> ReportData:
        """What `reckon report` draws: the history, accuracy by GPU, every factor set and
        the running runs (left out, with the reason, when MLflow is down or unset)."""
        running: list[RunningProjection] = []
        running_error = None
        try:
            running = self.running()
        except (UnavailableError, InputError) as error:
            running_error = str(error)
        return ReportData(
            history=self.history(),
            accuracy=self.accuracy(by="gpu_type"),
            factor_history=self.factor_history(),
            running=running,
            running_error=running_error,
            generated_at=self.clock.now(),
        )

    def schema_status(self) -> SchemaStatus:
        return self._adapters.schema().status()

    def upgrade_schema(self) -> SchemaStatus:
        return self._adapters.schema().upgrade()

    def require_schema(self) -> None:
        """Refuse to serve on an out-of-date schema (SQLite upgrades itself here)."""
        self._adapters.schema().ensure()

    # --- shared parsing of what every entry point passes as text ------------------------------

    def _since(self, text: str | None) -> datetime | None:
        return None if text is None else parse_since(text, self.clock.now())

    def _gpu_name(self, gpu: str | None) -> str | None:
        return None if gpu is None else self.catalog.resolve(gpu).name
