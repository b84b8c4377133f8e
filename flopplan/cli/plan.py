"""``flopplan plan``, ``compare`` and ``tables``: budgets into plans, same-FLOP comparisons, paper tables."""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Callable
from typing import Any

import click

from flopplan.cli import command_line, echo_json, fail, main
from flopplan.cli.options import (
    CONVENTION_OPTIONS,
    budget_from,
    budget_given,
    budget_options,
    build_recipe,
    check_conventions_apply,
    names_option,
    profile_from,
    recipe_options,
    steps_option,
)
from flopplan.recipe import Recipe

DEFAULT_MODELS = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b")
DEFAULT_REWARDS = ("rule", "orm:qwen2.5-1.5b", "prm:qwen2.5-math-prm-7b", "prm:qwen2.5-1.5b")


def _output(tables: list[Any], fmt: str, notes: list[str], command: str, data: Callable[[], Any],
            plans: list[Any], sections: list[str] | None = None) -> None:
    """Print the tables in ``fmt``, or (json) the data, built only then; ``sections``: each plan's table, a CSV
    column where a plan is in more than one."""
    from flopplan.report.console import render
    from flopplan.report.plan_tables import plans_to_csv
    from flopplan.report.tables import provenance

    if fmt == "json":
        echo_json(data())
        return
    csv_text = plans_to_csv(plans, provenance(command), tables=sections) if fmt == "csv" else ""
    text = render(tables, fmt, notes, command, csv_text)
    if text is not None:
        click.echo(text, nl=False)


@main.command()
@click.option("--model", "models", multiple=True, metavar="NAME",
              help="Policy (repeatable or comma-separated; default Qwen2.5 0.5B to 14B).")
@recipe_options(Recipe())
@budget_options
@click.option("--solve", "free", type=click.Choice(["steps", "group_size", "prompts_per_step", "iterations"]),
              default="steps", show_default=True, help="The free quantity; others need --steps.")
@click.option("--steps", type=int, help="GRPO steps: alone, what they cost; with --solve or --largest-model, the "
                                        "steps to afford.")
@click.option("--target-learning-share", type=float,
              help="Solve --solve iterations|group_size for this learning share (0-1) instead of a budget.")
@click.option("--largest-model", is_flag=True, help="The largest registry model that affords --steps steps.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False),
              help="Write a versioned plan file (JSON); - prints it instead of the tables.")
@click.option("--save-recipe", type=click.Path(dir_okay=False),
              help="Write the effective recipe (TOML, or JSON for a .json name; - prints it).")
@click.option("--from-trl", "from_trl", type=click.Path(dir_okay=False), multiple=True,
              help="Price an existing TRL run: a JSON/YAML file of GRPOConfig fields (TRL's names; "
                   "GRPOConfig(...).to_dict() or a saved training_args.bin too); repeat it for a file of peft, "
                   "reward_funcs, model_name_or_path and reward_overhead_tokens (export trl's flopplan.yaml); "
                   "--device cpu|cuda (or a GPU name) or a --profile's device picks TRL's log-prob head; "
                   "--prompt-len, --completion-len and --reward-overhead state the data.")
@click.option("--from-verl", "from_verl", type=click.Path(dir_okay=False),
              help="Price an existing verl GRPO run: a file of Hydra overrides (key=value lines) or a YAML config.")
