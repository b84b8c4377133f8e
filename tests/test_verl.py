"""flopplan.engines.verl (torch-free): export a recipe as verl 0.9.1 overrides, read it back, verl's rules, verl's own
FLOP estimate, the launch script.

The key-set tests download the verl wheel once (cached under the pytest cache; skipped without a network). With
FLOPPLAN_VERL_PYTHON naming a Python where verl 0.9.1 imports (e.g. /work/venv-verl/bin/python), one test runs
verl's real ``validate_config`` on the exports and on the bad cases below.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from verl_keys import default_keys, generated_config, obtain_wheel

from flopplan.cost import step_cost
from flopplan.engines.hydra import format_override, parse_value
from flopplan.engines.verl import (
    DEFAULTS,
    REWARD_FUNCTION_PLACEHOLDER,
    check_verl_rules,
    launch_script,
    read_overrides,
    recipe_from_verl,
    verl_overrides,
    verl_recipe,
)
from flopplan.errors import UserError
from flopplan.lengths import Length
from flopplan.passes import RoundShape
from flopplan.recipe import Recipe, RewardSystem

A, R, M, REF, RM = ("actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "actor_rollout_ref.model.",
                    "actor_rollout_ref.ref.", "reward.reward_model.")
ORM = RewardSystem.parse("orm:qwen2.5-0.5b")
BASE = dict(policy="qwen2.5-0.5b", prompts_per_step=16, group_size=8, prompt_len=Length.fixed(128),
            completion_len=Length.fixed(256), engine="vllm", logprob_head="all", update_padding="none")
RECIPES = {
    "lora-beta0-mu1": Recipe(**BASE),
    "full-beta-mu2-minibatch": Recipe(**BASE, lora_rank=None, beta=0.04, iterations=2, optimizer_batch=64),
    "lora-orm-bypass-prefix-targets": Recipe(**BASE, reward=ORM, beta=0.01, old_logprobs="off", prefix_sharing=True,
                                             lora_targets=("q_proj", "v_proj")),
    "full-orm-padded-nockpt": Recipe(**{**BASE, "update_padding": "batch"}, lora_rank=None, reward=ORM, iterations=2,
                                     grad_ckpt=False, micro_batch=4),
    "lora-eval": Recipe(**BASE, eval_every=5, eval_prompts=32),
}
FLOP_FIELDS = ("policy", "lora_rank", "prompts_per_step", "group_size", "prompt_len", "completion_len", "iterations",
               "beta", "grad_ckpt", "logprob_head", "engine", "prefix_sharing", "update_padding",
               "optimizer_batch_size", "reward")


def export(recipe: Recipe, **kwargs) -> dict:
    return verl_overrides(recipe, steps=7, gpus_per_node=8, **kwargs)


def assert_same_price(back: Recipe, recipe: Recipe) -> None:
    assert step_cost(back).step_phases == step_cost(recipe).step_phases
    for name in FLOP_FIELDS:
        assert getattr(back, name) == getattr(recipe, name), name
    rules = ("old_logprobs", "reference")  # the round's rules, as RoundShape.of applies them
    assert [getattr(RoundShape.of(back), k) for k in rules] == [getattr(RoundShape.of(recipe), k) for k in rules]
    assert set(back.lora_targets) == set(recipe.lora_targets) or recipe.lora_rank is None


# -- the wheel's key set (downloaded once, cached) ----------------------------------------------------------------

@pytest.fixture(scope="session")
def verl_wheel(request, tmp_path_factory) -> Path:
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider: a download per session
    folder = Path(cache.mkdir("verl-0.9.1-wheel")) if cache is not None else tmp_path_factory.mktemp("verl-wheel")
    with open(folder / ".lock", "w") as lock:  # pytest-xdist workers share the cache: one downloads
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return obtain_wheel(folder)
        except RuntimeError as exc:
            pytest.skip(f"verl wheel unavailable: {exc}")


@pytest.fixture(scope="session")
def verl_keys(verl_wheel) -> dict:
    return default_keys(verl_wheel)


def test_the_defaults_flopplan_assumes_are_verls(verl_keys):
    assert len(verl_keys) > 800
    wrong = {key: (value, verl_keys.get(key, "MISSING")) for key, value in DEFAULTS.items()
             if verl_keys.get(key, "MISSING") != value}
    assert not wrong


@pytest.mark.parametrize("name", RECIPES)
def test_every_exported_key_is_in_verls_default_config(name, verl_keys):
    overrides = export(RECIPES[name], merge_lora=False)
    assert set(overrides) <= set(verl_keys)
    check_verl_rules(overrides, known_keys=set(verl_keys))


def test_an_unknown_key_is_refused_as_hydra_would(verl_keys):
    base = export(RECIPES["lora-beta0-mu1"])
    with pytest.raises(UserError, match=r"Could not override 'actor_rollout_ref.actor.not_a_key'"):
        check_verl_rules({**base, A + "not_a_key": 1}, known_keys=set(verl_keys))
    with pytest.raises(UserError, match=r"Could not append to config. An item is already at 'data.train_batch_size'"):
        check_verl_rules({**base, "+data.train_batch_size": 16}, known_keys=set(verl_keys))
    check_verl_rules({**base, "+" + M + "override_config.attn_implementation": "sdpa"}, known_keys=set(verl_keys))


@pytest.mark.parametrize(("key", "values"), [(R + "calculate_log_probs", ("abc", float("nan"), 2.5, 1)),
                                             (M + "lora_alpha", ("abc", -1, 0, float("nan"), 2.5, True))])
def test_a_typed_field_flopplan_does_not_price_must_still_be_of_its_type(key, values):
    base = export(RECIPES["lora-beta0-mu1"])
    for value in values:
        with pytest.raises(UserError, match=key):
            recipe_from_verl({**base, key: value})


def test_a_full_yaml_config_reads_back(verl_wheel, tmp_path):
    """The wheel's whole default config (interpolations as text) with the export applied, as a YAML file."""
    recipe = RECIPES["full-beta-mu2-minibatch"]
    config = generated_config(verl_wheel)
    for key, value in export(recipe).items():
        node = config
        *parents, leaf = key.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    back, steps = recipe_from_verl(path)
    assert steps == 7
    assert_same_price(back, recipe)


