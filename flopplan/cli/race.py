"""``flopplan race``: the pilot-grid protocol (design -> run -> analyze -> validate, and the demo that does all
four on this machine)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from flopplan.cli import command_line, echo_json, fail, main
from flopplan.cli.options import build_recipe, names_option, parse_number, recipe_options
from flopplan.errors import UserError, check_int
from flopplan.fileio import exists, is_file
from flopplan.recipe import Recipe

RACE_BASE = ("tiny, full fine-tuning, 16 prompts x G, prompt 10, completion 2, no gradient checkpointing, one "
             "micro-batch per round, 100 prompts per evaluation target")
"""The recipe a race starts from unless a recipe or options say otherwise (:func:`race_base`): the built-in task's
shapes (its prompts are 10 tokens of the tiny family's character tokenizer, its answers a digit and the end
token)."""


MICRO_BATCH_DEFAULT = ("each arm's largest that divides its generation and optimizer batches; without those, a "
                       "step's rollouts in one")
"""What a design's arms get for --micro-batch unless it or the recipe file sets one (Grid.round_micro_batch)."""


def race_base() -> Recipe:
    from flopplan.lengths import Length

    return Recipe(policy="tiny", lora_rank=None, prompts_per_step=16, prompt_len=Length.fixed(10),
                  completion_len=Length.fixed(2), grad_ckpt=False)


def _values(values: tuple[str, ...], what: str) -> tuple[str, ...]:
    """A shorthand axis option's values (repeatable, comma-separated), each given once: a value named twice is
    refused as ``--axis`` refuses it, since the grid would silently hold one arm where two were asked for."""
    names = [m.strip() for value in values for m in value.split(",") if m.strip()]
    twice = [name for i, name in enumerate(names) if name in names[:i]]
    if twice:
        raise UserError(f"{what} names a value twice ({twice[0]})")
    return tuple(names_option(values, what))  # (refusing an option given without a name)


def _ints(values: tuple[str, ...], what: str) -> tuple[int, ...]:
    out = []
    for name in _values(values, what):
        if not name.isdigit() or int(name) < 1:
            raise UserError(f"{what} takes positive integers, not {name!r}")
        out.append(int(name))
    return tuple(out)


