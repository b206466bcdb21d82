"""RECKON_EXPERIMENTS names experiments by name or id: comma-separated, or a JSON list for
names that hold a comma; a mistake is one line naming the variable."""

from __future__ import annotations

import pytest

from service.config import Settings
from service.domain.errors import InputError


def test_a_json_list_keeps_a_name_with_a_comma_whole() -> None:
    settings = Settings(experiments='["ablations, lr sweep", "pretraining", 7]')

    assert settings.experiment_list == ["ablations, lr sweep", "pretraining", "7"]


def test_a_comma_separated_list_still_reads_as_before() -> None:
    assert Settings(experiments=" a, b ,,7 ").experiment_list == ["a", "b", "7"]
    assert Settings(experiments="").experiment_list == []


@pytest.mark.parametrize("text", ['["unclosed"', '[{"name": "x"}]'])
def test_a_bad_json_list_is_one_line_naming_the_variable(text: str) -> None:
    with pytest.raises(InputError, match="RECKON_EXPERIMENTS") as raised:
        _ = Settings(experiments=text).experiment_list

    assert "\n" not in str(raised.value)
