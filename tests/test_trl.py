"""TRL's GRPOTrainer: its round arithmetic and checks, the GRPOConfig <-> Recipe mapping both ways, and real TRL
runs whose ledger equals what executes (FlopCounterMode plus the in-place GEMMs it misses) phase by phase, and
which ``flopplan plan --from-trl`` predicts to the integer."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import ROOT, cli, one_line_error, sigint_in_round_2

from flopplan.cost import step_cost
from flopplan.engines.trl import (
    GRPO_DEFAULTS,
    NO_FLOPS,
    check_grpo_config,
    grpo_config_kwargs,
    installed_trl_version,
    logprob_head_for,
    recipe_from_trl,
    trl_run,
)
from flopplan.errors import UserError
from flopplan.lengths import Length
from flopplan.recipe import Recipe, RewardSystem
from flopplan.runfile import trl_checkpoints

CPU_PROFILE = ROOT / "calibration" / "cpu-amd-epyc-2-threads-quick" / "profile.json"

PROMPT = 9  # the built-in task's prompts: "6 3 1 1 >" (no BOS with the character tokenizer TRL gets)


# -- the arithmetic of a round -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("config", "rollouts", "steps", "old"), [
    ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 1, "steps_per_generation": 2}, 8, 2, True),
    ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "steps_per_generation": 4}, 16, 2, True),
    ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2}, 8, 1, False),
    ({"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "num_iterations": 2}, 8, 2, True),
    ({"per_device_train_batch_size": 4, "generation_batch_size": 32}, 32, 8, True),
    ({"per_device_train_batch_size": 4, "generation_batch_size": 32, "steps_per_generation": 8}, 32, 8, True),
])
def test_round_arithmetic_follows_trl(config, rollouts, steps, old):
    """Rollouts a round, optimizer steps a round, and TRL's old-log-prob rule (ga % (spg x mu) != 0), as the TRL
    runs measured them (ga=1/spg=2 on, ga=2/spg=4 on, ga=spg off, mu=2 on)."""
    run = trl_run({"num_generations": 4, **config})
    assert (run.rollouts, run.optimizer_steps_per_round, run.old_logprobs) == (rollouts, steps, old)
    assert run.rounds(5) == -(-5 * run.ga // (run.spg * run.mu))


@pytest.mark.parametrize(("config", "fragment"), [
    ({"num_generations": 1}, "at least 2 generations"),
    ({"steps_per_generation": 2, "generation_batch_size": 16}, "--world-size 2"),  # both: saved by TRL, checked
    ({"per_device_train_batch_size": 4, "generation_batch_size": 6}, "divisible by the global batch size"),
    ({"per_device_train_batch_size": 3, "num_generations": 4}, "divisible by num_generations"),
    ({"gradient_accumulation_steps": 4, "steps_per_generation": 2}, "micro-steps of two generation rounds"),
    ({"gradient_accumulation_steps": 2, "steps_per_generation": 1}, "a generation round's 1 micro-steps"),
    # a round of 2 x 2 micro-steps is one optimizer step over both passes: no round is spanned, and none is said to be
    ({"gradient_accumulation_steps": 4, "steps_per_generation": 2, "num_iterations": 2},
     "hold micro-steps of all of the round's num_iterations"),
    ({"gradient_accumulation_steps": 3, "steps_per_generation": 2, "num_iterations": 3,
      "per_device_train_batch_size": 2}, "micro-steps of several of the round's num_iterations"),
    ({"per_device_train_batch_size": 0}, "positive integer"),
])
def test_trl_constraints_are_checked_first(config, fragment):
    with pytest.raises(UserError, match=fragment):
        trl_run({"per_device_train_batch_size": 4, "num_generations": 4, **config})


def test_the_log_prob_head_follows_the_trl_version_and_device():
    assert logprob_head_for("1.14.2", "cpu") == logprob_head_for("1.14.0", "cuda") == "completion"
    assert logprob_head_for("1.16.0", "cpu") == "fused" and logprob_head_for("1.16.0", "cuda") == "fused-compact"
    assert logprob_head_for("1.15.0", "cuda") == "fused-compact"
    with pytest.raises(UserError, match="Triton"):
        logprob_head_for("1.15.0", "cpu")
    # pre-releases and local builds read by their release (the digits were split by hand: "1.16rc1" was refused)
    assert logprob_head_for("1.16rc1", "cpu") == logprob_head_for("1.16.0.dev0", "cpu") == "fused"
    assert logprob_head_for("1.17.0+cu128", "cuda") == "fused-compact"
    assert logprob_head_for("1.14", "cpu") == "completion"
    for bad in ("", "trl", "1", "one.two"):
        with pytest.raises(UserError, match="cannot read the TRL version"):
            logprob_head_for(bad, "cpu")


def test_a_trl_config_that_sets_use_cpu_is_priced_on_the_cpus_head(tmp_path):
    """TRL runs a config with use_cpu on the CPU (its log-prob head the CPU's), but --from-trl priced it with the
    GPU's head unless --device cpu was given; a GPU named beside use_cpu contradicts it and is refused."""
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"num_generations": 4, "per_device_train_batch_size": 4,
                                  "max_completion_length": 16, "use_cpu": True}))
    args = ("plan", "--from-trl", str(config), "--model", "tiny", "--prompt-len", "8", "--steps", "3", "--json")
    priced = json.loads(cli(*args, check=True).stdout)["plans"][0]["recipe"]["logprob_head"]
    on_cpu = json.loads(cli(*args, "--device", "cpu", check=True).stdout)["plans"][0]["recipe"]["logprob_head"]
    assert priced == on_cpu == logprob_head_for(installed_trl_version(), "cpu")
    one_line_error(cli(*args, "--device", "h100"), "the TRL configuration sets use_cpu")
    gpu = tmp_path / "gpu.json"  # a calibrated GPU's profile, as flopplan calibrate names one
    gpu.write_text(json.dumps({**json.loads(CPU_PROFILE.read_text()), "device": "NVIDIA H100 80GB HBM3",
                               "device_type": "cuda"}))
    one_line_error(cli(*args, "--profile", str(gpu)), "not on the --profile's 'NVIDIA H100 80GB HBM3'")
    with_profile = json.loads(cli(*args, "--profile", str(CPU_PROFILE), check=True).stdout)
    assert with_profile["plans"][0]["recipe"]["logprob_head"] == on_cpu


def test_a_trl_config_timed_with_a_cpus_profile_is_priced_on_the_cpus_head(tmp_path):
    """Without use_cpu, TRL runs where the machine has a GPU; a CPU's --profile says the run is timed on a CPU,
    where TRL runs on the CPU and its log-prob head is the CPU's (it was priced with the GPU's)."""
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"num_generations": 4, "per_device_train_batch_size": 4,
                                  "max_completion_length": 16}))
    args = ("plan", "--from-trl", str(config), "--model", "tiny", "--prompt-len", "8", "--steps", "3", "--json")
    heads = {flag: json.loads(cli(*args, *flag, check=True).stdout)["plans"][0]["recipe"]["logprob_head"]
             for flag in (("--profile", str(CPU_PROFILE)), ("--device", "cpu"), ("--device", "cuda"))}
    assert heads[("--profile", str(CPU_PROFILE))] == heads[("--device", "cpu")]
    assert heads[("--device", "cpu")] != heads[("--device", "cuda")]  # else this test could not fail
    named = tmp_path / "xeon.json"  # a profile named by hand, its device_type stated (as calibrate writes it)
    named.write_text(json.dumps({**json.loads(CPU_PROFILE.read_text()), "device": "Intel Xeon Platinum 8480+",
                                 "device_type": " CPU "}))  # (as typed by hand: read as calibrate's "cpu")
    out = json.loads(cli(*args, "--profile", str(named), check=True).stdout)
    assert out["plans"][0]["recipe"]["logprob_head"] == heads[("--device", "cpu")]


