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
from flopplan.cli.options import flop_budget, parse_number, recipe_changes, recipe_options, steps_option
from flopplan.train.config import demo_recipe

RESUME_OPTIONS = {"out_dir", "resume", "max_steps", "budget", "no_progress", "as_json"}
"""What ``--resume`` accepts besides the run folder: a longer run, a larger budget, no progress bar, JSON."""


@main.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Run folder: new or empty (with --resume: the run to continue).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), help="A plan file (flopplan plan --out).")
@click.option("--plan-model", help="Which model's plan to run when the plan file holds several.")
@click.option("--budget", help="FLOP budget (default: the plan's).")
@click.option("--steps", "max_steps", type=int, help="Stop after N steps (also without a budget).")
@click.option("--model", "model_name", help="Policy: tiny (default), or a registry name with --random-init.")
@click.option("--model-path", type=click.Path(file_okay=False), help="A local model folder (weights + tokenizer).")
@click.option("--random-init", is_flag=True, help="Registry architecture without weights (FLOP/time-faithful).")
@click.option("--task", default="digits", show_default=True, help="Built-in task: digits[:first|last|max|sum[:N]].")
@click.option("--dataset", type=click.Path(dir_okay=False), help="JSONL {prompt, answer} (GSM8K '#### x' ok).")
@click.option("--eval-dataset", type=click.Path(dir_okay=False), help="JSONL held-out set.")
@click.option("--train-size", default=20000, show_default=True, type=int, help="Built-in task problems.")
@recipe_options(demo_recipe(), exclude=("engine",))
@click.option("--engine", "trainer_engine", default="builtin", show_default=True, type=click.Choice(["builtin", "trl"]),
              help="Who runs the GRPO loop: flopplan's trainer, or TRL's GRPOTrainer with flopplan's FLOP meter.")
@click.option("--lr", type=float,
              help="AdamW learning rate (default 3e-3 tiny/tiny-s, 1e-3 tiny-l, 1e-5 LoRA, 1e-6 full).")
@click.option("--lora-alpha", type=int, help="LoRA alpha (default 2 x rank).")
@click.option("--temperature", default=1.0, show_default=True, type=float, help="Sampling temperature.")
@click.option("--clip-eps", default=0.2, show_default=True, type=float, help="Lower clip of the ratio (TRL epsilon).")
@click.option("--clip-eps-high", type=float, help="Upper clip (default = --clip-eps; DAPO uses 0.28).")
@click.option("--scale-rewards", default="group", show_default=True, type=click.Choice(["group", "none"]),
              help="Divide advantages by the group std (GRPO) or not (Dr. GRPO).")
@click.option("--loss-aggregation", default="token", show_default=True, type=click.Choice(["token", "sequence"]),
              help="Average token losses over the optimizer batch (token: DAPO, TRL) or per sequence first.")
@click.option("--max-grad-norm", default=1.0, show_default=True, type=float, help="Gradient clipping norm.")
@click.option("--weight-decay", default=0.0, show_default=True, type=float, help="AdamW weight decay.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the data order, sampling and init.")
@click.option("--checkpoint-every", default=10, show_default=True, type=int, help="Steps between checkpoints.")
@click.option("--keep-checkpoints", default=3, show_default=True, type=int,
              help="How many of the newest checkpoints to keep (older ones are deleted).")
@click.option("--resume", is_flag=True,
              help="Continue the run in --out from its last checkpoint (--steps/--budget may extend it).")
@click.option("--measure-flops", is_flag=True, help="Also count every phase with torch FlopCounterMode.")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where the run executes (auto: a GPU when there is one).")
@click.option("--format-reward", default=0.0, show_default=True, type=float, help="Reward for a well-formed answer.")
@click.option("--reward-model-path", type=click.Path(file_okay=False), help="A local reward model folder.")
@click.option("--prm-aggregate", default="min", show_default=True, type=click.Choice(["min", "prod", "last"]),
              help="How a PRM's step scores become one reward.")
@click.option("--reward-output", default="auto", show_default=True,
              type=click.Choice(["auto", "score", "probability", "verdict"]),
              help="An ORM's reward: its score, its probability (sigmoid), or its verdict (1 if P >= 1/2, else 0); "
                   "auto: the probability for a binary classifier (flopplan reward-model train), else the score.")
@click.option("--eval-at-end", is_flag=True,
              help="Also evaluate after the last step: every step keeps an evaluation's worst case in reserve, and "
                   "the step after which the next would not fit (or the last of --steps) evaluates.")
@click.option("--lost-outside-budget", is_flag=True,
              help="Work a kill loses is recorded but not charged against the budget, so a resumed run does the "
                   "steps of an uninterrupted one (RACE's pilots).")
