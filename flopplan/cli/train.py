"""``flopplan train`` and ``report``: the metered validating run of a plan, and what it spent and learned."""

from __future__ import annotations

import functools
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from flopplan.cli import echo_json, fail, main
from flopplan.cli.options import (
    CONVENTION_OPTIONS,
    check_conventions_apply,
    dataclass_options,
    dataclass_values,
    recipe_changes,
    recipe_options,
)
from flopplan.errors import UserError
from flopplan.train.config import TrainConfig, demo_recipe

RESUME_OPTIONS = {"out_dir", "resume", "max_steps", "budget_flops", "train_flops", "no_progress", "as_json"}
"""What ``--resume`` accepts besides the run folder: a longer run, a larger budget or training cap, no progress bar,
JSON."""


@main.command()
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), help="A plan file (flopplan plan --out).")
@click.option("--plan-model", help="Which model's plan to run when the plan file holds several.")
@click.option("--model", "model_name", help="Policy: tiny (default), or a registry name with --random-init.")
@dataclass_options(TrainConfig)
@recipe_options(demo_recipe(), exclude=("engine", "window"),  # the trainer's kernels compute a masked window
                hidden=("prompt_len", "eval_prompt_len"),  # refused: a run's prompts are its task's or dataset's
                default_texts={"micro_batch": "64, the demo's 16 x 16 round; G once --prompts-per-step or "
                                              "--group-size is given"})
@click.option("--resume", is_flag=True,
              help="Continue the run in --out from its last checkpoint (--steps/--budget may extend it).")
@click.option("--no-eval", is_flag=True, help="No held-out evaluation.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON.")
def train(plan_file: str | None, plan_model: str | None, model_name: str | None, recipe_file: str | None,
          resume: bool, no_eval: bool, no_progress: bool, as_json: bool, **opts: Any) -> None:
    """Run GRPO with a FLOP ledger that never exceeds the budget (the validating run of a plan).

    The run's options are TrainConfig's fields (flopplan.train.config), the recipe's are Recipe's."""
    from flopplan.train.config import replace_config, train_config
    from flopplan.train.runfolder import RunFolder

    ctx = click.get_current_context()
    if resume:
        given = sorted(name for name in ctx.params
                       if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
                       and name not in RESUME_OPTIONS)
        if given:
            option = next(p.opts[0] for p in ctx.command.params if p.name == given[0])
            fail(f"--resume continues the run as it was configured; it takes only --out, --steps, --budget, "
                 f"--train-flops, --no-progress and --json, not {option}")
    knobs = dataclass_values(TrainConfig, opts)  # the run's options first: the recipe's include another --engine
    if knobs["dataset"] is not None:  # a dataset's prompts replace the built-in task (TrainConfig.task is None)
        for name, option in (("task", "--task"), ("train_size", "--train-size")):
            if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
                fail(f"{option} and --dataset contradict each other: {option} is the built-in task's, and a run "
                     "on a dataset has none")
    changes, tuning_given = recipe_changes(opts)
    if no_eval and {"eval_every", "eval_prompts"} & set(changes):
        fail("--no-eval contradicts --eval-every/--eval-prompts")
    out_dir = knobs["out_dir"]
    limits: dict[str, Any] = {}  # a finished run can be continued further
    folder = RunFolder(out_dir)
    if resume:
        limits = {name: knobs[name] for name in ("max_steps", "budget_flops", "train_flops")
                  if knobs[name] is not None}
        # (out_dir: the folder given now, wherever the run was made)
        config = replace_config(_read_config(folder), out_dir=out_dir, **limits)
    else:
        from flopplan.grpo.data import check_datasets
        from flopplan.grpo.reward_funcs import RewardFuncs

        # the rows and the reward functions that read them, before torch is imported and the run folder made
        if knobs["dataset"] is not None:  # (an eval dataset alone is refused by train_config)
            check_datasets([knobs["dataset"], knobs["eval_dataset"]], RewardFuncs.load(knobs["reward_funcs"],
                                                                                       knobs["reward_weights"]))
        engine_recipe = None
        if knobs["engine"] == "trl":
            from flopplan.engines.trl import recipe_for_trl_run

            engine_recipe = functools.partial(recipe_for_trl_run, device=knobs["device"])
        config = train_config(plan_file=plan_file, plan_model=plan_model, recipe_file=recipe_file, changes=changes,
                              tuning_given=tuning_given, no_eval=no_eval, model=model_name,
                              engine_recipe=engine_recipe, **knobs)
        # --experts where no model of the run has mixture-of-experts layers changes no count: refused, as plan does
        # (the specs read only then: the policy's also checks the LoRA rank, which a load error would come before)
        if conventions := [name for name in CONVENTION_OPTIONS if name in changes]:
            check_conventions_apply(conventions, [s for s in (config.recipe.policy_spec, config.recipe.reward_spec)
                                                  if s is not None])
    record = functools.partial(_record_limits, folder, limits)
    if config.engine == "trl":
        _train_on_trl(config, resume, as_json, record)
        return
    try:
        from flopplan.measure import quiet_transformers
        from flopplan.train.trainer import Trainer
    except ImportError as exc:
        fail(f"flopplan train needs the torch extra (pip install 'flopplan[torch]'): {exc}")
    quiet_transformers()
    trainer = Trainer(config, resume=resume, progress=not no_progress and not as_json and sys.stdout.isatty())
    record()  # the checkpoint accepted the extension
    from flopplan.report.console import console

    con = console()
    if not as_json:
        for note in trainer.notes:
            con.print(f"note: {note}")
        if trainer.random_policy and config.model_path is None:
            con.print(f"policy {trainer.spec.name}: random-initialised ({trainer.spec.params:,} parameters)")
        if trainer.reward_model is not None and trainer.reward_model.random_init:
            con.print(f"reward model {trainer.reward_model.spec.name}: random-initialised, its scores are "
                      "meaningless (the FLOPs and the plumbing are real)")
        for note in learned_reward_notes(config):
            con.print(note)
    summary = trainer.run()
    if as_json:
        echo_json(summary.to_data())
    else:
        from flopplan.report.console import print_tables
        from flopplan.report.run_report import run_tables

        tables, notes = run_tables(summary)
        print_tables(tables, notes)
        con.print(f"run folder: {out_dir} (flopplan report {out_dir})")
    _exit_if_interrupted(summary, out_dir)


