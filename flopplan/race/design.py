"""RACE's design: the arms of a pilot grid, a geometric ladder of pilot budgets with successive halving, and the
versioned manifest (``race.json`` is the analysis; ``manifest.json`` is this).

An arm is one allocation: a policy size, a group size G, update passes mu and a reward system, the prompts per
step fixed, and any other recipe field or FLOP-neutral training knob a race varies (:mod:`flopplan.race.axes`).
At rung r every surviving arm trains to the same budget of training FLOPs ``b_r = b_0 eta^r`` (the
planner solves its steps), each with the same seeds; after a rung at least ``keep_r = ceil(keep_(r-1) / eta)`` arms
go on (:mod:`flopplan.race.promotion`), continuing their pilots, so a pilot at rung r has cost b_r in all, not
the sum of the rungs. The budget leaves room for more: up to ``room_r = min(room_(r-1), floor(room x keep_r))``
arms (``--room``, a number >= 1, default 2), the extra ones only when the evidence cannot rule them out at F; what
the halving does not spend goes to the validating run. At 8x beyond a rung, keeping 2 of 4 arms dropped the true
best at F in 49 % of the repetitions where curves cross, room for all 4 in 16.5 % (benchmarks/race_halving.py).

Evaluations (greedy, on every evaluation target, at step 0, after the first step whose training FLOPs reach
each of ``evals`` log-spaced points below the top rung, plus a point within the first rung of an arm those fall on too
few of the steps of (:mod:`flopplan.race.eval_points`), and after a pilot's last step at every rung) are charged
to each pilot's ledger on top of its training budget: a pilot's FLOP budget is ``b_r`` plus, per evaluation that
can fall within it, the evaluation's exact worst-case cost. ``b_0`` is the largest budget for which the worst case
of the whole grid (every rung's ``room`` most expensive survivors, every seed) stays within ``phi x F``; the ledgers of
the pilots then prove it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flopplan import __version__
from flopplan.budget import BUDGET_LIMITS, Budget
from flopplan.cost import step_cost
from flopplan.errors import UserError, check_int, first_problem, is_int, is_number
from flopplan.fileio import atomic_write_json, is_file, read_json
from flopplan.planfile import PlanEntry
from flopplan.planner import plan
from flopplan.race.axes import CLASSIC, Axis, arm_name, check_knobs, label
from flopplan.race.design_notes import few_positions_note, holdout_note, horizon_note, one_seed_note
from flopplan.race.eval_points import evaluation_points, positions
from flopplan.race.families import CURVE_POSITIONS
from flopplan.race.grid import EVAL_LOOPS, MAX_ETA, MAX_SEED, Grid, room_ladder
from flopplan.race.seed_pooling import ONE_SEED_SD, is_seed_sd
from flopplan.recipe import Recipe, RewardSystem
from flopplan.units import eng

MANIFEST = "manifest.json"
PILOTS = "pilots"  # the folder of a race's pilots (flopplan.race.pilots.pilot_folder)
MANIFEST_VERSION = 5
READABLE = (1, 2, 3, 4, MANIFEST_VERSION)  # 4: eval_loop, eval_generations; 5: an evaluation per rung's end
"""Version 1 (before any axis): no ``axes``, arms without ``knobs`` or ``grpo``: read as that. Versions 1-2
(before the room for extra arms): no ``room``: read as room = keep, the halving's count and no more."""
MIN_STEPS = 3
"""A pilot at the first rung must afford this many steps (each arm), or the design is refused."""
AXES = CLASSIC
EVAL_NEVER = 10**9
"""A pilot's ``eval_every``: beyond any run, so it evaluates at step 0 and at the FLOP points only."""