def _flop_fields(recipe: Recipe) -> dict:
    return step_cost(recipe).step_phases


@pytest.mark.parametrize("recipe", [
    Recipe(policy="qwen2.5-0.5b", lora_rank=16, prompts_per_step=8, group_size=4, micro_batch=8,
           completion_len=Length.fixed(128), prompt_len=Length.fixed(64)),
    Recipe(policy="qwen2.5-0.5b", lora_rank=None, prompts_per_step=8, group_size=4, micro_batch=4, iterations=2,
           beta=0.04, generation_batch=16, completion_len=Length.fixed(64), prompt_len=Length.fixed(32),
           reward=RewardSystem.parse("orm:qwen2.5-0.5b")),
], ids=["lora", "full-beta-mu2-orm"])
@pytest.mark.parametrize("world", [1, 2])
def test_recipe_to_grpo_config_and_back(recipe, world):
    r = recipe.with_(generation_batch=recipe.rollouts_per_step // world, optimizer_batch=recipe.rollouts_per_step,
                     old_logprobs="auto")  # (an ORM's template tokens go through reward_overhead_tokens)
    kwargs = grpo_config_kwargs(r, world_size=world, steps=7)
    back, run, notes = recipe_from_trl(kwargs, model=r.policy, prompt_len=r.prompt_len, world_size=world,
                                       device="cuda", trl_version="1.16.0")
    assert _flop_fields(back) == _flop_fields(r) and not notes
    assert kwargs["max_steps"] == 7 * run.optimizer_steps_per_round and run.rounds(kwargs["max_steps"]) == 7


@pytest.mark.parametrize(("changes", "fragment"), [
    ({"reward": RewardSystem.parse("prm")}, "process reward model"),
    ({"update_padding": "none"}, "packed"),
    ({"eval_every": 5, "eval_prompts": 4}, "--no-eval"),
    ({"generation_batch": 8}, "--generation-batch"),
    ({"logprob_head": "all"}, "logprob_head all"),
    ({"group_size": 1}, "num_generations < 2"),  # TRL's GRPOConfig refuses it: the exported file would not load
])
def test_what_trl_cannot_run_is_refused(changes, fragment):
    with pytest.raises(UserError, match=fragment):
        grpo_config_kwargs(Recipe(prompts_per_step=4, group_size=4).with_(**changes))


def test_fields_flopplan_cannot_price_are_refused_by_name():
    base = {"num_generations": 4, "per_device_train_batch_size": 4}
    for field, value in (("use_liger_kernel", True), ("pad_to_multiple_of", 64), ("eval_strategy", "steps"),
                         ("use_transformers_paged", True),  # TRL's deprecated alias of continuous batching
                         ("gradient_checkpointing_kwargs", {"use_reentrant": True})):
        with pytest.raises(UserError, match=field):
            recipe_from_trl({**base, field: value}, model="tiny", prompt_len=Length.fixed(8))
    _, _, notes = recipe_from_trl({**base, "learning_rate": 1e-5, "num_generatons": 2,
                                   "vllm_importance_sampling_cap": 3.0}, model="tiny",
                                  prompt_len=Length.fixed(8))
    assert notes and "num_generatons" in notes[0] and "learning_rate" not in notes[0] and "_cap" not in notes[0]


@pytest.mark.parametrize("field", ["use_vllm", "vllm_importance_sampling_correction", "gradient_checkpointing"])
@pytest.mark.parametrize("value", ["false", "abc", [1], float("nan"), -1, 2.5, None])
def test_a_boolean_field_that_is_not_true_or_false_is_refused(field, value):
    base = {"num_generations": 4, "per_device_train_batch_size": 4}
    with pytest.raises(UserError, match=f"{field} must be true or false"):
        recipe_from_trl({**base, field: value}, model="tiny", prompt_len=Length.fixed(8))
    recipe_from_trl({**base, field: False}, model="tiny", prompt_len=Length.fixed(8))


@pytest.mark.parametrize("name", ["gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"])
@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"use_reentrant": False, "early_stop": False}, r"\(gradient_checkpointing_kwargs\) early_stop False: flopplan"),
    ({"every_n_layers": 2}, r"\(gradient_checkpointing_kwargs\) every_n_layers 2: flopplan prices the default"),
    ({"context_fn": "selective"}, r"\(gradient_checkpointing_kwargs\) context_fn: flopplan prices the default"),
    ({"use_reentrant": True}, "use_reentrant: flopplan prices non-reentrant"),
    ([("use_reentrant", False)], "a dict of keywords"),
])
def test_checkpointing_keywords_that_change_the_recompute_are_refused(name, kwargs, fragment):
    """Under either name (transformers 5.25's activation_checkpointing_kwargs, or TRL's deprecated alias)."""
    base = {"num_generations": 4, "per_device_train_batch_size": 4}
    with pytest.raises(UserError, match=fragment):
        recipe_from_trl({**base, name: kwargs}, model="tiny", prompt_len=Length.fixed(8))
    neutral = {"use_reentrant": False, "preserve_rng_state": False, "determinism_check": "none", "early_stop": True,
               "every_n_layers": 1, "offload": True}
    recipe_from_trl({**base, name: neutral}, model="tiny", prompt_len=Length.fixed(8))


def test_transformers_new_checkpointing_name_is_read_and_wins_over_the_old():
    """A config that turns checkpointing off by transformers 5.25's name is priced without it (it was priced with
    TRL's default on, the field noted as unknown); where both names are set the new one wins, as in
    TrainingArguments."""
    base = {"num_generations": 4, "per_device_train_batch_size": 4}
    for fields, on in (({"activation_checkpointing": False}, False), ({"gradient_checkpointing": False}, False),
                       ({"activation_checkpointing": True, "gradient_checkpointing": False}, True), ({}, True)):
        recipe, _, notes = recipe_from_trl({**base, **fields}, model="tiny", prompt_len=Length.fixed(8))
        assert recipe.grad_ckpt is on and notes == [], fields
    check_grpo_config({"activation_checkpointing": False}, "a file")  # a GRPOConfig field (plan --from-trl)
    off = {**base, "activation_checkpointing": False, "activation_checkpointing_kwargs": {"every_n_layers": 2}}
    assert not recipe_from_trl(off, model="tiny", prompt_len=Length.fixed(8))[0].grad_ckpt  # its keywords unused


