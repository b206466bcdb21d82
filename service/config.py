"""Settings from the environment (pydantic-settings): the one source of every variable
Reckon reads. Built by `load_settings()`, never at import, so tests and entry points
choose their own environment. The catalog-only commands read just RECKON_HARDWARE_FILE,
and MLflow's client defaults are set at process start, both in `service.environment`."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from service.domain.errors import InputError
from service.domain.values import DEFAULT_HALF_LIFE_DAYS
from service.environment import HARDWARE_FILE_VARIABLE

DEFAULT_DATABASE_URL = "sqlite:///reckon.db"  # relative: a file in the working directory


class Settings(BaseSettings):
    """Every variable Reckon reads. Names are the contract in docs/contract.md §4."""

    model_config = SettingsConfigDict(env_prefix="RECKON_", extra="ignore", populate_by_name=True)

    database_url: str = DEFAULT_DATABASE_URL
    hardware_file: Path | None = Field(default=None, validation_alias=HARDWARE_FILE_VARIABLE)
    mlflow_tracking_uri: str | None = Field(default=None, validation_alias="MLFLOW_TRACKING_URI")
    experiments: str = ""  # comma-separated names or ids; empty means every active one
    schedule: str = "0 2 * * *"
    running_schedule: str = "0 * * * *"  # the forecast job (reckon forecast), hourly
    timezone: str = "UTC"
    api_token: str | None = None
    # A request body larger than this is refused (413) before it is read.
    max_request_bytes: int = Field(default=1_048_576, ge=1_024, le=1_073_741_824)
    throughput_metric: str = "tokens_per_second"
    profiles_file: Path | None = None  # TOML: in-house trainers' metric names (service.profiles)
    prices_file: Path | None = None  # TOML: price per GPU-hour per GPU (service.domain.prices)
    lookback_hours: float = Field(default=48.0, ge=0, le=24 * 365 * 10)
    write_back_tags: bool = True
    half_life_days: float = Field(default=DEFAULT_HALF_LIFE_DAYS, gt=0)

    @field_validator("prices_file", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        """RECKON_PRICES_FILE= (set, but empty) names no file, as when it is not set."""
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def experiment_list(self) -> list[str]:
        """Comma-separated names or ids, or a JSON list of them (`["ablations, lr sweep", "7"]`)
        for names that hold a comma."""
        text = self.experiments.strip()
        if text.startswith("["):
            try:
                items = json.loads(text)
            except ValueError:
                raise InputError(
                    f"bad setting RECKON_EXPERIMENTS: {text[:60]!r} is not a JSON list"
                ) from None
            if not isinstance(items, list) or not all(isinstance(i, str | int) for i in items):
                raise InputError("bad setting RECKON_EXPERIMENTS: a JSON list of names or ids")
            return [str(item).strip() for item in items if str(item).strip()]
        return [part.strip() for part in text.split(",") if part.strip()]


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        first = error.errors()[0]
        name = "_".join(str(part) for part in first["loc"]).upper()
        name = name if name.startswith(("RECKON_", "MLFLOW_")) else "RECKON_" + name
        raise InputError(f"bad setting {name}: {first['msg']}") from None
