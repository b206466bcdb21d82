"""Use cases on stored predictions: record, link, unlink, show, list."""

from __future__ import annotations

from service.domain.errors import InputError, NotFoundError
from service.domain.records import ESTIMATE_TAG, SavedEstimate
from service.usecases import estimates
from service.usecases.planning import PlanningCases
from service.usecases.results import EstimateDetail, Unlinked


class RegistryCases(PlanningCases):
    """Record, link, unlink, show and list stored predictions."""

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