def test_early_stop_false_reruns_what_the_priced_recompute_skips():
    """Why early_stop=False is refused and the RNG setting is not: FlopCounterMode over a checkpointed step of a real
    (tiny, random) Qwen2 counts more FLOPs with early_stop=False (each layer's down projection rerun) and the same
    with preserve_rng_state=False."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=256, attn_implementation="eager", use_cache=False)
    counted = {}
    for name, kwargs in (("default", {"use_reentrant": False}), ("rng", {"use_reentrant": False,
                                                                          "preserve_rng_state": False}),
                         ("no early stop", {"use_reentrant": False, "early_stop": False})):
        model = Qwen2ForCausalLM(config).train()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        with FlopCounterMode(display=False) as counter:
            model(input_ids=torch.randint(0, 256, (2, 16))).logits.sum().backward()
        counted[name] = counter.get_total_flops()
    assert counted["rng"] == counted["default"]
    # the down projection's forward, 2 x tokens x intermediate x hidden, once more per layer
    assert counted["no early stop"] - counted["default"] == 2 * (2 * 32 * 128 * 64)


@pytest.mark.parametrize(("field", "value", "fragment"), [
    ("generation_kwargs", {"num_beams": 2}, "'num_beams': flopplan does not price it (TRL samples one sequence"),
    ("generation_kwargs", {"use_cache": False}, "use_cache: flopplan prices KV-cached generation"),
    ("generation_kwargs", {"eos_token_id": 3}, "'eos_token_id': flopplan does not price it (TRL stops and cuts"),
    ("generation_kwargs", {"max_new_tokens": 24}, "'max_new_tokens': flopplan does not price it (set max_comp"),
    ("generation_kwargs", {"assistant_model": "draft"}, "'assistant_model': flopplan does not price it"),
    ("generation_kwargs", '{"num_beams": 2}', "'num_beams'"),
    ("generation_kwargs", {"cache_implementation": "static"}, "generation_kwargs cache_implementation 'static'"),
    ("cache_implementation", "static", "GRPOConfig cache_implementation 'static'"),
])
def test_generation_settings_that_change_what_a_rollout_computes_are_refused(field, value, fragment):
    """TRL merges generation_kwargs over its own generation config: beams, an uncached or static-cache decode and
    another EOS ran more than the meter charged, and max_new_tokens ran past the guard's bound, silently (a review).
    Sampling settings compute the same passes and are read past."""
    base = {"num_generations": 4, "per_device_train_batch_size": 4}
    with pytest.raises(UserError, match=re.escape(fragment)) as caught:
        recipe_from_trl({**base, field: value}, model="tiny", prompt_len=Length.fixed(8))
    assert "\n" not in str(caught.value)
    sampled = {"temperature": 0.7, "top_p": 0.9, "min_p": 0.05, "repetition_penalty": 1.1, "min_new_tokens": 2,
               "use_cache": True, "cache_implementation": "dynamic"}
    plain, _, _ = recipe_from_trl(base, model="tiny", prompt_len=Length.fixed(8))
    read, _, notes = recipe_from_trl({**base, "generation_kwargs": sampled, "cache_implementation": "offloaded"},
                                     model="tiny", prompt_len=Length.fixed(8))
    assert read == plain and not notes


def test_with_vllm_generation_kwargs_are_vllms_sampling_params():
    """With use_vllm TRL passes generation_kwargs to vLLM's SamplingParams, and its cache_implementation is not
    used: vLLM's logit and stop settings are read past (the meter charges the ids vLLM returned), what changes the
    sequences or their limit is refused (a review found vLLM's seed and penalties refused as HF keys)."""
    base = {"num_generations": 4, "per_device_train_batch_size": 4, "use_vllm": True}
    neutral = {"seed": 1, "presence_penalty": 0.5, "frequency_penalty": 0.2, "min_tokens": 2, "stop": ["\n\n"],
               "logit_bias": {"3": -1.0}}
    recipe_from_trl({**base, "generation_kwargs": neutral, "cache_implementation": "static"}, model="tiny",
                    prompt_len=Length.fixed(8))
    for key, value in (("n", 2), ("max_tokens", 64), ("prompt_logprobs", 1)):
        with pytest.raises(UserError, match=f"generation_kwargs '{key}': flopplan does not price it with vLLM"):
            recipe_from_trl({**base, "generation_kwargs": {key: value}}, model="tiny", prompt_len=Length.fixed(8))


def test_a_policys_own_generation_config_that_changes_what_generate_computes_is_refused():
    """transformers fills every generation setting TRL leaves unset from the policy's generation_config: a model
    saved with num_beams 3 ran 3 beams a row under TRL while the meter charged one (a review). What TRL sets itself,
    or the script's generation_kwargs, overrides the model's."""
    from flopplan.engines.trl_generation import check_model_generation

    for settings, fragment in (({"num_beams": 3}, "num_beams 3"), ({"use_cache": False}, "use_cache False"),
                               ({"num_return_sequences": 2}, "num_return_sequences 2"),
                               ({"cache_implementation": "static"}, "cache_implementation 'static'"),
                               ({"prefill_chunk_size": 16}, "prefill_chunk_size 16"),
                               ({"use_mtp": True}, "use_mtp True")):
        with pytest.raises(UserError, match=re.escape(f"the policy's generation_config sets {fragment}")):
            check_model_generation(settings, set(), None)
    check_model_generation({"num_beams": 3}, {"num_beams"}, None)  # the script's generation_kwargs override it
    check_model_generation({"cache_implementation": "static"}, set(), "dynamic")  # GRPOConfig's replaces it
    check_model_generation({"max_length": 32768, "eos_token_id": 2, "top_p": 0.8, "num_beams": 1}, set(), None)


def test_the_python_apis_budget_and_peak_refusals_name_its_keywords():
    """A held-out user: meter(budget=Budget(dollars=...), profile="h100") without a price was told to pass
    --price-per-gpu-hour, the CLI's flag, in a Python script; and peak_flops=-1 was accepted (an MFU below 0)."""
    from types import SimpleNamespace

    from flopplan.budget import Budget
    from flopplan.engines.trl_hook import meter
    from flopplan.planner import budget_flops

    with pytest.raises(UserError, match=re.escape("needs a price per GPU-hour (price_per_hour=...)")):
        budget_flops(Budget(dollars=1.0), Recipe(policy="tiny"), "h100")
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=0))
    for peak in (-1, 0, float("nan"), float("inf"), "1e15", True):  # (a string raised TypeError; True read as 1)
        with pytest.raises(UserError, match=r"peak_flops must be .* a positive number"):
            meter(trainer, peak_flops=peak)


