"""Use cases that answer from the catalog alone (and, when calibrated, a factor set):
estimate, save, plan, sensitivity, hardware. The math is in service/domain/requests.py,
memory_plans.py (training memory per GPU as a bound) and service/calibration/; this area
chooses the factors and stores what is saved."""

from __future__ import annotations

from collections.abc import Mapping

from service.domain import memory_plans, requests
from service.domain.forecast import parse_deadline
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
        catalog = self._context.catalog
        request = requests.build_request(catalog, inputs)
        memory = memory_plans.check(catalog, request, memory_plans.settings_of(inputs))
        if not (calibrated or factor_set is not None):
            source: FactorSource = "given" if inputs.factors_given else "default"
            return Answer(requests.compute(catalog, request), source, memory=memory)
        from service.calibration.calibrated import calibrated_estimate

        chosen = self._context.chosen_factor_set(inputs, factor_set)
        answer = calibrated_estimate(catalog, request, chosen, self._context.adapters.prior())
        return Answer(answer.estimate, answer.factors.level, answer, memory=memory)

    def save(
        self,
        inputs: RawInputs,
        *,
        calibrated: bool = False,
        factor_set: int | None = None,
        label: str | None = None,
        deadline: str | None = None,
    ) -> SavedAnswer:
        """Estimate and store it as an immutable prediction. `deadline` (a date, an ISO 8601
        time or a duration counted from now: service.domain.forecast.parse_deadline) is
        stored as an absolute UTC time; its run is at risk when its P90 finish is after it."""
        now = self._context.clock.now()
        due = None if deadline is None else parse_deadline(deadline, now)
        answer = self.estimate(inputs, calibrated=calibrated, factor_set=factor_set)
        fitted = answer.calibrated
        saved = registry.save(
            self._context.adapters.unit_of_work(),
            answer.estimate,
            now=now,
            label=label,
            deadline=due,
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
        """The fewest GPUs (a multiple of `multiple_of`) whose wall time meets the deadline
        and whose training memory per GPU fits the chip; `inputs.gpus` is ignored. Calibrated,
        "meets" means at quantile `confidence` of the predictive distribution (default 0.5:
        the P50); 0.9 asks to be 90% sure. A chip without a memory size is planned by time."""
        catalog = self._context.catalog
        request = requests.build_request(catalog, inputs)
        settings = memory_plans.settings_of(inputs)
        wants = calibrated or factor_set is not None or confidence is not None
        if not wants:
            bound = memory_plans.plan_that_fits(
                catalog, request, settings, deadline_seconds, multiple_of
            )
            return PlanAnswer(
                bound.plan, bound=bound.bound, time_gpus=bound.time_gpus, memory=bound.memory
            )
        from service.calibration import calibrated_plans

        fewest = memory_plans.fewest_that_fit(catalog, request, settings, multiple_of)
        chosen = self._context.chosen_factor_set(inputs, factor_set)
        peak = catalog.peak_flops(request.hardware.gpu, request.hardware.precision)
        answer = calibrated_plans.calibrated_plan(
            request, peak, self._context.segments(chosen), deadline_seconds,
            0.5 if confidence is None else confidence, multiple_of, fewest.gpus or 1,
        )  # fmt: skip
        plan = Plan(deadline_seconds, answer.gpus, answer.multiple_of, answer.wall.estimate)
        memory = memory_plans.check(
            catalog, memory_plans.with_gpus(request, answer.gpus), settings, multiple_of
        )
        version = None if chosen is None else chosen.version
        return PlanAnswer(plan, answer, version, answer.bound, answer.time_gpus, memory=memory)

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
        catalog = self._context.catalog
        request = requests.build_request(catalog, inputs)
        base, rows = requests.sensitivity(catalog, request, dict(vary))
        variations = requests.variations(catalog, request, dict(vary))
        settings = memory_plans.settings_of(inputs)
        fits = memory_plans.fits_per_row(catalog, request, settings, variations)
        if not (calibrated or factor_set is not None):
            return Sensitivity(base, rows, fits=fits)
        from service.calibration import calibrated_plans

        chosen = self._context.chosen_factor_set(inputs, factor_set)
        ranged = calibrated_plans.calibrated_sensitivity(
            request, catalog.peak_flops, self._context.segments(chosen), variations
        )
        version = None if chosen is None else chosen.version
        return Sensitivity(base, rows, ranged, version, fits=fits)
