"""``flopplan tables``: every committed table under ``tables/``, regenerated from the closed form."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flopplan.fileio import atomic_write_text, writable_targets
from flopplan.report.tables import to_latex, to_markdown

COMMAND = "flopplan tables"


def _peer_files() -> dict[str, str]:
    from flopplan.report.peer_tables import peer_error_tables

    tables = peer_error_tables()
    return {"peer_formulas.md": to_markdown(tables, COMMAND), "peer_formulas.tex": to_latex(tables, COMMAND)}


PAPER_BUDGETS = (10**18, 10**19, 10**20)
"""Budgets of the paper tables: 1, 10 and 100 EFLOP."""
PAPER_SIZES = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
               "qwen3-30b-a3b")
"""The Qwen2.5 sizes, and a mixture of experts whose active parameters (3.3 B) sit among them and whose total
(30.5 B) is near the largest."""
PAPER_FEEDBACK_POLICIES = ("qwen2.5-1.5b", "qwen2.5-7b")
PAPER_REWARDS = ("rule", "orm:qwen2.5-1.5b", "prm:qwen2.5-math-prm-7b", "prm:qwen2.5-1.5b")


def _plan_files() -> dict[str, str]:
    """Same-FLOP model sizes, feedback systems and the per-phase breakdown, at each paper budget, for the
    default recipe (``flopplan plan`` with no options). CSVs hold the exact integers of every plan."""
    from flopplan.planner import Budget, compare_models, compare_rewards
    from flopplan.recipe import Recipe
    from flopplan.report.plan_tables import phase_table, plan_notes, plans_to_csv, same_flop_table
    from flopplan.report.tables import provenance
    from flopplan.units import eng

    recipe = Recipe()
    tables: dict[str, list] = {"same_flop_sizes": [], "feedback_systems": [], "phase_breakdown": []}
    csv_plans: dict[str, list] = {"same_flop_sizes": [], "feedback_systems": []}
    for flops in PAPER_BUDGETS:
        budget = Budget(flops=flops)
        size_plans = compare_models(recipe, list(PAPER_SIZES), budget)
        feedback_plans = compare_rewards(recipe, list(PAPER_REWARDS), budget, list(PAPER_FEEDBACK_POLICIES))
        for stem, plans, table in (  # each table's recipe line from its own plans (the conventions it names)
                ("same_flop_sizes", size_plans,
                 same_flop_table(size_plans, f"Model sizes at equal FLOPs: {eng(flops)}")),
                ("feedback_systems", feedback_plans,
                 same_flop_table(feedback_plans, f"Feedback systems at equal FLOPs: {eng(flops)}")),
                ("phase_breakdown", size_plans,
                 phase_table(size_plans, f"FLOPs by phase and model size: {eng(flops)}"))):
            table.notes = [n for n in plan_notes(plans) if n.startswith("recipe:")]
            tables[stem].append(table)
        csv_plans["same_flop_sizes"] += size_plans
        csv_plans["feedback_systems"] += feedback_plans
    files: dict[str, str] = {}
    for stem, group in tables.items():
        files[f"{stem}.md"] = to_markdown(group, COMMAND)
        files[f"{stem}.tex"] = to_latex(group, COMMAND)
    for stem, plans in csv_plans.items():  # phase columns are in both CSVs
        files[f"{stem}.csv"] = plans_to_csv(plans, provenance(COMMAND))
    return files


GENERATORS: list[Callable[[], dict[str, str]]] = [_peer_files, _plan_files]


def all_tables() -> dict[str, str]:
    """File name -> contents, for every table flopplan publishes."""
    files: dict[str, str] = {}
    for generator in GENERATORS:
        files.update(generator())
    return files


def write_tables(directory: str | Path, generate: Callable[[], dict[str, str]] | None = None) -> list[Path]:
    """Write the closed-form tables (or what ``generate`` makes) into ``directory``."""
    files = (generate or all_tables)()
    writable_targets(*(Path(directory) / name for name in files))  # all checked before the first is written
    return [atomic_write_text(Path(directory) / name, text) for name, text in sorted(files.items())]


def stale_tables(directory: str | Path, generate: Callable[[], dict[str, str]] | None = None) -> list[str]:
    """Names of the files under ``directory`` that differ from (or are missing against) a fresh generation. A
    folder with none of them is not a tables folder (``tables --check`` run outside the repository): refused."""
    folder = Path(directory)
    fresh = (generate or all_tables)()
    if not folder.is_dir() or not any((folder / name).exists() for name in fresh):
        from flopplan.errors import UserError

        raise UserError(f"{str(folder)!r} holds none of flopplan's tables: run from the repository root, or pass "
                        "--out to the tables folder")
    stale = []
    for name, text in sorted(fresh.items()):
        path = Path(directory) / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    return stale