def test_phi3_fused_lora_names_are_read_where_the_policy_is_a_phi3():
    """A Phi-3 LoraConfig (qkv_proj, gate_up_proj) prices as the split projections it fuses, and the export
    writes peft's fused names back; elsewhere the fused names are refused with one line."""
    base = {"num_generations": 4, "per_device_train_batch_size": 4}
    phi3 = "microsoft/Phi-3-mini-4k-instruct"
    fused, _, _ = recipe_from_trl({**base, "peft": {"r": 8, "target_modules": ["qkv_proj", "o_proj", "gate_up_proj",
                                                                              "down_proj"]}},
                                  model=phi3, prompt_len=Length.fixed(8))
    split, _, _ = recipe_from_trl({**base, "peft": {"r": 8, "target_modules": "all-linear"}}, model=phi3,
                                  prompt_len=Length.fixed(8))
    assert fused.lora_targets == split.lora_targets and _flop_fields(fused) == _flop_fields(split)
    assert grpo_config_kwargs(fused.with_(old_logprobs="auto"))["peft"]["target_modules"] == [
        "qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
    for model, targets, fragment in (("qwen2.5-0.5b", ["qkv_proj", "o_proj"], "Phi-3 only"),
                                     (phi3, ["qkv_proj", "c_attn"], "c_attn")):
        with pytest.raises(UserError, match=fragment) as caught:
            recipe_from_trl({**base, "peft": {"r": 8, "target_modules": targets}}, model=model,
                            prompt_len=Length.fixed(8))
        assert "\n" not in str(caught.value)


# -- against the installed TRL -----------------------------------------------------------------------------------

def test_defaults_and_field_names_are_trls():
    trl = pytest.importorskip("trl")
    fields = {f.name: f.default for f in dataclasses.fields(trl.GRPOConfig)}
    assert {k: fields[k] for k in GRPO_DEFAULTS} == GRPO_DEFAULTS
    assert set(fields) >= NO_FLOPS


def test_every_field_of_trls_grpo_config_is_priced_read_past_or_refused():
    """plan --from-trl told a held-out team to check the spelling of 13 fields trl 1.16 has (entropy_coef,
    chat_template_kwargs, ...): every field of the release is now classified, and only a name it lacks is noted."""
    trl = pytest.importorskip("trl")
    from flopplan.engines.trl import BATCH_KEYS, PRICED
    from flopplan.engines.trl_fields import READ_PAST, SPECIAL, TRL_FIELDS

    if trl.__version__ == "1.16.0":
        assert {f.name for f in dataclasses.fields(trl.GRPOConfig)} == TRL_FIELDS
    classes = (PRICED | frozenset(BATCH_KEYS), NO_FLOPS, READ_PAST, SPECIAL)
    assert set().union(*classes) == TRL_FIELDS
    assert all(not a & b for i, a in enumerate(classes) for b in classes[i + 1:])  # each field in one class


@pytest.mark.parametrize(("extra", "outcome"), [
    ({"entropy_coef": 0.01, "chat_template_kwargs": {"think": True}, "ddp_timeout": 600, "lr_scheduler_kwargs": {}},
     None),
    ({"entropy_coef": 0.01, "learnign_rate": 1e-6}, "fields trl 1.16's GRPOConfig does not have (read past: check "
                                                    "their spelling): learnign_rate"),
    ({"auto_find_batch_size": True}, "refused: GRPOConfig auto_find_batch_size: TRL's GRPOConfig refuses it"),
    ({"eval_on_start": True}, "refused: GRPOConfig eval_on_start: an evaluation's FLOPs"),
    ({"eval_on_start": "false"}, "refused: GRPOConfig eval_on_start must be true or false, not 'false'"),
    ({"fsdp": "full_shard", "fsdp_config": {"activation_checkpointing": True}},
     "refused: GRPOConfig fsdp_config activation_checkpointing"),
    # read as transformers reads it (helper 139): the fsdp_ prefix, a string, and only with fsdp on
    ({"fsdp": "full_shard", "fsdp_config": {"fsdp_activation_checkpointing": "true"}},
     "refused: GRPOConfig fsdp_config activation_checkpointing"),
    ({"fsdp": "full_shard", "fsdp_config": {"activation_checkpointing": "no"}}, None),
    ({"fsdp_config": {"activation_checkpointing": True}}, None),
    # each process's share of one batch, and ranks that share one: the round is not a batch per process
    ({"accelerator_config": {"split_batches": True}}, "refused: GRPOConfig accelerator_config split_batches"),
    ({"accelerator_config": {"split_batches": False, "dispatch_batches": None}}, None),
    ({"parallelism_config": {"tp_size": 2}}, "refused: GRPOConfig parallelism_config tp_size 2"),
    # helper 141's: settings of another type were read past, truthy values read as false, a tp_size true as 1
    ({"accelerator_config": ["split_batches"]}, "refused: GRPOConfig accelerator_config must be an object or"),
    ({"accelerator_config": {"split_batches": [1]}}, "refused: GRPOConfig accelerator_config split_batches"),
    ({"parallelism_config": "tp=2"}, "refused: GRPOConfig parallelism_config must be an object, not 'tp=2'"),
    ({"parallelism_config": {"tp_size": True}}, "refused: parallelism_config tp_size must be a positive integer"),
    ({"parallelism_config": {"tp_size": 0}}, "refused: parallelism_config tp_size must be a positive integer"),
])
def test_a_trl_configs_other_fields_are_noted_only_where_trl_lacks_them_or_they_change_the_price(tmp_path, extra,
                                                                                                 outcome):
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"num_generations": 4, "per_device_train_batch_size": 4,
                                  "max_completion_length": 16, **extra}))
    out = cli("plan", "--from-trl", str(config), "--model", "tiny", "--prompt-len", "8", "--steps", "3", "--json")
    if outcome is not None and outcome.startswith("refused: "):
        one_line_error(out, outcome.removeprefix("refused: "))
        return
    notes = json.loads(out.stdout)["notes"]
    assert not any("check their spelling" in n for n in notes) if outcome is None else \
        any(n.startswith(outcome) for n in notes), notes


