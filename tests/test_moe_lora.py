"""LoRA targets on a mixture-of-experts policy priced as peft 0.22 adapts them, or refused with one line: peft's
``target_modules="all-linear"`` adapts more of an MoE model than the seven projections (Qwen3-MoE and Mixtral: the
routed experts and the router; Qwen2-MoE: those and the shared expert's gate), which flopplan priced as the seven (a
Mixtral training step counted 5,651,968 FLOPs where 11,458,048 ran); Mixtral's MLP names match no module, so targets
that name only them adapt nothing (peft raises) and were priced. Every place that builds a recipe is checked:
``plan``, ``estimate``, ``plan --from-trl`` and verl's config. Real transformers models, random-initialised, and
real peft."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers import cli, one_line_error, tiny_moe

from flopplan.arch import REGISTRY, ArchSpec
from flopplan.errors import UserError
from flopplan.hf_config import to_hf_config

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

FAMILIES = ("qwen3_moe", "qwen2_moe", "mixtral")
UNPRICED = {"qwen3_moe": ("mlp.gate", "the router (gate.weight)"), "mixtral": ("mlp.gate", "the router (gate.weight)"),
            "qwen2_moe": ("mlp.shared_expert_gate", "its gate (shared_expert_gate)")}
"""What peft's all-linear adapts in each family that flopplan does not price (the router, the shared expert's gate):
its module in layer 0, and how the refusal names it."""


tiny = tiny_moe


def _config(tmp_path: Path, family: str) -> Path:
    path = tmp_path / family / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_hf_config(tiny(family))))
    return path


def _peft_adapts(family: str, targets) -> set[str]:
    """The parts of layer 0 that peft gives adapters for these targets (its trainable parameters' owners)."""
    from peft import LoraConfig, get_peft_model

    from flopplan.measure.models import build_model

    model = get_peft_model(build_model(tiny(family), device="cpu", seed=0), LoraConfig(r=4, target_modules=targets))
    return {name.split("layers.0.")[1].split(".lora_")[0].removesuffix(".base_layer")
            for name, p in model.named_parameters() if p.requires_grad and "layers.0." in name}


def _trl_file(tmp_path: Path, targets) -> Path:
    path = tmp_path / "grpo.yaml"
    path.write_text(yaml.safe_dump({"per_device_train_batch_size": 4, "num_generations": 2,
                                    "max_completion_length": 6, "peft": {"r": 4, "target_modules": targets}}))
    return path


def _plan_from_trl(tmp_path: Path, family: str, targets):
    return cli("plan", "--from-trl", str(_trl_file(tmp_path, targets)), "--model", str(_config(tmp_path, family)),
               "--prompt-len", "4", "--steps", "1", "--device", "cpu", "--json")


def _verl(tmp_path: Path, family: str, targets) -> None:
    from flopplan.engines.verl import recipe_from_verl, verl_overrides
    from flopplan.recipe import Recipe

    overrides = verl_overrides(Recipe(policy="tiny", lora_rank=4, engine="vllm", logprob_head="all",
                                      update_padding="none"),
                               steps=1, gpus_per_node=1, model_path="some/folder")
    recipe, _ = recipe_from_verl({**overrides, "actor_rollout_ref.model.target_modules": targets},
                                 model=str(_config(tmp_path, family)))
    assert recipe.policy_spec is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_all_linear_on_an_moe_policy_is_refused_naming_what_peft_adapts(family, tmp_path):
    adapted = _peft_adapts(family, "all-linear")
    module, named = UNPRICED[family]
    assert module in adapted  # what flopplan does not price, adapted by peft
    assert {f"self_attn.{p}" for p in ("q_proj", "k_proj", "v_proj", "o_proj")} <= adapted
    line = one_line_error(_plan_from_trl(tmp_path, family, "all-linear"), "peft.target_modules all-linear")
    assert named in line and "name the targets" in line
    with pytest.raises(UserError, match=r"model\.target_modules all-linear"):
        _verl(tmp_path, family, "all-linear")


def test_all_linear_on_a_dense_policy_is_the_seven_projections(tmp_path):
    seven = json.loads(cli("plan", "--from-trl", str(_trl_file(tmp_path, [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])), "--model", "tiny",
        "--prompt-len", "4", "--steps", "1", "--device", "cpu", "--json").stdout)
    every = json.loads(cli("plan", "--from-trl", str(_trl_file(tmp_path, "all-linear")), "--model", "tiny",
                           "--prompt-len", "4", "--steps", "1", "--device", "cpu", "--json").stdout)
    assert every["plans"][0]["flops"] == seven["plans"][0]["flops"]


def test_verl_export_of_an_moe_policy_names_its_targets_not_all_linear(tmp_path):
    """verl builds its LoraConfig from target_modules: all-linear would adapt the router as well."""
    from flopplan.engines.verl import recipe_from_verl, verl_overrides
    from flopplan.recipe import Recipe

    recipe = Recipe(policy="tiny-moe", engine="vllm", logprob_head="all", update_padding="none")
    overrides = verl_overrides(recipe, steps=1, gpus_per_node=1, model_path="some/folder")
    assert REGISTRY["tiny-moe"].moe is not None
    assert sorted(overrides["actor_rollout_ref.model.target_modules"]) == sorted(recipe.lora_targets)
    assert recipe_from_verl(overrides, model="tiny-moe")[0].lora_targets == recipe.lora_targets


@pytest.mark.parametrize("targets", [["gate_proj", "up_proj", "down_proj"], ["down_proj"]])
def test_mixtral_lora_on_mlp_names_alone_adapts_nothing_and_is_refused(targets, tmp_path):
    """Mixtral's experts are parameters (peft's names for them: w1, w2, w3), its MLP names match no module."""
    with pytest.raises(ValueError, match="not found in the base model"):
        _peft_adapts("mixtral", targets)
    config = str(_config(tmp_path, "mixtral"))
    names = ",".join(targets)
    one_line_error(cli("estimate", "--model", config, "--phase", "train", "--batch", "2", "--seq", "7",
                       "--lora-rank", "4", "--lora-targets", names), "adapts nothing")
    one_line_error(cli("plan", "--model", config, "--lora-rank", "4", "--lora-targets", names, "--budget", "1e15"),
                   "adapts nothing")
    one_line_error(_plan_from_trl(tmp_path, "mixtral", targets), "adapts nothing")
    with pytest.raises(UserError, match="adapts nothing"):
        _verl(tmp_path, "mixtral", targets)
    assert _peft_adapts("mixtral", ["q_proj", *targets]) == {"self_attn.q_proj"}  # with a module named: priced
    assert cli("estimate", "--model", config, "--phase", "train", "--seq", "7", "--lora-rank", "4",
               "--lora-targets", f"q_proj,{names}").returncode == 0


# -- the TRL meter reads back peft's conversion of a Qwen3-MoE's MLP names -----------------------------------------

SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _peft_model(targets, family="qwen3_moe", **extra):
    from peft import LoraConfig, get_peft_model

    from flopplan.measure.models import build_model

    return get_peft_model(build_model(tiny(family), device="cpu", seed=0),
                          LoraConfig(r=4, lora_alpha=8, target_modules=targets, **extra))


@pytest.mark.parametrize("family", ["qwen3_moe", "qwen2_moe"])
@pytest.mark.parametrize("targets", [SEVEN, ["q_proj", "down_proj"], ["gate_proj", "up_proj"]])
def test_the_meter_reads_pefts_conversion_of_the_mlp_names_back(targets, family):
    """peft moves a Qwen3-MoE's MLP names into target_parameters (gate_up_proj at rank 2r, down_proj), and from
    0.22 adds Qwen2-MoE's routed experts there beside its shared expert's modules; the meter refused any
    target_parameters, so flopplan's own default plan (LoRA on the seven) could not run on TRL."""
    from flopplan.engines.trl_trainer import policy_lora

    model = _peft_model(targets, family)
    assert model.peft_config["default"].target_parameters  # converted by peft
    rank, names = policy_lora(model)
    assert rank == 4 and set(names) == set(targets)


@pytest.mark.parametrize("targets", [tuple(SEVEN), ("gate_proj", "up_proj", "down_proj"), ("q_proj", "down_proj")])
def test_the_adapted_tiny_moe_policy_is_built_without_pefts_spurious_pattern_warnings(targets):
    """``flopplan train --model tiny-moe --lora-rank 4`` printed two peft RuntimeWarnings, that the rank and alpha
    patterns of ``.*\\.gate_up_proj`` "did not match any targeted module and were ignored": peft's own conversion of
    the MLP names wrote them for the fused experts, which it adapts at rank 2r as they say. None now, and the
    experts are adapted."""
    import warnings

    from flopplan.arch import resolve
    from flopplan.formulas import LoRA
    from flopplan.measure.models import add_lora, build_model

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = add_lora(build_model(resolve("tiny-moe"), device="cpu", seed=0), LoRA(4, targets))
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]
    ranks = sorted(p.shape[0] // 8 for name, p in model.named_parameters()  # (tiny-moe: 8 experts, one each)
                   if "layers.0.mlp.experts." in name and "lora_A" in name)
    assert ranks == ([4, 8] if "gate_proj" in targets else [4])  # down_proj at r, the fused gate_up_proj at 2r


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["builtin", "trl"])
def test_train_of_tiny_moe_with_lora_prints_no_peft_warning(engine, tmp_path):
    """The same through ``flopplan train`` on either engine (TRL's trainer calls get_peft_model itself), in a
    process of its own with Python's default warning filters."""
    import os
    import subprocess
    import sys

    from helpers import ROOT

    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    out = subprocess.run([sys.executable, "-m", "flopplan", "train", "--engine", engine, "--out", str(tmp_path / "run"),
                          "--model", "tiny-moe", "--lora-rank", "4", "--steps", "1", "--no-eval", "--no-progress",
                          "--prompts-per-step", "2", "--group-size", "2", "--completion-len", "3"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "RuntimeWarning" not in out.stderr and "gate_up_proj" not in out.stderr, out.stderr[-3000:]


def test_only_pefts_warning_of_the_fused_expert_pattern_is_silenced():
    import warnings

    from flopplan.moe import fused_expert_patterns_quiet

    with pytest.warns(RuntimeWarning, match="q_proj"), fused_expert_patterns_quiet("qwen3_moe", tuple(SEVEN)):
        warnings.warn("The following rank_pattern keys did not match any targeted module and were ignored: "
                      "['q_proj'].", RuntimeWarning, stacklevel=1)


@pytest.mark.parametrize("targets,extra,fragment", [
    (["q_proj", "gate"], {}, "router"),  # peft: gate -> gate.weight
    (["q_proj"], {"target_parameters": ["mlp.experts.down_proj"]}, "target_parameters"),
    (SEVEN, {"rank_pattern": {"q_proj": 8}}, "rank_pattern"),
])
def test_the_meter_still_refuses_other_parameter_lora(targets, extra, fragment):
    from flopplan.engines.trl_trainer import policy_lora

    with pytest.raises(UserError, match=fragment):
        policy_lora(_peft_model(targets, **extra))


@pytest.mark.slow
def test_a_qwen3_moe_lora_on_the_seven_targets_is_metered_as_it_runs_on_trl(tmp_path):
    """The whole trainer.train() of a random-initialised Qwen3-MoE with LoRA on the seven targets (the routed
    experts adapted through peft's target_parameters) under FlopCounterMode, which gets formulas for the grouped
    expert matmul and the in-place addmm_ (it has none): its count equals the meter's ledger."""
    pytest.importorskip("trl")
    from datasets import Dataset
    from peft import LoraConfig
    from torch.utils.flop_counter import FlopCounterMode, mm_flop
    from trl import GRPOConfig, GRPOTrainer

    from flopplan.grpo.codecs import hf_char_tokenizer
    from flopplan.measure.meter import grouped_mm_flops
    from flopplan.measure.models import build_model
    from flopplan.trl import meter

    tokenizer = hf_char_tokenizer()
    spec = tiny("qwen3_moe")
    model = build_model(ArchSpec(**{**spec.__dict__, "vocab_size": len(tokenizer)}), device="cpu", seed=0,
                        experts_implementation="grouped_mm")  # (transformers' default, as TRL loads a model)
    for config in (model.config, model.generation_config):
        config.pad_token_id, config.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    data = Dataset.from_list([{"prompt": f"{i % 10}+{i % 7}="} for i in range(16)])
    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=6, max_steps=2, gradient_checkpointing=True, beta=0.04,
                      logging_steps=1, save_strategy="no", report_to="none", use_cpu=True, bf16=False,
                      disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [float(len(c)) for c in completions]],
                          args=args, processing_class=tokenizer, train_dataset=data,
                          peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=SEVEN))
    metered = meter(trainer, out=str(tmp_path / "run"))
    assert metered.recipe.lora_targets == tuple(SEVEN)
    aten = torch.ops.aten
    formulas = {aten._grouped_mm: grouped_mm_flops,  # the meter's and torch's own formulas, for two ops
                aten.addmm_: lambda out, a, b, *_, **__: mm_flop(a, b)}  # FlopCounterMode counts as 0 (addmm_
    counter = FlopCounterMode(display=False, custom_mapping=formulas)  # takes beta and alpha by position here)
    with counter:
        trainer.train()
    counts = counter.get_flop_counts()["Global"]
    assert counts[aten._grouped_mm] > 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["flops"]["total"] == counter.get_total_flops() > 0


