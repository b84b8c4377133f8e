"""RACE's protocol: the design (ladder, successive halving, the worst case within phi x F, room for the arms the
evidence cannot rule out), the manifest, the promotion rule, and bad designs refused in one line."""

from __future__ import annotations

import json

import pytest
from helpers import cli, one_line_error

from flopplan.errors import UserError
from flopplan.race.design import MANIFEST, Grid, RaceDesign, design_race
from flopplan.recipe import Recipe

SMALL = ("--models", "tiny-s", "--group-sizes", "4,8", "--seeds", "2", "--rungs", "2", "--evals", "3",
         "--eval-prompts", "20", "--room", "1")
"""A race small enough to train in about a minute here: 2 arms x 2 seeds, 2 rungs, the budget for the halving's
count only (room for more: test_the_budget_leaves_room_for_arms_the_evidence_cannot_rule_out)."""


def _base() -> Recipe:
    from flopplan.cli.race import race_base

    return race_base()


def _eval_flops(recipe: Recipe, targets: tuple[str, ...]) -> int:
    from flopplan.train.targets import evaluation_flops

    return sum(evaluation_flops(recipe, targets).values())


@pytest.mark.parametrize("arms, seeds, rungs, eta", [(("tiny-s", "tiny", "tiny-l"), 2, 3, 2), (("tiny",), 3, 2, 3)])
def test_the_worst_case_of_every_pilot_fits_phi_f(arms, seeds, rungs, eta):
    grid = Grid(arms, (4, 8), (1,), ("rule",), seeds=seeds, targets=("heldout", "long"), rungs=rungs, eta=eta,
                evals=4, eval_prompts=20)
    design = design_race(_base(), grid, 10**13, 0.3, evaluation_flops=_eval_flops)
    assert design.worst_case_flops <= design.pilot_cap == int(0.3 * 10**13)
    assert all(b * eta == c for b, c in zip(design.rung_flops, design.rung_flops[1:], strict=False))
    assert design.keep[0] == len(design.arms) == 2 * len(arms)
    assert all(-(-k // eta) == k2 for k, k2 in zip(design.keep, design.keep[1:], strict=False))
    for arm in design.arms:  # the planner's steps fit each rung's training budget; equal FLOPs across arms
        for entry, budget in zip(arm.rungs, design.rung_flops, strict=True):
            assert entry.flops["total"] <= budget < entry.flops["total"] + entry.step_flops
    assert design.worst_case_flops >= 0.99 * design.pilot_cap  # the first rung is as large as phi allows


def test_the_design_says_when_its_horizon_is_beyond_where_p_best_was_checked():
    """The horizon (F over the largest pilot, every arm's top-rung ledger budget) is stated before any pilot runs;
    beyond the 2x (with slack) at which the P(best) was checked, the note says the analysis will read it as a
    strength of preference and names the levers; a design with its largest pilot near F gets no such clause. A
    design of one seed says that the seeds' spread will be assumed, not measured; one of two seeds does not."""
    from flopplan.race.design_notes import HORIZON_SLACK, MEASURED_HORIZON, horizon_note, one_seed_note

    def horizon_of(grid: Grid, phi: float) -> tuple[float, str]:
        design = design_race(_base(), grid, 10**13, phi, evaluation_flops=_eval_flops)
        top = max(a.pilot_budget(design, len(design.keep) - 1) for a in design.arms)
        note, *others = (n for n in design.notes if not n.startswith("a top-rung pilot evaluates"))
        assert others == ([one_seed_note(0.05)] if grid.seeds == 1 else [])
        return 10**13 / top, note

    far, far_note = horizon_of(Grid(("tiny-s", "tiny"), (4, 8), (1,), ("rule",), seeds=2, evals=3,
                                    eval_prompts=20), 0.3)
    near, near_note = horizon_of(Grid(("tiny-s",), (4, 8), (1,), ("rule",), seeds=1, rungs=1, evals=3,
                                      eval_prompts=20), 0.9)
    assert far > MEASURED_HORIZON * HORIZON_SLACK >= near
    assert far_note.startswith(f"F is {far:.1f}x the largest pilot") and "how strongly" in far_note
    assert "--pilot-fraction" in far_note and "--rungs" in far_note and "seeds" not in far_note  # two seeds
    assert "fewer arms or seeds (two at least)" in horizon_note(far, 3)
    assert "assumes a seed sd of 5 % of the gain (--seed-sd" in one_seed_note(0.05)
    assert "a seed sd of 0.4 % of the gain" in one_seed_note(0.004)
    assert near_note == f"F is {near:.1f}x the largest pilot: predictions at F extrapolate that far"


@pytest.mark.parametrize(("evals", "rungs", "positions"), [(2, 2, 4), (3, 2, None), (4, 2, None), (2, 1, 3),
                                                            (3, 1, 4), (5, 1, None)])
def test_the_design_says_when_its_pilots_evaluate_too_rarely_to_hold_a_point_out(evals, rungs, positions):
    """The analysis holds an evaluation position out only from 5 on (after step 0: the --evals points, each rung's
    end): with fewer, its families are weighted equally and its intervals not calibrated on the pilots' holdout, and
    the design says so before any pilot runs. Counted per arm, at the steps the points fall on: --evals 2 with two
    rungs gives 4 (the G8 arm: steps 1 and 18, the rungs' ends 306 and 612), --evals 3 with one rung 4 (1, 6, 58,
    612), --evals 2 with one rung 3."""
    design = design_race(_base(), Grid(("tiny-s",), (4, 8), (1,), ("rule",), seeds=2, rungs=rungs, evals=evals,
                                       eval_prompts=20), 10**13, 0.3, evaluation_flops=_eval_flops)
    notes = [n for n in design.notes if n.startswith("a top-rung pilot evaluates")]
    if positions is None:
        assert notes == []
    else:
        assert len(notes) == 1 and f"about {positions} positions" in notes[0] and "--evals" in notes[0]


def test_every_arm_evaluates_at_enough_positions_in_its_first_rung_for_a_curve():
    """An arm whose steps are dear takes few steps in its first rung, and the grid's log-spaced points fell between
    them: the demo's tiny-l arms (3 steps) evaluated after steps 1 and 3 only, so an arm the halving set aside was
    "not fitted". The design adds a point within such an arm's first rung (flopplan.race.eval_points; here tiny-l
    at G32, 3 steps), every pilot's budget pays for it, and the worst case still fits phi x F."""
    from flopplan.race.eval_points import evaluated_steps, log_points, positions
    from flopplan.race.families import CURVE_POSITIONS

    grid = Grid(("tiny-s", "tiny-l"), (4, 32), (1,), ("rule",), seeds=2, rungs=2, evals=3, eval_prompts=20)
    design = design_race(_base(), grid, 10**13, 0.3, evaluation_flops=_eval_flops)
    first = {a.name: (a.rungs[0].step_flops, a.rungs[0].steps) for a in design.arms}
    spaced = log_points(min(f for f, _ in first.values()), design.rung_flops[-1], grid.evals)
    dear = [n for n, (f, s) in first.items() if positions(spaced, f, (s,), design.rung_flops[0]) < CURVE_POSITIONS]
    assert dear and all(n.startswith("tiny-l.") for n in dear)  # the grid's own points leave tiny-l short
    assert set(spaced) <= set(design.eval_points)
    for name in dear:  # halfway in ln FLOPs between its first step and its rung's end: steps 1, 2, 3
        assert evaluated_steps(design.eval_points, first[name][0], first[name][1:], design.rung_flops[0]) == [1, 2, 3]
    for name, (flops, steps) in first.items():
        assert positions(design.eval_points, flops, (steps,), design.rung_flops[0]) >= CURVE_POSITIONS, name
    assert design.worst_case_flops <= design.pilot_cap
    assert all(a.pilot_budget(design, 0) == design.rung_flops[0] + a.eval_flops * (2 + len(
        [p for p in design.eval_points if p <= design.rung_flops[0]])) for a in design.arms)


def test_a_budget_that_cannot_pay_for_the_added_point_is_designed_without_it_and_says_so():
    """Near the least budget a grid can be designed at, the point that gives a dear arm its third position costs
    each pilot one evaluation more, and the first rung would then buy that arm 2 steps. The design falls back to
    the grid's own points rather than refusing the budget, and names the arms a curve will miss if the halving
    sets them aside there; a budget that pays for the point adds it and says nothing."""
    from flopplan.race.eval_points import positions
    from flopplan.race.families import CURVE_POSITIONS

    grid = Grid(("tiny-s", "tiny-l"), (4, 32), (1,), ("rule",), seeds=2, rungs=2, evals=3, eval_prompts=20)

    def design(budget: float) -> RaceDesign | None:
        try:
            return design_race(_base(), grid, int(budget), 0.3, evaluation_flops=_eval_flops)
        except UserError:
            return None

    def few(d: RaceDesign) -> list[str]:
        return [a.name for a in d.arms if positions(d.eval_points, a.rungs[0].step_flops, (a.rungs[0].steps,),
                                                    d.rung_flops[0]) < CURVE_POSITIONS]

    low, high = 10**12, 10**13  # the least budget designed (to 0.05 %): refused below, designed above
    assert design(low) is None and design(high) is not None
    while high - low > 5 * 10**9:
        mid = (low + high) // 2
        low, high = (low, mid) if design(mid) else (mid, high)
    tight = design(high)
    assert tight is not None and few(tight) == ["tiny-l.G32.mu1.rule"] and tight.arms[-1].rungs[0].steps == 3
    assert [n for n in tight.notes if n.startswith("tiny-l.G32.mu1.rule: the first-rung pilots evaluate at fewer")]
    roomy = design(1.2 * high)
    assert roomy is not None and few(roomy) == [] and not [n for n in roomy.notes if "evaluate at fewer" in n]


def test_the_library_refuses_a_grid_of_one_arm_as_the_cli_does():
    """design_race (the library) designed a race of one arm, which the CLI alone refused: nothing to compare."""
    with pytest.raises(UserError, match=r"a race compares arms: the grid has one \(tiny-s\.G4"):
        design_race(_base(), Grid(("tiny-s",), (4,), (1,), ("rule",), seeds=2), 10**13, 0.3,
                    evaluation_flops=_eval_flops)


def test_a_race_sets_the_seed_sd_its_one_seed_arms_assume_and_every_analysis_reads_it(tmp_path):
    """``race design --seed-sd``: the relative seed sd an arm of one seed is assumed to have (where no other arm
    shows one) is the design's, recorded in the manifest and said in the design's note; a manifest without it (before
    the option) reads the default; a value outside [0, 1] is one line, from the CLI and from an edited manifest."""
    grid = Grid(("tiny-s", "tiny"), (4,), (1,), ("rule",), seeds=1, rungs=1, evals=3, eval_prompts=20, one_seed_sd=0.2)
    design = design_race(_base(), grid, 10**13, 0.6, evaluation_flops=_eval_flops)
    assert design.one_seed_sd == 0.2 and "assumes a seed sd of 20 % of the gain" in design.notes[1]
    data = design.to_data()
    assert RaceDesign.from_data(json.loads(json.dumps(data)), "m").one_seed_sd == 0.2
    assert RaceDesign.from_data({k: v for k, v in data.items() if k != "one_seed_sd"}, "m").one_seed_sd == 0.05
    for wrong in (5, 0, True, "0.2", float("nan")):
        with pytest.raises(UserError, match="one_seed_sd must be a number above 0 and at most 1"):
            RaceDesign.from_data({**data, "one_seed_sd": wrong}, "m")
    with pytest.raises(UserError, match="--seed-sd must be a relative sd above 0 and at most 1"):
        design_race(_base(), Grid(("tiny-s",), (4,), (1,), ("rule",), seeds=1, one_seed_sd=-0.1), 10**13, 0.6,
                    evaluation_flops=_eval_flops)
    one_line_error(cli("race", "design", "--budget", "1e13", "--models", "tiny-s", "--seeds", "1", "--seed-sd", "2",
                       "--out", str(tmp_path / "x")), "--seed-sd must be a relative sd above 0")
    assert not (tmp_path / "x" / MANIFEST).exists()


@pytest.mark.parametrize("room", [1, 1.5, 2, 3])
def test_the_budget_leaves_room_for_arms_the_evidence_cannot_rule_out(room):
    """room_r = min(room_(r-1), room x keep_r); the worst case pays for that many survivors at every rung, so the
    runner can promote them all; more room, smaller pilots."""
    from flopplan.race.runner import _affordable

    grid = Grid(("tiny-s", "tiny"), (4, 8), (1,), ("rule",), seeds=2, rungs=3, eta=2, room=room, evals=3,
                eval_prompts=20)
    design = design_race(_base(), grid, 10**13, 0.3, evaluation_flops=_eval_flops)
    assert design.keep == (4, 2, 1)
    assert design.room == {1: (4, 2, 1), 1.5: (4, 3, 1), 2: (4, 4, 2), 3: (4, 4, 3)}[room]  # floor(room x keep)
    worst = 0
    for rung, most in enumerate(design.room):
        growth = sorted((a.pilot_budget(design, rung) - (a.pilot_budget(design, rung - 1) if rung else 0)
                         for a in design.arms), reverse=True)
        worst += 2 * sum(growth[:most])
    assert design.worst_case_flops == worst <= design.pilot_cap
    names = [a.name for a in design.arms]
    assert _affordable(design, [names], names) == design.room[1]
    if room > 1:
        tight = design_race(_base(), Grid(**{**grid.__dict__, "room": 1}), 10**13, 0.3, evaluation_flops=_eval_flops)
        assert tight.rung_flops[0] > design.rung_flops[0]
    old = {**design.to_data(), "race_manifest_version": 2}
    old.pop("room")
    assert RaceDesign.from_data(old, "v2").room == design.keep  # before the room: the halving's count only
    with pytest.raises(UserError, match="malformed"):
        RaceDesign.from_data({**design.to_data(), "room": [4, 1, 1]}, "m")  # room below the halving's count


def test_the_manifest_round_trips_and_a_corrupted_one_is_refused(tmp_path):
    out = cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path / "r"), *SMALL,
              "--json", check=True)
    data = json.loads(out.stdout)
    design = RaceDesign.load(tmp_path / "r")
    assert design.to_data() == data == json.loads((tmp_path / "r" / MANIFEST).read_text())
    assert {a.name for a in design.arms} == {"tiny-s.G4.mu1.rule", "tiny-s.G8.mu1.rule"}
    assert all(a.recipe.micro_batch == a.recipe.rollouts_per_step and not a.recipe.grad_ckpt for a in design.arms)
    one_line_error(cli("race", "design", "--budget", "6e10", "--out", str(tmp_path / "r"), *SMALL), "already holds")
    (tmp_path / "r" / MANIFEST).write_text('{"race_manifest_version": 1, "arms": [')
    for command in ("run", "analyze"):
        one_line_error(cli("race", command, str(tmp_path / "r")), "manifest")
    # values no design writes (hand edits) are refused before any pilot runs, each by what is wrong
    for key, value, fragment in (("rung_flops", "many", "malformed"), ("budget_flops", -6 * 10**12, "budget_flops"),
                                 ("pilot_fraction", 5, "pilot_fraction"), ("eta", 0, "eta"),
                                 ("rung_flops", [-1, -2], "rung_flops"), ("keep", [0, 0], "keep"),
                                 ("seeds", [-1], "seeds"), ("targets", [], "targets"),
                                 ("fit_targets", ["nosuch"], "fit_targets"), ("arms", [], "arms"),
                                 ("eval_points", [], "eval_points"),
                                 # an arm's name is its pilots' folder: a path out of the race is refused
                                 ("arms", [data["arms"][0] | {"name": "../../elsewhere"}], "arm's name"),
                                 ("arms", [data["arms"][0] | {"name": ""}], "arm's name"),
                                 ("arms", [data["arms"][0] | {"eval_flops": -2 * 10**9}], "eval_flops"),
                                 ("reward_model_path", 5, "reward_model_path"),
                                 ("race_manifest_version", True, "race_manifest_version"),
                                 # each passed, and failed only in a pilot or a sum after work had begun
                                 ("seeds", [10**40], "seeds"), ("eta", 10**40, "eta"),
                                 ("eval_generations", -1, "eval_loop"),
                                 ("room", [10**40, *data["room"][1:]], "room"),
                                 *(("worst_case_flops", bad, "worst_case_flops")
                                   for bad in ("abc", -1, float("nan"), [1])),
                                 *(("arms", [data["arms"][0] | {"upfront_flops": bad}, *data["arms"][1:]],
                                    "upfront_flops") for bad in (True, 4.5, 10**40))):
        (tmp_path / "r" / MANIFEST).write_text(json.dumps({**data, key: value}))
        for command in ("run", "analyze"):
            one_line_error(cli("race", command, str(tmp_path / "r")), fragment)
    # a figure the manifest derives, edited by hand, is refused and its inputs named (the race would ignore it)
    (tmp_path / "r" / MANIFEST).write_text(json.dumps({**data, "pilot_cap": data["pilot_cap"] * 2}))
    for command in ("run", "analyze"):
        one_line_error(cli("race", command, str(tmp_path / "r")), "pilot_fraction x budget_flops")
    # its inputs edited with it set to match, or without it: read (the stale one alone is refused, as above)
    for cap in ({"pilot_cap": int(0.25 * data["budget_flops"])}, {}):
        edited = {k: v for k, v in data.items() if k != "pilot_cap"} | {"pilot_fraction": 0.25} | cap
        (tmp_path / "r" / MANIFEST).write_text(json.dumps(edited))
        assert RaceDesign.load(tmp_path / "r").pilot_cap == int(0.25 * data["budget_flops"])
    (tmp_path / "r" / MANIFEST).write_text(json.dumps({**data, "pilot_fraction": 0.25}))
    one_line_error(cli("race", "analyze", str(tmp_path / "r")), "set pilot_cap to match")
    # seeds edited up: the pilots could overspend phi x F (every arm runs the first rung), refused before any runs
    (tmp_path / "r" / MANIFEST).write_text(json.dumps({**data, "seeds": [*data["seeds"], *range(100, 108)]}))
    assert RaceDesign.load(tmp_path / "r").worst_case_flops > data["pilot_cap"]
    one_line_error(cli("race", "run", str(tmp_path / "r")), "could spend")
    # a field missing, of the wrong type, or a ladder the arms' steps were not planned for: named, with what is wrong
    # (a held-out team's edits got only "is malformed: rerun `flopplan race design`")
    first = data["rung_flops"][0]
    for edit, fragment in (({"budget_flops": 1e9}, "budget_flops must be a whole number, not 1000000000.0"),
                           ({"arms": None}, "it has no arms"), ({"arms": 5}, "arms must be a list"),
                           ({"rung_flops": [first * 1.5, *data["rung_flops"][1:]]}, "rung_flops must be a list of "
                            "whole numbers, not one holding"),
                           ({"rung_flops": [first * 3 // 2, *data["rung_flops"][1:]]}, f"rung_flops[0] is "
                            f"{first * 3 // 2:,} but arm {data['arms'][0]['name']}'s steps at rung 1 were planned for "
                            f"{first:,}"),
                           ({"rung_flops": [b * 4 for b in data["rung_flops"]]}, "rung_flops[0]")):
        edited = {k: v for k, v in ({**data, **edit}).items() if v is not None}
        (tmp_path / "r" / MANIFEST).write_text(json.dumps(edited))
        line = one_line_error(cli("race", "run", str(tmp_path / "r")), fragment)
        assert "is malformed: rerun" not in line
    assert not list((tmp_path / "r").glob("pilots"))
    one_line_error(cli("race", "run", str(tmp_path / "none")), "no RACE manifest")


def test_a_design_into_a_folder_with_an_earlier_races_pilots_or_into_no_folder_is_refused(tmp_path):
    """Pilots left from a race whose manifest is gone would pass for the new design's (the runner finds them
    done); an empty --out would write the manifest where the command runs."""
    (tmp_path / "r" / "pilots" / "tiny-s.G4.mu1.rule").mkdir(parents=True)
    one_line_error(cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path / "r"),
                       *SMALL), "pilots of an earlier race")
    assert not (tmp_path / "r" / MANIFEST).exists()
    one_line_error(cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", "", *SMALL), "--out")


@pytest.mark.parametrize("args, fragment", [
    (("--models", ","), "without a name"),
    (("--group-sizes", "0"), "positive integers"),
    (("--group-sizes", "1,8"), "group size of 1 cannot race"),  # GRPO's advantage is 0: such an arm never learns
    (("--pilot-fraction", "0"), "between 0 and 1"),
    (("--pilot-fraction", "1"), "between 0 and 1"),
    (("--pilot-fraction", "-0.2"), "between 0 and 1"),
    (("--budget", "1e9"), "too small"),
    (("--prompts-per-step", "1000000000"), "one step costs"),  # its worst-case round listed 1e10 rollouts
    (("--group-sizes", "99999999999999999999"), "one step costs"),  # OverflowError there
    (("--seeds", "1000000000"), "--seeds must be an integer from 1 to 1,000"),  # a tuple of them filled memory
    (("--rungs", "10000000"), "--rungs must be an integer from 1 to 60"),
    (("--rungs", "60"), "2^59 x the first"),  # it said "a budget of 1.27e+30 FLOPs is beyond what flopplan plans"
    (("--evals", "10000000"), "--evals must be an integer from 1 to 10,000"),
    (("--budget", "-5"), "--budget"),
    (("--budget", "1e31"), "at most 1e30"),  # the planner's limit, as `flopplan plan` checks it
    (("--budget", "1e400"), "at most 1e30"),
    (("--seeds", "0"), "seeds"),
    (("--eval-prompts", "1"), "--eval-prompts must be an integer >= 2"),  # the analysis resamples the prompts
    (("--eta", "1"), "eta"),
    (("--room", "0"), "room"),
    (("--fit-targets", "long", "--eval-targets", "heldout"), "not an evaluation target"),
    (("--rewards", "orm:tiny-rm"), "reward model"),
    (("--rewards", "ORM:tiny-rm"), "reward model"),  # the recipe reads it as orm: its upfront FLOPs are needed
    (("--reward-model-path", "tests"), "no arm is orm"),  # recorded in the manifest, it would be used by none
    (("--rewards", "rule,RULE"), "one allocation"),  # twin arms would run the same pilots and split the P(best)
    (("--models", "tiny-s,TINY-S"), "one allocation"),
    (("--axis", "vllm_server_host=host:1,host/1"), "one name"),  # two arms, one pilots' folder
    (("--group-sizes", "8,08"), "one allocation"),
    (("--models", "qwen9"), "qwen9"),
])
def test_bad_designs_are_one_line_and_write_nothing(tmp_path, args, fragment):
    base = {"--budget": "6e10", "--pilot-fraction": "0.5"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    argv = [x for k, v in {**base, **given}.items() for x in (k, v)]
    rest = [x for i, x in enumerate(SMALL) if not (x in given or (i and SMALL[i - 1] in given))]
    one_line_error(cli("race", "design", *argv, "--out", str(tmp_path / "r"), *rest), fragment)
    assert not (tmp_path / "r" / MANIFEST).exists()


def test_a_demo_checks_its_options_and_folder_before_any_work(tmp_path):
    # --jobs 0 was refused only after a reward model's training had half-made the folder; an unwritable --out
    # was a FileNotFoundError traceback
    one_line_error(cli("race", "demo", "--quick", "--jobs", "0", "--out", str(tmp_path / "demo")), "--jobs")
    assert not (tmp_path / "demo").exists()
    (tmp_path / "file").write_text("")
    one_line_error(cli("race", "demo", "--quick", "--out", str(tmp_path / "file" / "demo")), "cannot write")


@pytest.mark.parametrize("replicates", ["1000000000", "99999999999999999999"])  # 224 GiB asked; a ValueError
def test_replicates_beyond_the_maximum_are_refused_before_the_folder_is_read(replicates):
    one_line_error(cli("race", "analyze", "nowhere", "--replicates", replicates), "from 10 to 100,000")


def test_an_empty_grid_is_refused():
    from flopplan.errors import UserError

    with pytest.raises(UserError, match="the grid is empty: give at least one value for group sizes"):
        design_race(_base(), Grid(("tiny",), (), (1,), ("rule",)), 10**12, 0.5, evaluation_flops=_eval_flops)


def test_analyze_names_its_option_when_it_refuses_too_few_replicates(tmp_path):
    """The refusal named the analysis's argument (n_replicates), which the command line does not have; it is checked
    before the folder is read."""
    one_line_error(cli("race", "analyze", str(tmp_path), "--replicates", "2"),
                   "--replicates must be an integer from 10 to 100,000, not 2")


def test_run_refuses_a_bad_shard_and_analyze_waits_for_a_rung(tmp_path):
    cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path), *SMALL, check=True)
    one_line_error(cli("race", "run", str(tmp_path), "--shard", "2/2"), "--shard")
    one_line_error(cli("race", "run", str(tmp_path), "--shard", "x"), "--shard")
    one_line_error(cli("race", "run", str(tmp_path), "--jobs", "0"), "--jobs")
    one_line_error(cli("race", "analyze", str(tmp_path)), "first rung")
    one_line_error(cli("race", "validate", str(tmp_path)), "race.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]  # the refusals wrote nothing


# -- a real race, uninterrupted and killed ------------------------------------------------------------------------

def test_promotion_keeps_the_halving_then_every_arm_that_may_lead_at_f():
    from flopplan.race.promotion import Trend, keep
    from flopplan.race.results import ArmPrediction

    def pred(arm: str, reward: float, half: float, comparable: bool = True) -> ArmPrediction:
        return ArmPrediction(arm=arm, ledger_flops=1e12, reward=reward, lo=reward - half, hi=reward + half,
                             gain=reward, gain_lo=reward - half, gain_hi=reward + half,
                             p_best=0.2 if comparable else 0.0,
                             extrapolation=4.0, usable=comparable, comparable=comparable, note="", observed=None)

    leader, late, behind, unstable = pred("leader", 0.6, 0.05), pred("late", 0.4, 0.3), pred("behind", 0.3, 0.1), \
        pred("unstable", 0.9, 0.5, comparable=False)
    trends = {"leader": Trend(0.5, 0.55), "late": Trend(0.3, 0.6), "behind": Trend(0.35, 0.35),
              "unstable": Trend(0.2, 0.9)}
    # the best observed first; late's upper bound at F (0.7) reaches the leader's lower bound (0.55): it stays
    assert keep([behind, late, leader], 1, trends) == ["leader", "late"]
    # the halving's count: the observed leader, then by where the last slope leads (late 0.6 > behind 0.35)
    assert keep([behind, late, leader], 2, trends, limit=2) == ["leader", "late"]
    assert keep([behind, late, leader], 3, trends) == ["leader", "late", "behind"]
    # a non-comparable arm does not set the bar at F but competes on its trend
    assert keep([unstable, behind, leader], 2, trends, limit=2) == ["leader", "unstable"]
    # beyond the halving's count: an arm with a share of P(best) or a slope that reaches the leader's lower bound
    # (a non-comparable one has no share of P(best); unstable goes on by its slope)
    assert keep([unstable, behind], 1, trends) == ["behind", "unstable"]
    assert keep([unstable, behind], 1, {**trends, "unstable": Trend(0.2, 0.1)}) == ["behind"]
    assert keep([], 2) == []


def test_an_arm_with_no_curve_goes_on_first_when_it_shows_the_most():
    """The runner's promotion with arms the analysis could not fit (no prediction at F): the best observed arm goes
    on whatever its curve, so an arm at a pass rate of 1 from step 0 is not cut for having no curve; other unfitted
    arms only fill the halving's count."""
    from flopplan.race.promotion import Trend
    from flopplan.race.runner import with_unfitted

    trends: dict[str, Trend | None] = {"leader": Trend(0.5, 0.55), "late": Trend(0.3, 0.6)}
    assert with_unfitted(["leader", "late"], trends, {"solved": 1.0, "flat": 0.1}, 2) == ["solved", "leader", "late"]
    assert with_unfitted(["leader", "late"], trends, {"flat": 0.1}, 2) == ["leader", "late"]
    assert with_unfitted(["leader"], trends, {"flat": 0.1, "stuck": 0.2}, 2) == ["leader", "stuck"]
    assert with_unfitted(["leader"], trends, {"tied": 0.5}, 2) == ["leader", "tied"]  # not more: fills the count
    assert with_unfitted([], {}, {"a": None, "b": 0.3}, 1) == ["b"]


def test_tables_of_a_race_without_an_analysis_is_one_line(tmp_path):
    one_line_error(cli("tables", "--race", str(tmp_path), "--out", str(tmp_path / "t")), "race.json")


def test_a_budget_the_pilots_and_reward_model_use_up_is_refused():
    from flopplan.errors import UserError

    grid = Grid(("tiny-s",), (8,), (1,), ("rule", "orm:tiny-rm"), seeds=2, targets=("heldout",), rungs=2,
                evals=2, eval_prompts=20, upfront={"orm:tiny-rm": 4 * 10**11})
    with pytest.raises(UserError, match="leaves no validating run"):
        design_race(_base(), grid, 8 * 10**11, 0.5, evaluation_flops=_eval_flops)


def test_the_evaluations_lengths_reach_the_pilots(tmp_path):
    """--eval-completion-len was refused in every race design ("applies with an evaluation (--eval-every K ...)",
    an option race design does not have): the pilots evaluate at FLOP points, so it applies, and prices them."""
    longer, default = (RaceDesign.load(cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out",
                                           str(tmp_path / name), *SMALL, *extra, check=True) and tmp_path / name)
                       for name, extra in (("long", ("--eval-completion-len", "5")), ("plain", ())))
    assert all(a.recipe.eval_completion_len is not None and a.recipe.eval_completion_len.max == 5 for a in longer.arms)
    assert all(a.eval_flops > b.eval_flops for a, b in zip(longer.arms, default.arms, strict=True))