@dataclass(frozen=True)
class Arm:
    """One allocation of the grid: its axes' values, the recipe they make, the planner's entry per rung (training
    only, at the rung's budget) and one evaluation's worst-case FLOPs; ``knobs``: its FLOP-neutral ``flopplan
    train`` options (name -> :func:`flopplan.race.axes.label`'s value), ``grpo``: GRPOConfig fields for TRL only."""

    name: str
    axes: dict[str, Any]
    recipe: Recipe
    rungs: tuple[PlanEntry, ...]
    eval_flops: int
    upfront_flops: int = 0  # e.g. a learned reward model's training, charged to this arm's feedback
    knobs: dict[str, Any] = field(default_factory=dict)
    grpo: dict[str, Any] = field(default_factory=dict)

    def pilot_budget(self, design: RaceDesign, rung: int) -> int:
        """The FLOP budget of this arm's pilot at ``rung``: training, plus every evaluation that can fall in it (at
        step 0, at the FLOP points, and the one after its last step at each rung so far, the current rung's kept in
        reserve at every step). Manifests before version 5 priced one end-of-rung evaluation whatever the rung, so
        a continued pilot ran a step or two short of its table; they keep that price (their pilots ran at it)."""
        ends = rung + 1 if design.manifest_version >= 5 else 1
        return design.rung_flops[rung] + self.eval_flops * (1 + design.evals_within(rung) + ends)

    def split(self, rung: int = -1) -> dict[str, float]:
        """The arm's rollout / learning / feedback shares of its training FLOPs at ``rung``."""
        return self.rungs[rung].shares()

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "axes": self.axes, "recipe": self.recipe.to_data(),
                "rungs": [entry.to_data() for entry in self.rungs], "eval_flops": self.eval_flops,
                "upfront_flops": self.upfront_flops, "knobs": self.knobs, "grpo": self.grpo}

    @staticmethod
    def from_data(data: Any, where: str) -> Arm:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not isinstance(
                data.get("rungs"), list) or not is_int(data.get("eval_flops")):
            raise UserError(f"{where} is malformed")
        upfront = data.get("upfront_flops") or 0  # null or absent before the upfront charge; checked with the rest
        return Arm(data["name"], dict(data.get("axes") or {}), Recipe.from_data(data.get("recipe"), where),
                   tuple(PlanEntry.from_data(e, f"{where}, rung {i}") for i, e in enumerate(data["rungs"])),
                   int(data["eval_flops"]), upfront, dict(data.get("knobs") or {}),
                   dict(data.get("grpo") or {}))


