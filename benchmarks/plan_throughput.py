"""Planner speed: recipe x budget plans per second on numpy grids, and the wall time of `flopplan plan`.

    python benchmarks/plan_throughput.py [--recipes 2000] [--budgets 1000] [--repeats 5]

A grid plan computes, for every (recipe, budget) pair, the GRPO steps the budget affords, FLOPs per bucket
(rollout, learning, feedback, evaluation) and in total, leftover, rollouts, generated and update tokens, through
the same phase functions as the scalar planner (flopplan.cost), evaluated on arrays. Target: >= 1e6 plans/s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

from flopplan.arch import QWEN25_SIZES
from flopplan.grid import plan_grid
from flopplan.recipe import Recipe, RewardSystem


def grid_rate(recipes: int, budgets: int, repeats: int, seed: int = 0) -> list[tuple[str, float, int]]:
    rng = np.random.default_rng(seed)
    arrays = {
        "prompts_per_step": rng.choice([16, 32, 64, 128, 256, 512], recipes),
        "group_size": rng.choice([2, 4, 8, 16, 32, 64], recipes),
        "prompt_len": rng.integers(64, 2048, recipes),
        "completion_len": rng.integers(128, 8192, recipes),
        "iterations": rng.integers(1, 5, recipes),
    }
    budget_values = np.logspace(17, 22, budgets)
    results = []
    for name in QWEN25_SIZES:
        for reward in ("rule", "prm:qwen2.5-math-prm-7b"):
            recipe = Recipe(policy=name, reward=RewardSystem.parse(reward), eval_every=None, eval_prompts=0)
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                grid = plan_grid(recipe, budget_values, **arrays)
                times.append(time.perf_counter() - start)
            results.append((f"{name} {reward.split(':')[0]}", min(times), grid.size))
    return results


def cli_wall_time(runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "flopplan", "plan"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", type=int, default=2000)
    parser.add_argument("--budgets", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cli-runs", type=int, default=10)
    args = parser.parse_args()
    print(f"grid: {args.recipes} recipes x {args.budgets} budgets per model and reward system, best of "
          f"{args.repeats}")
    rates = []
    for label, seconds, size in grid_rate(args.recipes, args.budgets, args.repeats):
        rate = size / seconds
        rates.append(rate)
        print(f"  {label:<22} {size:>10,} plans in {1000 * seconds:7.1f} ms = {rate / 1e6:6.2f} M plans/s")
    print(f"plans per second: min {min(rates) / 1e6:.2f} M, median {statistics.median(rates) / 1e6:.2f} M "
          f"(target >= 1.00 M)")
    walls = cli_wall_time(args.cli_runs)
    print(f"`flopplan plan` (default, table output, new process): median {statistics.median(walls):.3f} s, "
          f"max {max(walls):.3f} s over {len(walls)} runs (target < 0.5 s)")


if __name__ == "__main__":
    main()
