"""The built-in trainer's progress bar (rich): step, FLOPs spent of the budget, reward, accuracy and the last
evaluation, updated after every committed step."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flopplan.ledger import Ledger


@contextmanager
def progress_bar(trainer: Any) -> Iterator[Callable[[Any, Ledger], None]]:
    """The bar of ``trainer`` (a :class:`flopplan.train.trainer.Trainer`; hidden unless ``trainer.progress``), and
    the observer that updates it with a step's result and the ledger."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from flopplan.units import eng

    budget = trainer.config.budget_flops
    total = budget if budget is not None else float(trainer.config.max_steps or 1)
    progress = Progress(TextColumn("[bold]GRPO[/] step {task.fields[step]}"), BarColumn(),
                        TextColumn("{task.fields[flops]}"), TextColumn("reward {task.fields[reward]}"),
                        TextColumn("acc {task.fields[acc]}"), TextColumn("eval {task.fields[eval]}"),
                        TimeElapsedColumn(), TimeRemainingColumn(), disable=not trainer.progress, transient=False)
    task = progress.add_task("grpo", total=total, step=trainer.step, flops="", reward="-", acc="-", eval="-")

    def update(result: Any, ledger: Ledger) -> None:
        spent = ledger.spent
        flops = f"{eng(spent)} / {eng(budget)}" if budget is not None else eng(spent)
        progress.update(task, completed=spent if budget is not None else trainer.step, step=trainer.step,
                        flops=flops, reward=f"{result.metrics.get('reward', 0):.3f}",
                        acc=f"{result.metrics.get('accuracy', 0):.3f}",
                        eval=f"{trainer.last_eval.get('eval_accuracy', float('nan')):.3f}")

    with progress:
        yield update
