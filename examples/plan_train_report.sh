#!/usr/bin/env bash
# Plan -> train -> report on the CPU: plan a FLOP budget for the tiny policy on the built-in task, run the
# validating GRPO run from the plan file (every phase also counted by FlopCounterMode), then summarise it:
# FLOPs by bucket against the budget and the plan, and reward/accuracy against FLOPs spent (report.png).
set -euo pipefail
cd "$(dirname "$0")/.."
PATH="$PWD/.venv/bin:$PATH"   # the venv `make demo` / `make test` creates, when there is one
out="${TMPDIR:-/tmp}/flopplan-example"
budget="${FLOPPLAN_EXAMPLE_BUDGET:-6e11}"   # about 67 steps, a minute on 2 CPU cores
rm -rf "$out" && mkdir -p "$out"
flopplan plan --model tiny --full --prompts-per-step 16 --group-size 16 --prompt-len 10 --completion-len 2 \
    --micro-batch 64 --eval-every 10 --eval-prompts 200 --budget "$budget" --out "$out/plan.json"
flopplan train --plan "$out/plan.json" --out "$out/run" --measure-flops --no-progress
flopplan report "$out/run"
