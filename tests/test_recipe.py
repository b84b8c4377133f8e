"""Recipes: validation, file round trips, the old-logprobs rule and the reward systems' models."""

from __future__ import annotations

import pytest
from helpers import cli, one_line_error
from hypothesis import given, settings
from strategies import recipes

from flopplan.arch import REGISTRY, orm_head, with_head
from flopplan.errors import UserError
from flopplan.passes import RoundShape
from flopplan.recipe import Recipe, RewardSystem


@settings(max_examples=50, deadline=None)
@given(recipes())
def test_recipe_round_trips_through_toml_and_json(tmp_path_factory, recipe):
    folder = tmp_path_factory.mktemp("recipes")
    for name in ("r.toml", "r.json"):
        path = recipe.save(folder / name)
        assert Recipe.load(path) == recipe


BAD_RECIPES = {
    "unknown key": {"polcy": "qwen2.5-7b"},
    "negative group": {"group_size": -2},
    "zero prompts": {"prompts_per_step": 0},
    "bad beta": {"beta": -0.1},
    "bad engine": {"engine": "sglang"},
    "prefix sharing with hf": {"prefix_sharing": True},
    "micro batch not dividing": {"micro_batch": 7},
    "bad reward": {"reward": "dpo"},
    "orm without model": {"reward": "orm"},
    "bad lora": {"lora": {"rank": 8, "targets": ["lm_head"]}},
    "eval without prompts": {"eval_every": 10},
    "bad length": {"completion_len": {"mean": 5000, "max": 100}},
    "string bool": {"grad_ckpt": "false"},
    "string eval start": {"eval_at_start": "no"},
    "numeric policy": {"policy": 5},
    "numeric targets": {"lora": {"rank": 8, "targets": [1, 2]}},
}


@pytest.mark.parametrize("case", sorted(BAD_RECIPES))
def test_bad_recipes_are_refused(case):
    with pytest.raises(UserError):
        Recipe.from_data(BAD_RECIPES[case])


def test_old_logprobs_auto_follows_optimizer_steps_per_round():
    def runs(**changes):
        return RoundShape.of(Recipe(**changes)).old_logprobs

    assert not runs()
    assert runs(iterations=2)
    assert runs(optimizer_batch=128)  # 512 rollouts feed 4 optimizer steps
    assert runs(engine="vllm")
    assert not runs(iterations=2, old_logprobs="off", engine="vllm")  # verl's bypass
    with pytest.raises(UserError, match="clip never acts"):  # what the built-in trainer and TRL cannot run
        Recipe(iterations=2, old_logprobs="off")


def test_orm_head_and_prm_head():
    spec = REGISTRY["qwen2.5-1.5b"]
    orm = RewardSystem.parse("orm:qwen2.5-1.5b").spec()
    assert orm.head == orm_head(spec)
    assert orm.params == with_head(spec, orm_head(spec)).params
    prm = RewardSystem.parse("prm:qwen2.5-1.5b").spec()
    assert [(lay.in_features, lay.out_features) for lay in prm.head.layers] == [(1536, 1536), (1536, 2)]
    assert RewardSystem.parse("prm").spec() is REGISTRY["qwen2.5-math-prm-7b"]


def test_a_prm_on_a_one_label_score_head_is_refused_before_it_runs(tmp_path):
    """tiny-rm's score head has one label; a PRM's step reward is the probability of label 1 of two, so a run (or a
    race's pilot) on prm:tiny-rm would fail inside the reward model's forward. It is refused in one line where the
    recipe's reward model is read, before any training, and a race design refuses the arm."""
    with pytest.raises(UserError, match="two-label"):
        RewardSystem.parse("prm:tiny-rm").spec()
    one_line_error(cli("train", "--model", "tiny-s", "--reward", "prm:tiny-rm", "--steps", "1", "--out",
                       str(tmp_path / "t")), "a PRM needs a two-label (step incorrect, step correct) score head")
    one_line_error(cli("race", "design", "--budget", "1.2e11", "--pilot-fraction", "0.5", "--models", "tiny-s",
                       "--group-sizes", "4", "--rewards", "rule,prm:tiny-rm", "--seeds", "2", "--rungs", "1",
                       "--evals", "2", "--eval-prompts", "20", "--out", str(tmp_path / "r")), "use orm:tiny-rm")
    assert not (tmp_path / "r").exists()
    assert RewardSystem.parse("prm:tiny").spec().head.layers[-1].out_features == 2  # an LM gets the PRM head


@pytest.mark.parametrize(("policy", "changes", "fragment"), [
    ("qwen3-30b-a3b", {"experts": "eager"}, "eager"),  # LoRA on every target adapts the routed experts
    ("phi-3-mini-4k-instruct", {"lora_targets": ("q_proj", "v_proj")}, "qkv_proj"),
    ("qwen2.5-0.5b", {"lora_targets": ("qkv_proj",)}, "Phi-3"),
])
def test_lora_targets_the_model_cannot_take_are_refused(policy, changes, fragment):
    recipe = Recipe(policy=policy, lora_rank=8, **changes)
    with pytest.raises(UserError, match=fragment):
        _ = recipe.policy_spec