@main.group(invoke_without_command=True)
@click.pass_context
def race(ctx: click.Context) -> None:
    """RACE: a cheap pilot grid that says which allocation to run at a budget, how sure it is, and checks itself
    (with no subcommand: the demo)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(demo)


@race.command()
@click.option("--budget", required=True, help="The target budget F in FLOPs (what the validating run may spend).")
@click.option("--pilot-fraction", default=0.25, show_default=True, type=float,
              help="The share of F all pilots together may spend (their ledgers prove it).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="The race folder.")
@click.option("--axis", "axes", multiple=True, metavar="NAME=V1,V2",
              help="An axis of the grid, repeatable: a recipe field (priced: policy, group_size, iterations, beta, "
                   "completion_len, lora_rank, reward, ...), a FLOP-neutral training option (lr, temperature, "
                   "loss_clip_low, reward_funcs, reward_weights, ...) or the GRPOConfig field of either "
                   "(num_generations, learning_rate, max_completion_length, loss_type, ...). With an axis, what no "
                   "axis varies is the base recipe's.")
@click.option("--models", multiple=True, metavar="A,B,...",
              help="Policy sizes: --axis policy=A,B (default without --axis: tiny-s,tiny,tiny-l).")
@click.option("--group-sizes", multiple=True, metavar="G1,G2",
              help="Group sizes: --axis group_size=G1,G2 (default without --axis: 8,16).")
@click.option("--mus", "mus", multiple=True, metavar="M1,M2", help="Update passes: --axis iterations=M1,M2 "
              "(default without --axis: 1).")
@click.option("--rewards", multiple=True, metavar="R1,R2", help="Reward systems: --axis reward=R1,R2 (default "
              "without --axis: rule).")
@click.option("--reward-model-path", type=click.Path(file_okay=False),
              help="The trained reward model an orm arm uses (flopplan reward-model train).")
@click.option("--seeds", default=3, show_default=True, type=int, help="Seeds per pilot.")
@click.option("--seed-sd", "seed_sd", default=0.05, show_default=True, type=float,
              help="For an arm with one seed, where no other arm shows how far seeds differ: the sd of a seed's gain "
                   "over R0 the analysis assumes, relative to the gain (0.05: ScaleRL's seed spread).")
@click.option("--eval-prompts", "eval_prompts_per_target", default=100, show_default=True, type=int,
              help="Prompts per evaluation target (a fixed set, the same for every arm and seed).")
@click.option("--eval-targets", default=None, help="Evaluation targets [default: heldout,long; with --eval-loop "
              "trl: heldout].")
@click.option("--eval-loop", type=click.Choice(["flopplan", "trl"]), default="flopplan", show_default=True,
              help="How the pilots evaluate, and so what each evaluation is priced at: flopplan's greedy pass over "
                   "each target (built-in pilots) or TRL's evaluation loop on the script's one eval_dataset (race "
                   "run --pilot: sampled completions, scored, and the loss forward).")
@click.option("--eval-generations", type=int, default=None,
              help="With --eval-loop trl: completions per evaluation prompt (num_generations_eval; spec.apply sets "
                   "it) [default: 1].")
@click.option("--fit-targets", default="heldout", show_default=True,
              help="The targets the decisions use; the others are held out (reported, never fitted).")
@click.option("--rungs", default=3, show_default=True, type=int, help="Rungs of the pilot-budget ladder.")
@click.option("--eta", default=2, show_default=True, type=int, help="Budget ratio between rungs and halving factor.")
@click.option("--room", default=2.0, show_default=True, type=float,
              help="The pilot budget pays for up to ROOM x the halving's count at each rung (rounded down): the extra "
                   "arms go on only when the evidence cannot rule them out at F (1: the halving's count only).")
@click.option("--evals", default=8, show_default=True, type=int,
              help="Log-spaced evaluation points along the pilots (besides step 0 and each rung's end); the design "
                   "adds one within the first rung of an arm whose steps they fall on too few of (3 positions fit a "
                   "curve).")
@recipe_options(race_base(), exclude=("engine", "group_size", "iterations", "reward", "eval_every", "eval_prompts",
                                      "eval_batch", "eval_at_start", "experts", "window"),
                default_texts={"micro_batch": MICRO_BATCH_DEFAULT})
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
def design(budget: str, pilot_fraction: float, out_dir: str, axes: tuple[str, ...], models: tuple[str, ...],
           group_sizes: tuple[str, ...], mus: tuple[str, ...], rewards: tuple[str, ...],
           reward_model_path: str | None, seeds: int, seed_sd: float,
           eval_prompts_per_target: int, eval_targets: str | None, eval_loop: str, eval_generations: int | None,
           fit_targets: str, rungs: int, eta: int, room: float,
           evals: int, recipe_file: str | None, as_json: bool, **recipe_opts: Any) -> None:
    """Write the race's manifest: every arm of the grid, the ladder of pilot budgets and what each rung buys."""
    from flopplan.race.design import MANIFEST, PILOTS, design_race

    if not out_dir.strip():
        fail("--out must name the race folder")
    folder = Path(out_dir)  # checked first: nothing is priced for a folder that cannot take the race
    if exists(folder / MANIFEST, "--out "):
        fail(f"{out_dir!r} already holds a race: give another --out, or `flopplan race run {out_dir}`")
    if exists(folder / PILOTS, "--out "):  # a race whose manifest is gone: its pilots would pass for this design's
        fail(f"{out_dir!r} holds the pilots of an earlier race (pilots/) but no manifest: give another --out")
    total = parse_number(budget, "--budget")
    if not isinstance(total, int) or total < 1:
        fail("--budget must be a whole number of FLOPs")
    given, extra = _given_axes(axes, models, group_sizes, mus, rewards)
    start = Recipe.load(recipe_file) if recipe_file else race_base()  # read once
    if recipe_file and not axes:
        _refuse_a_replaced_recipe_value(recipe_file, start, given)
    values = _grid_values(given, bool(axes))
    base = build_recipe(None, recipe_opts, start, evaluates=True,  # the pilots evaluate at FLOP points
                        arms=_arm_fields(values, extra))
    shorthands = _shorthands(base, values, extra)
    targets = eval_targets if eval_targets is not None else "heldout" if eval_loop == "trl" else "heldout,long"
    generations = eval_generations if eval_generations is not None else 1 if eval_loop == "trl" else 0
    grid = replace(_grid(shorthands, seeds, targets, fit_targets, rungs, eta, evals, reward_model_path,
                         eval_prompts_per_target, room), one_seed_sd=seed_sd, eval_loop=eval_loop,
                   eval_generations=generations)  # Grid.check refuses what does not go together
    model = None if reward_model_path is None else str(Path(reward_model_path).resolve())  # pilots run anywhere
    result = design_race(base, grid, total, pilot_fraction, evaluation_flops=_evaluation_flops, command=command_line(),
                         reward_model_path=model)
    result.save(folder)
    if as_json:
        echo_json(result.to_data())
        return
    from flopplan.race.tables import design_table
    from flopplan.report.console import print_tables

    table, notes = design_table(result)
    print_tables([table], notes)
    click.echo(f"manifest: {folder / MANIFEST}; next: flopplan race run {out_dir}")


