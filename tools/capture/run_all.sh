#!/bin/bash
# Re-run every capture (one after another: at most two training processes at a time), then the checks.
set -euo pipefail
cd "$(dirname "$0")/.."
venvs/hf/bin/python scripts/capture_hf.py
venvs/hf/bin/python scripts/capture_composer.py
venvs/hf/bin/python scripts/capture_lightning.py
venvs/hf/bin/python scripts/capture_planned.py
venvs/hf/bin/python scripts/model_param_counts.py
rm -rf _scratch
python3 scripts/check_runs.py > checks.txt