@click.option("--world-size", type=int, help="With --from-trl: the processes the run uses (default 1).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan file as JSON (same as --format json).")
def plan(models: tuple[str, ...], recipe_file: str | None, budget: str | None, gpu_hours: float | None,
         dollars: float | None, device: str | None, profile_file: str | None, price_per_gpu_hour: float | None,
         fmt: str, free: str, steps: int | None, target_learning_share: float | None, largest_model: bool,
         out_file: str | None, save_recipe: str | None, from_trl: tuple[str, ...], from_verl: str | None,
         world_size: int | None, as_json: bool, **recipe_opts: Any) -> None:
    """What a budget buys for each model: GRPO steps, rollouts, updates, reward calls, and the split into
    rollout/search, learning and feedback; or what --steps N steps cost.

    With no options: a 1e19 FLOP budget, LoRA r=64, G=8, 64 prompts per step, 256-token prompts, 1024-token
    completions, rule reward, Qwen2.5 0.5B to 14B.
    """
    from flopplan.fileio import STDOUT, writable_targets
    from flopplan.planfile import PlanFile
    from flopplan.planner import require_steps
    from flopplan.report.plan_tables import model_specs, phase_table, plan_notes, same_flop_table, time_table
    from flopplan.solver import plan_request

    fmt = "json" if as_json else fmt
    if out_file == STDOUT and save_recipe == STDOUT:
        fail("--out - and --save-recipe - would both print: give a file name to one of them")
    engine_files = (*from_trl, *([from_verl] if from_verl else []))  # (--save-recipe may rewrite --recipe's file)
    writable_targets(*(f for f in (out_file, save_recipe) if f), reads=engine_files)
    writable_targets(*([out_file] if out_file else []), reads=(*engine_files, *([recipe_file] if recipe_file else [])))
    extra_notes: list[str] = []
    conventions = [name for name in CONVENTION_OPTIONS if recipe_opts.get(name) is not None]  # (consumed below)
    if (from_trl or from_verl) and (free != "steps" or target_learning_share is not None):
        fail(f"--{'solve ' + free if free != 'steps' else 'target-learning-share'} searches the recipe, which the "
             "engine configuration fixes: price it as it is (--steps or a budget), or plan the recipe without it")
    # a profile file is read once (its engine plays no part): an engine configuration's head follows its device
    file_profile = profile_from(device, profile_file, price_per_gpu_hour, "hf") if profile_file else None
    if from_trl or from_verl:
        from flopplan.cli.engines import recipe_of_engine_config

        base, steps, extra_notes, device = recipe_of_engine_config(
            from_trl, from_verl, recipe_file, models, recipe_opts, steps, world_size, device,
            budget_given(budget, gpu_hours, dollars), file_profile)
        models = (base.policy,)
    elif world_size is not None:
        fail("--world-size goes with --from-trl")
    base = base if from_trl or from_verl else build_recipe(recipe_file, recipe_opts)
    if largest_model and models:
        fail("--largest-model searches the registry for the model: it takes no --model")
    # the models asked for; else the recipe file's policy when it names one; else Qwen2.5 0.5B-14B
    names = names_option(models, "--model")
    if not names and recipe_file and isinstance(file_data := Recipe.load_data(recipe_file), dict) \
            and "policy" in file_data:
        names = [base.policy]
    names = names or list(DEFAULT_MODELS)
    the_budget = budget_from(budget, gpu_hours, dollars)
    prof = file_profile or profile_from(device, None, price_per_gpu_hour, base.engine)
    steps_option(steps)
    plans = plan_request(base, names, the_budget, prof, free=free, steps=steps, target_share=target_learning_share,
                         largest=largest_model, budget_given=budget_given(budget, gpu_hours, dollars))
    require_steps(plans)
    check_conventions_apply(conventions, model_specs(plans))
    if save_recipe:
        if any(p.recipe != plans[0].recipe for p in plans[1:]):
            fail(f"--save-recipe writes one recipe, and this request has {len(plans)} (one per model): give one "
                 "--model")
        plans[0].recipe.save(save_recipe)  # the effective recipe, solved values included
    command = command_line()
    plan_file = PlanFile.of(plans, command, extra_notes)  # its JSON is built only to be saved or printed
    if out_file:
        plan_file.save(out_file)
    if STDOUT in (out_file, save_recipe):
        return  # the file went to standard output: no tables around it
    tables = [same_flop_table(plans, with_time=prof is not None), phase_table(plans)]
    if prof is not None:
        tables.append(time_table(plans))
    _output(tables, fmt, extra_notes + plan_notes(plans) + ([f"plan file: {out_file}"] if out_file else []),
            command, plan_file.to_data, plans)


@main.command()
@click.option("--models", "models", multiple=True, metavar="A,B,...", help="Policies (default Qwen2.5 0.5B-14B).")
@click.option("--rewards", "rewards", multiple=True, metavar="R1,R2,...",
              help="Reward systems (default rule, orm:qwen2.5-1.5b, prm:qwen2.5-math-prm-7b, prm:qwen2.5-1.5b).")