def _evaluation_flops(recipe: Recipe, targets: tuple[str, ...]) -> int:
    from flopplan.train.targets import evaluation_flops

    return sum(evaluation_flops(recipe, targets).values())


def _given_axes(axes: tuple[str, ...], models: tuple[str, ...], group_sizes: tuple[str, ...],
                mus: tuple[str, ...], rewards: tuple[str, ...]) -> tuple[dict[str, tuple[Any, ...]], tuple[Any, ...]]:
    """The classic axes' values given (policy, group_size, iterations, reward: from their shorthand options or
    ``--axis``; empty where neither gives one) and the other axes."""
    from flopplan.race.axes import CLASSIC, parse_axis

    given = {"policy": _values(models, SHORTHAND["policy"]),
             "group_size": _ints(group_sizes, SHORTHAND["group_size"]),
             "iterations": _ints(mus, SHORTHAND["iterations"]),
             "reward": _values(rewards, SHORTHAND["reward"])}
    extra = []
    given_by: dict[str, str] = {name: SHORTHAND[name] for name, values in given.items() if values}
    for text in axes:
        axis = parse_axis(text)
        if axis.name in given_by:  # --axis group_size=4,8 --axis num_generations=4, or --group-sizes 4 beside it
            where = given_by[axis.name]
            both = f"{where} twice" if where == f"--axis {axis.given}" else f"{where} and --axis {axis.given}"
            raise UserError(f"the axis {axis.name} is given twice ({both}): give its values once")
        given_by[axis.name] = f"--axis {axis.given}"
        if axis.name not in CLASSIC:
            extra.append(axis)
            continue
        given[axis.name] = tuple(str(v) if axis.name in ("policy", "reward") else v for v in axis.values)
    return given, tuple(extra)


DEFAULT_GRID = {"policy": ("tiny-s", "tiny", "tiny-l"), "group_size": (8, 16), "iterations": (1,), "reward": ("rule",)}
"""The classic axes' values of ``race design`` without an axis."""
SHORTHAND = {"policy": "--models", "group_size": "--group-sizes", "iterations": "--mus", "reward": "--rewards"}
"""The option that gives each classic axis's values."""


def _refuse_a_replaced_recipe_value(recipe_file: str, recipe: Recipe, given: dict[str, tuple[Any, ...]]) -> None:
    """Without any axis, the default grid replaces a recipe file's policy, group size, passes and reward: refused
    where the file's value (``recipe``) is not among the default grid's (a recipe of qwen2.5-7b would race the tiny
    models)."""
    for name, default in DEFAULT_GRID.items():
        value = str(getattr(recipe, name))
        if not given[name] and value not in map(str, default):
            raise UserError(f"{recipe_file} sets {name} {value}, which the default grid would replace with "
                            f"{','.join(map(str, default))}: give the values to race ({SHORTHAND[name]} {value}, "
                            f"or more)")


def _grid_values(given: dict[str, tuple[Any, ...]], with_axes: bool) -> dict[str, tuple[Any, ...]]:
    """The classic axes' values the grid takes, where they are known before the base recipe is: those given, or
    without any axis the default grid's; empty where the base recipe's own value is taken."""
    return {k: v or (() if with_axes else DEFAULT_GRID[k]) for k, v in given.items()}


def _arm_fields(values: dict[str, tuple[Any, ...]], extra: tuple[Any, ...]) -> list[dict[str, Any]]:
    """Per arm (every combination), the recipe fields the grid's axes set (:func:`flopplan.race.design.
    recipe_fields`): the classic axes with values and the recipe-field axes."""
    from flopplan.race.design import combinations, recipe_fields

    axes = {**{k: v for k, v in values.items() if v}, **{a.name: a.values for a in extra if a.kind == "recipe"}}
    return [recipe_fields(arm, extra) for arm in combinations(axes)]


