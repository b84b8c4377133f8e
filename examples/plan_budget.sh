#!/usr/bin/env bash
# Plan a budget: what 3e19 FLOPs buy for a 7B GRPO recipe with a process reward model, in FLOPs and in hours.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$PWD/.venv/bin:$PATH"   # the venv `make demo` / `make test` creates, when there is one
flopplan plan --recipe examples/recipe.toml --budget 3e19 --device h100 --out "${TMPDIR:-/tmp}/flopplan-plan.json"
# The other way round: the most update passes (mu) that still afford 40 steps
flopplan plan --recipe examples/recipe.toml --budget 3e19 --solve iterations --steps 40
# And in GPU-hours on H200s (datasheet profile; calibrate for real numbers):
flopplan plan --recipe examples/recipe.toml --gpu-hours 2000 --device h200 --format markdown
