#!/usr/bin/env bash
# Sets everything up, then runs the main job: the digits CNN trained on tpu.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m torchtpu.examples.train_digits "$@"
