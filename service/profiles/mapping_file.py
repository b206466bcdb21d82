"""The mapping file named by RECKON_PROFILES_FILE: in-house trainers' metric and param names
→ quantity, unit, scope. Read once at start-up; any mistake is one InputError line naming
the file and the entry, never a traceback. Example:

    [[profile]]
    name = "acme-trainer"
    detect = ["acme/tok_s"]                 # optional; default: every metric listed
    compute_from = ["throughput", "runtime"]  # optional; see Profile

    [profile.metrics]
    "acme/tok_s" = { quantity = "tokens_per_second", unit = "1/s", scope = "device", statistic = "steady" }
    "acme/tokens" = { quantity = "tokens" }
    "acme/train_hours" = { quantity = "compute_seconds", unit = "h" }

    [profile.params]
    "world_size" = { quantity = "gpus" }

    [[defaults]]                 # what runs do not log: the first table covering a run fills it
    experiment = "pretraining"   # by name or id; and/or run_name = "llama3-8b-*" (a pattern)
    gpus = 64
    precision = "bf16"
"""  # noqa: E501

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, cast

from service.domain.errors import InputError
from service.profiles.run_defaults import RunDefaults, parse_defaults
from service.profiles.spec import QUANTITIES, UNITS, Profile, Quantity, Scope, Spec, Statistic

_COMPUTE = ("throughput", "flops", "steps", "runtime")
_SPEC_KEYS = {"quantity", "unit", "scope", "statistic"}


def load_mapping_file(path: Path) -> tuple[tuple[Profile, ...], tuple[RunDefaults, ...]]:
    """The profiles a mapping file defines, in file order (earlier ones detect first), and
    its `[[defaults]]` tables (run_defaults.py), in file order (the first covering wins)."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"cannot read profiles file {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"profiles file {path} is not valid TOML: {error}") from None
    where = str(path)
    defaults = parse_defaults(document.get("defaults"), where)
    if "profile" not in document and defaults:
        return (), defaults
    return parse_mapping(document, where), defaults


def parse_mapping(document: dict[str, Any], where: str) -> tuple[Profile, ...]:
    entries = document.get("profile", [])
    if not isinstance(entries, list) or not entries:
        raise InputError(
            f"profiles file {where}: expected one or more [[profile]] or [[defaults]] tables"
        )
    return tuple(_profile(entry, where, index) for index, entry in enumerate(entries))


def _profile(entry: Any, where: str, index: int) -> Profile:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise InputError(f"profiles file {where}: profile #{index + 1} needs a name")
    name = entry["name"]
    here = f"profiles file {where}, profile {name!r}"
    specs: list[Spec] = []
    for table, source in (("metrics", "metric"), ("params", "param")):
        items = entry.get(table, {})
        if not isinstance(items, dict):
            raise InputError(f"{here}: [{table}] must be a table")
        for key, spec in items.items():
            specs.append(_spec(key, spec, source, here))
    if not specs:
        raise InputError(f"{here}: maps no metric or param")
    metrics = [spec.name for spec in specs if spec.source == "metric"]
    detect = entry.get("detect", metrics)
    if not isinstance(detect, list) or not detect or not all(isinstance(d, str) for d in detect):
        raise InputError(f"{here}: detect must be a non-empty list of names")
    compute_from = entry.get("compute_from", list(_COMPUTE))
    if not isinstance(compute_from, list) or not set(compute_from) <= set(_COMPUTE):
        raise InputError(f"{here}: compute_from must list some of {', '.join(_COMPUTE)}")
    return Profile(
        name=name,
        specs=tuple(specs),
        detect=tuple(detect),
        compute_from=tuple(compute_from),
        source_file=f"mapping file {where}",
    )


def _spec(key: str, spec: Any, source: str, here: str) -> Spec:
    if not isinstance(spec, dict):
        raise InputError(f"{here}: {key!r} must be an inline table with a quantity")
    unknown = set(spec) - _SPEC_KEYS
    if unknown:
        raise InputError(f"{here}: {key!r} has unknown keys {', '.join(sorted(unknown))}")
    quantity = spec.get("quantity")
    if quantity not in QUANTITIES:
        raise InputError(
            f"{here}: {key!r} quantity {quantity!r}; use one of {', '.join(QUANTITIES)}"
        )
    unit = spec.get("unit", "1")
    if unit not in UNITS:
        raise InputError(f"{here}: {key!r} unit {unit!r}; use one of {', '.join(UNITS)}")
    scope = spec.get("scope", "job")
    if scope not in ("job", "device"):
        raise InputError(f"{here}: {key!r} scope {scope!r}; use job or device")
    statistic = spec.get("statistic", "latest")
    if statistic not in ("latest", "steady") or (statistic == "steady" and source == "param"):
        raise InputError(f"{here}: {key!r} statistic {statistic!r}; use latest or steady (metrics)")
    return Spec(
        name=key,
        quantity=cast(Quantity, quantity),
        scope=cast(Scope, scope),
        unit=unit,
        source="metric" if source == "metric" else "param",
        statistic=cast(Statistic, statistic),
    )
