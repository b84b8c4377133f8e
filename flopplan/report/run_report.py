"""``flopplan report``: a training run's FLOPs against its budget and plan, its time against the plan's, and its
curves against FLOPs."""

from __future__ import annotations

from pathlib import Path

from flopplan.fileio import atomic_savefig, lock_holder
from flopplan.passes import BUCKET_OF, BUCKETS
from flopplan.report.tables import Table
from flopplan.runfile import RunSummary, StepRecord, ledger_holds
from flopplan.units import apart, duration, eng, percent

UNIT_BUCKET = {"rollout": "rollout", "eval": "evaluation", "reward": "feedback"}
"""The bucket of a ledger unit's seconds (the scoring and update passes, the other units, are learning)."""


def unfinished(folder: str | Path, summary: RunSummary) -> str:
    """Why the summary of ``folder`` is not a finished run's, "" when it is: a process still holds the folder's
    lock (the run goes on), or the ledger holds steps past the summary's, or the built-in trainer (whose last
    summary always records its stop) wrote it at a checkpoint and no process holds the folder (killed)."""
    steps, executed = ledger_holds(folder)
    holder = lock_holder(folder)
    if holder is None and summary.stopped_for and steps <= summary.steps:
        return ""
    if holder is None and not summary.stopped_for and summary.engine != "builtin" and steps <= summary.steps:
        return ""  # a TRL run ended by its own epochs records no stop decision
    state = f"still running ({holder})" if holder is not None else "killed"
    return (f"not finished: {state}; its ledger holds {steps} committed steps, "
            f"{executed:,} FLOPs; the tables are its last checkpoint's "
            f"(step {summary.steps})" + ("" if holder is not None else "; resume it (flopplan train --resume)"))


def run_tables(summary: RunSummary, not_finished: str = "") -> tuple[list[Table], list[str]]:
    """Spent (executed, useful, measured) vs budget vs plan, per bucket; notes on the run (``not_finished``: why
    the run is not finished, :func:`unfinished`, in place of its stop)."""
    s = summary
    budget = s.budget_flops
    planned = s.plan.flops if s.plan is not None else {}
    measured = s.measured_flops
    columns = ["bucket", "spent (executed)", "useful (no padding)"]
    if measured:
        columns.append("FlopCounterMode")
    if planned:
        columns += ["plan", "spent / plan"]
    columns += ["share of spent"]
    title = f"{s.model} GRPO run: {s.steps} steps"
    if budget:
        title += f", budget {eng(budget)}"
    table = Table(title, columns)
    for bucket in (*BUCKETS, "total"):
        row = [bucket, f"{s.flops[bucket]:,}", f"{s.useful_flops[bucket]:,}"]
        if measured:
            row.append(f"{measured[bucket]:,}")
        if planned:
            p = planned.get(bucket, 0)
            row += [f"{p:,}", f"{s.flops[bucket] / p:.3f}" if p else "-"]
        row.append(percent(s.flops[bucket], s.flops["total"]) if bucket != "total" else "100.0 %")
        table.rows.append(row)
    notes = [not_finished or f"stopped: {s.stop_reason or 'finished'}"]
    if budget:
        extra = [f"{s.abandoned_flops:,} FLOPs of abandoned steps"] if s.abandoned_flops else []
        extra += [f"{s.lost_flops:,} FLOPs lost to a kill"] if s.lost_flops else []
        verdict = "within the budget" if s.within_budget else "OVER THE BUDGET"
        share = apart(100.0 * s.charged / budget, 100.0, lambda v, d: f"{v:.{max(d - 2, 1)}f} %")  # (99.98 % spent
        # of a budget is not "100.0 %")
        when = " by the last checkpoint" if not_finished else ""
        aside, word = "", "spent" if s.lost_charged or not extra else "charged"
        if extra:  # charged (the default), or recorded beside the budget (--lost-outside-budget)
            aside = (f" (including {' and '.join(extra)})" if s.lost_charged else
                     f"; {' and '.join(extra)} recorded, not charged (--lost-outside-budget): {s.spent:,} "
                     "spent in all")
        notes.append(f"{word} {s.charged:,}{when} of {budget:,} FLOPs ({share}): {verdict}{aside}")
    if s.plan is not None:
        notes.append(f"plan: {s.plan.steps} steps for {eng(planned.get('total', 0))}")
        if s.plan.overridden:
            notes.append(f"the run changed the plan's recipe ({', '.join(s.plan.overridden)}): spent / plan "
                         "compares two recipes")
    if measured:
        verdict = "equal" if s.measured_equals_closed_form else "DIFFERENT"
        notes.append(f"FlopCounterMode vs closed form, phase by phase: {verdict}")
    if s.eval_accuracy:
        first, last = s.eval_accuracy[0], s.eval_accuracy[-1]
        notes.append(f"held-out accuracy {first[1]:.3f} (step {first[0]}) -> {last[1]:.3f} (step {last[0]})"
                     + (f"; chance {s.chance:.2f}" if s.chance else ""))
    if s.random_init_reward_model:
        notes.append("the reward model is random-initialised: its scores are meaningless (FLOPs are real)")
    elif s.random_init_reward_model is None and s.reward.startswith(("orm", "prm")):
        notes.append("the reward model's weights are the script's: whether they are trained is not recorded "
                     "(FLOPs are real)")
    if s.interrupted:
        notes.append(interruption(s))
    notes += [f"note: {note}" for note in s.notes]
    time_tables, time_notes = time_table(s)
    return [table, *time_tables], notes + time_notes


