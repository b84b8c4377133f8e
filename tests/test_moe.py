"""MoE blocks (flopplan.moe): registry parameter counts, routed FLOPs, config refusals, and the experts convention
on the command line, in recipes, plans and the same-FLOP tables."""

from __future__ import annotations

import json

import pytest
from helpers import cli, one_line_error, write_config

from flopplan.arch import REGISTRY, spec_from_config
from flopplan.catalog import CONFIGS
from flopplan.errors import UserError
from flopplan.formulas import forward_flops

# Parameter totals the model cards and safetensors indexes publish (rounded there as 30.5B, 3.3B active, etc.).
PUBLISHED = {"qwen3-30b-a3b": (30_532_122_624, 3.3e9), "mixtral-8x7b-v0.1": (46_702_792_704, 12.9e9),
             "qwen1.5-moe-a2.7b": (14_315_784_192, 2.7e9), "llama-3.1-8b": (8_030_261_248, 8.03e9),
             "qwen3-8b": (8_190_735_360, 8.19e9)}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_registry_parameter_counts(name):
    total, active = PUBLISHED[name]
    assert REGISTRY[name].params == total
    assert abs(REGISTRY[name].params_active - active) < 0.02 * active  # the cards round (3.35B -> "3.3B")


def test_routed_flops_depend_on_top_k_only():
    spec = REGISTRY["qwen3-30b-a3b"]
    terms = forward_flops(spec, 1, 10, 1)
    moe = spec.moe
    assert terms["experts.gate_up_proj"] == spec.num_layers * 2 * (10 * moe.top_k) * spec.hidden_size * (
        2 * moe.expert_intermediate)


@pytest.mark.parametrize("change,fragment", [
    ({"num_experts_per_tok": None}, "num_experts_per_tok"),
    ({"num_experts_per_tok": 200}, "exceeds"),
    ({"experts_implementation": "deepgemm"}, "experts_implementation"),
    ({"mlp_only_layers": [0]}, "dense layers"),
])
def test_bad_moe_configs(change, fragment):
    cfg = dict(CONFIGS["Qwen/Qwen3-30B-A3B"], **change)
    with pytest.raises(UserError, match=fragment):
        spec_from_config(cfg, "bad")


def test_bad_moe_config_on_the_cli_is_one_line(tmp_path):
    path = write_config(tmp_path, "bad-moe", dict(CONFIGS["Qwen/Qwen3-30B-A3B"], num_experts_per_tok=None))
    one_line_error(cli("plan", "--model", str(path), "--budget", "1e18"), "num_experts_per_tok")


# -- the experts convention on the command line, in recipes and in plans -----------------------------------------

@pytest.mark.parametrize("implementation", ["grouped_mm", "batched_mm", "eager"])
def test_estimate_counts_the_experts_implementation_asked_for(implementation):
    from flopplan.formulas import Conventions, train_flops

    out = cli("estimate", "--model", "qwen3-30b-a3b", "--phase", "train", "--batch", "2", "--seq", "64",
              "--experts", implementation, "--json", check=True)
    data = json.loads(out.stdout)
    spec = REGISTRY["qwen3-30b-a3b"]
    assert data["flops"] == train_flops(spec, 2, 64, 64, conv=Conventions(experts=implementation)).total
    assert data["conventions"]["experts"] == implementation


def test_a_dense_estimate_names_no_experts_convention():
    data = json.loads(cli("estimate", "--model", "qwen3-0.6b", "--phase", "forward", "--seq", "8", "--json",
                          check=True).stdout)
    assert "experts" not in data["conventions"]


@pytest.mark.parametrize("command", [
    ("estimate", "--phase", "train", "--seq", "16", "--lora-rank", "8"),
    ("plan",),
])
def test_expert_lora_under_the_eager_loop_is_one_line(command):
    one_line_error(cli(command[0], "--model", "qwen3-30b-a3b", *command[1:], "--experts", "eager"), "eager")


def test_the_recipe_carries_the_experts_convention():
    from flopplan.recipe import Recipe

    default = Recipe(policy="qwen3-30b-a3b")
    assert default.conventions.experts == "grouped_mm" and "experts" not in default.to_data()
    chosen = default.with_(experts="batched_mm", lora_rank=None)
    assert chosen.conventions.experts == "batched_mm" and chosen.to_data()["experts"] == "batched_mm"
    assert Recipe.from_data(chosen.to_data()) == chosen
    with pytest.raises(UserError, match="experts"):
        Recipe(experts="loop")


def test_plan_json_of_an_moe_policy_records_its_experts_convention():
    """The three implementations run the same matmul FLOPs (tests/test_exact_moe.py measures each); the convention
    decides which LoRA the experts can take, and the plan records it when chosen."""
    plans = {impl: json.loads(cli("plan", "--model", "qwen3-30b-a3b", "--full", "--experts", impl, "--format",
                                  "json", check=True).stdout)["plans"][0] for impl in ("grouped_mm", "eager")}
    assert plans["eager"]["recipe"]["experts"] == "eager" and "experts" not in plans["grouped_mm"]["recipe"]
    assert plans["eager"]["flops"] == plans["grouped_mm"]["flops"]


def test_the_same_flop_row_of_an_moe_policy_names_active_and_total_parameters():
    from flopplan.planner import Budget, compare_models
    from flopplan.recipe import Recipe
    from flopplan.report.plan_tables import model_cell
    from flopplan.units import count

    moe, dense = compare_models(Recipe(), ["qwen3-30b-a3b", "qwen3-0.6b"], Budget(flops=10**18))
    spec = REGISTRY["qwen3-30b-a3b"]
    assert count(spec.params_active) in model_cell(moe) and count(spec.params) in model_cell(moe)
    assert model_cell(dense) == "qwen3-0.6b"