@dataclass(frozen=True)
class RaceDesign:
    """A pilot grid: the target budget F, the pilot fraction phi, the ladder, the arms, seeds and targets."""

    budget_flops: int
    pilot_fraction: float
    rung_flops: tuple[int, ...]  # training FLOPs per pilot at each rung
    keep: tuple[int, ...]  # arms per rung
    eta: int
    seeds: tuple[int, ...]
    targets: tuple[str, ...]
    fit_targets: tuple[str, ...]
    eval_points: tuple[int, ...]  # training FLOPs after which the pilots evaluate (besides step 0)
    arms: tuple[Arm, ...]
    command: str = ""
    reward_model_path: str | None = None  # relative: to the race folder (the demo's); else absolute
    notes: tuple[str, ...] = ()
    flopplan_version: str = __version__
    axes: tuple[Axis, ...] = ()  # beyond the classic four (every arm records those)
    room: tuple[int, ...] = ()  # the most arms per rung the budget pays for (room_ladder; manifests before v3: keep)
    one_seed_sd: float = ONE_SEED_SD  # the seed sd the analysis assumes for an arm of one seed (--seed-sd)
    eval_loop: str = "flopplan"  # what each evaluation was priced as (EVAL_LOOPS; --eval-loop)
    eval_generations: int = 0  # trl: completions per evaluation prompt (num_generations_eval); flopplan: 0
    manifest_version: int = MANIFEST_VERSION  # what a loaded manifest was written as (pilot_budget reads it)

    def evals_within(self, rung: int) -> int:
        return sum(1 for point in self.eval_points if point <= self.rung_flops[rung])

    def arm(self, name: str) -> Arm:
        for a in self.arms:
            if a.name == name:
                return a
        raise UserError(f"the race has no arm {name!r} (it has {', '.join(a.name for a in self.arms)})")

    @property
    def worst_case_flops(self) -> int:
        """The most all pilots together can spend: at each rung, the ``room`` arms whose pilots grow the most."""
        total = 0
        for rung in range(len(self.keep)):
            growth = sorted((a.pilot_budget(self, rung) - (a.pilot_budget(self, rung - 1) if rung else 0)
                             for a in self.arms), reverse=True)
            total += len(self.seeds) * sum(growth[:self.room[rung]])
        return total

    @property
    def pilot_cap(self) -> int:
        return math.floor(self.pilot_fraction * self.budget_flops)

    def pilots(self) -> list[tuple[str, int]]:
        """Every (arm, seed) pilot the grid may run, in a fixed order."""
        return [(a.name, s) for a in self.arms for s in self.seeds]

    def to_data(self) -> dict[str, Any]:
        return {"race_manifest_version": self.manifest_version, "flopplan_version": self.flopplan_version,
                "command": self.command, "budget_flops": self.budget_flops, "pilot_fraction": self.pilot_fraction,
                "rung_flops": list(self.rung_flops), "keep": list(self.keep),
                "room": list(self.room), "eta": self.eta,
                "seeds": list(self.seeds), "targets": list(self.targets), "fit_targets": list(self.fit_targets),
                "eval_points": list(self.eval_points), "worst_case_flops": self.worst_case_flops,
                "pilot_cap": self.pilot_cap, "reward_model_path": self.reward_model_path,
                "notes": list(self.notes), "axes": [a.to_data() for a in self.axes], "one_seed_sd": self.one_seed_sd,
                "eval_loop": self.eval_loop, "eval_generations": self.eval_generations,
                "arms": [a.to_data() for a in self.arms]}

    def save(self, folder: str | Path) -> Path:
        return atomic_write_json(Path(folder) / MANIFEST, self.to_data())

    @staticmethod
    def from_data(data: Any, where: str) -> RaceDesign:
        if not isinstance(data, dict) or "race_manifest_version" not in data:
            raise UserError(f"{where} is not a RACE manifest (write one with `flopplan race design`)")
        if not is_int(data["race_manifest_version"]) or data["race_manifest_version"] not in READABLE:
            raise UserError(f"{where}: race_manifest_version must be {' or '.join(map(str, READABLE))}, not "
                            f"{data['race_manifest_version']!r}")
        problem = _field_problem(data)
        if problem:
            raise UserError(f"{where} is malformed: {problem} (rerun `flopplan race design`)")
        try:
            lists = {k: data[k] for k in ("rung_flops", "keep", "seeds", "eval_points")}
            lists["room"] = data["room"] if data["race_manifest_version"] >= 3 else data["keep"]
            if not all(isinstance(v, list) and all(is_int(x) for x in v) for v in lists.values()) or not (
                    is_int(data["budget_flops"]) and is_number(data["pilot_fraction"]) and is_int(data["eta"])):
                raise TypeError
            arms = tuple(Arm.from_data(a, f"{where}, arm {i + 1}") for i, a in enumerate(data["arms"]))
            design = RaceDesign(
                int(data["budget_flops"]), float(data["pilot_fraction"]), tuple(lists["rung_flops"]),
                tuple(lists["keep"]), int(data["eta"]), tuple(lists["seeds"]), tuple(map(str, data["targets"])),
                tuple(map(str, data["fit_targets"])), tuple(lists["eval_points"]), arms, str(data.get("command", "")),
                data.get("reward_model_path"), tuple(map(str, data.get("notes") or ())),
                str(data.get("flopplan_version", "")),
                tuple(Axis.from_data(a, f"{where}, axis {i + 1}") for i, a in enumerate(data.get("axes") or ())),
                tuple(lists["room"]), data.get("one_seed_sd", ONE_SEED_SD), data.get("eval_loop", "flopplan"),
                data.get("eval_generations", 0), int(data["race_manifest_version"]))
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{where} is malformed: rerun `flopplan race design`") from None
        if len(design.rung_flops) != len(design.keep) or len(design.room) != len(design.keep) or any(
                len(a.rungs) != len(design.rung_flops) for a in design.arms) or any(
                m < k for m, k in zip(design.room, design.keep, strict=True)):
            raise UserError(f"{where} is malformed: its rungs disagree")
        problem = _manifest_problem(design) or _derived_problem(design, data)
        if problem:
            raise UserError(f"{where} is malformed: {problem} (rerun `flopplan race design`)")
        return design

    @staticmethod
    def load(folder: str | Path) -> RaceDesign:
        path = Path(folder) / MANIFEST
        if not is_file(path, "RACE manifest "):
            raise UserError(f"{str(folder)!r} holds no RACE manifest ({MANIFEST}): run `flopplan race design` first")
        return RaceDesign.from_data(read_json(path, "RACE manifest"), f"RACE manifest {str(path)!r}")