def test_an_exported_config_loads_in_grpo_config_and_trl_parser_and_prices_back(tmp_path):
    trl = pytest.importorskip("trl")
    plan = tmp_path / "plan.json"
    cli("plan", "--model", "qwen2.5-0.5b", "--lora-rank", "16", "--prompts-per-step", "8", "-G", "4",
        "--micro-batch", "8", "--generation-batch", "16", "--mu", "2", "--steps", "10", "--out", str(plan), check=True)
    out = cli("export", "trl", str(plan), "--world-size", "2", "--out", str(tmp_path / "trl"), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    fields = yaml.safe_load(Path(data["grpo_config"]).read_text())
    config = trl.GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", **fields)
    assert config.steps_per_generation * config.per_device_train_batch_size * 2 == 32
    (parsed,) = trl.TrlParser([trl.GRPOConfig]).parse_args_and_config(
        ["--config", data["grpo_config"], "--output_dir", str(tmp_path / "out"), "--use_cpu", "true"])
    assert {k: getattr(parsed, k) for k in fields} == fields
    own = yaml.safe_load(Path(data["flopplan_config"]).read_text())
    assert own["peft"]["r"] == 16 and own["reward_funcs"] == ["rule"] and own["model_name_or_path"] == "qwen2.5-0.5b"
    assert "accelerate launch --num_processes 2" in data["command"] and os.access(data["launcher"], os.X_OK)
    priced = json.loads(cli("plan", "--from-trl", data["grpo_config"], "--from-trl", data["flopplan_config"],
                            "--world-size", "2", "--prompt-len", "256", "--json").stdout)["plans"][0]
    original = json.loads(plan.read_text())["plans"][0]
    assert priced["step_flops"] == original["step_flops"] and priced["recipe"]["lora"]["rank"] == 16


def test_an_orm_plan_prices_back_from_its_export_at_the_plans_step_flops(tmp_path):
    """The reward model's template tokens (--reward-overhead, 32 by default for orm:tiny) travel in flopplan.yaml,
    so the round trip keeps the plan's price; --from-trl takes --reward-overhead for the user's data (0: plain
    text, as TRL joins prompt and completion), and without either it prices 0 and says what the overhead is for."""
    def step_flops(*args: str) -> int:
        return json.loads(cli("plan", *args, "--json", check=True).stdout)["plans"][0]["step_flops"]

    recipe = ("--model", "tiny", "-G", "4", "--prompts-per-step", "4", "--prompt-len", "9", "--completion-len", "4",
              "--lora-rank", "8", "--reward", "orm:tiny")  # (tiny-rm's own template is 0 tokens)
    plan = tmp_path / "plan.json"
    cli("plan", *recipe, "--steps", "5", "--out", str(plan), check=True)
    out = cli("export", "trl", str(plan), "--out", str(tmp_path / "trl"), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["flopplan"]["reward_overhead_tokens"] == 32 and "plain-text" in data["notes"][0]
    files = ("--from-trl", data["grpo_config"], "--from-trl", data["flopplan_config"], "--prompt-len", "9")
    assert step_flops(*files) == json.loads(plan.read_text())["plans"][0]["step_flops"]
    assert step_flops(*files, "--reward-overhead", "0") == step_flops(*recipe, "--reward-overhead", "0", "--steps", "5")
    own = yaml.safe_load(Path(data["flopplan_config"]).read_text())
    del own["reward_overhead_tokens"]
    bare = tmp_path / "own.yaml"
    bare.write_text(yaml.safe_dump(own))
    priced = json.loads(cli("plan", "--from-trl", data["grpo_config"], "--from-trl", str(bare), "--prompt-len", "9",
                            "--json", check=True).stdout)
    assert priced["plans"][0]["recipe"]["reward_overhead_tokens"] == 0
    assert any("--reward-overhead N" in n for n in priced["notes"])
    rule = tmp_path / "rule.yaml"
    rule.write_text(yaml.safe_dump({"num_generations": 4, "per_device_train_batch_size": 4}))
    one_line_error(cli("plan", "--from-trl", str(rule), "--model", "tiny", "--prompt-len", "9", "--reward-overhead",
                       "4"), "not a rule")
    for processes in ("0", "-1"):  # 0 was priced as one process (a held-out user)
        one_line_error(cli("plan", "--from-trl", str(rule), "--model", "tiny", "--prompt-len", "9", "--world-size",
                           processes), f"the world size must be a positive integer, not {processes}")


def test_num_train_epochs_is_known_and_a_run_without_max_steps_says_what_it_prices(tmp_path):
    """num_train_epochs is a GRPOConfig field, not a misspelling; without max_steps TRL stops after its epochs of data
    flopplan has not read, so the plan says it prices the budget instead, and how an epoch counts in rounds."""
    config = tmp_path / "grpo.yaml"
    config.write_text(yaml.safe_dump({"per_device_train_batch_size": 8, "num_generations": 4, "num_train_epochs": 2}))

    def notes(*extra: str) -> list[str]:
        return json.loads(cli("plan", "--from-trl", str(config), "--model", "tiny", "--prompt-len", "16",
                              "--completion-len", "8", "--json", *extra, check=True).stdout)["notes"]

    unset = notes()
    assert not any("do not know" in n for n in unset)
    assert any("max_steps is not set: TRL stops after num_train_epochs (2) epochs" in n and "floor(R / 2) rounds" in n
               for n in unset)
    assert not any("max_steps is not set" in n for n in notes("--steps", "3"))
    config.write_text(yaml.safe_dump({"per_device_train_batch_size": 8, "num_generations": 4, "max_steps": 3}))
    assert not any("max_steps is not set" in n for n in notes())


@pytest.mark.parametrize("head", ["completion", "all"])
def test_export_refuses_a_head_the_exported_trl_does_not_run(tmp_path, head):
    """The export targets trl 1.16, whose chunked head is fused-compact on CUDA and fused on the CPU: a plan priced
    with TRL <= 1.14's head (or verl's) would cost otherwise there, so it is refused, naming the head to plan with."""
    plan = tmp_path / "plan.json"
    cli("plan", "--model", "tiny", "--lora-rank", "8", "-G", "4", "--prompts-per-step", "8", "--steps", "3",
        "--logprob-head", head, "--generation-batch", "16", "--out", str(plan), check=True)
    line = one_line_error(cli("export", "trl", str(plan), "--world-size", "2", "--out", str(tmp_path / "x")),
                          f"logprob_head {head}: the exported GRPOConfig is for trl >=1.16,<1.17")
    assert "--logprob-head fused-compact" in line and "--logprob-head fused " in line and "<= 1.14" not in line
    assert not (tmp_path / "x").exists()


def test_export_with_no_processes_writes_nothing(tmp_path):
    plan = tmp_path / "plan.json"
    cli("plan", "--model", "tiny", "--full", "--prompts-per-step", "4", "-G", "4", "--steps", "2", "--out",
        str(plan), check=True)
    for world in ("0", "-1"):
        one_line_error(cli("export", "trl", str(plan), "--world-size", world, "--out", str(tmp_path / "x")),
                       "world size")
    assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def saved_grpo_config(tmp_path_factory):
    """A GRPOConfig as TRL saves it: its to_dict() as JSON and its training_args.bin (torch.save)."""
    trl = pytest.importorskip("trl")
    import torch

    folder = tmp_path_factory.mktemp("saved")
    config = trl.GRPOConfig(output_dir=str(folder / "out"), per_device_train_batch_size=4, num_generations=4,
                            gradient_accumulation_steps=2, steps_per_generation=4, max_completion_length=8,
                            max_steps=6, use_cpu=True, report_to="none")
    (folder / "args.json").write_text(json.dumps(config.to_dict(), default=str))
    torch.save(config, folder / "training_args.bin")
    by_hand = {"per_device_train_batch_size": 4, "num_generations": 4, "gradient_accumulation_steps": 2,
               "steps_per_generation": 4, "max_completion_length": 8, "max_steps": 6}
    (folder / "hand.yaml").write_text(yaml.safe_dump(by_hand))
    return folder


def test_a_saved_grpo_config_prices_as_its_fields_do(saved_grpo_config):
    def priced(name: str, *extra: str) -> dict:
        out = cli("plan", "--from-trl", str(saved_grpo_config / name), "--model", "tiny", "--prompt-len",
                  str(PROMPT), "--device", "cpu", "--json", *extra)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    hand = priced("hand.yaml")
    for name in ("args.json", "training_args.bin"):
        saved = priced(name)
        assert saved["plans"][0]["phases"] == hand["plans"][0]["phases"]
        assert saved["plans"][0]["steps"] == hand["plans"][0]["steps"] == 3
        assert not any("do not know" in n for n in saved["plans"][0].get("notes", []))
    # generation_batch_size was filled for one process: on two the fields disagree, and say so
    one_line_error(cli("plan", "--from-trl", str(saved_grpo_config / "args.json"), "--model", "tiny",
                       "--prompt-len", "9", "--world-size", "2"), "--world-size 1")


def test_what_is_not_a_grpo_config_is_refused(tmp_path):
    bert = tmp_path / "config.json"
    bert.write_text(json.dumps({"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 768}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hidden_size": 768, "vocab_size": 30522}))
    for path in (bert, other):
        one_line_error(cli("plan", "--from-trl", str(path), "--model", "tiny", "--prompt-len", "9"), "GRPOConfig")
    twice = tmp_path / "twice.yaml"
    twice.write_text("num_generations: 4\n")
    one_line_error(cli("plan", "--from-trl", str(twice), "--from-trl", str(twice), "--model", "tiny",
                       "--prompt-len", "9"), "num_generations")


# -- real runs -------------------------------------------------------------------------------------------------

SMALL = ["--prompts-per-step", "4", "-G", "4", "--micro-batch", "8", "--no-progress", "--fixed-completion-len"]
SCENARIOS = {
    "full, rule, checkpointing, 2 micro-batches": [],
    "LoRA, beta, mu 2, no checkpointing, ORM": ["--lora-rank", "4", "--beta", "0.04", "--mu", "2",
                                                "--no-grad-ckpt", "--reward", "orm:tiny"],
    "full, beta, mu 2, checkpointing, ORM": ["--full", "--beta", "0.04", "--mu", "2", "--reward", "orm:tiny"],
    "LoRA, checkpointing, rule": ["--lora-rank", "4"],
}


def _trl_config_of(run: Path, steps: int, path: Path) -> Path:
    """The GRPOConfig fields of a run (what a TRL user would have written), as a YAML file."""
    from flopplan.train.config import TrainConfig

    stored = json.loads((run / "config.json").read_text())
    stored.pop("flopplan_version"), stored.pop("flopplan_run_version")
    recipe = TrainConfig.from_data(stored).recipe
    kwargs = grpo_config_kwargs(recipe, steps=steps)
    kwargs["reward_funcs"] = ["tiny"] if recipe.reward.kind == "orm" else [{"rule": "exact match"}]
    kwargs.pop("reward_overhead_tokens", None)  # the built-in task's plain-text prompts: TRL reads no template
    path.write_text(yaml.safe_dump(kwargs))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(SCENARIOS))
def test_trl_runs_are_counted_exactly_and_planned_exactly(tmp_path, case):
    pytest.importorskip("trl")
    run = tmp_path / "run"
    out = cli("train", "--engine", "trl", "--out", str(run), "--steps", "2", *SMALL, *SCENARIOS[case],
              "--measure-flops", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    s = json.loads(out.stdout)
    assert s["engine"] == "trl" and s["measured_equals_closed_form"] is True
    for unit, values in s["measured_by_unit"].items():
        assert values["measured"] == values["closed_form"] > 0, unit
    assert s["engine_checks"]["num_tokens"]["equal"] is True
    planned = json.loads(cli("plan", "--from-trl", str(_trl_config_of(run, 2, tmp_path / "trl.yaml")), "--model",
                             "tiny", "--prompt-len", str(PROMPT), "--device", "cpu", "--json").stdout)["plans"][0]
    assert {p: v["flops"] for p, v in planned["phases"].items()} == {p: v["executed"] for p, v in s["phases"].items()}


@pytest.mark.slow
def test_a_trl_run_stops_at_its_budget_and_resumes_with_its_ledger(tmp_path, planned_run):
    pytest.importorskip("trl")
    run = tmp_path / "run"
    budget = 5_000_000_000
    out = cli("train", "--engine", "trl", "--out", str(run), "--budget", str(budget), *SMALL, "--checkpoint-every",
              "1", "--json")
    s = json.loads(out.stdout)
    assert "its budget spent" not in out.stderr  # (flopplan train reports the stop itself, once)
    assert s["stop_reason"].startswith("budget") and s["within_budget"] and s["flops"]["total"] <= budget
    assert s["stop"]["reason"] == "budget" and s["stop"]["round"] == s["steps"] + 1
    bound = s["stop"]["bound_flops"]
    assert s["flops"]["total"] + bound > budget  # it stopped only because the next round might not fit
    checkpoints = [path for _, path in trl_checkpoints(run / "trl")]  # by step (checkpoint-10 after checkpoint-9)
    assert checkpoints and json.loads((checkpoints[-1] / "flopplan_ledger.json").read_text())[
        "flopplan_trl_ledger_version"] == 1  # versioned, written atomically
    builtin = json.loads((planned_run[1] / "summary.json").read_text())
    assert set(s) - {"engine_checks"} <= set(builtin) | {"measured_flops", "measured_by_unit",
                                                         "measured_equals_closed_form"}
    (checkpoints[-1] / "trainer_state.json").unlink()  # killed while saving its last: resumed from the one before
    more = json.loads(cli("train", "--out", str(run), "--resume", "--budget", str(2 * budget), "--json").stdout)
    assert more["steps"] > s["steps"] and more["flops"]["total"] > s["flops"]["total"] and more["lost_flops"] > 0
    assert more["flops"]["total"] + more["lost_flops"] <= 2 * budget
    assert [m["step"] for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())] == \
        list(range(1, more["steps"] + 1))
    for checkpoint in (run / "trl").glob("checkpoint-*"):  # as if killed before its first checkpoint was complete
        (checkpoint / "trainer_state.json").unlink(missing_ok=True)
    (run / "summary.json").unlink()
    again = json.loads(cli("train", "--out", str(run), "--resume", "--budget", str(3 * budget), "--json").stdout)
    # started again: what its logs hold and the work an earlier kill lost (kept beside them since) are charged
    assert again["lost_flops"] == more["flops"]["total"] + more["lost_flops"]
    assert again["flops"]["total"] + again["lost_flops"] <= 3 * budget and again["steps"] >= 1
    assert [m["step"] for m in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())] == \
        list(range(1, again["steps"] + 1))


