"""Specification of the peak FLOP/s catalog: dense datasheet values with a source per entry,
case-insensitive aliases, errors instead of guesses, and a user's TOML file on top."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service.domain.errors import InputError
from service.domain.hardware import (
    BUILTIN_GPUS,
    PRECISIONS,
    Catalog,
    build_catalog,
    load_user_gpus,
    normalize_name,
)

TERA = 1e12

REQUIRED_GPUS = (
    "v100",
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h100-nvl",
    "h200",
    "b200",
    "l40s",
    "mi250x",
    "mi300x",
)

# The current generation (issue 12): Blackwell and Blackwell Ultra, CDNA 3/4, Gaudi 3, TPUs.
CURRENT_CHIPS = (
    "gb200",
    "b300",
    "gb300",
    "mi325x",
    "mi355x",
    "gaudi3",
    "tpu-v5e",
    "tpu-v5p",
    "tpu-v6e",
)


@pytest.fixture
def catalog() -> Catalog:
    """The built-in catalog alone (no user file)."""
    return build_catalog()


def write_hardware_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "hardware.toml"
    path.write_text(text, encoding="utf-8")
    return path


# --- built-in entries ------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", REQUIRED_GPUS + CURRENT_CHIPS)
def test_required_gpu_has_a_half_precision_training_peak(catalog: Catalog, gpu: str) -> None:
    spec = catalog.resolve(gpu)

    assert spec.name == gpu
    assert "bf16" in spec.peak_flops or "fp16" in spec.peak_flops


@pytest.mark.parametrize(
    ("gpu", "precision", "tflops"),
    [
        ("h100-sxm", "fp32", 67),
        ("h100-sxm", "tf32", 495),
        ("h100-sxm", "bf16", 989),
        ("h100-sxm", "fp8", 1979),
        ("a100-80gb", "bf16", 312),
        ("a100-80gb", "tf32", 156),
        ("a100-80gb", "fp32", 19.5),
        ("a100-40gb", "bf16", 312),
        ("a100-40gb", "tf32", 156),
        ("a100-40gb", "fp32", 19.5),
        # rack or platform totals divided by their GPU count, sparse figures halved
        ("gb200", "fp32", 80),
        ("gb200", "tf32", 1250),
        ("gb200", "bf16", 2500),
        ("gb200", "fp8", 5000),
        ("gb200", "fp4", 10000),
        ("b300", "bf16", 2250),
        ("b300", "fp8", 4500),
        ("b300", "fp4", 13500),
        ("gb300", "bf16", 2500),
        ("gb300", "fp4", 15000),
        ("mi325x", "bf16", 1307.4),
        ("mi325x", "fp8", 2614.9),
        ("mi355x", "fp32", 157.3),
        ("mi355x", "bf16", 2516.6),
        ("mi355x", "fp8", 5033.2),
        ("mi355x", "fp4", 10066.3),
        ("gaudi3", "bf16", 1835),
        ("gaudi3", "fp8", 1835),
        ("tpu-v5e", "bf16", 197),
        ("tpu-v5p", "bf16", 459),
        ("tpu-v6e", "bf16", 918),
    ],
)
def test_peak_is_the_dense_datasheet_value(
    catalog: Catalog, gpu: str, precision: str, tflops: float
) -> None:
    result = catalog.peak_flops(gpu, precision)

    assert result == pytest.approx(tflops * TERA, rel=1e-9)


@pytest.mark.parametrize(
    ("gpu", "sparse_tflops"),
    [
        # the datasheets' "with sparsity" FP16/BF16 figures; dense is half
        ("a100-40gb", 624),
        ("a100-80gb", 624),
        ("h100-sxm", 1979),
        ("h100-pcie", 1513),
        ("h100-nvl", 1671),
        ("h200", 1979),
        ("b200", 4500),
        ("l40s", 733),
        ("mi300x", 2614.9),
        ("gb200", 5000),
        ("b300", 4500),
        ("gb300", 5000),
        ("mi325x", 2614.9),
        ("mi355x", 5033.2),
    ],
)
def test_half_precision_peak_is_dense_not_the_sparse_figure(
    catalog: Catalog, gpu: str, sparse_tflops: float
) -> None:
    spec = catalog.resolve(gpu)

    for precision in ("bf16", "fp16"):
        assert spec.peak_flops[precision] == pytest.approx(sparse_tflops * TERA / 2, rel=2e-2)


def test_h100_sxm_bf16_peak_is_below_the_sparse_1979(catalog: Catalog) -> None:
    result = catalog.peak_flops("h100-sxm", "bf16")

    assert result < 1000e12


# Gaudi 3 runs FP8 at the BF16 rate by design, so it is left out of the ladder.
@pytest.mark.parametrize("gpu", [*REQUIRED_GPUS, *(c for c in CURRENT_CHIPS if c != "gaudi3")])
def test_tensor_precisions_double_down_the_ladder(catalog: Catalog, gpu: str) -> None:
    # Catches TF32 entered as BF16 and sparse FP8: tf32 = bf16/2 and fp8 = 2·bf16 (dense).
    peaks = catalog.resolve(gpu).peak_flops
    half = peaks.get("bf16", peaks.get("fp16"))
    assert half is not None

    if "tf32" in peaks:
        assert peaks["tf32"] == pytest.approx(half / 2, rel=2e-2)
    if "fp8" in peaks:
        assert peaks["fp8"] == pytest.approx(half * 2, rel=2e-2)


def test_every_entry_names_its_source(catalog: Catalog) -> None:
    specs = catalog.gpus()

    assert specs
    assert all(spec.source.strip() for spec in specs)


def test_every_entry_uses_only_known_precisions(catalog: Catalog) -> None:
    specs = catalog.gpus()

    assert all(set(spec.peak_flops) <= set(PRECISIONS) for spec in specs)


# --- look-ups --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("a100_80gb", "a100-80gb"),
        ("A100 80GB", "a100-80gb"),
        ("A100-80GB", "a100-80gb"),
        ("H100", "h100-sxm"),
        ("h100", "h100-sxm"),
        ("NVIDIA H100 SXM", "h100-sxm"),
        ("H100-PCIe", "h100-pcie"),
        ("AMD Instinct MI300X", "mi300x"),
        ("  v100  ", "v100"),
        # what NVML, nvidia-smi and torch.cuda.get_device_name() print
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H800", "h800"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA GB300", "gb300"),
        ("NVIDIA L40S", "l40s"),
        ("Tesla V100-SXM2-32GB", "v100"),
        ("Tesla V100-SXM2-16GB", "v100"),
        # what rocm-smi / torch on ROCm print
        ("AMD Instinct MI250X", "mi250x"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI355X", "mi355x"),
        # Gaudi (hl-smi) and TPUs (jax device_kind, GKE accelerator labels)
        ("HL-325L", "gaudi3"),
        ("Intel Gaudi 3", "gaudi3"),
        ("TPU v5 lite", "tpu-v5e"),
        ("tpu-v5-lite-podslice", "tpu-v5e"),
        ("TPU v5", "tpu-v5p"),
        ("tpu-v5p-slice", "tpu-v5p"),
        ("TPU v6 lite", "tpu-v6e"),
        ("tpu-v6e-slice", "tpu-v6e"),
        # case does not matter anywhere
        ("nvidia h100 80gb hbm3", "h100-sxm"),
        ("NVIDIA GB200", "gb200"),
        ("TPU-V6E", "tpu-v6e"),
    ],
)
def test_gpu_names_and_aliases_resolve_case_insensitively(
    catalog: Catalog, name: str, canonical: str
) -> None:
    spec = catalog.resolve(name)

    assert spec.name == canonical


@pytest.mark.parametrize("precision", ["bf16", "BF16", "bfloat16", "bf-16"])
def test_precision_names_are_normalized(catalog: Catalog, precision: str) -> None:
    result = catalog.peak_flops("h100-sxm", precision)

    assert result == pytest.approx(989 * TERA, rel=1e-9)


def test_unknown_gpu_is_an_error_listing_the_known_ones(catalog: Catalog) -> None:
    with pytest.raises(InputError) as raised:
        catalog.peak_flops("nosuchgpu", "bf16")

    message = str(raised.value)
    assert "nosuchgpu" in message
    assert all(gpu in message for gpu in REQUIRED_GPUS)


def test_missing_precision_is_an_error_naming_what_the_chip_has(catalog: Catalog) -> None:
    with pytest.raises(InputError) as raised:
        catalog.peak_flops("a100-80gb", "fp8")

    message = str(raised.value)
    assert "fp8" in message
    assert all(p in message for p in ("fp32", "tf32", "bf16", "fp16"))


@pytest.mark.parametrize(
    ("gpu", "precision"),
    [
        ("mi355x", "tf32"),  # CDNA 4 dropped TF32 hardware
        ("tpu-v6e", "fp8"),
        ("tpu-v5e", "fp32"),
        ("gaudi3", "fp32"),
        ("gb200", "fp4x"),
    ],
)
def test_a_current_chip_without_the_precision_is_an_error(
    catalog: Catalog, gpu: str, precision: str
) -> None:
    with pytest.raises(InputError, match=precision):
        catalog.peak_flops(gpu, precision)


@pytest.mark.parametrize("name", ["NVIDIA H200 NVL", "Tesla V100-PCIE-32GB", "TPU v4"])
def test_a_variant_with_other_clocks_is_unknown_not_a_neighbour(
    catalog: Catalog, name: str
) -> None:
    # A PCIe or NVL part runs at lower clocks than its SXM sibling: never borrow its peak.
    with pytest.raises(InputError, match="unknown GPU"):
        catalog.resolve(name)


def test_unknown_precision_is_an_error_not_a_fallback(catalog: Catalog) -> None:
    with pytest.raises(InputError, match="int3"):
        catalog.peak_flops("h100-sxm", "int3")


# --- the user's hardware file ----------------------------------------------------------------


def test_user_file_adds_a_new_gpu(tmp_path: Path) -> None:
    path = write_hardware_file(
        tmp_path,
        """
        [gpu.my-chip]
        source = "vendor datasheet, dense"
        aliases = ["mychip"]
        memory_gb = 96
        peak_tflops = { bf16 = 500, fp8 = 1000 }
        """,
    )

    catalog = build_catalog(path)

    spec = catalog.resolve("MyChip")
    assert spec.name == "my-chip"
    assert spec.source == "vendor datasheet, dense"
    assert spec.memory_gb == 96
    assert catalog.peak_flops("my-chip", "bf16") == pytest.approx(500 * TERA)
    assert catalog.peak_flops("my-chip", "fp8") == pytest.approx(1000 * TERA)
    assert catalog.peak_flops("a100-80gb", "bf16") == pytest.approx(312 * TERA)


def test_user_file_overrides_one_precision_and_keeps_the_others(tmp_path: Path) -> None:
    path = write_hardware_file(
        tmp_path,
        """
        [gpu.h100-sxm]
        source = "our measured matmul peak"
        peak_tflops = { bf16 = 900 }
        """,
    )

    catalog = build_catalog(path)

    assert catalog.peak_flops("h100-sxm", "bf16") == pytest.approx(900 * TERA)
    assert catalog.peak_flops("h100-sxm", "fp8") == pytest.approx(1979 * TERA)
    assert catalog.peak_flops("h100-sxm", "fp32") == pytest.approx(67 * TERA)
    assert "our measured matmul peak" in catalog.resolve("h100-sxm").source


def test_user_entry_named_by_a_builtin_alias_overrides_that_builtin(tmp_path: Path) -> None:
    path = write_hardware_file(
        tmp_path,
        """
        [gpu.H100]
        source = "our measured matmul peak"
        peak_tflops = { bf16 = 900 }
        """,
    )

    catalog = build_catalog(path)

    assert catalog.peak_flops("h100-sxm", "bf16") == pytest.approx(900 * TERA)
    assert catalog.peak_flops("h100-sxm", "fp8") == pytest.approx(1979 * TERA)


def test_user_entry_aliased_to_a_builtin_overrides_and_keeps_the_others(tmp_path: Path) -> None:
    path = write_hardware_file(
        tmp_path,
        """
        [gpu.our-h100]
        source = "our measured matmul peak"
        aliases = ["h100-sxm"]
        peak_tflops = { bf16 = 900 }
        """,
    )

    catalog = build_catalog(path)

    assert catalog.peak_flops("h100-sxm", "bf16") == pytest.approx(900 * TERA)
    assert catalog.peak_flops("h100-sxm", "fp8") == pytest.approx(1979 * TERA)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("[gpu.my-chip\nsource = 'x'", "not valid TOML"),
        ("[gpu.my-chip]\npeak_tflops = { bf16 = 500 }\n", "source"),
        ("[gpu.my-chip]\nsource = '  '\npeak_tflops = { bf16 = 500 }\n", "source"),
        ("[gpu.my-chip]\nsource = 'x'\npeak_tflops = { bf16 = -500 }\n", "positive"),
        ("[gpu.my-chip]\nsource = 'x'\npeak_tflops = { bf16 = 0 }\n", "positive"),
        ("[gpu.my-chip]\nsource = 'x'\npeak_tflops = { bf16 = 'fast' }\n", "number"),
        ("[gpu.my-chip]\nsource = 'x'\npeak_tflops = { int4 = 500 }\n", "unknown precision"),
        ("[gpu.my-chip]\nsource = 'x'\n", "peak_tflops"),
        ("[gpu.my-chip]\nsource = 'x'\naliases = 'c'\npeak_tflops = { bf16 = 5 }\n", "aliases"),
        ("[accelerator.my-chip]\nsource = 'x'\n", r"\[gpu.NAME\]"),
        ("", r"\[gpu.NAME\]"),
    ],
)
def test_malformed_user_file_is_an_input_error_naming_the_file(
    tmp_path: Path, text: str, complaint: str
) -> None:
    path = write_hardware_file(tmp_path, text)

    with pytest.raises(InputError) as raised:
        load_user_gpus(path)

    message = str(raised.value)
    assert str(path) in message
    assert re.search(complaint, message)


def test_missing_user_file_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"

    with pytest.raises(InputError, match=re.escape(str(path))):
        build_catalog(path)


def test_no_name_or_alias_names_two_gpus() -> None:
    owners: dict[str, set[str]] = {}
    for spec in BUILTIN_GPUS:
        for key in (spec.name, *spec.aliases):
            owners.setdefault(normalize_name(key), set()).add(spec.name)

    shared = {key: names for key, names in owners.items() if len(names) > 1}
    assert shared == {}