def interruption(summary: RunSummary) -> str:
    """The step a Ctrl-C abandoned (before its first update), as a sentence."""
    i = summary.interrupted or {}
    step, flops = i.get("step"), i.get("abandoned_flops")
    if not isinstance(step, int) or not isinstance(flops, int):
        return f"interrupted: {i}"  # (not what flopplan's trainer records)
    charged = "charged to the budget" if summary.lost_charged else "recorded, not charged (--lost-outside-budget)"
    how = "failed" if summary.stopped_for == "failed" else "interrupted"  # (a reward function's error, a Ctrl-C)
    return (f"{how} in step {step} before its first update: the step is abandoned and redone on resume; "
            f"abandoned steps have spent {flops:,} FLOPs, {charged}")


def time_table(summary: RunSummary) -> tuple[list[Table], list[str]]:
    """The run's time beside its plan's, when the plan was priced with a profile: per bucket (the ledger's seconds
    of the phase calls), outside the phases (the rest of the wall time) and the wall time from the processes' start
    to the summary. The plan's process exit (after the summary, dated by no run file) is a note."""
    s, plan = summary, summary.plan
    if s.wall_seconds is None and not s.seconds:
        return [], []
    measured = dict.fromkeys(BUCKETS, 0.0)
    for unit, seconds in s.seconds.items():
        measured[UNIT_BUCKET.get(unit, "learning")] += seconds
    priced = plan.seconds if plan is not None and plan.seconds is not None else None
    planned = dict.fromkeys(BUCKETS, 0.0)
    outside = {}
    for name, seconds in (priced or {}).items():
        if name in BUCKET_OF:
            planned[BUCKET_OF[name]] += seconds
        else:
            outside[name] = seconds
    exit_seconds = outside.pop("shutdown", 0.0)
    phases, planned_phases = sum(measured.values()), sum(planned.values())
    rows: list[tuple[str, float, float | None]] = [(b, measured[b], planned[b]) for b in BUCKETS
                                                   if measured[b] or planned[b]]
    rows.append(("phases", phases, planned_phases))
    wall = s.wall_seconds
    if wall is not None:
        rows.append(("outside the phases", wall - phases, sum(outside.values()) if outside else None))
        rows.append(("wall: start to summary", wall, planned_phases + sum(outside.values()) if outside else None))
    title = "Time: measured" + (f" vs plan on {plan.profile}" if priced is not None and plan else "")
    table = Table(title, ["time", "measured", *(["plan", "measured / plan"] if priced is not None else [])])
    for name, got, want in rows:
        cells = [name, duration(got)]
        if priced is not None:
            cells += ["-", "-"] if want is None else [duration(want), f"{got / want:.2f}" if want else "-"]
        table.rows.append(cells)
    table.align = "l" + "r" * (len(table.columns) - 1)
    notes = []
    if s.core_share is not None:
        assumed = (f"; the profile's times assume {plan.core_share:.2f} (its fit runs' typical share over their "
                   "timed steps, start-up apart)" if plan and plan.core_share else "")
        notes.append(f"the run had {s.core_share:.2f} of its cores over its whole process, start-up included (the "
                     "last process's CPU seconds per thread over its wall seconds; other processes took the rest)"
                     f"{assumed}")
    if s.measured_flops is not None:
        notes.append("timed under the FLOP meter (--measure-flops): its times include the meter's own work; time "
                     "a run without it to compare with a plan, or to calibrate on")
    if priced is not None and plan is not None:
        if plan.steps != s.steps:
            notes.append(f"the plan priced {plan.steps} steps, the run took {s.steps}")
        if not outside:
            notes.append("the plan's profile models no time outside the phases (flopplan calibrate --from-runs "
                         "learns it from runs)")
        if exit_seconds:
            notes.append(f"the plan adds {duration(exit_seconds)} for the process's exit after the summary (dated "
                         f"by no run file): {duration(planned_phases + sum(outside.values()) + exit_seconds)} in all")
    return [table], notes


