"""What the integration tests of captured real runs share: the capture machine as a chip."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.domain.hardware import Catalog, build_catalog

# The captured runs trained on CPU: imported as an H100 they would run at 0.07% of its peak,
# which Reckon rightly refuses to learn from. The capture machine as a chip of its own:
# 2 x86-64 cores x 32 fp32 FLOP a cycle (AVX2 FMA) x 3 GHz.
CAPTURE_FP32 = 0.192e12
CAPTURE_CHIP = """
[gpu.capture-cpu]
source = "the capture VM: 2 cores x 32 fp32 FLOP/cycle (AVX2 FMA) x 3 GHz"
peak_tflops = { fp32 = 0.192 }
"""


@pytest.fixture
def capture_catalog(tmp_path: Path) -> Catalog:
    path = tmp_path / "hardware.toml"
    path.write_text(CAPTURE_CHIP)
    return build_catalog(path)
