"""Plans as tables: the same-FLOP comparison, the bucket split and the per-phase breakdown."""

from __future__ import annotations

from typing import Any

from flopplan.passes import BUCKETS, EVAL_PHASES, STEP_PHASES
from flopplan.planfile import PlanEntry
from flopplan.planner import Plan, budget_text, hours_unit
from flopplan.recipe import conventions_that_apply
from flopplan.report.tables import Table
from flopplan.units import apart, count, duration, eng


def _tuning(plan: Plan) -> str:
    r = plan.recipe
    return "full" if r.lora_rank is None else f"LoRA r={r.lora_rank}"


def model_cell(plan: Plan) -> str:
    """The policy's name; an MoE policy's with the parameters one token runs through and the total (its FLOPs
    follow the active ones, its memory the total)."""
    spec = plan.recipe.policy_spec
    if spec.moe is None:
        return plan.model
    return f"{plan.model} (MoE, {count(spec.params_active)} of {count(spec.params)} params active)"


def same_flop_table(plans: list[Plan], title: str | None = None, with_time: bool = False) -> Table:
    """One row per plan: what the budget buys and how it splits into buckets. The budget, steps and spends print
    with the digits it takes for no spend to read as the budget (:func:`_digits`)."""
    digits = _digits(plans)
    budget = _budget_text(plans[0], digits) if plans else ""
    buckets = [b for b in BUCKETS if b != "evaluation" or any(p.evaluations for p in plans)]
    columns = ["model", "reward", "steps", "prompts", "rollouts", "gen tok", "upd tok", "opt steps", "RM evals",
               *buckets, "step", "spent"]
    if with_time:
        columns += [hours_unit(plans[0].profile if plans else None).replace("-hours", "-h")]
    if title is None:
        if plans and plans[0].priced:
            steps = sorted({p.steps for p in plans})
            title = f"What {', '.join(f'{s:,}' for s in steps)} step{'s' if steps != [1] else ''} cost"
        elif plans and plans[0].budget.flops is None:
            title = f"What {budget} buys: same-budget comparison"
        else:
            title = f"What {budget} buys: same-FLOP comparison"
    table = Table(title, columns)
    for p in plans:
        totals = p.totals()
        shares = p.shares()
        row = [model_cell(p), str(p.recipe.reward), f"{p.steps:,}", count(totals["prompts"]), count(totals["rollouts"]),
               count(totals["generated_tokens"]), count(totals["update_tokens"]), count(totals["optimizer_steps"]),
               count(totals["reward_evaluations"]), *(f"{100 * shares[b]:.1f}%" for b in buckets),
               eng(p.cost.step_flops, digits=digits), eng(p.total_flops, digits=digits)]
        if with_time:
            hours = p.budget.gpu_hours
            row.append("-" if p.gpu_hours is None else _sig3(p.gpu_hours) if hours is None else
                       apart(p.gpu_hours, hours, lambda v, d: f"{v:,.{d}g}" if v < 1e5 else f"{v:,.0f}"))
        table.rows.append(row)
    table.align = "ll" + "r" * (len(columns) - 2)
    return table


def _digits(plans: list[Plan]) -> int:
    """The fewest significant digits (3 at least) at which no plan's spend reads as its FLOP budget where the two
    differ (999.5 PFLOP of 1 EFLOP; a 3.00157 PFLOP step in a "3 PFLOP" title)."""
    for digits in range(3, 17):
        if all(p.budget.flops is None or p.priced or p.total_flops == p.budget.flops
               or eng(p.total_flops, digits=digits) != eng(p.budget.flops, digits=digits) for p in plans):
            return digits
    return 16


def _budget_text(plan: Plan, digits: int) -> str:
    """A plan's budget as a title names it: FLOPs at ``digits``, device-hours in the profile's unit."""
    return eng(plan.budget.flops, digits=digits) if plan.budget.flops is not None else \
        budget_text(plan.budget, plan.profile)


def phase_table(plans: list[Plan], title: str | None = None) -> Table:
    """One row per plan: the share of each phase in the run's FLOPs."""
    phases = [ph for ph in (*STEP_PHASES, *EVAL_PHASES) if any(ph in p.phases for p in plans)]
    table = Table(title or "Where the FLOPs go, by phase", ["model", "reward", *phases, "total"])
    digits = _digits(plans)  # (the allocation table's rule: no total reads as its budget)
    for p in plans:
        total = p.total_flops
        table.rows.append([model_cell(p), str(p.recipe.reward),
                           *(f"{100 * p.phases.get(ph, 0) / total:.1f}%" if ph in p.phases and total else "-"
                             for ph in phases), eng(total, digits=digits)])
    table.align = "ll" + "r" * (len(table.columns) - 2)
    return table


def time_table(plans: list[Plan]) -> Table:
    """Seconds per phase and device-hours, when a profile was given."""
    phases = [ph for ph in (*STEP_PHASES, *EVAL_PHASES) if any(p.seconds and ph in p.seconds for p in plans)]
    outside = any(p.seconds and set(p.seconds) - set(phases) for p in plans)  # the profile's non-phase terms
    device = plans[0].profile.describe() if plans and plans[0].profile else ""
    hours = hours_unit(plans[0].profile if plans else None)
    table = Table(f"Estimated time on {device}", ["model", "reward", *phases, *(["outside phases"] if outside else []),
                                                  hours, "dollars"])
    for p in plans:
        seconds = p.seconds or {}
        rest = [duration(sum(v for k, v in seconds.items() if k not in phases))] if outside else []
        table.rows.append([p.model, str(p.recipe.reward), *(duration(seconds.get(ph, 0)) for ph in phases), *rest,
                           _sig3(p.gpu_hours or 0), _dollars(p.dollars)])
    table.align = "ll" + "r" * (len(table.columns) - 2)
    return table


