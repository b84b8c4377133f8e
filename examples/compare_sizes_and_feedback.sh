#!/usr/bin/env bash
# Same-FLOP comparisons: every Qwen2.5 size under one budget, and rule vs ORM vs PRM feedback per size.
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$PWD/.venv/bin:$PATH"   # the venv `make demo` / `make test` creates, when there is one
flopplan compare --budget 1e19 --models qwen2.5-0.5b,qwen2.5-1.5b,qwen2.5-3b,qwen2.5-7b \
    --rewards rule,orm:qwen2.5-1.5b,prm:qwen2.5-math-prm-7b,prm:qwen2.5-1.5b
# The largest policy that still affords 300 steps of the default recipe:
flopplan plan --budget 1e19 --largest-model --steps 300
