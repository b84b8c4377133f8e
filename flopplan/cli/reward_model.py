"""``flopplan reward-model train``: a learned outcome reward model for the built-in task, for the feedback arm of
RACE (``flopplan train --reward orm:tiny-rm --reward-model-path DIR``)."""

from __future__ import annotations

import sys
from typing import Any

import click

from flopplan.cli import command_line, echo_json, fail, main


@main.group("reward-model")
def reward_model() -> None:
    """Learned reward models: a small sequence classifier trained on rule-labelled completions."""


@reward_model.command("train")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for the model (transformers files, tokenizer, reward_model.json): new or empty.")
@click.option("--task", default="digits", show_default=True, help="Built-in task: digits[:RULE[:LENGTH]].")
@click.option("--rule", type=click.Choice(["first", "last", "max", "sum"]), help="The task's rule (default: the "
                                                                                  "task's, first).")
@click.option("--length", type=int, help="Digits per prompt (default: the task's, 4).")
@click.option("--samples", default=2000, show_default=True, type=int, help="Training samples.")
@click.option("--held-out", default=1000, show_default=True, type=int,
              help="Held-out samples (prompts no training sample has) for the agreement with the rule.")
@click.option("--steps", default=1000, show_default=True, type=int, help="Optimizer steps, at most.")
@click.option("--target-agreement", default="0.9", show_default=True,
              help="Stop at the first check (every 10 steps, on validation samples of their own prompts) whose "
                   "agreement with the rule reaches this with and without EOS; 'none': train every step.")
@click.option("--validation", default=300, show_default=True, type=int, help="Validation samples for the stop.")
@click.option("--batch", default=128, show_default=True, type=int, help="Samples per step.")
@click.option("--lr", default=1e-3, show_default=True, type=float, help="AdamW learning rate.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the samples, the init and the order.")
@click.option("--architecture", default="tiny-rm", show_default=True,
              help="A one-label sequence-classification registry architecture.")
@click.option("--measure-flops", is_flag=True, help="Also count every batch with torch FlopCounterMode.")
@click.option("--json", "as_json", is_flag=True, help="Print reward_model.json.")
def train(out_dir: str, task: str, rule: str | None, length: int | None, samples: int, held_out: int, steps: int,
          target_agreement: str, validation: int, batch: int, lr: float, seed: int, architecture: str,
          measure_flops: bool, as_json: bool) -> None:
    """Train a reward model on rule-labelled (prompt, completion) samples of the built-in task (the answer, wrong
    digits, two digits, random tokens), each read with EOS (as the built-in trainer reads it) and without (as TRL
    does); deterministic for a seed, it reports its training FLOPs (exact) and its held-out agreement with the rule
    in both reads."""
    from flopplan.grpo.tasks import DigitTask, parse_task

    target: float | None = None
    if target_agreement.strip().lower() != "none":
        try:
            target = float(target_agreement)
        except ValueError:
            fail(f"--target-agreement must be a number in (0, 1] or 'none', not {target_agreement!r}")
    base = parse_task(task)
    digits = DigitTask(rule or base.rule, base.length if length is None else length)
    try:
        from flopplan.grpo.reward_model import RewardModelTraining, train_reward_model
        from flopplan.measure import quiet_transformers
    except ImportError as exc:
        fail(f"flopplan reward-model train needs the torch extra (pip install 'flopplan[torch]'): {exc}")
    quiet_transformers()
    cfg = RewardModelTraining(digits, samples=samples, held_out=held_out, steps=steps, batch=batch, lr=lr,
                              seed=seed, architecture=architecture, measure=measure_flops,
                              target_agreement=target, validation=validation)
    _ = cfg.spec  # an unusable architecture fails before any work
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from flopplan.report.console import console

    bar = Progress(TextColumn("reward model step {task.completed:.0f}"), BarColumn(),
                   TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn(), console=console(),
                   disable=as_json or not sys.stdout.isatty(), transient=True)
    with bar:
        task_id = bar.add_task("train", total=steps, loss="-")
        card = train_reward_model(cfg, out_dir, command_line(),
                                  lambda step, loss: bar.update(task_id, completed=step, loss=f"{loss:.3f}"))
    if as_json:
        echo_json(card.to_data())
        return
    from flopplan.report.console import print_tables
    from flopplan.report.tables import Table

    reads = [card.agreement, card.agreement_without_eos or {}]  # a card this command writes has both

    def each(value: Any) -> list[str]:  # one column per read: the built-in trainer's, TRL's
        return [value(read) for read in reads]

    rows = [["held-out accuracy (P >= 0.5 vs the rule)", *each(lambda a: f"{a['accuracy']:.3f}")],
            ["held-out AUC", *each(lambda a: "-" if a["auc"] is None else f"{a['auc']:.3f}")]]
    rows += [[f"  accuracy on {kind} completions ({v['samples']})",
              *each(lambda a, kind=kind: f"{a['by_kind'][kind]['accuracy']:.3f}")]
             for kind, v in card.agreement["by_kind"].items()]
    title = f"{card.architecture} reward model for {card.task} ({card.params:,} parameters)"
    costs = [["training FLOPs (forward + backward, exact)", f"{card.training_flops:,}"],
             ["agreement-check FLOPs (forwards, both reads)", f"{card.evaluation_flops:,}"]]
    if card.measured_training_flops is not None:
        same = card.measured_training_flops == card.training_flops and \
            card.measured_evaluation_flops == card.evaluation_flops
        costs.append(["FlopCounterMode", f"{card.measured_training_flops:,} ({'equal' if same else 'DIFFERENT'})"])
    tables = [Table(title, ["", "rows with EOS (built-in trainer)", "without EOS (TRL)"], rows),
              Table("its cost", ["", "value"], costs)]
    checked = " and ".join(f"{read.get('validation_accuracy') or 0:.3f}" for read in reads)
    stop = "" if card.target_agreement is None else (
        f" (stopped: validation agreement with and without EOS {checked} >= {card.target_agreement})"
        if card.steps < (card.max_steps or 0) else f" (the target {card.target_agreement} was not reached)")
    print_tables(tables, [f"{card.samples:,} samples, {card.steps} steps of {card.batch}{stop}, seed {card.seed}",
                          f"use: flopplan train --reward orm:{card.architecture} --reward-model-path {out_dir}"])