def test_qwen2_moe_routed_experts_are_priced_only_under_a_peft_that_adapts_them():
    """peft 0.22 adapts Qwen2-MoE's routed experts for the MLP names (beside its shared expert's modules), as it did
    Qwen3-MoE's; peft 0.21 left them frozen. flopplan prices peft 0.22's adapters (the exactness tests count them
    against FlopCounterMode), so an older peft there is refused with one line rather than charged for FLOPs that do
    not run; attention-only targets, and Qwen3-MoE, are priced on either."""
    from flopplan.moe import check_peft_experts

    assert {"mlp.experts", "mlp.shared_expert.down_proj"} <= _peft_adapts("qwen2_moe", ["down_proj"])  # peft >= 0.22
    check_peft_experts("qwen2_moe", ("down_proj",), "0.22.0")
    check_peft_experts("qwen2_moe", ("q_proj", "v_proj"), "0.21.2")
    check_peft_experts("qwen3_moe", ("gate_proj", "up_proj", "down_proj"), "0.21.2")
    with pytest.raises(UserError, match=r"peft 0\.21\.2 leaves a Qwen2-MoE policy's routed experts frozen .* "
                                        r"down_proj.*peft>=0\.22"):
        check_peft_experts("qwen2_moe", ("v_proj", "down_proj"), "0.21.2")
