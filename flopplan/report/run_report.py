"""``flopplan report``: a training run's FLOPs against its budget and plan, and its curves against FLOPs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flopplan.cost import BUCKETS, is_bucket_flops
from flopplan.errors import UserError
from flopplan.fileio import read_json, read_step_log
from flopplan.report.tables import Table
from flopplan.report.units import eng, percent


def load_run(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = Path(run_dir)
    if not (folder / "summary.json").exists():
        raise UserError(f"{str(folder)!r} is not a flopplan run folder (no summary.json)")
    summary = read_json(folder / "summary.json", "run summary")
    _check_summary(summary, folder / "summary.json")
    metrics = [m for m in read_step_log(folder / "metrics.jsonl") if is_bucket_flops(m.get("flops"))]
    return summary, metrics


def _check_summary(summary: Any, where: Path) -> None:
    """A summary must carry what the report reads; anything else is one clear line, not a traceback."""
    problems = []
    if not isinstance(summary, dict):
        problems.append("not an object")
    else:
        for key in ("flops", "useful_flops"):
            if not is_bucket_flops(summary.get(key)):
                problems.append(f"{key} is not FLOPs by bucket")
        if summary.get("measured_flops") is not None and not is_bucket_flops(summary["measured_flops"]):
            problems.append("measured_flops is not FLOPs by bucket")
        budget = summary.get("budget_flops")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            problems.append("budget_flops is not an integer")
        evals = summary.get("eval_accuracy") or []
        if not isinstance(evals, list) or not all(
                isinstance(e, list) and len(e) == 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                             for v in e) for e in evals):
            problems.append("eval_accuracy is malformed")
        plan = summary.get("plan")
        if plan is not None and (not isinstance(plan, dict) or not is_bucket_flops(plan.get("flops") or {})):
            problems.append("plan is malformed")
    if problems:
        raise UserError(f"{str(where)!r} is not a flopplan run summary: {problems[0]}")


def run_tables(summary: dict[str, Any]) -> tuple[list[Table], list[str]]:
    """Spent (executed, useful, measured) vs budget vs plan, per bucket; notes on the run."""
    budget = summary.get("budget_flops")
    plan = summary.get("plan") or {}
    planned = plan.get("flops") or {}
    measured = summary.get("measured_flops")
    columns = ["bucket", "spent (executed)", "useful (no padding)"]
    if measured:
        columns.append("FlopCounterMode")
    if planned:
        columns += ["plan", "spent / plan"]
    columns += ["share of spent"]
    title = f"{summary.get('model')} GRPO run: {summary.get('steps')} steps"
    if budget:
        title += f", budget {eng(budget)}"
    table = Table(title, columns)
    flops, useful = summary["flops"], summary["useful_flops"]
    for bucket in (*BUCKETS, "total"):
        row = [bucket, f"{flops[bucket]:,}", f"{useful[bucket]:,}"]
        if measured:
            row.append(f"{measured[bucket]:,}")
        if planned:
            p = planned.get(bucket, 0)
            row += [f"{p:,}", f"{flops[bucket] / p:.3f}" if p else "-"]
        row.append(percent(flops[bucket], flops["total"]) if bucket != "total" else "100.0 %")
        table.rows.append(row)
    notes = [f"stopped: {summary.get('stop_reason') or 'finished'}"]
    if budget:
        abandoned = summary.get("abandoned_flops") or 0
        spent = flops["total"] + abandoned
        verdict = "within the budget" if spent <= budget else "OVER THE BUDGET"
        notes.append(f"spent {spent:,} of {budget:,} FLOPs ({percent(spent, budget)}): {verdict}"
                     + (f" (including {abandoned:,} FLOPs of abandoned steps)" if abandoned else ""))
    if planned:
        notes.append(f"plan: {plan.get('steps')} steps for {eng(planned.get('total', 0))}")
        overridden = plan.get("overridden")
        if overridden and isinstance(overridden, list):
            notes.append(f"the run changed the plan's recipe ({', '.join(map(str, overridden))}): spent / plan "
                         "compares two recipes")
    if measured:
        verdict = "equal" if summary.get("measured_equals_closed_form") else "DIFFERENT"
        notes.append(f"FlopCounterMode vs closed form, phase by phase: {verdict}")
    evals = summary.get("eval_accuracy") or []
    if evals:
        first, last = evals[0], evals[-1]
        chance = summary.get("chance")
        notes.append(f"held-out accuracy {first[1]:.3f} (step {first[0]}) -> {last[1]:.3f} (step {last[0]})"
                     + (f"; chance {chance:.2f}" if chance else ""))
    if summary.get("random_init_reward_model"):
        notes.append("the reward model is random-initialised: its scores are meaningless (FLOPs are real)")
    if summary.get("interrupted"):
        notes.append(f"interrupted: {summary['interrupted']}")
    return [table], notes


def plot_run(summary: dict[str, Any], metrics: list[dict[str, Any]], path: str | Path) -> str | None:
    """Reward and accuracy against FLOPs spent, and the spent FLOPs by bucket (PNG)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    def numeric(m: dict[str, Any], *keys: str) -> bool:
        return all(isinstance(m.get(k), (int, float)) and not isinstance(m.get(k), bool) for k in keys)

    train = [m for m in metrics if m["step"] > 0 and numeric(m, "reward", "accuracy")]
    evals = [m for m in metrics if numeric(m, "eval_accuracy")]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        x = [m["flops"]["total"] for m in train]
        ax1.plot(x, [m["reward"] for m in train], "--", label="train reward", color="tab:blue", alpha=0.7)
        ax1.plot(x, [m["accuracy"] for m in train], label="train accuracy", color="tab:green", alpha=0.7)
    if evals:
        ax1.plot([m["flops"]["total"] for m in evals], [m["eval_accuracy"] for m in evals], "o-",
                 label="held-out accuracy", color="tab:red")
    if summary.get("chance"):
        ax1.axhline(summary["chance"], ls="--", color="grey", label="chance")
    ax1.set_xlabel("FLOPs spent")
    ax1.set_ylabel("reward / accuracy")
    ax1.legend(loc="best", fontsize=8)
    ax1.set_title(f"{summary.get('model')}: learning against compute")
    if metrics:
        x = [m["flops"]["total"] for m in metrics]
        stacks = [[m["flops"][b] for m in metrics] for b in BUCKETS]
        ax2.stackplot(x, *stacks, labels=list(BUCKETS), alpha=0.8)
        ax2.set_xlabel("FLOPs spent")
        ax2.set_ylabel("FLOPs by bucket (cumulative)")
        ax2.legend(loc="upper left", fontsize=8)
        ax2.set_title("where the FLOPs went")
    fig.tight_layout()
    out = Path(path)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix or '.png'}")  # the suffix picks the format (png, pdf, svg)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(tmp, dpi=110)
        tmp.replace(out)
    except OSError as exc:
        raise UserError(f"cannot write the plot {str(out)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a suffix matplotlib has no writer for
        raise UserError(f"cannot write the plot {str(out)!r}: {exc}") from None
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return str(out)
