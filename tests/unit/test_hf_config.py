"""The parameter count Reckon reads from a Hugging Face model config matches transformers'
own `num_parameters(exclude_embeddings=True)` (counted on the meta device when the fixture
was made: tests/data/model_configs.json, tools/capture/model_param_counts.py), so a default
HF run's total_flos gives its tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.profiles.hf_config import FAMILIES, non_embedding_parameters

CONFIGS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "data" / "model_configs.json").read_text()
)


def logged(config: dict[str, Any]) -> dict[str, str]:
    """The config as HF's MLflow callback logs it: every value as text."""
    return {key: str(value) for key, value in config.items()}


@pytest.mark.parametrize("model", CONFIGS, ids=[model["name"] for model in CONFIGS])
def test_the_count_matches_transformers_own(model: dict[str, Any]) -> None:
    assert (
        non_embedding_parameters(logged(model["config"]))
        == (model["num_parameters_exclude_embeddings"])
    )


def test_the_fixtures_cover_gqa_tied_embeddings_and_biases() -> None:
    configs = [model["config"] for model in CONFIGS]

    assert {model["family"] for model in CONFIGS} == set(FAMILIES)
    assert any(c.get("num_key_value_heads", 0) < c.get("num_attention_heads", 0) for c in configs)
    assert any(c.get("tie_word_embeddings") is True for c in configs)
    assert any(c.get("tie_word_embeddings") is False for c in configs)
    assert {"qwen2", "gpt2", "gpt_neox", "phi"} <= {c["model_type"] for c in configs}  # biases


def test_an_unknown_family_or_an_unreadable_config_gives_no_count() -> None:
    llama = logged(CONFIGS[0]["config"])

    assert non_embedding_parameters({**llama, "model_type": "mamba"}) is None
    assert non_embedding_parameters({**llama, "hidden_size": "wide"}) is None
    assert non_embedding_parameters({**llama, "num_attention_heads": "0"}) is None
    assert non_embedding_parameters({}) is None
