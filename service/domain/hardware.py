"""The peak FLOP/s catalog: dense (no 2:4 sparsity) datasheet values per GPU model and
precision, one source per entry, plus entries a user adds in a TOML file. Never guesses:
an unknown GPU or a precision the chip lacks is an InputError listing what is known."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from service.domain import spelling
from service.domain.errors import InputError, ReckonError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
TERA = 1e12


@dataclass(frozen=True)
class GpuSpec:
    name: str  # canonical, lower case
    peak_flops: Mapping[str, float]  # precision -> dense FLOP/s per GPU
    source: str
    aliases: tuple[str, ...] = ()
    # HBM (L40S: GDDR6) per GPU in the vendor's binary GB, from the document in `source`
    # (per GPU where it is a platform's); None: unknown, never 0 (service/domain/memory.py)
    memory_gb: float | None = None
    vendor: str = "nvidia"


def _tf(**peaks_tflops: float) -> dict[str, float]:
    return {precision: value * TERA for precision, value in peaks_tflops.items()}


# fp32 means the plain FP32 path (CUDA cores on NVIDIA); tf32 is its tensor-core path.
# Sparse datasheet figures are halved to dense; that halving is stated per entry.
BUILTIN_GPUS: tuple[GpuSpec, ...] = (
    GpuSpec(
        "v100",
        _tf(fp32=15.7, fp16=125),
        # NVIDIA Tesla V100 datasheet (SXM2): FP32 15.7 TFLOPS, Tensor 125 TFLOPS; no BF16/TF32
        source="NVIDIA V100 Tensor Core GPU datasheet, SXM2 column",
        aliases=(
            "v100-sxm2",
            "v100-32gb",
            "v100-16gb",
            "tesla-v100",
            "tesla-v100-sxm2-32gb",  # NVML / torch.cuda.get_device_name
            "tesla-v100-sxm2-16gb",
        ),
        memory_gb=32,  # the 16 GB SXM2 part (aliases above) shares it: see docs/memory.md
    ),
    GpuSpec(
        "a100-40gb",
        _tf(fp32=19.5, tf32=156, bf16=312, fp16=312),
        # NVIDIA A100 datasheet: TF32 156 (312 sparse), BF16/FP16 312 (624 sparse); no FP8
        source="NVIDIA A100 Tensor Core GPU datasheet, dense (sparse values halved)",
        aliases=("a100-sxm4-40gb", "a100-40g", "a100-pcie-40gb", "a100-40gb-pcie"),
        memory_gb=40,
    ),
    GpuSpec(
        "a100-80gb",
        _tf(fp32=19.5, tf32=156, bf16=312, fp16=312),
        # NVIDIA A100 datasheet, 80GB SXM column: same compute peaks as the 40GB part
        source="NVIDIA A100 Tensor Core GPU datasheet, dense (sparse values halved)",
        aliases=("a100-sxm4-80gb", "a100-80g", "a100-pcie-80gb", "a100-80gb-pcie"),
        memory_gb=80,
    ),
    GpuSpec(
        "h100-sxm",
        _tf(fp32=67, tf32=495, bf16=989, fp16=989, fp8=1979),
        # NVIDIA H100 datasheet, SXM: TF32 989*, BF16/FP16 1979*, FP8 3958* (*sparse, halved)
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column, dense",
        aliases=("h100", "h100-sxm5", "h100-80gb-sxm", "h100-sxm5-80gb", "h100-80gb-hbm3"),
        memory_gb=80,
    ),
    GpuSpec(
        "h100-pcie",
        _tf(fp32=51, tf32=378, bf16=756, fp16=756, fp8=1513),
        # NVIDIA H100 datasheet, PCIe: TF32 756*, BF16/FP16 1513*, FP8 3026* (*sparse, halved)
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column, dense",
        aliases=("h100-pcie-80gb", "h100-80gb-pcie"),
        memory_gb=80,
    ),
    GpuSpec(
        "h100-nvl",
        _tf(fp32=60, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5),
        # NVIDIA H100 datasheet, H100 NVL (94GB, per GPU): TF32 835*, BF16 1671*, FP8 3341*
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 NVL column (per GPU), dense",
        aliases=("h100-nvl-94gb",),
        memory_gb=94,
    ),
    GpuSpec(
        "h800",
        _tf(fp32=67, tf32=495, bf16=989, fp16=989, fp8=1979),
        # H800 SXM: the export variant of H100 SXM; same tensor peaks, reduced NVLink
        source="NVIDIA H800 SXM product brief (compute as H100 SXM), dense",
        aliases=("h800-sxm", "h800-80gb"),
        memory_gb=80,
    ),
    GpuSpec(
        "h200",
        _tf(fp32=67, tf32=495, bf16=989, fp16=989, fp8=1979),
        # NVIDIA H200 datasheet, SXM: TF32 989*, BF16/FP16 1979*, FP8 3958* (*sparse, halved)
        source="NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column, dense",
        aliases=("h200-sxm", "h200-141gb", "h200-141gb-hbm3e"),
        memory_gb=141,
    ),
    GpuSpec(
        "b200",
        _tf(fp32=75, tf32=1125, bf16=2250, fp16=2250, fp8=4500, fp4=9000),
        # NVIDIA HGX B200 datasheet (8 GPUs): FP32 600 TF, TF32 18 PF*, BF16 36 PF*,
        # FP8 72 PF*, FP4 144 PF* (*sparse): per GPU /8, dense /2
        source="NVIDIA HGX B200 datasheet, per GPU (platform / 8), dense",
        aliases=("b200-sxm", "b200-180gb"),
        memory_gb=180,
    ),
    GpuSpec(
        "gb200",
        _tf(fp32=80, tf32=1250, bf16=2500, fp16=2500, fp8=5000, fp4=10000),
        # NVIDIA GB200 NVL72 datasheet (72 GPUs): FP32 5,760 TF, TF32 180 PF*, BF16 360 PF*,
        # FP8 720 PF*, FP4 1,440 PF* (*sparse): per GPU /72, dense /2
        source="NVIDIA GB200 NVL72 datasheet, per GPU (rack / 72), dense",
        aliases=("gb200-nvl72", "gb200-186gb"),
        memory_gb=186,
    ),
    GpuSpec(
        "b300",
        _tf(fp32=75, tf32=1125, bf16=2250, fp16=2250, fp8=4500, fp4=13500),
        # NVIDIA HGX B300 datasheet (8 GPUs): FP32 600 TF, TF32 18 PF*, BF16 36 PF*,
        # FP8 72 PF*, FP4 144 PF* | 108 PF dense: per GPU /8, sparse /2 (Blackwell Ultra's
        # dense FP4 is stated, not half the sparse figure)
        source="NVIDIA HGX B300 datasheet, per GPU (platform / 8), dense",
        aliases=("b300-sxm", "b300-sxm6-ac", "b300-288gb"),
        memory_gb=288,
    ),
    GpuSpec(
        "gb300",
        _tf(fp32=83.3, tf32=1250, bf16=2500, fp16=2500, fp8=5000, fp4=15000),
        # NVIDIA GB300 NVL72 datasheet (72 GPUs): FP32 6 PF, TF32 180 PF*, BF16 360 PF*,
        # FP8 720 PF*, FP4 1,440 PF* | 1,080 PF dense: per GPU /72, sparse /2
        source="NVIDIA GB300 NVL72 datasheet, per GPU (rack / 72), dense",
        aliases=("gb300-nvl72", "gb300-288gb"),
        memory_gb=288,
    ),
    GpuSpec(
        "l40s",
        _tf(fp32=91.6, tf32=183, bf16=362.05, fp16=362.05, fp8=733),
        # NVIDIA L40S datasheet: TF32 366*, BF16/FP16 733*, FP8 1466* (*sparse, halved)
        source="NVIDIA L40S datasheet, dense",
        aliases=("l40s-48gb",),
        memory_gb=48,
    ),
    GpuSpec(
        "mi250x",
        _tf(fp32=95.7, bf16=383, fp16=383),
        # AMD Instinct MI250X datasheet: FP32 matrix 95.7, FP16/BF16 383 TFLOPS; no TF32/FP8
        source="AMD Instinct MI250X datasheet (matrix peaks), no sparsity",
        aliases=("instinct-mi250x", "amd-mi250x"),
        memory_gb=128,
        vendor="amd",
    ),
    GpuSpec(
        "mi300x",
        _tf(fp32=163.4, tf32=653.7, bf16=1307.4, fp16=1307.4, fp8=2614.9),
        # AMD Instinct MI300X datasheet: TF32 653.7, FP16/BF16 1307.4, FP8 2614.9 (dense;
        # the with-sparsity figures are double)
        source="AMD Instinct MI300X datasheet, dense",
        aliases=("instinct-mi300x", "amd-mi300x"),
        memory_gb=192,
        vendor="amd",
    ),
    GpuSpec(
        "mi325x",
        _tf(fp32=163.4, tf32=653.7, bf16=1307.4, fp16=1307.4, fp8=2614.9),
        # AMD Instinct MI325X datasheet: the MI300X compute die (304 CUs, 2.1 GHz) with
        # 256 GB HBM3E: TF32 653.7, FP16/BF16 1307.4, FP8 2614.9 (dense; sparse doubles)
        source="AMD Instinct MI325X datasheet, dense",
        aliases=("instinct-mi325x", "amd-mi325x"),
        memory_gb=256,
        vendor="amd",
    ),
    GpuSpec(
        "mi355x",
        _tf(fp32=157.3, bf16=2516.6, fp16=2516.6, fp8=5033.2, fp4=10066.3),
        # AMD Instinct MI355X datasheet (CDNA 4, 256 CUs, 2.4 GHz): FP32 matrix 157.3,
        # FP16/BF16 2.5 PF, FP8 5.0 PF, MXFP4 10.1 PF (dense; sparse doubles). CDNA 4 has no
        # TF32 hardware (AMD emulates it through BF16), so there is no tf32 peak
        source="AMD Instinct MI355X datasheet, dense",
        aliases=("instinct-mi355x", "amd-mi355x"),
        memory_gb=288,
        vendor="amd",
    ),
    GpuSpec(
        "gaudi3",
        _tf(bf16=1835, fp8=1835),
        # Intel Gaudi 3 AI accelerator white paper, HL-325L OAM: MME BF16 and FP8 1,835
        # TFLOPS each (no sparsity); the other formats run far slower, so none is listed
        source="Intel Gaudi 3 AI Accelerator white paper, HL-325L OAM, MME peaks",
        aliases=("gaudi-3", "intel-gaudi-3", "intel-gaudi3", "hl-325l", "hl-325"),
        memory_gb=128,
        vendor="intel",
    ),
    GpuSpec(
        "tpu-v5e",
        _tf(bf16=197),
        # Google Cloud TPU v5e documentation: 197 TFLOPS BF16 per chip (394 TOPS INT8)
        source="Google Cloud TPU v5e system architecture, per chip",
        # jax device_kind "TPU v5 lite"; GKE accelerator "tpu-v5-lite-podslice"
        aliases=("v5e", "tpuv5e", "tpu-v5-lite", "tpu-v5-lite-podslice", "v5litepod"),
        memory_gb=16,
        vendor="google",
    ),
    GpuSpec(
        "tpu-v5p",
        _tf(bf16=459),
        # Google Cloud TPU v5p documentation: 459 TFLOPS BF16 per chip (918 TOPS INT8)
        source="Google Cloud TPU v5p system architecture, per chip",
        # jax device_kind "TPU v5"; GKE accelerator "tpu-v5p-slice"
        aliases=("v5p", "tpuv5p", "tpu-v5", "tpu-v5p-slice"),
        memory_gb=95,
        vendor="google",
    ),
    GpuSpec(
        "tpu-v6e",
        _tf(bf16=918),
        # Google Cloud TPU v6e (Trillium) documentation: 918 TFLOPS BF16 per chip (1,836 TOPS
        # INT8)
        source="Google Cloud TPU v6e (Trillium) system architecture, per chip",
        # jax device_kind "TPU v6 lite"; GKE accelerator "tpu-v6e-slice"
        aliases=("v6e", "tpuv6e", "tpu-v6-lite", "tpu-v6e-slice", "trillium"),
        memory_gb=32,
        vendor="google",
    ),
)


def normalize_name(name: str) -> str:
    """`NVIDIA A100-SXM4-80GB` (as NVML and `torch.cuda.get_device_name` report it),
    `a100_80gb` and `A100 80GB` become `a100-sxm4-80gb`, `a100-80gb`, ...: lower case, dashes,
    the vendor prefix dropped, so the catalog's aliases can match what a framework prints."""
    text = name.strip().lower().replace("_", "-").replace(" ", "-")
    for prefix in ("nvidia-", "amd-instinct-"):
        if text.startswith(prefix) and len(text) > len(prefix):
            text = text[len(prefix) :]
    while "--" in text:
        text = text.replace("--", "-")
    return text