@click.option("--no-eval", is_flag=True, help="No held-out evaluation.")
@click.option("--eval-targets", default="heldout", show_default=True,
              help="Evaluation targets, comma-separated: heldout (the task's held-out strings), long (the same rule "
                   "on strings twice as long); fixed prompt sets, one line per target and evaluation in "
                   "evaluations.jsonl.")
@click.option("--eval-at-flops", help="Also evaluate after the first step whose training FLOPs (evaluations "
                                      "excluded) reach each of F1,F2,... (e.g. 1e9,3e9,1e10).")
@click.option("--fixed-completion-len", "fixed_completion", is_flag=True,
              help="Every completion runs to --completion-len tokens (EOS held back): fixed shapes, as exactness "
                   "checks use.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the run summary as JSON.")
def train(out_dir: str, plan_file: str | None, plan_model: str | None, budget: str | None, max_steps: int | None,
          model_name: str | None, model_path: str | None, random_init: bool, task: str, dataset: str | None,
          eval_dataset: str | None, train_size: int, recipe_file: str | None, lr: float | None,
          lora_alpha: int | None, temperature: float, clip_eps: float, clip_eps_high: float | None,
          scale_rewards: str, loss_aggregation: str, max_grad_norm: float, weight_decay: float, seed: int,
          checkpoint_every: int, keep_checkpoints: int, resume: bool, measure_flops: bool, device: str,
          format_reward: float,
          reward_model_path: str | None, prm_aggregate: str, no_eval: bool, no_progress: bool, as_json: bool,
          trainer_engine: str, fixed_completion: bool, eval_targets: str, eval_at_flops: str | None,
          eval_at_end: bool, lost_outside_budget: bool, reward_output: str,
          **recipe_opts: Any) -> None:
    """Run GRPO with a FLOP ledger that never exceeds the budget (the validating run of a plan)."""
    from flopplan.train.config import replace_config, train_config
    from flopplan.train.runfolder import RunFolder
    from flopplan.train.targets import parse_targets

    changes, tuning_given = recipe_changes(recipe_opts)
    if no_eval and {"eval_every", "eval_prompts"} & set(changes):
        fail("--no-eval contradicts --eval-every/--eval-prompts")
    extend: dict[str, Any] = {}
    folder = RunFolder(out_dir)
    if resume:
        ctx = click.get_current_context()
        given = sorted(name for name in ctx.params
                       if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
                       and name not in RESUME_OPTIONS)
        if given:
            option = next(p.opts[0] for p in ctx.command.params if p.name == given[0])
            fail(f"--resume continues the run as it was configured; it takes only --out, --steps, --budget, "
                 f"--no-progress and --json, not {option}")
        config = folder.read_config()
        extend["out_dir"] = out_dir  # the folder given now, wherever the run was made
        if max_steps is not None:  # a finished run can be continued for more steps or with a larger budget
            extend["max_steps"] = steps_option(max_steps)
        if budget is not None:
            extend["budget_flops"] = flop_budget(budget)
        config = replace_config(config, **extend)
    else:
        steps_option(max_steps)
        engine_recipe = None
        if trainer_engine == "trl":
            from flopplan.engines.trl import recipe_for_trl_run

            engine_recipe = functools.partial(recipe_for_trl_run, device=device)
        config = train_config(
            out_dir, plan_file=plan_file, plan_model=plan_model, recipe_file=recipe_file, changes=changes,
            tuning_given=tuning_given, no_eval=no_eval, model=model_name, budget_flops=flop_budget(budget),
            engine_recipe=engine_recipe, max_steps=max_steps, task=task, dataset=dataset, eval_dataset=eval_dataset,
            train_size=train_size,
            model_path=model_path, random_init=random_init, lr=lr, lora_alpha=lora_alpha, temperature=temperature,
            clip_low=clip_eps, clip_high=clip_eps if clip_eps_high is None else clip_eps_high,
            scale_rewards=scale_rewards, loss_aggregation=loss_aggregation, max_grad_norm=max_grad_norm,
            weight_decay=weight_decay, seed=seed, checkpoint_every=checkpoint_every,
            keep_checkpoints=keep_checkpoints, measure_flops=measure_flops,
            device=device, format_reward=format_reward, reward_model_path=reward_model_path,
            prm_aggregate=prm_aggregate, reward_output=reward_output, engine=trainer_engine,
            fixed_completion=fixed_completion,
            eval_targets=parse_targets(eval_targets), eval_at_flops=flop_thresholds(eval_at_flops),
            eval_at_end=eval_at_end, charge_lost=not lost_outside_budget)
    if config.engine == "trl":
        _train_on_trl(config, resume, as_json)
        return
    try:
        from flopplan.measure import quiet_transformers
        from flopplan.train.trainer import Trainer
    except ImportError as exc:
        fail(f"flopplan train needs the torch extra (pip install 'flopplan[torch]'): {exc}")
    quiet_transformers()
    trainer = Trainer(config, resume=resume, progress=not no_progress and not as_json and sys.stdout.isatty())
    if set(extend) - {"out_dir"}:  # the checkpoint accepted the extension: record it with the run
        stored = folder.read_config()
        folder.write_config(replace_config(stored, **{k: v for k, v in extend.items() if k != "out_dir"}))
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
    interrupted = summary.stop_reason.startswith("interrupted")
    if as_json:
        echo_json(summary.to_data())
    else:
        from flopplan.report.console import print_tables
        from flopplan.report.run_report import run_tables

        tables, notes = run_tables(summary)
        print_tables(tables, notes)
        con.print(f"run folder: {out_dir} (flopplan report {out_dir})")
    if interrupted:  # Ctrl-C: a checkpoint was written; say how to go on, and exit as interrupted programs do
        click.echo(f"flopplan: interrupted; continue with: flopplan train --out {shlex.quote(out_dir)} --resume",
                   err=True)
        sys.exit(130)