def _shorthands(base: Recipe, values: dict[str, tuple[Any, ...]], extra: tuple[Any, ...]) -> dict[str, Any]:
    """The classic axes' values (:func:`_grid_values`; the base recipe's where none is given) and ``extra``: the
    other axes."""
    from flopplan.race.axes import CLASSIC

    fallback = {"policy": base.policy, "group_size": base.group_size, "iterations": base.iterations,
                "reward": str(base.reward)}
    out: dict[str, Any] = {k: values[k] or (fallback[k],) for k in CLASSIC}
    out["extra"] = extra
    return out


def _grid(shorthands: dict[str, Any], seeds: int, eval_targets: str, fit_targets: str, rungs: int, eta: int,
          evals: int, reward_model_path: str | None, eval_prompts: int, room: float) -> Any:
    from flopplan.race.design import Grid, orm_rewards

    reward_names = shorthands["reward"]
    upfront = {}
    orms = orm_rewards(reward_names)
    if reward_model_path and not orms:
        fail("--reward-model-path is for an orm arm's trained reward model, and no arm is orm: drop it or add one "
             "(--rewards orm:MODEL)")
    if orms:
        if not reward_model_path:
            fail("an orm arm needs its trained reward model: --reward-model-path DIR (flopplan reward-model train)")
        from flopplan.runfile import load_reward_model_card

        card = load_reward_model_card(reward_model_path)
        upfront = dict.fromkeys(orms, card.upfront_flops)
    return Grid(shorthands["policy"], shorthands["group_size"], shorthands["iterations"], reward_names,
                seeds=seeds, targets=tuple(names_option((eval_targets,), "--eval-targets")),
                fit_targets=tuple(names_option((fit_targets,), "--fit-targets")), rungs=rungs, eta=eta,
                room=room, evals=evals, eval_prompts=eval_prompts, upfront=upfront, axes=shorthands["extra"])


def _shard(text: str) -> tuple[int, int]:
    index, sep, count = text.partition("/")
    if not sep or not index.isdigit() or not count.isdigit():
        raise UserError(f"--shard must be I/N (this process's index and the number of shards), not {text!r}")
    return int(index), int(count)


@race.command()
@click.argument("race_dir", type=click.Path(file_okay=False))
@click.option("--backend", type=click.Choice(("local", "ray")), default="local", show_default=True,
              help="Who runs the pilots: local processes, or Ray tasks over a cluster (the ray extra).")
@click.option("--jobs", type=int, help="local: pilots in parallel processes (default 1).")
@click.option("--shard", default="0/1", show_default=True,
              help="I/N: run the pilots of shard I of N (one task of a Slurm array each).")
@click.option("--address", help="ray: the cluster's head, HOST:PORT, ray://HOST:PORT or auto (default: a local "
              "cluster for this command, or RAY_ADDRESS).")
@click.option("--pilot-cpus", type=float, help="ray: CPUs each pilot reserves, its torch threads (default 1).")
@click.option("--pilot-gpus", type=float, help="ray: GPUs each pilot reserves (default 0).")
@click.option("--pilot", "pilot", metavar="COMMAND",
              help="Each pilot runs this command (your TRL script: it reads $FLOPPLAN_PILOT with "
                   "flopplan.race.pilot()) instead of the built-in trainer; recorded with the race.")
@click.option("--json", "as_json", is_flag=True, help="Print what ran as JSON.")
def run(race_dir: str, backend: str, jobs: int | None, shard: str, address: str | None, pilot_cpus: float | None,
        pilot_gpus: float | None, pilot: str | None, as_json: bool) -> None:
    """Run (or continue, after a kill) every rung's pilots, on the built-in trainer or as your script (--pilot),
    in local processes or as Ray tasks; each pilot is an ordinary run folder."""
    from flopplan.race.design import RaceDesign
    from flopplan.race.pilots import take_ctrl_c
    from flopplan.race.runner import run_race

    executor = None
    if backend == "ray":
        if jobs is not None:
            fail("--jobs is the local pool's: Ray runs as many pilots as the cluster has --pilot-cpus/--pilot-gpus for")
        from flopplan.race.ray_backend import RayOptions, ray_executor

        RaceDesign.load(race_dir)  # a folder without a race is refused before Ray starts
        executor = ray_executor(RayOptions(address, 1.0 if pilot_cpus is None else pilot_cpus, pilot_gpus or 0.0))
    elif address is not None or pilot_cpus is not None or pilot_gpus is not None:
        fail("--address, --pilot-cpus and --pilot-gpus are the ray backend's (--backend ray)")
    say = (lambda text: None) if as_json else (lambda text: click.echo(text, err=True))
    take_ctrl_c()
    try:
        result = run_race(race_dir, jobs=1 if jobs is None else jobs, shard=_shard(shard), executor=executor,
                          pilot=pilot, log=say)
    except KeyboardInterrupt:
        how = "Ray ends the running pilots: each resumes from its last checkpoint, what ran after it recorded as " \
            "lost" if backend == "ray" else "a pilot of the local pool stops after its round, with a checkpoint"
        click.echo(f"flopplan: interrupted: `flopplan race run {race_dir}` continues the race ({how})", err=True)
        raise SystemExit(130) from None
    if as_json:
        echo_json(result)
    elif result["complete"]:
        click.echo(f"all rungs done; next: flopplan race analyze {race_dir}")


