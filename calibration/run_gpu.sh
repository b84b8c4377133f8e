#!/usr/bin/env bash
# Calibrate one GPU (e.g. the lent H200): qwen2.5-0.5b and qwen2.5-1.5b, random-initialised, bf16, SDPA.
# Leaves profile.json, report.md and the plot in one folder (default calibration/<gpu name>), plus the
# exactness of the closed form against FlopCounterMode with SDPA kernels on the GPU (flash backward = 2.5x).
#   bash calibration/run_gpu.sh [OUT_DIR]          # about 5-7 minutes on one H200
set -euo pipefail
cd "$(dirname "$0")/.."
py=".venv/bin/python"
[ -x "$py" ] || py=python3
out="${1:-calibration/$("$py" -c 'import torch; print(torch.cuda.get_device_name(0).lower().replace(" ", "-"))')}"
mkdir -p "$out"
# 1. the SDPA convention on the GPU: FlopCounterMode counts the flash/efficient kernels (backward 2.5x forward)
"$py" -m pytest -q tests/test_exact_counts.py -k "sdpa" -p no:cacheprovider -n 0 2>&1 | tee "$out/sdpa_exactness.txt"
# 2. the sweep, the fit, the counters side by side
timeout 460 "$py" -m flopplan calibrate --device cuda --models qwen2.5-0.5b,qwen2.5-1.5b --out "$out" --json \
    > "$out/calibrate.json"
# 3. what the profile does to a plan
"$py" -m flopplan plan --model qwen2.5-0.5b --model qwen2.5-1.5b --profile "$out/profile.json" --gpu-hours 10 \
    --format markdown > "$out/plan_with_profile.md"
echo "wrote $out"
ls -la "$out"
