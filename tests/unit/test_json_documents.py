"""The JSON documents (service/presenters/json_documents.py, json_loop_documents.py,
json_memory_documents.py) against
what the views put in them: the views spread some dataclasses whole (`fields_of`), so a field
added to one must be declared in its document, in the dataclass's order (the API emits the
declared order, the CLI the views'); every document forbids undeclared keys and says in one
line what it is; and the CLI's views never load them (nor pydantic)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys

import pytest

from service.calibration.calibrated_plans import CalibratedSensitivityRow
from service.calibration.model import BacktestResult, SegmentFactors
from service.domain.inputs import ESTIMATE_INPUTS
from service.domain.money import CostTotal, RunCost
from service.presenters import json_documents as doc
from service.presenters import json_forecast_documents as forecastdoc
from service.presenters import json_loop_documents as loopdoc
from service.presenters import json_memory_documents as memdoc
from service.presenters import json_money_documents as moneydoc
from service.usecases.results.reads import Scores

DOCUMENTS = [
    item
    for module in (doc, loopdoc, memdoc, moneydoc, forecastdoc)
    for item in vars(module).values()
    if inspect.isclass(item) and item.__module__ == module.__name__
]


def keys(document: type) -> list[str]:
    return list(document.__annotations__)


def fields(dataclass: type) -> list[str]:
    return [item.name for item in dataclasses.fields(dataclass)]


@pytest.mark.parametrize(
    ("document", "dataclass", "added"),
    [
        (loopdoc.SegmentFields, SegmentFactors, []),
        (loopdoc.Segment, SegmentFactors, ["effective", "fallback_to", "gpus_slope_words", "thin"]),
        (loopdoc.Scores, Scores, []),
        (loopdoc.Backtest, BacktestResult, []),
        (moneydoc.RunCost, RunCost, []),
        (moneydoc.CostTotal, CostTotal, []),
        (doc.CalibratedSensitivityRow, CalibratedSensitivityRow, ["wall_human", "fits"]),
    ],
    ids=lambda item: getattr(item, "__name__", None),
)
def test_a_document_of_a_spread_dataclass_declares_its_fields_in_order(
    document: type, dataclass: type, added: list[str]
) -> None:
    assert keys(document) == fields(dataclass) + added


def test_the_estimate_documents_keep_the_inputs_order_and_the_estimates_keys() -> None:
    inputs = [spec.name for spec in ESTIMATE_INPUTS]
    estimate = keys(doc.Estimate)
    interval = ["wall_seconds_p10", "wall_seconds_p90"]

    assert keys(doc.EstimateInputs) == inputs == estimate[: len(inputs)]
    assert keys(doc.SavedEstimate) == [*keys(doc.EstimateIdentity), "run_ids", *estimate, *interval]
    assert keys(doc.ExternalEstimate)[-2:] == interval
    assert [key for key in keys(loopdoc.Factors) if key in keys(loopdoc.FactorSet)] == keys(
        loopdoc.FactorSet
    )


def test_a_spend_group_is_a_group_and_the_keys_of_a_cost_total() -> None:
    assert keys(moneydoc.SpendGroup) == ["group", *fields(CostTotal)]


def test_every_document_forbids_undeclared_keys_and_says_what_it_is_in_one_line() -> None:
    """Provenance alone is open: a factor set stored by an older version keeps its keys."""
    open_ = [d for d in DOCUMENTS if getattr(d, "__pydantic_config__", {}).get("extra") != "forbid"]
    undocumented = [item for item in DOCUMENTS if not item.__doc__ or "\n" in item.__doc__]

    assert len(DOCUMENTS) >= 45
    assert open_ == [loopdoc.Provenance] and undocumented == []


def test_the_cli_views_load_neither_the_documents_nor_pydantic() -> None:
    """The views import the documents for type checking only: `reckon estimate --json` starts
    without them (docs/contract.md §7)."""
    probe = (
        "import json, sys\n"
        "from service.entrypoints.cli.main import main\n"
        "code = main(sys.argv[1:])\n"
        "names = ('pydantic', 'typing_extensions', 'service.presenters.json_documents',\n"
        "         'service.presenters.json_memory_documents',\n"
        "         'service.presenters.json_money_documents')\n"
        "print(json.dumps([code, [n for n in names if n in sys.modules]]))\n"
    )
    argv = ["estimate", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb", "--gpus", "8"]
    argv.append("--json")
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=60
    )

    code, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0, done.stderr
    assert loaded == []
