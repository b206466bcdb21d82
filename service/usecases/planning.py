"""Use cases that answer from the catalog alone (and, when calibrated, the active factor
set): estimate, save, plan, sensitivity, hardware."""

from __future__ import annotations

from collections.abc import Mapping

from service.domain.hardware import GpuSpec
from service.domain.inputs import RawInputs
from service.domain.records import FactorSource
from service.domain.values import Plan
from service.usecases import estimates
from service.usecases.context import Core
from service.usecases.results import Answer, PlanAnswer, SavedAnswer, Sensitivity


class PlanningCases(Core):
    """Estimate, save, plan, sensitivity, hardware."""

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
        from service.calibration import calibrated as calibrated_use_case

        chosen = self._chosen_factor_set(inputs, factor_set)
        answer = calibrated_use_case.calibrated(
            self.catalog, request, chosen, self._adapters.prior()
        )
        return Answer(answer.estimate, answer.factors.level, answer)

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
        from service.calibration import calibrated_plans as planning

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
        from service.calibration import calibrated_plans as planning

        chosen = self._chosen_factor_set(inputs, factor_set)
        variations = estimates.variations(self.catalog, request, dict(vary))
        ranged = planning.calibrated_sensitivity(
            request, self.catalog.peak_flops, self._segments(chosen), variations
        )
        return Sensitivity(base, rows, ranged, None if chosen is None else chosen.version)