def is_ladder(budgets: Sequence[float]) -> bool:
    """A ladder of pilot budgets: at least one, every one a positive number, strictly ascending (what a design
    writes; the manifest, the analysis's input and race.json are each checked by it)."""
    return (bool(budgets) and all(is_number(b) and b > 0 for b in budgets)
            and all(a < b for a, b in itertools.pairwise(budgets)))


def _field_problem(data: dict[str, Any]) -> str:
    """The first field of a manifest (a hand edit, a damaged copy) that is missing or of the wrong type, named with
    what it must be: '' when none (the values are checked after, :func:`_manifest_problem`)."""
    lists = ["rung_flops", "keep", "seeds", "eval_points"] + (["room"] if data["race_manifest_version"] >= 3 else [])
    for name in ("budget_flops", "pilot_fraction", "eta", *lists, "targets", "fit_targets", "arms"):
        if name not in data:
            return f"it has no {name}"
    for name in ("budget_flops", "eta"):
        if not is_int(data[name]):
            return f"{name} must be a whole number, not {data[name]!r}"
    if not is_number(data["pilot_fraction"]):
        return f"pilot_fraction must be a number, not {data['pilot_fraction']!r}"
    for name in lists:
        value = data[name]
        if not isinstance(value, list) or not all(is_int(x) for x in value):
            bad = next((x for x in value if not is_int(x)), None) if isinstance(value, list) else value
            return f"{name} must be a list of whole numbers, not one holding {bad!r}" if isinstance(
                value, list) else f"{name} must be a list of whole numbers, not {value!r}"
    for name in ("targets", "fit_targets", "arms"):
        if not isinstance(data[name], list):
            return f"{name} must be a list, not {data[name]!r}"
    return ""