def normalize_precision(precision: str) -> str:
    text = precision.strip().lower().replace("-", "").replace("_", "")
    aliases = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
    return aliases.get(text, text)


class Catalog:
    """Look-ups by canonical name or alias, case-insensitive."""

    def __init__(self, gpus: Iterable[GpuSpec]) -> None:
        self._gpus: dict[str, GpuSpec] = {}
        self._index: dict[str, str] = {}
        for spec in gpus:
            self._gpus[spec.name] = spec
        for spec in self._gpus.values():
            for key in (spec.name, *spec.aliases):
                self._index[normalize_name(key)] = spec.name

    def gpus(self) -> list[GpuSpec]:
        return sorted(self._gpus.values(), key=lambda spec: spec.name)

    def resolve(self, name: str) -> GpuSpec:
        key = normalize_name(name)
        canonical = self._index.get(key)
        if canonical is None:
            close = spelling.closest(key, self._index)
            if close:
                raise InputError(f"unknown GPU {name!r}; did you mean {' or '.join(close)}?")
            known = ", ".join(spec.name for spec in self.gpus())
            raise InputError(
                f"unknown GPU {name!r}; known: {known} "
                "(add your own in the file named by RECKON_HARDWARE_FILE)"
            )
        return self._gpus[canonical]

    def peak_flops(self, gpu: str, precision: str) -> float:
        spec = self.resolve(gpu)
        key = normalize_precision(precision)
        if key not in PRECISIONS:
            raise InputError(spelling.unknown_precision(precision, key, PRECISIONS))
        peak = spec.peak_flops.get(key)
        if peak is None:
            has = ", ".join(p for p in PRECISIONS if p in spec.peak_flops)
            raise InputError(f"{spec.name} has no {precision} peak; it has: {has}")
        return peak

    def known_peak(self, gpu: str, precision: str) -> float | None:
        """The peak, or None where the catalog has no such GPU or precision."""
        try:
            return self.peak_flops(gpu, precision)
        except ReckonError:
            return None