@pytest.mark.slow
def test_ctrl_c_stops_a_trl_run_after_its_round_says_how_to_go_on_and_the_resume_loses_nothing(tmp_path):
    """``flopplan train --engine trl`` under Ctrl-C: as the built-in loop, a checkpoint after the round in
    progress, one line saying how to continue, exit 130, no traceback; ``--resume`` records no lost work."""
    pytest.importorskip("trl")
    run = tmp_path / "run"
    code, err = sigint_in_round_2([sys.executable, "-m", "flopplan", "train", "--engine", "trl", "--out", str(run),
                                   "--steps", "500", *SMALL], run)
    assert code == 130 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("flopplan: interrupted; continue with: flopplan train --out")
    stopped = json.loads((run / "summary.json").read_text())
    assert stopped["stop"]["reason"] == "interrupted" and 2 <= stopped["steps"] < 500
    more = json.loads(cli("train", "--out", str(run), "--resume", "--steps", str(stopped["steps"] + 1),
                          "--json").stdout)
    assert more["steps"] == stopped["steps"] + 1 and more["lost_flops"] == 0


@pytest.mark.slow
def test_two_processes_count_what_one_would_and_stop_together(tmp_path):
    """torchrun with 2 CPU processes (gloo): each charges its shard, the totals are summed; with fixed lengths the
    global round costs the same as on one process, and the budget stops both on the same round."""
    pytest.importorskip("trl")
    budget = ["--budget", "3000000000", *SMALL]
    one = tmp_path / "one"
    single = json.loads(cli("train", "--engine", "trl", "--out", str(one), *budget, "--json").stdout)
    two = tmp_path / "two"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          "-m", "flopplan", "train", "--engine", "trl", "--out", str(two), *budget,
                          "--generation-batch", "8", "--json"], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    pair = json.loads((two / "summary.json").read_text())
    assert pair["steps"] == single["steps"] and pair["flops"] == single["flops"]
    assert pair["stop_reason"] == single["stop_reason"]


def test_train_on_trl_refuses_what_it_cannot_meter(tmp_path):
    pytest.importorskip("trl")
    one_line_error(cli("train", "--engine", "trl", "--out", str(tmp_path / "r"), "--steps", "1", "--eval-every",
                       "2", "--eval-prompts", "4", "--eval-at-end"), "--eval-at-end")
    one_line_error(cli("train", "--engine", "trl", "--out", str(tmp_path / "r"), "--steps", "1", "--reward", "prm:tiny",
                       "--no-eval"), "process reward model")


def test_a_refused_trl_run_writes_nothing(tmp_path):
    """Refused once the trainer is built (a budget that buys no round, checked when the meter attaches): the run
    folder this command would have made, models and TRL's folder included, is absent."""
    pytest.importorskip("trl")
    out = tmp_path / "run"
    one_line_error(cli("train", "--engine", "trl", "--out", str(out), "--budget", "1000000", *SMALL), "buys no round")
    assert not out.exists()


def test_a_trl_training_cap_below_one_round_is_refused_before_it_starts_and_one_round_is_allowed(tmp_path):
    """--train-flops below the first round's training FLOPs (evaluations excluded, as the meter's guard prices the
    round) is refused in one line when the meter attaches, as the built-in trainer refuses one below its first step
    (it reached TRL's on_train_begin, whose budget message formatted the absent budget: a TypeError, and the run
    folder was left behind); a cap of exactly one round trains that round and stops before the next."""
    pytest.importorskip("trl")
    run = tmp_path / "run"
    low = one_line_error(cli("train", "--engine", "trl", "--out", str(run), "--steps", "2", "--train-flops", "1000",
                             *SMALL), "--train-flops 1,000 buys no round: the first could cost up to ")
    assert not run.exists()
    found = re.search(r"could cost up to ([\d,]+) training FLOPs \(evaluations excluded\)", low)
    assert found, low
    round_ = int(found.group(1).replace(",", ""))
    s = json.loads(cli("train", "--engine", "trl", "--out", str(run), "--steps", "2", "--train-flops", str(round_),
                       *SMALL, "--json", check=True).stdout)
    assert s["steps"] == 1 and s["flops"]["total"] - s["flops"]["evaluation"] == round_
    assert s["stop"]["reason"] == "budget" and s["stop"]["bound_flops"] == round_


def test_a_resumed_trl_run_refuses_a_training_cap_below_what_it_trained_as_the_built_in_trainer_does(tmp_path):
    """``--resume --train-flops`` below the training FLOPs the checkpoint's ledger holds: the built-in trainer
    refuses it in one line; the TRL engine stopped at once, exit 0, its stop saying a negative number of FLOPs was
    left. A cap
    equal to them is taken (the run stops at once, as a race pilot run again does)."""
    pytest.importorskip("trl")
    run = tmp_path / "run"
    s = json.loads(cli("train", "--engine", "trl", "--out", str(run), "--steps", "1", "--checkpoint-every", "1",
                       *SMALL, "--json", check=True).stdout)
    trained = s["flops"]["total"] - s["flops"]["evaluation"]
    one_line_error(cli("train", "--out", str(run), "--resume", "--steps", "3", "--train-flops", str(trained - 1)),
                   f"the run has already trained {trained:,} FLOPs (evaluations excluded): --train-flops "
                   f"{trained - 1:,} does not extend it")
    again = json.loads(cli("train", "--out", str(run), "--resume", "--steps", "3", "--train-flops", str(trained),
                           "--json", check=True).stdout)
    assert again["steps"] == 1 and again["stop"]["reason"] == "budget"