@race.command()
@click.argument("race_dir", type=click.Path(file_okay=False))
@click.option("--replicates", default=500, show_default=True, type=int, help="Bootstrap replicates (10 to 100,000).")
@click.option("--no-plots", is_flag=True, help="Write race.json and report.md only.")
@click.option("--json", "as_json", is_flag=True, help="Print race.json.")
def analyze(race_dir: str, replicates: int, no_plots: bool, as_json: bool) -> None:
    """Curves, intervals, P(best), regimes, the recommendation and the temporal holdout: race.json, report.md."""
    from flopplan.race.analysis import MIN_REPLICATES
    from flopplan.race.analysis import analyze as analyze_race
    from flopplan.race.bootstrap import MAX_REPLICATES
    from flopplan.race.collect import race_input
    from flopplan.race.design import RaceDesign
    from flopplan.race.report import write_outputs

    # named as the option, before the folder
    check_int("--replicates", replicates, minimum=MIN_REPLICATES, maximum=MAX_REPLICATES)
    design_ = RaceDesign.load(race_dir)
    result = analyze_race(race_input(design_, race_dir, command_line()), n_replicates=replicates)
    written = write_outputs(result, race_dir, plots=not no_plots)
    if as_json:
        echo_json(result.to_data())
        return
    _print_recommendations(result)
    click.echo("wrote " + ", ".join(str(p) for p in written))


def _print_recommendations(result: Any) -> None:
    from flopplan.race.tables import recommendation_table
    from flopplan.report.console import print_tables

    table, notes = recommendation_table(result)
    print_tables([table], notes)


@race.command()
@click.argument("race_dir", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print validation.json.")
def validate(race_dir: str, as_json: bool) -> None:
    """Continue the recommended arm's pilot with the budget the pilots left and set predicted beside observed."""
    from flopplan.race.pilots import take_ctrl_c
    from flopplan.race.results import load_analysis
    from flopplan.race.validate import run_validation

    path = Path(race_dir) / "race.json"
    if not is_file(path, "race.json "):
        fail(f"{race_dir!r} has no race.json: run `flopplan race analyze {race_dir}` first")
    take_ctrl_c()
    try:
        out = run_validation(race_dir, load_analysis(path), command=command_line())
    except KeyboardInterrupt:
        click.echo(f"flopplan: interrupted: `flopplan race validate {race_dir}` continues the validating run (from "
                   "its last checkpoint)", err=True)
        raise SystemExit(130) from None
    if as_json:
        echo_json(out)
        return
    from flopplan.race.validate import render

    click.echo(render(out))


@race.command()
@click.option("--out", "out_dir", default="race-demo", show_default=True, type=click.Path(file_okay=False))
@click.option("--quick", is_flag=True, help="A smaller grid (the tests' one, 2-3 minutes on 2 cores).")
@click.option("--jobs", default=2, show_default=True, type=int, help="Pilots in parallel processes.")
def demo(out_dir: str, quick: bool, jobs: int) -> None:
    """design -> run -> analyze -> validate on the built-in task, end to end, on the local CPU (run it again after
    a kill: it continues)."""
    from flopplan.race.demo import run_demo
    from flopplan.race.pilots import take_ctrl_c
    from flopplan.race.validate import render

    take_ctrl_c()
    result = run_demo(out_dir, quick=quick, jobs=jobs, base=race_base(), command=command_line(),
                      echo=lambda text: click.echo(text, err=True))
    _print_recommendations(result["analysis"])
    click.echo(render(result["validation"]).split("\n", 2)[2])
    click.echo("took " + ", ".join(f"{name} {s / 60:.1f} min" for name, s in result["seconds"].items())
               + f"; report: {Path(out_dir) / 'report.md'}")
