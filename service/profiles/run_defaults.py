"""What a team knows about its runs that the runs do not log: `[[defaults]]` tables of the
profiles file, each naming the runs it covers (an experiment by name or id, a shell-style
pattern on the run name, or both) and the GPU type, GPU count or precision they ran with.
The first table that covers a run fills in only what the run itself does not say (its
reckon.* tags and its profile's readings win); `reckon import` flags come last. Pure."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.domain.errors import InputError

RUN_NAME_TAG = "mlflow.runName"
_KEYS = {"experiment", "run_name", "gpu", "gpus", "precision"}


@dataclass(frozen=True)
class RunDefaults:
    """One `[[defaults]]` table: which runs, and what they ran with."""

    experiment: str | None = None
    run_name: str | None = None
    gpu: str | None = None
    gpus: int | None = None
    precision: str | None = None

    def covers(self, experiment_id: str, experiment_name: str, run_name: str) -> bool:
        if self.experiment is not None and self.experiment not in (experiment_id, experiment_name):
            return False
        return self.run_name is None or fnmatch.fnmatchcase(run_name, self.run_name)


NONE = RunDefaults()


def first_covering(
    defaults: Sequence[RunDefaults], experiment_id: str, experiment_name: str, run_name: str
) -> RunDefaults:
    for entry in defaults:
        if entry.covers(experiment_id, experiment_name, run_name):
            return entry
    return NONE


def parse_defaults(entries: Any, where: str) -> tuple[RunDefaults, ...]:
    """The `[[defaults]]` tables of a profiles file; a mistake is one InputError line."""
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise InputError(f"profiles file {where}: defaults must be [[defaults]] tables")
    return tuple(_entry(entry, where, index) for index, entry in enumerate(entries))


def _entry(entry: Any, where: str, index: int) -> RunDefaults:
    here = f"profiles file {where}, defaults #{index + 1}"
    if not isinstance(entry, Mapping):
        raise InputError(f"{here}: must be a table")
    unknown = set(entry) - _KEYS
    if unknown:
        raise InputError(f"{here}: unknown keys {', '.join(sorted(unknown))}")
    texts = {key: entry.get(key) for key in ("experiment", "run_name", "gpu", "precision")}
    for key, value in texts.items():
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise InputError(f"{here}: {key} must be a non-empty string")
    if texts["experiment"] is None and texts["run_name"] is None:
        raise InputError(f"{here}: name the runs it covers (experiment, run_name or both)")
    gpus = entry.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise InputError(f"{here}: gpus must be a whole number of at least 1")
    if texts["gpu"] is None and gpus is None and texts["precision"] is None:
        raise InputError(f"{here}: gives none of gpu, gpus, precision")
    return RunDefaults(
        experiment=texts["experiment"],
        run_name=texts["run_name"],
        gpu=texts["gpu"],
        gpus=gpus,
        precision=texts["precision"],
    )