def plot_run(summary: RunSummary, metrics: list[StepRecord], path: str | Path) -> str | None:
    """Reward and accuracy against FLOPs spent, and the spent FLOPs by bucket (PNG, or the suffix's format)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None

    def numeric(m: StepRecord, *keys: str) -> bool:
        return all(isinstance(m.metrics.get(k), (int, float)) and not isinstance(m.metrics.get(k), bool)
                   for k in keys)

    evals = [m for m in metrics if numeric(m, "eval_accuracy")]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, style, color in (("reward", "--", "tab:blue"), ("accuracy", "-", "tab:green")):
        train = [m for m in metrics if m.step > 0 and numeric(m, key)]  # (a TRL script logs a reward, no accuracy)
        if train:
            ax1.plot([m.flops["total"] for m in train], [m.metrics[key] for m in train], style, label=f"train {key}",
                     color=color, alpha=0.7)
    if evals:
        ax1.plot([m.flops["total"] for m in evals], [m.metrics["eval_accuracy"] for m in evals], "o-",
                 label="held-out accuracy", color="tab:red")
    if summary.chance:
        ax1.axhline(summary.chance, ls="--", color="grey", label="chance")
    ax1.set_xlabel("FLOPs spent")
    ax1.set_ylabel("reward / accuracy")
    if ax1.get_legend_handles_labels()[0]:  # (nothing logged: no legend, which matplotlib warns of on stderr)
        ax1.legend(loc="best", fontsize=8)
    ax1.set_title(f"{summary.model}: learning against compute")
    if metrics:
        x = [m.flops["total"] for m in metrics]
        stacks = [[m.flops[b] for m in metrics] for b in BUCKETS]
        ax2.stackplot(x, *stacks, labels=list(BUCKETS), alpha=0.8)
        ax2.set_xlabel("FLOPs spent")
        ax2.set_ylabel("FLOPs by bucket (cumulative)")
        ax2.legend(loc="upper left", fontsize=8)
        ax2.set_title("where the FLOPs went")
    fig.tight_layout()
    try:
        return str(atomic_savefig(fig, path))
    finally:
        plt.close(fig)
