"""The time model's pricing: the calls of a phase and what they cost, the time outside the phases (checkpoints,
start-up), the trainable parameters it reads. No test asserts on a measured duration."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import OUTSIDE, profile_with, tiny_recipe
from synthetic_runs import TRUE_PHASES

from flopplan.errors import UserError
from flopplan.formulas import generate_flops
from flopplan.lengths import Length
from flopplan.recipe import Recipe
from flopplan.timing import (
    RunWork,
    call_seconds,
    checkpoints_in,
    generate_calls,
    non_phase_features,
    run_non_phase_seconds,
    trainable_parameters,
)


def test_generate_calls_are_the_generate_formula():
    from flopplan.arch import resolve
    from flopplan.formulas import LoRA

    spec = resolve("tiny")
    for lora in (None, LoRA(8)):
        calls = generate_calls(spec, 6, 11, 5, lora, tiny_recipe().conventions)
        assert [kind for kind, _ in calls] == ["prefill", "decode"]
        assert sum(float(c.flops.sum() if hasattr(c.flops, "sum") else c.flops) for _, c in calls) == \
            generate_flops(spec, 6, 11, 5, lora, tiny_recipe().conventions).total
        assert (float(np.sum(calls[1][1].adapter_flops)) > 0) == (lora is not None)


def test_decode_steps_priced_as_one_array_equal_the_step_by_step_sum():
    """The time model prices a rollout's decode steps in one numpy evaluation; that equals pricing each step
    (step j: context prompt + j, FLOPs from the decode formula, KV cache of prompt + j + 1 tokens) on its own."""
    from flopplan.formulas import decode_flops
    from flopplan.timing import Call, phase_calls

    params = {"throughput": 2e11, "bandwidth": 8e11, "overhead": 1e-3, "overhead_layer": 2e-4}
    recipe = Recipe(policy="qwen2.5-0.5b", prompt_len=Length.fixed(100), completion_len=Length.fixed(300))
    [(count, series)] = phase_calls(recipe)["rollout.decode"]
    vectorised = count * call_seconds("roofline", params, series, 2.0)
    spec, batch = recipe.policy_spec, recipe.generation_batch_size
    looped = 0.0
    for j in range(299):
        flops = decode_flops(spec, batch, 100 + j, recipe.lora, recipe.conventions).total  # hf: adapters on
        kv = batch * (100 + j + 1) * 2 * spec.num_layers * spec.kv_dim
        looped += count * call_seconds("roofline", params, Call(float(flops), batch, spec.params, kv,
                                                                 spec.num_layers), 2.0)
    assert len(series.flops) == 299 and vectorised == pytest.approx(looped, rel=1e-12)


def test_the_adapters_work_per_token_is_paid_by_calls_with_adapters_only():
    from flopplan.arch import resolve
    from flopplan.formulas import LoRA, forward_flops
    from flopplan.timing import sequence_call

    spec, conv = resolve("tiny"), tiny_recipe().conventions
    params = {"form": "saturating", "throughput_max": 1e10, "tokens_half": 10.0, "overhead": 1e-3,
              "overhead_layer": 1e-4, "attention_throughput": 1e9}
    for lora in (None, LoRA(4), LoRA(32)):
        call = sequence_call(forward_flops(spec, 8, 12, 12, lora, conv), 8 * 12, spec.num_layers)
        extra = call_seconds("saturating", {**params, "adapter_token_layer": 1e-5}, call, 4.0) - call_seconds(
            "saturating", params, call, 4.0)
        assert extra == pytest.approx(1e-5 * 8 * 12 * spec.num_layers if lora else 0.0)
    with pytest.raises(UserError, match="adapter_token_layer must be from 0 to"):
        profile_with(time_model={**TRUE_PHASES, "train": {**TRUE_PHASES["train"], "adapter_token_layer": -1.0}})


def test_checkpoints_and_startup_counts():
    assert [checkpoints_in(s, 10) for s in (0, 1, 9, 10, 11, 25)] == [1, 1, 1, 2, 2, 3]
    assert checkpoints_in(7, None) == 1
    work = RunWork.of(tiny_recipe())
    assert run_non_phase_seconds(OUTSIDE, work, 0, 0)["startup"] == 0.0
    assert non_phase_features("startup", work) == (1.0, tiny_recipe().policy_spec.params)


def test_trainable_parameters_match_the_real_model():
    torch = pytest.importorskip("torch")
    from flopplan.arch import resolve
    from flopplan.formulas import LoRA
    from flopplan.measure.models import add_lora, build_model

    spec = resolve("tiny")
    for lora in (None, LoRA(8), LoRA(4, ("q_proj", "v_proj"))):
        model = build_model(spec, device=torch.device("cpu"), dtype=torch.float32)
        if lora is not None:
            model = add_lora(model, lora)
        trainable = [p for p in model.parameters() if p.requires_grad]
        assert trainable_parameters(spec, lora) == (sum(p.numel() for p in trainable), len(trainable))
