"""Plan files (flopplan.planfile): what `plan --out` writes reads back as the recipe planned; an entry survives its
own layout; a file hands a runner exactly one plan or refuses with one line."""

from __future__ import annotations

import json

import pytest
from helpers import cli

from flopplan.budget import Budget
from flopplan.errors import UserError
from flopplan.passes import BUCKETS
from flopplan.planfile import PlanEntry, PlanFile, bucket_flops
from flopplan.planner import plan
from flopplan.recipe import Recipe

run = cli


@pytest.fixture(scope="module")
def entries() -> tuple[PlanEntry, PlanEntry]:
    budget = Budget(flops=10**19)
    return tuple(PlanEntry.of(plan(Recipe(policy=m), budget)) for m in ("qwen2.5-0.5b", "qwen2.5-1.5b"))


def test_plan_file_round_trip(tmp_path):
    path = tmp_path / "plan.json"
    out = run("plan", "--model", "qwen2.5-0.5b", "--completion-len", "300:900", "--beta", "0.04", "--reward",
              "prm", "--out", str(path))
    assert out.returncode == 0, out.stderr
    assert json.loads(path.read_text())["flopplan_plan_version"] == 1
    plans = PlanFile.load(path).plans
    assert len(plans) == 1
    recipe = plans[0].recipe
    assert recipe.policy == "qwen2.5-0.5b" and recipe.beta == 0.04 and recipe.reward.kind == "prm"
    assert recipe.completion_len.max == 900


def test_an_entry_reads_back_equal_from_its_data(entries):
    for entry in entries:
        data = json.loads(json.dumps(entry.to_data()))
        assert PlanEntry.from_data(data) == entry
        assert data["model"] == entry.recipe.policy and data["flops"]["total"] == sum(data["flops"][b] for b in BUCKETS)


def test_an_entry_whose_model_is_not_its_recipes_policy_is_refused(entries):
    data = dict(entries[0].to_data(), model="qwen2.5-1.5b")
    with pytest.raises(UserError) as exc:
        PlanEntry.from_data(data)
    assert "'qwen2.5-1.5b'" in str(exc.value)
    with pytest.raises(UserError):
        PlanEntry.from_data([data])


def test_select_hands_over_exactly_one_plan(entries):
    small, large = entries
    assert PlanFile((small,)).select() is small
    both = PlanFile((small, large))
    assert both.select("qwen2.5-1.5b") is large
    for bad in (lambda: both.select(), lambda: both.select("qwen2.5-7b"), lambda: PlanFile(()).select()):
        with pytest.raises(UserError):
            bad()


def test_a_run_records_the_recipe_fields_it_changed(entries):
    entry = entries[0]
    assert entry.with_overrides(entry.recipe).overridden == ()
    changed = entry.with_overrides(entry.recipe.with_(group_size=4, beta=0.5))
    assert set(changed.overridden) == {"group_size", "beta"} and changed.recipe == entry.recipe


ONES = {b: 1 for b in BUCKETS}


@pytest.mark.parametrize("value", [None, ONES, {**ONES, "total": -1}, {**ONES, "total": 1.0}, {**ONES, "total": True}])
def test_bucket_flops_are_non_negative_integers_for_every_bucket_and_the_total(value):
    with pytest.raises(UserError, match="where"):
        bucket_flops(value, "where")
    assert bucket_flops({**{b: 2 for b in BUCKETS}, "total": 8}, "where") == {**{b: 2 for b in BUCKETS}, "total": 8}


def _set(data: dict, path: str, value: object) -> dict:
    """``data`` with the value at a dotted ``path`` replaced (``...`` deletes it)."""
    data = json.loads(json.dumps(data))
    *parents, key = path.split(".")
    node = data
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return data


@pytest.mark.parametrize(("path", "value"), [
    ("steps", 10**40), ("evaluations", 10**40), ("step_flops", 10**40), ("eval_flops", 10**40),
    ("leftover_flops", -1), ("prompts", 10**40), ("update_tokens", 10**40), ("phases", ...), ("step_phases", ...),
    ("budget_flops", -1), ("budget_flops", "abc"), ("budget_flops", True), ("budget_flops", [1]),
    ("reward", [1]), ("reward", 10**40), ("shares", "abc"), ("shares", -1)])
def test_an_entry_no_planner_would_write_is_refused(entries, path, value):
    data = entries[0].to_data()
    with pytest.raises(UserError, match=path.split(".")[0]) as exc:
        PlanEntry.from_data(_set(data, path, value))
    assert "\n" not in str(exc.value)


def test_a_plan_file_whose_budget_flops_is_not_its_budget_is_refused(tmp_path, entries):
    data = PlanFile(entries[:1], budget=entries[0].budget).to_data()
    for value in (-1, float("nan"), "abc", [1], True):
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(_set(data, "budget_flops", value)))
        with pytest.raises(UserError, match="budget_flops"):
            PlanFile.load(path)
    path.write_text(json.dumps(data))
    assert PlanFile.load(path).plans == entries[:1]
