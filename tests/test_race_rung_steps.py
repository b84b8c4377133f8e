"""RACE's pilots train to their rung's designed training, not past it: a pilot's budget holds every evaluation that
can fall within its rung, and a step that passes several evaluation points runs one of them, so the budget alone let
the evaluations that did not run buy more steps (more for an arm of larger steps). ``--train-flops`` now caps each
pilot's training at its rung's FLOPs. A small race whose steps each pass several evaluation points, run to its
second rung (each pilot continued from the first, its cap raised)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli

from flopplan.race.design import RaceDesign
from flopplan.race.pilots import pilot_folder, within_rung
from flopplan.race.rung_ends import rung_end
from flopplan.runfile import load_evaluations, load_summary

DESIGN = ("race", "design", "--budget", "8e10", "--pilot-fraction", "0.5", "--models", "tiny-s", "--seeds", "1",
          "--rungs", "2", "--axis", "num_generations=4,8")


@pytest.mark.slow
def test_each_pilot_runs_its_rungs_designed_steps_and_trains_no_more_than_the_rung(tmp_path: Path):
    pytest.importorskip("torch")
    race = tmp_path / "race"
    cli(*DESIGN, "--out", str(race), check=True)
    design = RaceDesign.load(race)
    g8 = next(a for a in design.arms if a.recipe.group_size == 8)
    step = g8.rungs[0].step_flops  # the design this test needs: a step passes several evaluation points
    assert any(sum(1 for p in design.eval_points if s * step < p <= (s + 1) * step) > 1
               for s in range(g8.rungs[0].steps))
    cli("race", "run", str(race), check=True)
    continued = 0
    for arm in design.arms:
        folder = pilot_folder(race, arm.name, design.seeds[0])
        records = [r for r in load_evaluations(folder) if r.target == design.fit_targets[0]]
        summary = load_summary(folder)
        reached = 2 if summary.budget_flops == arm.pilot_budget(design, 1) else 1
        continued += reached == 2
        for rung in range(reached):
            last = max(within_rung(records, design, arm.name, rung), key=lambda r: r.step)
            assert last.step == arm.rungs[rung].steps, (arm.name, rung + 1)  # the evaluation at the rung's end
            assert last.train_flops <= design.rung_flops[rung], (arm.name, rung + 1)
            end = rung_end(folder, rung, arm.pilot_budget(design, rung))  # the runner's record of the rung's end
            assert end is not None and (end.step, end.train_flops) == (last.step, last.train_flops), (arm.name, rung)
            assert within_rung(records, design, arm.name, rung, folder) == within_rung(records, design, arm.name, rung)
        assert summary.steps == arm.rungs[reached - 1].steps
        assert summary.flops["total"] - summary.flops["evaluation"] <= design.rung_flops[reached - 1]
    assert continued  # some pilot was continued to the second rung
