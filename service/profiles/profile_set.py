"""The set of logging profiles a process reads runs with, and the order that decides which
profile a run gets. Pure: no MLflow here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from service.domain import bounds
from service.domain.errors import ReckonError
from service.domain.records import RunObservables
from service.profiles.builtin import DEFAULT_THROUGHPUT_METRIC, FRAMEWORKS, reckon_profile
from service.profiles.derive import HistoryReader, RunRecord, derive
from service.profiles.mapping_file import load_mapping_file
from service.profiles.run_config import run_config
from service.profiles.run_defaults import RUN_NAME_TAG, RunDefaults, first_covering
from service.profiles.spec import Profile

UNREADABLE_RUN = "unreadable_run"  # the reason code of a run the barrier stopped


class ProfileSet:
    """Profiles in detection order."""

    def __init__(self, profiles: Sequence[Profile], defaults: Sequence[RunDefaults] = ()) -> None:
        self.profiles = tuple(profiles)
        self.defaults = tuple(defaults)
        # Whether a default names an experiment: the adapter then looks experiment names up
        # (once each); asked for every run, so decided here once.
        self.names_experiments = any(entry.experiment is not None for entry in self.defaults)

    @classmethod
    def builtin(
        cls,
        throughput_metric: str = DEFAULT_THROUGHPUT_METRIC,
        mapped: Sequence[Profile] = (),
        defaults: Sequence[RunDefaults] = (),
    ) -> ProfileSet:
        ours = reckon_profile(throughput_metric)
        if throughput_metric == DEFAULT_THROUGHPUT_METRIC:
            return cls((*mapped, *FRAMEWORKS, ours), defaults)
        return cls((*mapped, ours, *FRAMEWORKS, reckon_profile()), defaults)

    def detect(self, record: RunRecord) -> Profile | None:
        for profile in self.profiles:
            if any(name in record.metrics or name in record.params for name in profile.detect):
                return profile
        return None

    def observe(
        self, record: RunRecord, history: HistoryReader, fallback_gpus: int | None = None
    ) -> RunObservables:
        """The run's observables: its reckon.* configuration first, then its profile, then
        the first `[[defaults]]` table covering it, then `fallback_gpus` for the GPU count.

        The fault barrier of one run: whatever it logged, this returns. An exception while
        reading it (a division by zero, an overflow, a string where a number belongs), or
        a derived number no formula can take (not finite, not positive, a GPU count beyond
        what a column holds), is the problem `unreadable_run`, naming the exception's class
        and the keys read; the pass records it as a skip and goes on. An outage while a
        metric history is fetched (a ReckonError) is not the run's fault and propagates."""
        profile: Profile | None = None
        try:
            profile = self.detect(record)
            config = run_config(record.tags, record.params)
            run_name = record.tags.get(RUN_NAME_TAG, "")
            covering = first_covering(
                self.defaults, record.experiment_id, record.experiment_name, run_name
            )
            observables = derive(profile, record, config, history, fallback_gpus, covering)
        except ReckonError:
            raise
        except Exception as error:
            return _unreadable(profile, record, f"{type(error).__name__} ({error})")
        wrong = _unusable_number(
            observables, exempt_throughput=bool(profile and profile.raw_throughput)
        )
        return observables if wrong is None else _unreadable(profile, record, wrong)


def _unusable_number(observables: RunObservables, *, exempt_throughput: bool) -> str | None:
    """The first derived value no formula can take, described; None when all can."""
    values = {
        "tokens": observables.tokens,
        "model FLOPs": observables.model_flops,
        "compute seconds": observables.compute_seconds,
        "parameters": observables.params,
        **({} if exempt_throughput else {"throughput": observables.throughput}),
    }
    for name, value in values.items():
        if value is not None and not (math.isfinite(value) and value > 0):
            return f"derived {name} = {value!r}"
    gpus = observables.gpus
    if gpus is not None and not 1 <= gpus <= bounds.INT_MAX:
        return f"derived GPU count = {gpus!r}"
    return None


def _unreadable(profile: Profile | None, record: RunRecord, what: str) -> RunObservables:
    keys = [spec.name for spec in profile.specs] if profile is not None else []
    read = sorted({key for key in (*keys, *record.tags) if key in record.metrics
                   or key in record.params or key.startswith("reckon.")})  # fmt: skip
    shown = ", ".join(read)
    detail = f"{what[:200]} reading the run's logged values"
    detail += (
        f" ({profile.name} profile; keys {shown[:300]})" if profile else f" (keys {shown[:300]})"
    )
    return RunObservables(profile=None if profile is None else profile.name,
                          problem=(UNREADABLE_RUN, detail))  # fmt: skip


def load_profile_set(
    profiles_file: Path | None, throughput_metric: str = DEFAULT_THROUGHPUT_METRIC
) -> ProfileSet:
    """What bootstrap builds from RECKON_PROFILES_FILE and RECKON_THROUGHPUT_METRIC."""
    mapped, defaults = load_mapping_file(profiles_file) if profiles_file is not None else ((), ())
    return ProfileSet.builtin(throughput_metric, mapped, defaults)