# -- round trips ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", RECIPES)
def test_round_trip_prices_the_same_step(name):
    recipe = RECIPES[name]
    back, steps = recipe_from_verl(export(recipe))
    assert steps == 7
    assert_same_price(back, recipe)


def test_round_trip_through_an_overrides_file(tmp_path):
    recipe = RECIPES["lora-orm-bypass-prefix-targets"]
    overrides = export(recipe, logger=("console", "wandb"), reward_model_path="my rm/Qwen2.5 0.5B")
    path = tmp_path / "run.overrides"
    lines = ["# a comment", *(shlex.quote(format_override(k, v)) + " \\" for k, v in overrides.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read_overrides(path) == overrides
    back, _ = recipe_from_verl(path, reward_model="qwen2.5-0.5b")
    assert_same_price(back, recipe)


def test_what_verl_cannot_express_is_normalised_then_round_trips():
    notes: list[str] = []
    recipe = Recipe(prompt_len=Length.mean_max(200, 256), completion_len=Length.mean_max(600, 1024))  # TRL defaults
    as_verl = verl_recipe(recipe, notes)
    assert (as_verl.engine, as_verl.logprob_head, as_verl.update_padding) == ("vllm", "all", "none")
    assert len(notes) == 3 and step_cost(as_verl).step_flops != step_cost(recipe).step_flops
    back, _ = recipe_from_verl(export(as_verl), prompt_len=recipe.prompt_len, completion_len=recipe.completion_len)
    assert_same_price(back, as_verl)
    fixed_notes: list[str] = []
    fixed = verl_recipe(Recipe(), fixed_notes)  # fixed lengths: packed as verl packs (use_remove_padding, its
    # default: "batch" exported false, which the help's "packed updates" denied, a held-out user), at the same price
    assert fixed.update_padding == "none" and "for verl: update_padding 'batch' -> 'none'" in fixed_notes
    assert step_cost(fixed).step_flops == step_cost(verl_recipe(Recipe()).with_(update_padding="batch")).step_flops
    assert export(fixed)[M + "use_remove_padding"] is True
    assert_same_price(recipe_from_verl(export(fixed))[0], fixed)


def test_export_settings_follow_the_recipe():
    lora = export(RECIPES["lora-orm-bypass-prefix-targets"])
    assert lora[A + "ppo_mini_batch_size"] == 16 and lora[R + "n"] == 8 and lora["algorithm.adv_estimator"] == "grpo"
    assert lora[M + "target_modules"] == ["q_proj", "v_proj"] and lora[M + "lora.merge"] is True
    assert lora["algorithm.rollout_correction.bypass_mode"] is True and lora[R + "calculate_log_probs"] is True
    assert lora[RM + "enable"] is True and lora[RM + "model_path"] == "Qwen/Qwen2.5-0.5B"
    assert lora[A + "use_kl_loss"] is True and lora[A + "kl_loss_coef"] == 0.01
    assert REF + "log_prob_micro_batch_size_per_gpu" in lora
    full = export(RECIPES["full-beta-mu2-minibatch"])
    assert full[A + "ppo_mini_batch_size"] == 8 and full[A + "ppo_epochs"] == 2 and full[M + "lora_rank"] == 0
    assert full["reward.custom_reward_function.path"] == REWARD_FUNCTION_PLACEHOLDER
    evaluated = export(RECIPES["lora-eval"])
    assert evaluated["trainer.test_freq"] == 5 and evaluated["trainer.val_before_train"] is True
    assert export(RECIPES["lora-beta0-mu1"])["trainer.val_before_train"] is False


@pytest.mark.parametrize(("recipe", "kwargs", "fragment"), [
    (Recipe(), {}, "engine 'hf'"),
    (Recipe(**{**BASE, "logprob_head": "fused-compact"}), {}, "logprob_head 'fused-compact'"),
    (Recipe(**BASE, reward=RewardSystem.parse("prm")), {}, "no process-reward path"),
    (Recipe(**BASE, micro_batch=4, optimizer_batch=4), {}, "not a multiple of group_size"),
    (Recipe(**{**BASE, "update_padding": "batch", "completion_len": Length.mean_max(100, 256)}), {}, "pads each micro"),
    (Recipe(**BASE), {"gpus_per_node": 3}, r"real_train_batch_size \(128\) must be divisible by minimal possible "
     r"batch size \(3\).*prompts_per_step 16 x group_size 8"),
    (Recipe(**BASE), {"rollout": "hf"}, "rollout must be vllm or sglang"),
    (Recipe(**BASE), {"steps": 0}, "steps must be"),
    (Recipe(**{**BASE, "policy": "tiny"}), {}, "has no Hugging Face repository"),
    # a path verl's OmegaConf would not read as written (it was passed through), a reward option the plan's reward
    # system does not use (it was ignored without a word)
    (Recipe(**BASE), {"reward_function": "${HOME}/r.py"}, r"reads \$\{NAME\} as another config key"),
    (Recipe(**BASE), {"model_path": "$WORK/qwen"}, r"--model-path '\$WORK/qwen'"),
    (Recipe(**BASE), {"reward_model_path": "/rm"}, "the plan's reward is rule"),
    (Recipe(**BASE, reward=RewardSystem.parse("orm:qwen2.5-1.5b")), {"reward_function": "r.py"},
     "--reward-function is a rule reward's file; the plan's reward is orm:qwen2.5-1.5b"),
])
def test_export_refuses_what_verl_cannot_run(recipe, kwargs, fragment):
    with pytest.raises(UserError, match=fragment):
        verl_overrides(recipe, **{"steps": 7, "gpus_per_node": 8, **kwargs})


def test_an_environment_variable_as_omegaconf_reads_it_is_passed_to_verl():
    path = "${oc.env:HOME}/rewards/score.py"
    assert verl_overrides(Recipe(**BASE), steps=7, gpus_per_node=8,
                          reward_function=path)["reward.custom_reward_function.path"] == path


def test_export_notes_name_the_placeholders_and_gaps():
    notes: list[str] = []
    export(RECIPES["lora-eval"], merge_lora=False, notes=notes)
    text = "\n".join(notes)
    assert REWARD_FUNCTION_PLACEHOLDER in text and "unmerged" in text and "eval_prompts (32)" in text


# -- verl's rules -----------------------------------------------------------------------------------------------

BASE_OVERRIDES = export(RECIPES["lora-beta0-mu1"])
RM_ON = {RM + "enable": True, RM + "model_path": "Qwen/Qwen2.5-0.5B", RM + "rollout.name": "vllm"}
# (name, changes to BASE_OVERRIDES, flopplan's message, verl's: a fragment of validate_config's error, "" for a bare
# assert, None where validate_config accepts and only the workers refuse)
RULE_CASES = [
    ("batch-over-gpus", {"data.train_batch_size": 63, R + "n": 5},
     r"real_train_batch_size \(315\) must be divisible by minimal possible batch size \(8\)",
     "real_train_batch_size (315) must be divisible by minimal possible batch size (8)"),
    ("fsdp-strategy", {A + "fsdp_config.strategy": "ddp"}, "strategy ddp not supported", "strategy ddp not supported"),
    ("actor-micro-both", {A + "ppo_micro_batch_size": 8}, "You have set both 'actor.ppo_micro_batch_size'",
     "You have set both 'actor.ppo_micro_batch_size'"),
    ("actor-micro-none", {A + "ppo_micro_batch_size_per_gpu": None},
     "Please set at least one of 'actor.ppo_micro_batch_size'", "Please set at least one of 'actor.ppo_micro_batch"),
    ("loss-agg", {A + "loss_agg_mode": "mean"}, "Invalid loss_agg_mode: mean", "Invalid loss_agg_mode: mean"),
    ("lr-scheduler", {A + "optim.lr_scheduler_type": "linear"}, r"lr_scheduler_type in \['constant', 'cosine'\]",
     ""),
    ("mini-above-batch", {"data.train_batch_size": 8}, r"train_batch_size \(8\) must be >= "
     r"actor.ppo_mini_batch_size \(16\)", "train_batch_size (8) must be >= actor.ppo_mini_batch_size (16)"),
    ("old-micro-divides", {A + "ppo_micro_batch_size_per_gpu": None, A + "ppo_micro_batch_size": 3},
     r"ppo_mini_batch_size \(16\) must be divisible by ppo_micro_batch_size \(3\)",
     "ppo_mini_batch_size (16) must be divisible by ppo_micro_batch_size (3)"),
    ("old-micro-gpus", {A + "ppo_micro_batch_size_per_gpu": None, A + "ppo_micro_batch_size": 4},
     r"ppo_micro_batch_size \(4\) \* ulysses_sequence_parallel_size \(1\) must be >= n_gpus \(8\)",
     "ppo_micro_batch_size (4) * ulysses_sequence_parallel_size (1) must be >= n_gpus (8)"),
    ("sp-needs-packing", {A + "ulysses_sequence_parallel_size": 2, M + "use_remove_padding": False},
     "When using sequence parallelism", "When using sequence parallelism"),
    ("ref-micro-none", {A + "use_kl_loss": True}, r"\[actor_rollout_ref.ref\] Please set at least one",
     "[actor_rollout_ref.ref] Please set at least one"),
    ("ref-micro-both", {A + "use_kl_loss": True, REF + "log_prob_micro_batch_size_per_gpu": 8,
                        REF + "log_prob_micro_batch_size": 8}, r"\[actor_rollout_ref.ref\] You have set both",
     "[actor_rollout_ref.ref] You have set both"),
    ("rollout-micro-none", {R + "log_prob_micro_batch_size_per_gpu": None},
     r"\[actor_rollout_ref.rollout\] Please set at least one", "[actor_rollout_ref.rollout] Please set at least one"),
    ("rollout-micro-both", {R + "log_prob_micro_batch_size": 8}, r"\[actor_rollout_ref.rollout\] You have set both",
     "[actor_rollout_ref.rollout] You have set both"),
    ("val-temperature", {R + "val_kwargs.do_sample": True, R + "temperature": 0},
     "validation gen temperature should be greater than 0", "validation gen temperature should be greater than 0"),
    ("lora-rank-vllm", {M + "lora_rank": 1024, M + "lora.merge": False},
     "lora_rank must be less than or equal to 512, but got 1024", "lora_rank must be less than or equal to 512"),
    ("rollout-name", {R + "name": "???", M + "lora.merge": False}, "Missing mandatory value: actor_rollout_ref."
     "rollout.name", "Missing mandatory value: actor_rollout_ref.rollout.name"),
    ("dynamic-mismatch", {A + "use_dynamic_bsz": True, R + "log_prob_use_dynamic_bsz": False},
     "use_dynamic_bsz == rollout.log_prob_use_dynamic_bsz", None),
    ("old-micro-alone", {A + "ppo_micro_batch_size_per_gpu": None, A + "ppo_micro_batch_size": 8},
     "ppo_micro_batch_size_per_gpu is not None", None),
    ("mini-over-dp", {A + "ppo_mini_batch_size": 1, "trainer.n_gpus_per_node": 16},
     r"Got mini_batch_size=8 and self.engine.get_data_parallel_size\(\)=16", None),
    ("update-micro", {A + "ppo_micro_batch_size_per_gpu": 3}, r"micro_batch_size_per_gpu \(16 samples per GPU", None),
    ("logprob-micro", {R + "log_prob_micro_batch_size_per_gpu": 5}, r"rollout.log_prob_micro_batch_size_per_gpu=5",
     None),
    ("rollout-tp", {R + "tensor_model_parallel_size": 3}, "rollout world_size: 8 is not divisible by "
     "infer_world_size: 3", None),
    ("rollout-sync", {R + "mode": "sync"}, "Rollout mode 'sync' has been removed", None),
    ("rollout-pp", {R + "pipeline_model_parallel_size": 2}, "not implemented pipeline_model_parallel_size > 1", None),
    ("rollout-ep", {R + "expert_parallel_size": 4}, "expert_parallel_size must be equal", None),
    ("disaggregation", {R + "name": "trtllm", R + "disaggregation.enabled": True},
     r"requires rollout.name in \('sglang', 'vllm'\); got 'trtllm'", None),
    ("reward-manager", {"reward.reward_manager.name": "nope"}, "Reward manager is not registered", None),
    ("rm-rollout-name", {**RM_ON, RM + "rollout.name": "???"}, "Missing mandatory value: reward.reward_model.rollout",
     None),
    ("rm-pool", {**RM_ON, RM + "enable_resource_pool": True}, "reward_model.nnodes must be greater than 0", None),
    ("rm-filter-groups", {**RM_ON, "algorithm.filter_groups.enable": True},
     "algorithm.filter_groups requires the reward metric at sampling time", None),
]


def rule_case(changes: dict) -> dict:
    return {**BASE_OVERRIDES, **changes}


def test_the_base_of_the_rule_cases_passes():
    check_verl_rules(BASE_OVERRIDES)


@pytest.mark.parametrize(("changes", "fragment"), [case[1:3] for case in RULE_CASES],
                         ids=[case[0] for case in RULE_CASES])
def test_each_verl_rule_refuses(changes, fragment):
    with pytest.raises(UserError, match=fragment):
        check_verl_rules(rule_case(changes))


def test_a_batch_not_a_multiple_of_the_mini_batch_passes_verl_but_is_not_priced():
    """verl pads such a batch with synthetic samples (trainer_base.py:1620-1621) instead of refusing it."""
    odd = rule_case({A + "ppo_mini_batch_size": 12, A + "ppo_micro_batch_size_per_gpu": 4})
    check_verl_rules(odd)
    with pytest.raises(UserError, match="not a multiple of ppo_mini_batch_size 12"):
        recipe_from_verl(odd)


@pytest.mark.parametrize(("changes", "fragment"), [
    ({"algorithm.adv_estimator": "gae"}, "adv_estimator 'gae'"),
    ({"algorithm.filter_groups.enable": True}, "dynamic sampling"),
    ({A + "use_kl_loss": True, A + "kl_loss_coef": 0.0, REF + "log_prob_micro_batch_size_per_gpu": 8},
     "KL coefficient of 0"),
    ({"reward_model.enable": True}, "legacy key"),
    ({M + "use_fused_kernels": True}, "use_fused_kernels"),
    ({R + "over_sample_rate": 0.1}, "over_sample_rate"),
    ({M + "path": "~/models/deepseek-llm-7b-chat"}, "actor_rollout_ref.model.path"),
    ({M + "target_modules": ["c_attn"]}, "target_modules"),
])
def test_reading_back_refuses_what_flopplan_cannot_price(changes, fragment):
    with pytest.raises(UserError, match=fragment):
        recipe_from_verl(rule_case(changes))


def test_phi3_fused_lora_names_read_back_as_the_projections_they_fuse():
    """Phi-3's peft names (qkv_proj, gate_up_proj) are accepted where the policy is a Phi-3 and priced as the split
    projections they stand for; on another family they are refused with one line."""
    phi3 = {M + "path": "microsoft/Phi-3-mini-4k-instruct"}
    fused = recipe_from_verl(rule_case({**phi3, M + "target_modules": ["qkv_proj", "o_proj", "gate_up_proj",
                                                                       "down_proj"]}))[0]
    split = recipe_from_verl(rule_case({**phi3, M + "target_modules": "all-linear"}))[0]
    assert fused.lora_targets == split.lora_targets and step_cost(fused).step_phases == step_cost(split).step_phases
    assert recipe_from_verl(rule_case({**phi3, M + "target_modules": ["qkv_proj"]}))[0].lora_targets == (
        "q_proj", "k_proj", "v_proj")
    with pytest.raises(UserError, match="Phi-3 only") as caught:
        recipe_from_verl(rule_case({M + "target_modules": ["qkv_proj", "o_proj"]}))
    assert "\n" not in str(caught.value)


def test_reading_back_notes_unmerged_lora_and_validation():
    notes: list[str] = []
    back, steps = recipe_from_verl({k: v for k, v in BASE_OVERRIDES.items() if k not in (
        M + "lora.merge", "trainer.val_before_train", "trainer.total_training_steps")}, notes=notes)
    assert steps is None and back.lora_rank == 64
    text = "\n".join(notes)
    assert "unmerged" in text and "validation is not priced" in text
    assert recipe_from_verl({**BASE_OVERRIDES, "algorithm.use_kl_in_reward": True, "algorithm.kl_ctrl.kl_coef": 0.02,
                             REF + "log_prob_micro_batch_size_per_gpu": 8})[0].beta == 0.02


def test_override_files_parse_as_hydra_values(tmp_path):
    assert [parse_value(v) for v in ("null", "true", "64", "1e-3", "[console,wandb]", "'true'", "???")] == [
        None, True, 64, 0.001, ["console", "wandb"], "true", "???"]
    assert format_override("trainer.experiment_name", "true") == "trainer.experiment_name='true'"
    bad = tmp_path / "bad.overrides"
    bad.write_text("data.train_batch_size=16\nnot-an-override\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"bad.overrides:2: not a key=value override"):
        read_overrides(bad)


# -- the launch script ------------------------------------------------------------------------------------------

def test_the_launch_script_runs_main_ppo_with_exactly_the_overrides(tmp_path):
    fake = tmp_path / "bin" / "python3"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n', encoding="utf-8")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    recipe = RECIPES["full-beta-mu2-minibatch"]
    script = tmp_path / "run.sh"
    script.write_text(launch_script(export(recipe)), encoding="utf-8")
    refused = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "FILL_IN" in refused.stderr
    overrides = export(recipe, reward_function="/data/my reward's.py")
    script.write_text(launch_script(overrides), encoding="utf-8")
    done = subprocess.run(["bash", str(script), "trainer.save_freq=50"], capture_output=True, text=True, env=env,
                          check=True)
    args = done.stdout.splitlines()
    assert args[:3] == ["-m", "verl.trainer.main_ppo", "algorithm.adv_estimator=grpo"]
    assert args[2:] == [format_override(k, v) for k, v in overrides.items()] + ["trainer.save_freq=50"]
    read = {k: parse_value(v) for k, _, v in (a.partition("=") for a in args[2:-1])}
    assert read == overrides
    assert_same_price(recipe_from_verl(read)[0], recipe)


# -- verl's real validate_config (optional) ---------------------------------------------------------------------

QUOTED_NAME = "it's \\ a \"test\" 1e3 true\\"
VALIDATE_SCRIPT = r'''
import ast, contextlib, importlib.util, io, json, os, sys, types
cases = json.load(sys.stdin)
stdout, sys.stdout = sys.stdout, sys.stderr  # verl prints: keep stdout for the JSON answer
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from verl.trainer.ppo.utils import need_reference_policy
from verl.utils.config import validate_config
if importlib.util.find_spec("vllm") is None:
    # validate_config imports get_vllm_max_lora_rank from a module that imports vllm: serve verl's own function
    import verl.workers.rollout as rollout
    folder = os.path.join(os.path.dirname(rollout.__file__), "vllm_rollout")
    source = os.path.join(folder, "utils.py")
    tree = ast.parse(open(source, encoding="utf-8").read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_vllm_max_lora_rank")
    namespace = {}
    exec("from typing import Literal, get_args", namespace)
    exec(compile(ast.Module(body=[fn], type_ignores=[]), source, "exec"), namespace)
    package = types.ModuleType("verl.workers.rollout.vllm_rollout")
    package.__path__ = [folder]
    utils = types.ModuleType("verl.workers.rollout.vllm_rollout.utils")
    utils.get_vllm_max_lora_rank = namespace["get_vllm_max_lora_rank"]
    sys.modules[package.__name__], sys.modules[utils.__name__] = package, utils
results = []
for case in cases:
    result = {"name": case["name"], "ok": False, "error": None, "printed": None}
    try:
        GlobalHydra.instance().clear()
        with initialize_config_module("verl.trainer.config", version_base=None):
            cfg = compose(config_name="ppo_trainer", overrides=case["overrides"])
        result["experiment_name"] = cfg.trainer.experiment_name
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            validate_config(cfg, use_reference_policy=bool(need_reference_policy(cfg)), use_critic=False)
        result["ok"], result["printed"] = True, printed.getvalue().strip().splitlines()[-1:]
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    results.append(result)
print(json.dumps(results), file=stdout)
'''


def test_verls_own_validate_config_agrees(tmp_path):
    python = os.environ.get("FLOPPLAN_VERL_PYTHON")
    if not python:
        pytest.skip("set FLOPPLAN_VERL_PYTHON to a Python with verl 0.9.1 installed to run its validate_config")
    cases = [{"name": f"export:{name}{':unmerged' if kw else ''}", "expect": True,
              "overrides": [format_override(k, v) for k, v in export(r, **kw).items()]}
             for name, r in RECIPES.items() for kw in ({}, {"merge_lora": False})]
    cases += [{"name": name, "overrides": [format_override(k, v) for k, v in rule_case(changes).items()],
               "expect": verl_says} for name, changes, _, verl_says in RULE_CASES]
    quoted = {**BASE_OVERRIDES, "trainer.experiment_name": QUOTED_NAME}
    cases.append({"name": "quoted-name", "overrides": [format_override(k, v) for k, v in quoted.items()],
                  "expect": True})
    cases.append({"name": "append-existing", "overrides": [format_override(k, v) for k, v in BASE_OVERRIDES.items()]
                  + ["+data.train_batch_size=16"], "expect": "Could not append to config. An item is already at "
                  "'data.train_batch_size'"})
    cases.append({"name": "unknown-key", "overrides": [format_override(k, v) for k, v in BASE_OVERRIDES.items()]
                  + [format_override(A + "not_a_key", 1)], "expect": "Could not override 'actor_rollout_ref.actor."})
    script = tmp_path / "validate.py"
    script.write_text(VALIDATE_SCRIPT, encoding="utf-8")
    done = subprocess.run([python, str(script)], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(done.stdout)}
    sys.stdout.write("".join(f"\n{name}: {json.dumps(results[name])}" for name in results))
    wrong = []
    for case in cases:
        got, expect = results[case["name"]], case["expect"]
        if expect is True or expect is None:  # an export, or a rule only the workers enforce
            wrong += [] if got["ok"] else [f"{case['name']}: {got['error']}"]
        elif got["ok"] or expect not in got["error"]:
            wrong.append(f"{case['name']}: expected {expect!r}, got {got['error']}")
    assert results["quoted-name"]["experiment_name"] == QUOTED_NAME  # Hydra reads our quoting back
    assert not wrong, "\n".join(wrong)


def test_export_verl_from_a_plan_file_then_plan_from_verl_prices_what_verl_runs(tmp_path, verl_keys):
    from helpers import cli, one_line_error

    plan = tmp_path / "plan.json"
    cli("plan", "--model", "qwen2.5-0.5b", "--steps", "40", "--prompts-per-step", "16", "-G", "8",
        "--beta", "0.04", "--out", str(plan), check=True)
    out = tmp_path / "verl"
    written = json.loads(cli("export", "verl", str(plan), "--gpus-per-node", "4", "--out", str(out), "--json",
                             check=True).stdout)
    assert set(written["overrides"]) <= set(verl_keys) and any("logprob_head" in n for n in written["notes"])
    assert read_overrides(out / "overrides.txt") == written["overrides"]
    priced = json.loads(cli("plan", "--from-verl", str(out / "overrides.txt"), "--json", check=True).stdout)
    as_verl = json.loads(cli("plan", "--model", "qwen2.5-0.5b", "--steps", "40", "--prompts-per-step", "16", "-G",
                             "8", "--beta", "0.04", "--engine", "vllm", "--logprob-head", "all", "--update-padding",
                             "batch", "--json", check=True).stdout)
    assert priced["plans"][0]["flops"] == as_verl["plans"][0]["flops"]
    assert any("MFU formula" in n for n in priced["notes"])
    one_line_error(cli("export", "verl", str(tmp_path / "missing.json")), "missing.json")


def test_a_plan_whose_recipe_was_edited_after_pricing_is_not_exported(tmp_path):
    """A plan file whose recipe was edited by hand (its group size doubled) was exported as it stood: verl (which has
    no meter) would run the plan's steps at twice the priced step. Both exports refuse it in one line; the plan as
    written exports."""
    from helpers import cli, one_line_error

    plan = tmp_path / "plan.json"
    cli("plan", "--model", "qwen2.5-0.5b", "--steps", "40", "--prompts-per-step", "16", "-G", "8", "--out", str(plan),
        check=True)
    cli("export", "verl", str(plan), "--out", str(tmp_path / "verl"), check=True)
    data = json.loads(plan.read_text())
    data["plans"][0]["recipe"]["group_size"] = 16
    plan.write_text(json.dumps(data))
    for engine in ("verl", "trl"):
        one_line_error(cli("export", engine, str(plan), "--out", str(tmp_path / f"{engine}-edited")),
                       "FLOPs a step, and its recipe prices at")
        assert not (tmp_path / f"{engine}-edited").exists()


def test_a_budget_plan_exported_to_verl_keeps_its_budget(tmp_path):
    """verl always computes old log-probs and runs the head on every token: a budget plan exports the steps that
    fit its budget under those conventions, not the plan's own steps."""
    from helpers import cli

    plan = tmp_path / "plan.json"
    cli("plan", "--model", "qwen2.5-0.5b", "--budget", "1e18", "--out", str(plan), check=True)
    planned = json.loads(plan.read_text())["plans"][0]
    written = json.loads(cli("export", "verl", str(plan), "--out", str(tmp_path / "v"), "--json", check=True).stdout)
    steps = written["overrides"]["trainer.total_training_steps"]
    priced = json.loads(cli("plan", "--from-verl", str(tmp_path / "v" / "overrides.txt"), "--json",
                            check=True).stdout)["plans"][0]
    assert steps < planned["steps"] and priced["steps"] == steps
    assert priced["flops"]["total"] <= 1e18 < priced["flops"]["total"] + priced["step_flops"]


def test_a_config_that_leaves_calculate_log_probs_to_verl_is_priced(tmp_path):
    """A held-out user's five overrides were refused ("calculate_log_probs must be true or false, not None"): the key
    was not among the defaults flopplan reads verl's config with (its default is checked against the wheel above)."""
    from helpers import cli

    overrides = tmp_path / "overrides.txt"
    overrides.write_text("algorithm.adv_estimator=grpo\nactor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct\n"
                         "actor_rollout_ref.rollout.name=vllm\n"
                         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4\n"
                         "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8\n")
    priced = json.loads(cli("plan", "--from-verl", str(overrides), "--format", "json", check=True).stdout)
    assert priced["plans"][0]["steps"] > 0 and priced["plans"][0]["recipe"]["policy"] == "qwen2.5-0.5b"
    # the same user's: a search the config fixes was run over it (G 2925 where rollout.n is 1), and a sequence-
    # parallel size the 8 GPUs do not divide into was priced (verl's device mesh is (world // sp, sp))
    from helpers import one_line_error

    one_line_error(cli("plan", "--from-verl", str(overrides), "--solve", "group_size", "--steps", "10"),
                   "--solve group_size searches the recipe, which the engine configuration fixes")
    one_line_error(cli("plan", "--from-verl", str(overrides), "--target-learning-share", "0.3"),
                   "--target-learning-share searches the recipe")
    sp3 = tmp_path / "sp3.txt"
    sp3.write_text(overrides.read_text() + "actor_rollout_ref.actor.ulysses_sequence_parallel_size=3\n")
    one_line_error(cli("plan", "--from-verl", str(sp3)), "the 8 GPUs do not divide into "
                                                          "ulysses_sequence_parallel_size (3) groups")


def test_a_plan_for_gpu_hours_exports_the_steps_its_budget_buys_under_verls_conventions(tmp_path):
    """A held-out user's plan for 100 GPU-hours kept its 25,119 steps, which cost 114.5 GPU-hours priced back under
    verl's conventions: a budget in hours (or dollars) is re-solved on the plan's profile, as one in FLOPs was."""
    from helpers import cli

    plan = tmp_path / "plan.json"
    cli("plan", "--model", "qwen2.5-0.5b", "--engine", "vllm", "--logprob-head", "completion", "--prompt-len", "2048",
        "--completion-len", "128", "--gpu-hours", "100", "--device", "h100", "--out", str(plan), check=True)
    out = json.loads(cli("export", "verl", str(plan), "--out", str(tmp_path / "v"), "--json", check=True).stdout)
    assert any("steps fit the plan's budget of 100 GPU-hours" in n for n in out["notes"]), out["notes"]
    back = json.loads(cli("plan", "--from-verl", str(tmp_path / "v" / "overrides.txt"), "--device", "h100",
                          "--format", "json", check=True).stdout)["plans"][0]
    original = json.loads(plan.read_text())["plans"][0]
    assert back["steps"] < original["steps"] and back["gpu_hours"] <= 100


def test_an_export_round_trip_keeps_the_plans_counting_conventions(tmp_path):
    """A plan counted with causal attention was exported with its steps and priced back under the default
    convention, 99.2 PFLOP for a 98 PFLOP budget, with nothing said; --from-verl and --from-trl refused the
    convention options. The printed price-back command (verl) and a note (TRL) now carry them, and they apply."""
    from helpers import cli

    plan = tmp_path / "plan.json"
    cli("plan", "--model", "qwen2.5-1.5b", "--attention", "causal", "--attention-kernel", "sdpa", "--engine", "vllm",
        "--logprob-head", "all", "--update-padding", "none", "--budget", "9.8e16", "--out", str(plan), check=True)
    original = json.loads(plan.read_text())["plans"][0]
    cli("export", "verl", str(plan), "--out", str(tmp_path / "v"), check=True)
    header = (tmp_path / "v" / "overrides.txt").read_text().splitlines()[0]
    assert header.endswith("--attention causal --attention-kernel sdpa"), header
    back = json.loads(cli("plan", "--from-verl", str(tmp_path / "v" / "overrides.txt"), "--attention", "causal",
                          "--attention-kernel", "sdpa", "--format", "json", check=True).stdout)["plans"][0]
    assert (back["steps"], back["flops"]["total"]) == (original["steps"], original["flops"]["total"])
    for_trl = tmp_path / "trl-plan.json"  # (TRL 1.16 runs its own log-prob head: the planner's default)
    cli("plan", "--model", "qwen2.5-1.5b", "--attention", "causal", "--attention-kernel", "sdpa", "--prompt-len",
        "128", "--completion-len", "256", "--steps", "10", "--out", str(for_trl), check=True)
    out = json.loads(cli("export", "trl", str(for_trl), "--out", str(tmp_path / "t"), "--json", check=True).stdout)
    assert any("the plan counted with --attention causal --attention-kernel sdpa" in n for n in out["notes"])
    trl = json.loads(cli("plan", "--from-trl", out["grpo_config"], "--from-trl", out["flopplan_config"],
                         "--prompt-len", "128", "--device", "cuda", "--attention", "causal", "--attention-kernel",
                         "sdpa", "--format", "json", check=True).stdout)["plans"][0]
    assert trl["flops"]["total"] == json.loads(for_trl.read_text())["plans"][0]["flops"]["total"]