def test_a_resumed_trl_runs_new_limits_are_recorded_with_the_run_as_the_built_in_trainer_records_them(tmp_path):
    """``--resume --steps/--train-flops`` extends a TRL run, but its config.json kept the old limits (max_steps 1,
    train_flops null), so a later plain ``--resume`` ran under them: at its old max_steps, stopped for its steps.
    Now they are recorded once the checkpoint accepted them, and the plain resume stops at the extended cap."""
    pytest.importorskip("trl")
    run = tmp_path / "run"
    s = json.loads(cli("train", "--engine", "trl", "--out", str(run), "--steps", "1", "--checkpoint-every", "1",
                       *SMALL, "--json", check=True).stdout)
    cap = 5 * (s["flops"]["total"] - s["flops"]["evaluation"]) // 2  # two rounds fit, not three
    more = json.loads(cli("train", "--out", str(run), "--resume", "--steps", "4", "--train-flops", str(cap),
                          "--json", check=True).stdout)
    assert more["steps"] == 2 and more["stop"]["reason"] == "budget"
    config = json.loads((run / "config.json").read_text())
    assert (config["max_steps"], config["train_flops"], config["budget_flops"]) == (4, cap, None)
    again = json.loads(cli("train", "--out", str(run), "--resume", "--json", check=True).stdout)
    assert again["steps"] == 2 and again["stop"] == more["stop"]  # (was: its old max_steps, "steps")


def test_a_dense_policys_moe_reward_model_runs_the_experts_implementation_the_run_counts(tmp_path):
    """--experts names the experts of a mixture-of-experts reward model beside a dense policy too (the plan counts
    it so), but TRL loads a reward model with the policy's model_init_kwargs, which carried experts_implementation
    only for an MoE policy: the reward model ran transformers' grouped_mm and the run was refused ("the recipe given
    does not match the trainer: its experts 'grouped_mm', the recipe's 'eager'"). Now it runs eager, recorded as
    the run's convention, and what FlopCounterMode counts of it equals the ledger with no grouped matmul missed."""
    pytest.importorskip("trl")
    run = tmp_path / "run"
    s = json.loads(cli("train", "--engine", "trl", "--out", str(run), "--steps", "1", *SMALL, "--no-eval", "--reward",
                       "orm:tiny-moe", "--experts", "eager", "--measure-flops", "--json", check=True).stdout)
    assert s["measured_equals_closed_form"] is True
    assert s["measured_by_unit"]["reward"]["measured"] == s["measured_by_unit"]["reward"]["closed_form"] > 0
    assert s["conventions"]["experts_implementation"] == "eager"
    blind = [c["shapes"]["blind_spots"]["grouped_mm"] for line in
             map(json.loads, (run / "ledger.jsonl").read_text().splitlines()) for c in line["charges"]]
    assert blind and not any(blind)


def test_an_moe_policys_dense_reward_model_loads(tmp_path):
    """TRL loads a reward model with the policy's model_init_kwargs: an MoE policy's experts_implementation reached
    a dense reward model, which transformers refuses (a ValueError traceback, "Qwen2ForSequenceClassification does
    not support setting experts implementation"). It loads without it, and is counted as it runs."""
    pytest.importorskip("trl")
    s = json.loads(cli("train", "--engine", "trl", "--out", str(tmp_path / "run"), "--model", "tiny-moe", "--steps",
                       "1", *SMALL, "--no-eval", "--reward", "orm:tiny", "--measure-flops", "--json",
                       check=True).stdout)
    assert s["steps"] == 1 and s["measured_equals_closed_form"] is True
    assert s["measured_by_unit"]["reward"]["measured"] == s["measured_by_unit"]["reward"]["closed_form"] > 0


@pytest.mark.slow
def test_a_learned_reward_model_rewards_on_trl_as_on_the_built_in_trainer(tmp_path):
    """A reward model from ``flopplan reward-model train`` under ``--engine trl``: TRL rewards with its raw logit,
    so ``--reward-output`` was ignored (rewards of -3.4 where the built-in trainer's probability was 0.03), the
    run's "accuracy" column was that reward, the card's line (held-out agreement, upfront FLOPs) was not printed,
    and the run was named after TRL's folders ("policy GRPO run"). The reward is now the output asked for (auto:
    the probability), the accuracy the exact-match rule's, logged by TRL at weight 0. A folder whose tokenizer
    cannot feed the model (no tokenizer files; another model's, with more tokens than its embeddings) failed
    mid-round with a traceback, leaving a run folder: it is refused in one line before training, and nothing is
    left."""
    pytest.importorskip("trl")
    from flopplan.grpo.codecs import hf_char_tokenizer
    from flopplan.grpo.reward_model import RewardModelTraining, train_reward_model
    from flopplan.grpo.tasks import DigitTask

    folder = tmp_path / "rm"
    train_reward_model(RewardModelTraining(DigitTask("first", 4), samples=64, held_out=32, validation=32, steps=6,
                                           batch=8, check_every=3, target_agreement=None), folder)
    base = ["train", "--engine", "trl", "--model", "tiny", "--reward", "orm:tiny-rm", "--steps", "1", "--no-eval",
            *SMALL]
    for output, run in (("auto", tmp_path / "auto"), ("verdict", tmp_path / "verdict")):
        out = cli(*base, "--reward-model-path", str(folder), "--reward-output", output, "--out", str(run), check=True)
        assert "held-out agreement with the rule" in out.stdout
        steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
        steps = [m for m in steps if "reward" in m]
        assert len(steps) == 1
        for m in steps:
            assert 0 <= m["reward"] <= 1 and 0 <= m["accuracy"] <= 1
            assert output == "auto" or (m["reward"] * 16).is_integer()  # a verdict: 0 or 1 for each of 16
        summary = json.loads((run / "summary.json").read_text())  # named as the recipe names them, not by the
        assert (summary["model"], summary["reward"]) == ("tiny", "orm:tiny-rm")  # folders TRL read ("policy")
    (tmp_path / "no-tokenizer").mkdir()
    for p in folder.iterdir():
        if "token" not in p.name:
            (tmp_path / "no-tokenizer" / p.name).write_bytes(p.read_bytes())
    wider = tmp_path / "wider"
    wider.mkdir()
    for p in folder.iterdir():
        (wider / p.name).write_bytes(p.read_bytes())
    tokenizer = hf_char_tokenizer()
    tokenizer.add_tokens([f"<t{i}>" for i in range(40)])  # 63 tokens, 32 embeddings
    tokenizer.save_pretrained(wider)
    for bad, fragment in (("no-tokenizer", "usable tokenizer"), ("wider", "63 tokens but its model has 32")):
        for engine in ("trl", "builtin"):
            run = tmp_path / f"{bad}-{engine}"
            one_line_error(cli(*base, "--engine", engine, "--reward-model-path", str(tmp_path / bad), "--out",
                               str(run)), fragment)
            assert not run.exists()