def _manifest_problem(d: RaceDesign) -> str:
    """What a manifest's values say that no design writes (a hand edit, a damaged copy), checked before any pilot
    runs: '' when nothing."""
    names = [a.name for a in d.arms]
    checks = (
        (d.budget_flops > 0, "budget_flops must be > 0"),
        (0 < d.pilot_fraction < 1, "pilot_fraction must be between 0 and 1"),
        (2 <= d.eta <= MAX_ETA, f"eta must be an integer from 2 to {MAX_ETA:,}"),
        (is_ladder(d.rung_flops), "rung_flops must be positive and ascending"),
        (all(k >= 1 for k in d.keep) and all(a >= b for a, b in itertools.pairwise(d.keep)),
         "keep must be positive and not increasing"),
        (bool(d.seeds) and all(0 <= x <= MAX_SEED for x in d.seeds) and len(set(d.seeds)) == len(d.seeds),
         f"seeds must be distinct integers from 0 to {MAX_SEED:,}"),
        (bool(d.targets) and len(set(d.targets)) == len(d.targets), "targets must be distinct and not empty"),
        (bool(d.fit_targets) and set(d.fit_targets) <= set(d.targets), "fit_targets must be among the targets"),
        (bool(names) and len(set(names)) == len(names), "arms must be distinct and not empty"),
        (all(n and n not in (".", "..") and not set(n) & set("/\\\0") for n in names),
         "an arm's name names its pilots' folder: not empty, '.', '..', nor holding a path separator"),
        (bool(d.eval_points) and all(x > 0 for x in d.eval_points), "eval_points must be positive and not empty"),
        (is_seed_sd(d.one_seed_sd), "one_seed_sd must be a number above 0 and at most 1"),
        (d.eval_loop in EVAL_LOOPS and is_int(d.eval_generations) and d.eval_generations >= 0 and (
            d.eval_generations >= 1) == (
            d.eval_loop == "trl"), "eval_loop must be flopplan (eval_generations 0) or trl (eval_generations >= 1)"),
        (all(a.eval_flops >= 0 for a in d.arms), "an arm's eval_flops (one evaluation's worst case) must be >= 0"),
        (all(is_int(a.upfront_flops) and 0 <= a.upfront_flops <= BUDGET_LIMITS["flops"] for a in d.arms),
         "an arm's upfront_flops must be a whole number of FLOPs from 0 to 1e30"),
        (d.reward_model_path is None or (isinstance(d.reward_model_path, str) and bool(d.reward_model_path)),
         "reward_model_path must be a path (text) or null"),
        (all(n <= len(d.arms) for n in (*d.keep, *d.room)) and all(a >= b for a, b in itertools.pairwise(d.room)),
         "keep and room must not exceed the arms, and room must not increase"),
    )
    return first_problem(checks)


def _derived_problem(d: RaceDesign, data: dict[str, Any]) -> str:
    """A figure the manifest records for the reader but derives (pilot_cap = floor(pilot_fraction x budget_flops))
    that no longer matches its inputs: an edit of it would be ignored (the race reads the inputs), an edit of the
    inputs leaves it stale; either way the manifest says two things, so it is refused with the value that matches.
    ``worst_case_flops`` is not compared: it sums the arms' pilot budgets, whose accounting (evaluations) a later
    release may refine, and that must not refuse an older race; what it guards is checked on the inputs
    (:func:`pilots_fit_the_cap`)."""
    worst = data.get("worst_case_flops", 0)  # recorded for the reader; not compared (see above), but a number
    if not is_int(worst) or worst < 0:
        return f"worst_case_flops must be a whole number of FLOPs >= 0, not {worst!r}"
    for arm in d.arms:  # the steps each rung was planned for (the pilots run them) at the ladder's budgets
        for rung, (entry, flops) in enumerate(zip(arm.rungs, d.rung_flops, strict=True)):
            if entry.budget.flops != float(flops):
                return (f"rung_flops[{rung}] is {flops:,} but arm {arm.name}'s steps at rung {rung + 1} were planned "
                        f"for {entry.budget.flops:,.0f}: the ladder is the design's, not an input")
    if "pilot_cap" in data and data["pilot_cap"] != d.pilot_cap:
        return (f"pilot_cap {data['pilot_cap']!r} is not pilot_fraction x budget_flops ({d.pilot_cap}): it is derived "
                "from those two, not read; to change the pilots' budget edit them, then set pilot_cap to match or "
                "delete it")
    return ""


def pilots_fit_the_cap(d: RaceDesign, where: str) -> None:
    """Refuse a manifest whose pilots could spend more than phi x F before any pilot runs: the halving keeps the
    later rungs within the cap (``runner._affordable``), but every arm runs the first rung and the halving's count
    the later ones whatever the cap says, so rungs, counts or seeds edited up would overspend the pilot fraction."""
    if d.worst_case_flops > d.pilot_cap:
        raise UserError(f"{where}: its pilots could spend {d.worst_case_flops:,} FLOPs, more than pilot_fraction x "
                        f"budget_flops = {d.pilot_cap:,} (rung_flops, keep, room or seeds edited?): rerun "
                        "`flopplan race design`")


