#!/bin/bash
# Create the two venvs under venvs/ (run from the capture folder). Both use pip from PyPI by name.
# hf: torch 2.13.0 is the CPU wheel that `pip install torch==2.13.0` takes from this machine's disk.
# composer: mosaicml 0.32.1 needs torch >= 2.6, < 2.7.1; PyPI's torch 2.7.0 is the CUDA build
# (pulls nvidia-* wheels; the venv is about 5.7 GB) and runs on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv venvs/hf
venvs/hf/bin/pip install torch==2.13.0 transformers==5.24.0 accelerate==1.15.0 lightning==2.6.6 mlflow==3.17.2
python3 -m venv venvs/composer
venvs/composer/bin/pip install torch==2.7.0 mosaicml==0.32.1 transformers==5.24.0 mlflow-skinny==3.17.2
