"""The set of logging profiles a process reads runs with, and the order that decides which
profile a run gets. Pure: no MLflow here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from service.domain.records import RunObservables
from service.profiles.builtin import DEFAULT_THROUGHPUT_METRIC, FRAMEWORKS, reckon_profile
from service.profiles.derive import HistoryReader, RunRecord, derive
from service.profiles.mapping_file import load_mapping_file
from service.profiles.run_config import run_config
from service.profiles.run_defaults import RUN_NAME_TAG, RunDefaults, first_covering
from service.profiles.spec import Profile


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
        the first `[[defaults]]` table covering it, then `fallback_gpus` for the GPU count."""
        config = run_config(record.tags, record.params)
        run_name = record.tags.get(RUN_NAME_TAG, "")
        covering = first_covering(
            self.defaults, record.experiment_id, record.experiment_name, run_name
        )
        return derive(self.detect(record), record, config, history, fallback_gpus, covering)


def load_profile_set(
    profiles_file: Path | None, throughput_metric: str = DEFAULT_THROUGHPUT_METRIC
) -> ProfileSet:
    """What bootstrap builds from RECKON_PROFILES_FILE and RECKON_THROUGHPUT_METRIC."""
    mapped, defaults = load_mapping_file(profiles_file) if profiles_file is not None else ((), ())
    return ProfileSet.builtin(throughput_metric, mapped, defaults)