@pytest.mark.slow
def test_trl_evaluation_is_metered_into_the_evaluation_bucket(tmp_path):
    """--eval-every runs TRL's evaluation loop on the held-out split (a baseline, then after every round): every
    unit, the evaluation's included, equals what executed, and the evaluation bucket holds the eval.* phases."""
    pytest.importorskip("trl")
    run = tmp_path / "run"
    out = cli("train", "--engine", "trl", "--out", str(run), "--steps", "2", *SMALL, "--eval-every", "1",
              "--eval-prompts", "4", "--measure-flops", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    s = json.loads(out.stdout)
    assert s["measured_equals_closed_form"] is True
    for unit, values in s["measured_by_unit"].items():
        assert values["measured"] == values["closed_form"] > 0, unit
    evaluation = {p: v["executed"] for p, v in s["phases"].items() if p.startswith("eval.")}
    assert s["flops"]["evaluation"] == sum(evaluation.values()) > 0 and evaluation["eval.decode"] > 0
    lines = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    assert sum(c["unit"] == "eval" for line in lines for c in line["charges"]) == 3  # the baseline, 2 rounds
    assert cli("report", str(run), "--no-plot").returncode == 0
    assert s["conventions"]["attention_kernel"] in ("eager", "sdpa") and all(
        c["shapes"]["attention_kernel"] == s["conventions"]["attention_kernel"]
        for line in lines for c in line["charges"] if c["unit"] == "update")


def test_a_refused_policy_architecture_names_where_it_was_loaded_from(tmp_path):
    """A held-out user's MoE policy with a dense layer between its MoE layers was refused as "config ''": the
    refusal names the folder the model was loaded from (or the trainer's model, built in memory)."""
    import transformers

    from flopplan.engines.trl_trainer import _architecture

    config = transformers.Qwen3MoeConfig(hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         head_dim=8, vocab_size=100, num_experts=4, num_experts_per_tok=2,
                                         mlp_only_layers=[1])
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path / "moe")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "moe")
    with pytest.raises(UserError, match=re.escape(f"config '{tmp_path / 'moe'}': layer 1 of 2 would be dense")):
        _architecture(loaded)
    with pytest.raises(UserError, match=re.escape("config \"the trainer's model\": layer 1 of 2 would be dense")):
        _architecture(transformers.AutoModelForCausalLM.from_config(config))


def test_a_reward_function_that_fails_on_trl_stops_the_run_in_one_line_and_it_resumes_once_fixed(tmp_path,
                                                                                                  monkeypatch):
    """`flopplan train --engine trl` with a reward function that raised (or returned a count other than the
    completions') ended in TRL's traceback; it stops in one line naming the function, and once the function is
    fixed the run resumes, what ran since its last checkpoint charged as lost. An async function stays async."""
    pytest.importorskip("trl")
    import asyncio

    from flopplan.grpo.reward_funcs import RewardFailed, RewardFuncs

    rewards = tmp_path / "rewards.py"
    rewards.write_text("def score(completions, **kw):\n    raise KeyError('label')\n\n"
                       "async def short(completions, **kw):\n    return [1.0]\n")
    monkeypatch.chdir(tmp_path)
    guarded = RewardFuncs.load(["rewards.py:score", "rewards.py:short"]).guarded()
    assert [f.__name__ for f in guarded] == ["score", "short"] and asyncio.iscoroutinefunction(guarded[1])
    with pytest.raises(RewardFailed, match="returned 1 rewards for 2 completions"):
        asyncio.run(guarded[1](prompts=["a", "b"], completions=["1", "2"], completion_ids=[[1], [2]]))
    run = tmp_path / "run"
    failed = cli("train", "--engine", "trl", "--out", str(run), "--steps", "2", *SMALL, "--reward-func",
                 "rewards.py:score")
    one_line_error(failed, "reward function 'rewards.py:score' raised KeyError: 'label': the run stopped in round 1")
    rewards.write_text("def score(completions, **kw):\n    return [0.5] * len(completions)\n")
    s = json.loads(cli("train", "--out", str(run), "--resume", "--json", check=True).stdout)
    assert s["steps"] == 2 and s["lost_flops"] > 0 and s["within_budget"]
    # rewards finite in float32 whose group sums are not (3e38 each) made TRL's advantages NaN, which TRL 1.16 sets
    # to 0 (the run learned nothing, silently; under scale_rewards none they fill the policy with NaN); the round
    # stops in one line, as the built-in trainer's step does
    rewards.write_text("def score(completions, **kw):\n    return [3e38] * len(completions)\n")
    one_line_error(cli("train", "--engine", "trl", "--out", str(tmp_path / "big"), "--steps", "2", *SMALL,
                       "--reward-func", "rewards.py:score"),
                   "give group advantages that are not finite in float32: scale the rewards or their weights down: "
                   "the run stopped in round 1")


@pytest.mark.parametrize(("columns", "weights", "scale", "overflows"), [
    ([[3e38] * 4], [1.0], "group", True),  # the group's sum
    ([[3e38] * 4], [1.0], "none", True),
    ([[2e38, 1.0, 1.0, 1.0], [2e38, 1.0, 1.0, 1.0]], [1.0, 1.0], "group", True),  # the sum over functions
    ([[1e10, 2e10, 3e10, 4e10]], [1e30], "group", True),  # the weight
    ([[1e19, -1e19, 1e19, -1e19]], [1.0], "group", True),  # the squared deviations the group's std sums
    ([[1e19, -1e19, 1e19, -1e19]], [1.0], "none", False),  # none takes no std: TRL's advantages are finite
    ([[0.0, 1e19] * 8], [1.0], "group", False),  # (helper 139: refused on the batch's spread, which group does not
    ([[0.0, 1e19] * 8], [1.0], "batch", True),   # take; TRL's advantages were +-0.866)
    ([[1e18, -1e18, 5.0, float("nan")], [float("nan")] * 4], [1.0, 2.0], "group", False),  # NaN: a None
    ([[0.0, 1.0, 1.0, 0.0] * 2], [1.0], "batch", False),
])
def test_rewards_trl_normalises_are_refused_where_float32_overflows(columns, weights, scale, overflows):
    import torch

    from flopplan.grpo.loss import check_trl_rewards
    from flopplan.grpo.reward_funcs import RewardFailed

    rewards = torch.tensor(columns, dtype=torch.float32).T  # a row per completion, a column per function
    if overflows:
        with pytest.raises(RewardFailed, match="not finite in float32"):
            check_trl_rewards(rewards, torch.tensor(weights), 4, scale)
    else:
        check_trl_rewards(rewards, torch.tensor(weights), 4, scale)


def test_a_trl_config_whose_field_names_are_not_text_is_refused_in_one_line(tmp_path):
    """YAML reads `5: 3`, `null: 3` or a date as a key; the notes joined them as text and raised TypeError."""
    for key in ("5", "null", "2020-01-01"):
        config = tmp_path / "args.yaml"
        config.write_text(f"num_generations: 4\nper_device_train_batch_size: 4\n{key}: 3\n")
        one_line_error(cli("plan", "--from-trl", str(config), "--model", "tiny", "--prompt-len", "8", "--steps", "3"),
                       "field names are text, not")
    config.write_text("num_generations: 4\nper_device_train_batch_size: 4\nfsdp: full_shard\nfsdp_config: {1: 2}\n")
    one_line_error(cli("plan", "--from-trl", str(config), "--model", "tiny", "--prompt-len", "8", "--steps", "3"),
                   "GRPOConfig fsdp_config: field names are text, not 1")


def test_an_fsdp_config_file_that_turns_on_fsdps_checkpointing_is_refused(tmp_path):
    """transformers reads fsdp_config from a JSON file's path too; its activation checkpointing was priced as none."""
    (tmp_path / "fsdp.json").write_text(json.dumps({"activation_checkpointing": True}))
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"num_generations": 4, "per_device_train_batch_size": 4, "max_completion_length": 16,
                                  "fsdp": "full_shard", "fsdp_config": str(tmp_path / "fsdp.json")}))
    one_line_error(cli("plan", "--from-trl", str(config), "--model", "tiny", "--prompt-len", "8", "--steps", "3"),
                   "GRPOConfig fsdp_config activation_checkpointing")
