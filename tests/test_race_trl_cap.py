"""A script pilot (TRL) trains no further than its rung's training FLOPs: its budget holds every evaluation that can
fall within the rung, and a round that passes several evaluation points evaluates once, so the budget alone let the
reserve of the evaluations that did not run buy more rounds (a held-out user's 1-rung race ran 24 rounds where the
design's table says 23, with 3 of its 4 priced evaluations). The spec carries the rung's training FLOPs
(``train_flops``) and the meter stops before a round whose worst case could take the training past them."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from helpers import cli
from test_race_trl import DESIGN, EXAMPLE

from flopplan.race.design import RaceDesign
from flopplan.race.rung_ends import rung_end


@pytest.mark.slow  # two TRL pilots (about 15 s each)
def test_a_script_pilot_whose_rounds_pass_several_evaluation_points_trains_no_more_than_its_rung(tmp_path):
    race = tmp_path / "race"
    one_rung = [*DESIGN[:DESIGN.index("--rungs") + 1], "1", *DESIGN[DESIGN.index("--rungs") + 2:]]
    many = [*one_rung[:one_rung.index("--evals") + 1], "4", *one_rung[one_rung.index("--evals") + 2:]]
    cli("race", "design", *many, "--budget", "1.5e10", "--out", str(race), check=True)
    design = RaceDesign.load(race)
    largest = max(design.arms, key=lambda a: a.rungs[0].step_flops)
    step = largest.rungs[0].step_flops  # the design this test needs: a round passes several evaluation points
    assert any(sum(1 for p in design.eval_points if s * step < p <= (s + 1) * step) > 1
               for s in range(largest.rungs[0].steps))
    pilot = (f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))} --data-dir {shlex.quote(str(tmp_path / 'd'))}"
             f" --models-dir {shlex.quote(str(tmp_path / 'models'))}")
    cli("race", "run", str(race), "--pilot", pilot, check=True)
    for arm in design.arms:
        folder = race / "pilots" / arm.name / "seed0"
        summary = json.loads((folder / "summary.json").read_text())
        trained = summary["flops"]["total"] - summary["flops"]["evaluation"]
        assert trained <= design.rung_flops[0], (arm.name, trained, design.rung_flops[0])
        assert json.loads((folder / "pilot.json").read_text())["train_flops"] == design.rung_flops[0]
        assert summary["stop"]["reason"] == "budget"  # finished at its rung
        if arm.name == largest.name:  # its budget would buy a round more: the cap stopped it
            assert "training FLOPs capped at" in summary["stop_reason"]
        last = json.loads((folder / "evaluations.jsonl").read_text().splitlines()[-1])
        assert last["train_flops"] == trained  # the last round evaluated
        end = rung_end(folder, 0, arm.pilot_budget(design, 0))  # the runner's record of where the rung ended
        assert end is not None and (end.step, end.train_flops) == (last["step"], trained)