def model_specs(plans: list[Plan]) -> list[Any]:
    """The models the plans count: each policy, and each reward model."""
    return [spec for p in plans for spec in (p.recipe.policy_spec, p.recipe.reward_spec) if spec is not None]


def _conventions(plans: list[Plan]) -> str:
    """The recipe's experts implementation and window convention, where a model of the plans has what they count
    (mixture-of-experts layers, sliding-window layers): they change its counts."""
    applies, r = conventions_that_apply(model_specs(plans)), plans[0].recipe
    return (f", experts {r.experts}" if "experts" in applies else "") + (
        f", windows {r.window}" if "window" in applies else "")


def plan_notes(plans: list[Plan]) -> list[str]:
    notes = []
    for p in plans:
        notes += [f"{p.model} ({p.recipe.reward}): {n}" for n in p.notes]
        outside = {k: v for k, v in (p.seconds or {}).items() if k not in (*STEP_PHASES, *EVAL_PHASES)}
        if outside:
            notes.append(f"{p.model} ({p.recipe.reward}) outside the phases: " + ", ".join(
                f"{term.replace('_', ' ')} {duration(v)}" for term, v in outside.items()))
    rewards = len({str(p.recipe.reward) for p in plans}) > 1

    def name(p: Plan) -> str:  # (with its reward where the plans' rewards differ)
        return f"{p.model} ({p.recipe.reward})" if rewards else p.model

    if plans:
        r = plans[0].recipe
        notes.append(f"recipe: {_tuning(plans[0])}, {r.prompts_per_step} prompts x G={r.group_size}, prompt "
                     f"{r.prompt_len.describe()}, completion {r.completion_len.describe()}, mu={r.iterations}, "
                     f"beta={r.beta:g}, engine {r.engine}, checkpointing {'on' if r.grad_ckpt else 'off'}, "
                     f"log-prob head {r.logprob_head}{_conventions(plans)}")
        templates = {str(p.recipe.reward): p.recipe.reward_overhead_tokens for p in plans
                     if p.recipe.reward.kind != "rule"}
        if templates:
            notes.append("reward model template tokens priced per call (--reward-overhead): " + ", ".join(
                f"{reward} {tokens}" for reward, tokens in templates.items()))
        priced = [p for p in plans if p.priced]
        if priced:
            notes.append("the budget these steps need: " + ", ".join(
                f"{name(p)} {eng(p.total_flops)}" + (f" ({_sig3(p.gpu_hours)} {hours_unit(p.profile)})"
                                                     if p.gpu_hours else "")
                for p in priced))
        leftover = [p.leftover_flops for p in plans if p.leftover_flops is not None and not p.priced]
        if leftover:
            notes.append("leftover per plan (< one more step): " + ", ".join(
                f"{name(p)} {eng(p.leftover_flops)}" for p in plans
                if p.leftover_flops is not None and not p.priced))
    return notes


CSV_COLUMNS = ("budget_flops", "model", "reward", "steps", "prompts", "rollouts", "generated_tokens",
               "update_tokens", "optimizer_steps", "reward_evaluations", "evaluations", "step_flops",
               *(f"flops_{b}" for b in (*BUCKETS, "total")), *(f"share_{b}" for b in BUCKETS),
               *(f"flops_{ph}" for ph in (*STEP_PHASES, *EVAL_PHASES)), "leftover_flops", "gpu_hours")


def plans_to_csv(plans: list[Plan], provenance_line: str | None = None, header: bool = True,
                 tables: list[str] | None = None) -> str:
    """Machine-readable rows: exact integers and unrounded shares, one row per plan; ``tables``, one name per plan,
    adds a first ``table`` column saying which table each row belongs to (a comparison lists a plan in two)."""
    import csv
    import io

    buffer = io.StringIO()
    if provenance_line:
        buffer.write(f"# {provenance_line}\n")
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow((["table"] if tables else []) + list(CSV_COLUMNS))
    for i, p in enumerate(plans):
        data = PlanEntry.of(p).to_data()
        row: dict[str, Any] = {key: data.get(key) for key in CSV_COLUMNS}
        row["budget_flops"] = p.budget.flops
        for b, v in data["flops"].items():
            row[f"flops_{b}"] = v
        for b, v in p.shares().items():
            row[f"share_{b}"] = f"{v:.6f}"
        for ph in (*STEP_PHASES, *EVAL_PHASES):
            row[f"flops_{ph}"] = p.phases.get(ph, 0)
        writer.writerow(([tables[i]] if tables else []) + ["" if row[c] is None else row[c] for c in CSV_COLUMNS])
    return buffer.getvalue()


def _dollars(value: float | None) -> str:
    """Dollars to the cent below $1,000, whole dollars above ($0.40 was "0")."""
    return "-" if value is None else f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"


def _sig3(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
