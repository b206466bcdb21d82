"""Builders with fixed defaults for the objects tests need (the seed's 8xA100 example)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from service.domain import requests
from service.domain.hardware import build_catalog
from service.domain.inputs import RawInputs
from service.domain.values import Estimate, EstimateRequest

SEED_INPUTS: dict[str, Any] = {
    "params": 7e9,
    "tokens": 1e12,
    "gpu": "a100-80gb",
    "gpus": 8,
    "precision": "bf16",
    "recompute": "full",
    "utilization": 0.4,
}
SEED_ARGS = [
    "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb", "--gpus", "8",
    "--precision", "bf16", "--recompute", "full", "--utilization", "0.4",
]  # fmt: skip
NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def a_request(**overrides: Any) -> EstimateRequest:
    return requests.build_request(build_catalog(), RawInputs(**{**SEED_INPUTS, **overrides}))


def an_estimate(**overrides: Any) -> Estimate:
    return requests.compute(build_catalog(), a_request(**overrides))
