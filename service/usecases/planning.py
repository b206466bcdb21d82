"""Use cases that answer from the catalog alone (and, when calibrated, a factor set):
estimate, save, plan, sensitivity, hardware. The math is in service/domain/requests.py and
service/calibration/; this area chooses the factors and stores what is saved."""

from __future__ import annotations

from collections.abc import Mapping

from service.domain import requests
from service.domain.hardware import GpuSpec
from service.domain.inputs import RawInputs
from service.domain.records import FactorSource
from service.domain.values import Plan
from service.usecases import registry
from service.usecases.context import Context
from service.usecases.results.answers import Answer, PlanAnswer, SavedAnswer, Sensitivity


class Planning:
    """Estimate, save, plan, sensitivity, hardware."""

    def __init__(self, context: Context) -> None:
        self._context = context

    def hardware(self) -> list[GpuSpec]:
        return self._context.catalog.gpus()

    def estimate(
        self, inputs: RawInputs, *, calibrated: bool = False, factor_set: int | None = None
    ) -> Answer:
        """With the given factors (else the defaults), or with fitted ones when `calibrated`
        or a pinned `factor_set` is asked for; both at once is an error, not a choice."""
        request = requests.build_request(self._context.catalog, inputs)
        if not (calibrated or factor_set is not None):
            source: FactorSource = "given" if inputs.factors_given else "default"
            return Answer(requests.compute(self._context.catalog, request), source)
        from service.calibration.calibrated import calibrated_estimate

        chosen = self._context.chosen_factor_set(inputs, factor_set)
        answer = calibrated_estimate(
            self._context.catalog, request, chosen, self._context.adapters.prior()
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
        saved = registry.save(
            self._context.adapters.unit_of_work(),
            answer.estimate,
            now=self._context.clock.now(),
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
        request = requests.build_request(self._context.catalog, inputs)
        wants = calibrated or factor_set is not None or confidence is not None
        if not wants:
            return PlanAnswer(
                requests.plan(self._context.catalog, request, deadline_seconds, multiple_of)
            )
        from service.calibration import calibrated_plans

        chosen = self._context.chosen_factor_set(inputs, factor_set)
        peak = self._context.catalog.peak_flops(request.hardware.gpu, request.hardware.precision)
        answer = calibrated_plans.calibrated_plan(
            request, peak, self._context.segments(chosen), deadline_seconds,
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
        request = requests.build_request(self._context.catalog, inputs)
        base, rows = requests.sensitivity(self._context.catalog, request, dict(vary))
        if not (calibrated or factor_set is not None):
            return Sensitivity(base, rows)
        from service.calibration import calibrated_plans

        chosen = self._context.chosen_factor_set(inputs, factor_set)
        variations = requests.variations(self._context.catalog, request, dict(vary))
        ranged = calibrated_plans.calibrated_sensitivity(
            request, self._context.catalog.peak_flops, self._context.segments(chosen), variations
        )
        return Sensitivity(base, rows, ranged, None if chosen is None else chosen.version)