def learned_reward_notes(config: Any) -> list[str]:
    """What the card of a reward model from ``flopplan reward-model train`` says about it, and whether it was
    trained on another task than the run's."""
    from flopplan.runfile import REWARD_MODEL_CARD, load_reward_model_card

    path = config.reward_model_path
    if path is None or not (Path(path) / REWARD_MODEL_CARD).exists():
        return []
    card = load_reward_model_card(path)
    notes = [f"reward model {card.architecture}: learned (seed {card.seed}), held-out agreement with the rule "
             f"{card.agreement['accuracy']:.3f}; its {card.upfront_flops:,} upfront FLOPs (training and check) are "
             "not in this run's ledger"]
    if config.dataset is None:
        from flopplan.grpo.tasks import parse_task

        task = parse_task(config.task)
        if card.task != f"digits:{task.rule}:{task.length}":
            notes.append(f"note: the reward model was trained on {card.task}, this run's task is "
                         f"digits:{task.rule}:{task.length}")
    else:
        notes.append(f"note: the reward model was trained on {card.task}, this run reads a dataset")
    return notes


def flop_thresholds(text: str | None) -> tuple[int, ...]:
    """``--eval-at-flops 1e9,3e9``: whole FLOP counts, increasing, each once (given in any order)."""
    if not text:
        return ()
    values = set()
    for part in text.split(","):
        value = parse_number(part.strip(), "--eval-at-flops")
        if not isinstance(value, int):
            fail(f"--eval-at-flops takes whole FLOP counts, not {part.strip()!r}")
        values.add(value)
    return tuple(sorted(values))


def _train_on_trl(config: Any, resume: bool, as_json: bool) -> None:
    try:
        from flopplan.engines.trl_run import run_trl
        from flopplan.measure import quiet_transformers
    except ImportError as exc:
        fail(f"flopplan train --engine trl needs the trl extra (pip install 'flopplan[torch,trl]'): {exc}")
    quiet_transformers()
    summary, notes = run_trl(config, resume)
    if int(os.environ.get("RANK", "0")) != 0:
        return  # under torchrun / accelerate every process ran the loop; the main one reports
    if as_json:
        echo_json(summary.to_data())
        return
    from flopplan.report.console import console, print_tables
    from flopplan.report.run_report import run_tables

    tables, run_notes = run_tables(summary)
    print_tables(tables, [*run_notes, *notes])
    console().print(f"run folder: {config.out_dir} (flopplan report {config.out_dir})")


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="Where to draw the curves (default RUN_DIR/report.png; with --json, only when given).")
@click.option("--no-plot", is_flag=True, help="Do not draw.")
def report(run_dir: str, as_json: bool, plot_file: str | None, no_plot: bool) -> None:
    """Summarise a training run: FLOPs by bucket vs budget vs plan, and reward/accuracy against FLOPs spent."""
    from flopplan.errors import UserError
    from flopplan.report.console import print_tables
    from flopplan.report.run_report import plot_run, run_tables
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
    if as_json:
        echo_json({**summary.to_data(), "plot": path})
        return
    tables, notes = run_tables(summary)
    print_tables(tables, notes + ([f"plot: {path}"] if path else []) + ([skipped] if skipped else []))