def orm_rewards(rewards: tuple[str, ...] | list[str]) -> list[str]:
    """The reward values of a grid that are outcome reward models as the recipe reads them (``orm:x``, ``ORM:x``):
    the arms a trained reward model's upfront FLOPs are charged to (``Grid.upfront``)."""
    return [r for r in rewards if RewardSystem.parse(r).kind == "orm"]


def training_only(recipe: Recipe) -> Recipe:
    """The recipe the planner prices a rung with: its training, without evaluations (charged on top)."""
    return recipe.with_(eval_every=None, eval_prompts=0, eval_batch=None)


def design_race(base: Recipe, grid: Grid, budget_flops: int, pilot_fraction: float, *,
                evaluation_flops: Any, command: str = "", reward_model_path: str | None = None) -> RaceDesign:
    """The design: every combination of the axes as an arm, b_0 the largest first-rung budget whose worst case
    fits ``pilot_fraction x budget_flops``. ``evaluation_flops(recipe, targets) -> int``: one evaluation's
    worst-case FLOPs (from the trainer's evaluation code)."""
    grid.check()
    check_int("--budget", budget_flops, 1)
    Budget(flops=budget_flops)  # the planner's limits (`flopplan plan` refuses the same budgets)
    if not (is_number(pilot_fraction) and 0 < pilot_fraction < 1):
        raise UserError(f"--pilot-fraction must be between 0 and 1 (exclusive), not {pilot_fraction!r}")
    classic = dict(zip(CLASSIC, (grid.policies, grid.group_sizes, grid.iterations, grid.rewards), strict=True))
    recipes = [_arm_of(base, grid, values, evaluation_flops, budget_flops)
               for values in combinations({**classic, **{a.name: a.values for a in grid.axes}})]
    _refuse_twins(recipes)
    keep = [len(recipes)]
    for _ in range(grid.rungs - 1):
        keep.append(max(1, math.ceil(keep[-1] / grid.eta)))
    room = room_ladder(keep, grid.room)
    cap = math.floor(pilot_fraction * budget_flops)

    def build(b0: int, fill: bool) -> RaceDesign:
        ladder = tuple(b0 * grid.eta ** r for r in range(grid.rungs))
        arms = tuple(replace(arm, rungs=tuple(PlanEntry.of(plan(training_only(arm.recipe), Budget(flops=float(b))))
                                              for b in ladder)) for arm in recipes)
        first = [(a.rungs[0].step_flops, a.rungs[0].steps) for a in arms]
        points = evaluation_points(min(f for f, _ in first), ladder[-1], grid.evals, first if fill else [], ladder[0])
        return RaceDesign(budget_flops, float(pilot_fraction), ladder, tuple(keep), grid.eta,
                          tuple(range(grid.first_seed, grid.first_seed + grid.seeds)), grid.targets,
                          grid.fit_targets or grid.targets[:1],
                          points, arms, command, reward_model_path,
                          axes=grid.axes, room=room, one_seed_sd=float(grid.one_seed_sd), eval_loop=grid.eval_loop,
                          eval_generations=grid.eval_generations)

    span = grid.eta ** (grid.rungs - 1)  # the top rung over the first
    if span > cap:
        raise UserError(f"--rungs {grid.rungs} at --eta {grid.eta} put the top rung at {grid.eta}^{grid.rungs - 1} x "
                        f"the first, beyond the pilots' budget phi x F = {cap:.3g} FLOPs: use fewer rungs or a smaller "
                        "eta, or raise --budget or --pilot-fraction")

    def solve(fill: bool) -> RaceDesign:
        """The largest first rung whose worst case fits phi x F (a top rung above the pilots' whole budget cannot
        fit, nor be planned past 1e30); ``fill``: with the points an arm of too few positions needs."""
        def fits(b0: int) -> bool:
            return b0 * span <= cap and build(b0, fill).worst_case_flops <= cap

        low, high = 1, max(1, cap // max(1, len(recipes) * grid.seeds))
        if not fits(low):
            raise UserError(f"the budget is too small for the smallest rung: phi x F = {cap:.3g} FLOPs cannot pay "
                            "even for the grid's evaluations; raise --budget or --pilot-fraction, or use fewer arms, "
                            "seeds or evaluation points (--evals)")
        while low < high:  # the worst case grows with b0
            mid = (low + high + 1) // 2
            low, high = (mid, high) if fits(mid) else (low, mid - 1)
        return build(low, fill)

    def short(d: RaceDesign) -> list[tuple[str, int]]:
        return [(a.name, a.rungs[0].steps) for a in d.arms if a.rungs[0].steps < MIN_STEPS]

    design = solve(fill=True)
    if short(design) and not short(unfilled := solve(fill=False)):  # the added evaluations cost a step: without
        design = unfilled  # them, and the design says which arms a curve may then miss (few_positions_note)
    if short(design):
        name, steps = min(short(design), key=lambda s: s[1])
        raise UserError(f"the budget is too small for the smallest rung: {design.rung_flops[0]:.3g} training FLOPs "
                        f"buy {steps} step{'s' if steps != 1 else ''} of {name} (each arm needs {MIN_STEPS}); raise "
                        "--budget or --pilot-fraction, or use fewer arms, seeds, rungs or evaluation points (--evals)")
    left = budget_flops - cap - max(grid.upfront.values(), default=0)
    if left < 3 * max(a.eval_flops for a in design.arms):
        raise UserError(f"the budget leaves no validating run: F = {budget_flops:.3g} less the pilots' "
                        f"{cap:.3g} and the reward model's {max(grid.upfront.values(), default=0):.3g} upfront "
                        "FLOPs; raise --budget or lower --pilot-fraction")
    if len(design.arms) == 1:  # after pricing, so that what else is wrong with the design is said first
        raise UserError(f"a race compares arms: the grid has one ({design.arms[0].name}); give an axis two values "
                        "(--models A,B, --group-sizes G1,G2, --axis NAME=V1,V2, ...)")
    top = max(a.pilot_budget(design, len(keep) - 1) for a in design.arms)
    seeds = len(design.seeds)
    fewest = min(positions(design.eval_points, a.rungs[-1].step_flops, [e.steps for e in a.rungs],
                           design.rung_flops[-1]) for a in design.arms)  # a top-rung pilot's, the arm's fewest
    few = [a.name for a in design.arms if positions(design.eval_points, a.rungs[0].step_flops, (a.rungs[0].steps,),
                                                    design.rung_flops[0]) < CURVE_POSITIONS]
    notes = (horizon_note(budget_flops / top, seeds), *([one_seed_note(grid.one_seed_sd)] if seeds == 1 else []),
             *filter(None, [holdout_note(fewest), few_positions_note(few)]))
    return replace(design, notes=notes)


def _model_identity(name: str) -> str:
    """One model however it is spelled: a path as the absolute path it names; a registry name or Hub id without
    case (both are case-insensitive). ``Qwen/Qwen2.5-7B`` and ``Qwen/Qwen2.5-7B-Instruct`` stay two models."""
    path = Path(name)
    return str(path.resolve()) if path.exists() else name.lower()


def _refuse_twins(arms: list[Arm]) -> None:
    """Two arms of one allocation (the same policy, reward system and settings, spelled two ways: ``--rewards
    prm,prm:qwen2.5-math-prm-7b``, ``--models tiny-s,TINY-S``) would run the same pilots twice and split the
    P(best) between them; two arms whose names collide (values that differ only in characters a name turns into
    ``-``) would share their pilots' folders: each refused in one line."""
    seen: dict[tuple[str, ...], str] = {}
    named: dict[str, Arm] = {}
    for arm in arms:
        reward = arm.recipe.reward
        rest = {k: v for k, v in arm.recipe.to_data().items() if k not in ("policy", "reward")}
        key = (_model_identity(arm.recipe.policy), reward.kind, _model_identity(reward.model or ""),
               repr(sorted(rest.items())), repr(sorted(arm.knobs.items())), repr(sorted(arm.grpo.items())))
        if key in seen:  # (--group-sizes 8,08 too: one value written twice)
            raise UserError(f"arms {seen[key]} and {arm.name} are one allocation (the same policy, reward and "
                            "settings, spelled two ways): give each value once")
        seen[key] = arm.name
        if arm.name in named:  # values that differ only in characters a folder name cannot hold
            raise UserError(f"two arms get one name, {arm.name} ({named[arm.name].axes} and {arm.axes}): their "
                            "pilots would share a folder; give values that differ in letters or digits")
        named[arm.name] = arm


def combinations(values: dict[str, tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Every combination of the axes' values (axis -> its values), one dict per arm, in the grid's order."""
    return [dict(zip(values, combo, strict=True)) for combo in itertools.product(*values.values())]


def recipe_fields(values: dict[str, Any], axes: Sequence[Axis]) -> dict[str, Any]:
    """The recipe fields among one arm's axis values (a knob or a GRPOConfig-only axis of ``axes`` is none; a
    classic axis is one), its reward parsed."""
    kinds = {a.name: a.kind for a in axes}
    fields = {k: v for k, v in values.items() if kinds.get(k, "recipe") == "recipe"}
    if "reward" in fields:
        fields["reward"] = RewardSystem.parse(str(fields["reward"]))
    return fields


def _arm_of(base: Recipe, grid: Grid, values: dict[str, Any], evaluation_flops: Any, budget_flops: int) -> Arm:
    """The arm of one combination of the axes' values (its rungs still to plan): the recipe fields set on the base
    recipe with the race's evaluation, the knobs checked as ``flopplan train`` would; refused (one line naming the
    arm) when its recipe is, or one step costs more than the budget (the step's closed form is checked before the
    evaluation's worst case, which lists every rollout of a round: a billion of them filled the memory)."""
    kinds = {a.name: a.kind for a in grid.axes}
    changes = recipe_fields(values, grid.axes)
    axes = {k: label(v) for k, v in values.items()}
    try:
        recipe = base.with_(**changes, eval_every=EVAL_NEVER, eval_prompts=grid.eval_prompts,
                            eval_at_start=True).with_local_paths_absolute()  # its pilots run from anywhere
        if grid.round_micro_batch and base.micro_batch is None and "micro_batch" not in changes:
            recipe = recipe.with_(micro_batch=math.gcd(recipe.generation_batch_size, recipe.optimizer_batch_size))
        step = step_cost(training_only(recipe)).step_flops  # the policy's spec read here (a LoRA rank, its targets)
    except UserError as exc:
        raise UserError(f"arm {arm_name(axes, grid.axes)}: {exc}") from None
    if step > budget_flops:
        raise UserError(f"the budget is too small for arm {arm_name(axes, grid.axes)}: one step costs {eng(step)}, "
                        f"more than the whole budget ({eng(budget_flops)})")
    knobs = {k: axes[k] for k in values if kinds.get(k) == "knob"}
    if knobs:
        check_knobs(recipe, knobs, builtin=False)  # race run checks the built-in trainer's when its pilots run there
    if grid.eval_loop == "trl":  # a script pilot's: TRL's loop on its one eval_dataset
        from flopplan.engines.trl_evaluation import designed_evaluation_flops

        evaluation = designed_evaluation_flops(recipe, grid.eval_generations)
    else:
        evaluation = int(evaluation_flops(recipe, grid.targets))
    return Arm(arm_name(axes, grid.axes), axes, recipe, (), evaluation,
               grid.upfront.get(str(axes["reward"]), 0), knobs, {k: axes[k] for k in values if kinds.get(k) == "grpo"})