def load_user_gpus(path: Path) -> list[GpuSpec]:
    """Read a TOML hardware file:

        [gpu.my-chip]
        source = "vendor datasheet, dense"       # required: where the numbers come from
        aliases = ["mychip"]
        memory_gb = 96
        peak_tflops = { bf16 = 500, fp8 = 1000 }  # dense TFLOP/s per GPU

    An entry whose name (or alias) is a built-in GPU overrides the precisions it lists and
    keeps the others.
    """
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"cannot read hardware file {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"hardware file {path} is not valid TOML: {error}") from None
    table = document.get("gpu")
    if not isinstance(table, dict) or not table:
        raise InputError(f"hardware file {path} has no [gpu.NAME] tables")
    return [_user_spec(path, name, entry) for name, entry in table.items()]


def _user_spec(path: Path, name: str, entry: object) -> GpuSpec:
    where = f"hardware file {path}, gpu {name!r}"
    if not isinstance(entry, dict):
        raise InputError(f"{where}: expected a table")
    peaks = entry.get("peak_tflops")
    if not isinstance(peaks, dict) or not peaks:
        raise InputError(f"{where}: needs peak_tflops = {{ bf16 = ... }}")
    peak_flops: dict[str, float] = {}
    for precision, value in peaks.items():
        key = normalize_precision(precision)
        if key not in PRECISIONS:
            raise InputError(f"{where}: unknown precision {precision!r}; use {PRECISIONS}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"{where}: peak for {precision} must be a number")
        if not math.isfinite(value) or value <= 0:
            raise InputError(f"{where}: peak for {precision} must be positive")
        peak_flops[key] = float(value) * TERA
    source = entry.get("source")
    if not isinstance(source, str) or not source.strip():
        raise InputError(f'{where}: needs source = "..." (where the peak values come from)')
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise InputError(f"{where}: aliases must be a list of strings")
    memory = entry.get("memory_gb")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int | float)):
        raise InputError(f"{where}: memory_gb must be a number")
    if memory is not None and not (math.isfinite(memory) and memory > 0):
        raise InputError(f"{where}: memory_gb must be positive (leave it out when unknown)")
    return GpuSpec(
        normalize_name(name),
        peak_flops,
        source=source,
        aliases=tuple(aliases),
        memory_gb=None if memory is None else float(memory),
        vendor=str(entry.get("vendor", "custom")),
    )


def _builtin_named_by(base: Catalog, spec: GpuSpec) -> GpuSpec | None:
    """The built-in GPU a user entry names by its name or any alias (so an alias can never
    shadow a built-in: it overrides it)."""
    for name in (spec.name, *spec.aliases):
        try:
            return base.resolve(name)
        except InputError:
            continue
    return None


def build_catalog(user_file: Path | None = None) -> Catalog:
    """The built-in catalog, with the user's file applied on top when one is named."""
    if user_file is None:
        return Catalog(BUILTIN_GPUS)
    base = Catalog(BUILTIN_GPUS)
    merged = {spec.name: spec for spec in BUILTIN_GPUS}
    for spec in load_user_gpus(user_file):
        existing = _builtin_named_by(base, spec)
        if existing is None:
            merged[spec.name] = spec
            continue
        merged[existing.name] = GpuSpec(
            existing.name,
            {**existing.peak_flops, **spec.peak_flops},
            source=f"{existing.source}; overridden: {spec.source}",
            aliases=tuple(dict.fromkeys((*existing.aliases, *spec.aliases))),
            memory_gb=spec.memory_gb if spec.memory_gb is not None else existing.memory_gb,
            vendor=existing.vendor,
        )
    return Catalog(merged.values())