def _record_limits(folder: Any, limits: dict[str, Any]) -> None:
    """A resumed run's new --steps/--budget/--train-flops, recorded with the run once its checkpoint accepted them
    (a later --resume, and whoever reads the folder, sees them)."""
    if limits:
        folder.record_limits(limits)


def _exit_if_interrupted(summary: Any, out_dir: str) -> None:
    """After a run Ctrl-C stopped (a checkpoint was written): say how to go on, and exit as interrupted programs
    do."""
    if summary.stopped_for == "interrupted":
        click.echo(f"flopplan: interrupted; continue with: flopplan train --out {shlex.quote(out_dir)} --resume",
                   err=True)
        sys.exit(130)


def learned_reward_notes(config: Any) -> list[str]:
    """What the card of a reward model from ``flopplan reward-model train`` says about it (its held-out agreement
    in the read of the run's engine: with EOS in the built-in trainer, without under TRL), and whether it was
    trained on another task than the run's or, for TRL, on rows with EOS only (a version-1 card)."""
    from flopplan.runfile import REWARD_MODEL_CARD, load_reward_model_card

    path = config.reward_model_path
    if path is None or not (Path(path) / REWARD_MODEL_CARD).exists():
        return []
    card = load_reward_model_card(path)
    trl = config.engine == "trl"
    read = card.agreement_without_eos if trl else card.agreement
    agreement = "unmeasured without EOS" if read is None else f"{read['accuracy']:.3f}"
    notes = [f"reward model {card.architecture}: learned (seed {card.seed}), held-out agreement with the rule "
             f"{agreement}{' (read as TRL reads it)' if trl else ''}; its {card.upfront_flops:,} upfront FLOPs "
             "(training and check) are not in this run's ledger"]
    if read is None:
        notes.append("note: the reward model was trained on rows ending in EOS only (an older flopplan); TRL reads "
                     "prompt + completion without it, where such a model scores near chance (held-out accuracy "
                     "0.742, AUC 0.609 against 0.915 with EOS): train it again with flopplan reward-model train")
    if config.dataset is None:
        from flopplan.grpo.tasks import parse_task

        task = parse_task(config.builtin_task)
        if card.task != f"digits:{task.rule}:{task.length}":
            notes.append(f"note: the reward model was trained on {card.task}, this run's task is "
                         f"digits:{task.rule}:{task.length}")
    else:
        notes.append(f"note: the reward model was trained on {card.task}, this run reads a dataset")
    return notes