@recipe_options(Recipe())
@budget_options
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON (same as --format json).")
def compare(models: tuple[str, ...], rewards: tuple[str, ...], recipe_file: str | None, budget: str | None,
            gpu_hours: float | None, dollars: float | None, device: str | None, profile_file: str | None,
            price_per_gpu_hour: float | None, fmt: str, as_json: bool, **recipe_opts: Any) -> None:
    """Same-FLOP comparisons: every model size under one budget, and every feedback system per model."""
    from flopplan.planfile import PlanEntry
    from flopplan.planner import compare_models, compare_rewards, require_steps
    from flopplan.report.plan_tables import model_specs, phase_table, plan_notes, same_flop_table

    fmt = "json" if as_json else fmt
    conventions = [name for name in CONVENTION_OPTIONS if recipe_opts.get(name) is not None]  # (consumed below)
    base = build_recipe(recipe_file, recipe_opts)
    names = names_option(models, "--models") or list(DEFAULT_MODELS)
    reward_names = names_option(rewards, "--rewards") or list(DEFAULT_REWARDS)
    the_budget = budget_from(budget, gpu_hours, dollars)
    prof = profile_from(device, profile_file, price_per_gpu_hour, base.engine)
    sizes = compare_models(base, names, the_budget, prof)
    feedback = compare_rewards(base, reward_names, the_budget, names, prof)
    require_steps(sizes + feedback)
    check_conventions_apply(conventions, model_specs(sizes + feedback))
    what = "equal FLOPs" if the_budget.flops is not None else "an equal budget"
    tables = [same_flop_table(sizes, f"Model sizes at {what} ({the_budget.describe()}, reward {base.reward})",
                              prof is not None),
              same_flop_table(feedback, f"Feedback systems at {what} ({the_budget.describe()})", prof is not None),
              phase_table(feedback, "Where the FLOPs go, by phase and feedback system")]
    def data() -> dict[str, Any]:
        return {"budget_flops": the_budget.flops, "budget": the_budget.to_data(),
                "model_sizes": [PlanEntry.of(p).to_data() for p in sizes],
                "feedback_systems": [PlanEntry.of(p).to_data() for p in feedback]}

    seen = {(p.model, str(p.recipe.reward)) for p in sizes}  # every plan once (a rule plan is in both tables)
    every = sizes + [p for p in feedback if (p.model, str(p.recipe.reward)) not in seen]
    _output(tables, fmt, plan_notes(every), command_line(), data, sizes + feedback,
            ["model_sizes"] * len(sizes) + ["feedback_systems"] * len(feedback))  # (the JSON's names)


@main.command()
@click.option("--out", "out_dir", default="tables", show_default=True, type=click.Path(file_okay=False),
              help="Folder to write the tables into.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any committed table differs.")
@click.option("--race", "race_dir", type=click.Path(file_okay=False),
              help="Instead: a race's tables (recommendation, arms at F, and RACE against the exhaustive answer "
                   "when benchmarks/race_regret.py left regret.json), from its race.json.")
@click.option("--json", "as_json", is_flag=True, help="Print the files written (or stale) as JSON.")
def tables(out_dir: str, check: bool, race_dir: str | None, as_json: bool) -> None:
    """Regenerate the paper tables (Markdown, LaTeX, CSV) from the closed form, or a race's from its race.json."""
    from flopplan.report.generate import stale_tables, write_tables

    generate = None
    if race_dir is not None:
        from flopplan.race.tables import race_tables

        generate = functools.partial(race_tables, race_dir)
    if check:
        stale = stale_tables(out_dir, generate)
        if as_json:
            echo_json({"folder": out_dir, "stale": stale})
        elif stale:
            again = shlex.join(["flopplan", "tables", *(["--race", race_dir] if race_dir is not None else []),
                                "--out", out_dir])
            click.echo(f"flopplan: stale tables in {out_dir}: {', '.join(stale)} (run `{again}`)", err=True)
        else:
            click.echo(f"all tables in {out_dir} are up to date")
        if stale:
            sys.exit(1)
        return
    written = [str(p) for p in write_tables(out_dir, generate)]
    if as_json:
        echo_json({"folder": out_dir, "written": written})
        return
    for path in written:
        click.echo(f"wrote {path}")
