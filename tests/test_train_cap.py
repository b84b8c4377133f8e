"""``flopplan train --train-flops``: the training FLOPs a run may reach (evaluations excluded), RACE's cap on a pilot
at its rung. Its budget also holds evaluations that may not run (a step that passes several ``--eval-at-flops``
points evaluates once); the budget alone let their reserve buy training past the rung."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import cli, one_line_error

pytest.importorskip("torch")
pytest.importorskip("peft")

SMALL = ["--prompts-per-step", "2", "--group-size", "2", "--micro-batch", "4", "--completion-len", "4",
         "--fixed-completion-len", "--no-progress", "--seed", "0"]


def training(run: Path) -> list[int]:
    """The training FLOPs (evaluations excluded) after each step, from the step log."""
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    return [m["flops"]["total"] - m["flops"]["evaluation"] for m in lines if m["step"] > 0]


def test_a_run_stops_before_a_step_that_could_pass_its_training_cap_and_a_resume_raises_it(tmp_path: Path):
    probe = tmp_path / "probe"  # one step: what a step's training costs (every completion at its maximum length)
    cli("train", "--out", str(probe), "--steps", "1", *SMALL, check=True)
    step = training(probe)[0]
    run = tmp_path / "run"
    cap = 3 * step + step // 2  # three steps and a half: the budget buys many more
    cli("train", "--out", str(run), "--budget", "1e12", "--train-flops", str(cap), "--eval-at-end", *SMALL,
        check=True)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 3 and training(run)[-1] <= cap
    assert summary["stop"]["reason"] == "budget"  # finished, as a budget stop: race run reads the pilot as done
    assert f"training FLOPs capped at {cap:,}" in summary["stop_reason"]
    evaluated = [json.loads(line)["step"] for line in (run / "evaluations.jsonl").read_text().splitlines()]
    assert evaluated[-1] == 3  # --eval-at-end evaluated the step the cap ended the run after
    assert json.loads((run / "config.json").read_text())["train_flops"] == cap
    lower = cli("train", "--out", str(run), "--resume", "--train-flops", str(step), "--no-progress")
    one_line_error(lower, f"--train-flops {step:,} does not extend it")  # (it was accepted and did nothing)
    cli("train", "--out", str(run), "--resume", "--budget", "1e12", "--train-flops", str(cap + 2 * step),
        "--no-progress", check=True)  # the next rung's cap
    assert json.loads((run / "summary.json").read_text())["steps"] == 5 and training(run)[-1] <= cap + 2 * step
    assert json.loads((run / "config.json").read_text())["train_flops"] == cap + 2 * step


def test_a_training_cap_that_is_not_a_whole_number_of_flops_is_refused_in_one_line(tmp_path: Path):
    out = cli("train", "--out", str(tmp_path / "run"), "--steps", "1", "--train-flops", "1.5", *SMALL)
    one_line_error(out, "--train-flops must be a whole number of FLOPs")