def _read_config(folder: Any) -> Any:
    """The run's configuration for a resume (:meth:`RunFolder.read_config`), with a note naming the relative paths
    read from the folder the run started in (:func:`flopplan.train.paths.anchored`)."""
    config = folder.read_config(resume=True)
    if folder.read_from_start:
        click.echo(f"note: read from {config.work_dir}, where the run started (not found here): "
                   f"{', '.join(folder.read_from_start)}", err=True)
    return config


def _train_on_trl(config: Any, resume: bool, as_json: bool, record: Any) -> None:
    try:
        from flopplan.engines.trl_run import run_trl
        from flopplan.measure import quiet_transformers
    except ImportError as exc:
        fail(f"flopplan train --engine trl needs the trl extra (pip install 'flopplan[torch,trl]'): {exc}")
    quiet_transformers()
    rank0 = int(os.environ.get("RANK", "0")) == 0
    if rank0 and not as_json:  # what the built-in trainer says of a learned reward model, before training
        from flopplan.report.console import console

        for note in learned_reward_notes(config):
            console().print(note)
    summary, notes = run_trl(config, resume, record)
    if not rank0:
        return  # under torchrun / accelerate every process ran the loop; the main one reports
    if as_json:
        echo_json(summary.to_data())
    else:
        from flopplan.report.console import console, print_tables
        from flopplan.report.run_report import run_tables

        tables, run_notes = run_tables(summary)  # (the summary's notes among them: the meter's others follow)
        print_tables(tables, [*run_notes, *(n for n in notes if not any(r.endswith(n) for r in run_notes))])
        console().print(f"run folder: {config.out_dir} (flopplan report {config.out_dir})")
    _exit_if_interrupted(summary, config.out_dir)


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="Where to draw the curves (default RUN_DIR/report.png; with --json, only when given).")
@click.option("--no-plot", is_flag=True, help="Do not draw.")
def report(run_dir: str, as_json: bool, plot_file: str | None, no_plot: bool) -> None:
    """Summarise a training run: FLOPs by bucket vs budget vs plan, and reward/accuracy against FLOPs spent."""
    from flopplan.report.console import print_tables
    from flopplan.report.run_report import plot_run, run_tables, unfinished
    from flopplan.runfile import load_run

    if no_plot and plot_file:
        fail("--no-plot and --plot contradict each other")
    summary, metrics = load_run(run_dir)
    path, skipped = None, None
    if plot_file:  # asked for: a plot that cannot be written is an error
        path = plot_run(summary, metrics, plot_file)
    elif not no_plot and not as_json:  # the default plot beside the run, when the folder takes it
        try:
            path = plot_run(summary, metrics, f"{run_dir}/report.png")
        except UserError as exc:
            skipped = f"no plot: {exc}"
    state = unfinished(run_dir, summary)
    if as_json:
        echo_json({**summary.to_data(), "plot": path, "unfinished": state or None})
        return
    tables, notes = run_tables(summary, state)
    print_tables(tables, notes + ([f"plot: {path}"] if path else []) + ([skipped] if skipped else []))
