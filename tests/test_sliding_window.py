"""Sliding windows as executed: a tiny eager Mistral with a 4-token window, on the CPU, against FlopCounterMode.

Eager attention computes the full score matrix of a prefill and masks it (the ``masked`` window convention, the
default); transformers' sliding cache keeps the last ``window - 1`` tokens, so a decode step attends to at most
``window`` keys whatever the kernel. The ``windowed`` convention (an SDPA/flash kernel that skips the pairs beyond
the window) is not counted by FlopCounterMode on the CPU: it is checked against a count of the band's mask.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from helpers import cli, write_config

from flopplan.arch import ArchSpec
from flopplan.formulas import (
    Conventions,
    LoRA,
    Training,
    decode_flops,
    forward_flops,
    generate_flops,
    train_flops,
)

WINDOW, B = 4, 2
SPEC = ArchSpec(name="tiny-mistral-w4", family="mistral", hidden_size=32, intermediate_size=48, num_layers=2,
                num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=64, tie_embeddings=False, qkv_bias=False,
                sliding_window=WINDOW)


@pytest.fixture(scope="module")
def measured():
    """The counters and one built model, shared by this module's cases (inference only: nothing mutates it)."""
    pytest.importorskip("torch")
    from flopplan.measure import counters
    from flopplan.measure.models import build_model

    return counters, build_model(SPEC, device="cpu", seed=0)


@pytest.mark.parametrize("seq", [3, 4, 10])
def test_forward_counts_the_masked_matrix(measured, seq, record_exact):
    counters, model = measured
    record_exact(f"{SPEC.name} forward B={B} T={seq}", forward_flops(SPEC, B, seq, seq).total,
                 counters.forward(model, B, seq, None))


@pytest.mark.parametrize("context", [1, 2, 3, 4, 9])
def test_decode_attends_to_the_window(measured, context, record_exact):
    counters, model = measured
    record_exact(f"{SPEC.name} decode B={B} C={context}", decode_flops(SPEC, B, context).total,
                 counters.decode(model, B, context))


@pytest.mark.parametrize(("prompt", "completion"), [(2, 2), (2, 6), (3, 5), (7, 3)])
def test_generate_crosses_the_window(measured, prompt, completion, record_exact):
    counters, model = measured
    record_exact(f"{SPEC.name} generate B={B} P={prompt} K={completion}",
                 generate_flops(SPEC, B, prompt, completion).total, counters.generate(model, B, prompt, completion))


@pytest.mark.parametrize("training", [Training(), Training(LoRA(4), checkpointing="non-reentrant")],
                         ids=["full", "lora+ckpt"])
def test_train_step_past_the_window(training, record_exact):
    pytest.importorskip("torch")
    from flopplan.measure import counters
    from flopplan.measure.models import build_model

    model = counters.prepare_training(build_model(SPEC, device="cpu", seed=0), training)
    record_exact(f"{SPEC.name} train B={B} T=10", train_flops(SPEC, B, 10, 3, training).total,
                 counters.train_step(model, B, 10, 3, training))


def test_without_a_window_nothing_changes():
    full = dataclasses.replace(SPEC, sliding_window=None)
    assert decode_flops(full, B, 9).total > decode_flops(SPEC, B, 9).total
    assert generate_flops(full, B, 2, 2).total == generate_flops(SPEC, B, 2, 2).total  # within the window


def test_estimate_notes_a_request_across_the_window(tmp_path):
    from flopplan.hf_config import to_hf_config

    config = str(write_config(tmp_path, "w4", dict(to_hf_config(SPEC), max_position_embeddings=64)))
    across = json.loads(cli("estimate", "--model", config, "--phase", "generate", "--prompt", "3", "--completion",
                            "5", "--json", check=True).stdout)
    within = json.loads(cli("estimate", "--model", config, "--phase", "generate", "--prompt", "2", "--completion",
                            "2", "--json", check=True).stdout)
    assert len(across["notes"]) == 1 and "notes" not in within
    assert across["conventions"]["window"] == "masked"
    windowed = json.loads(cli("estimate", "--model", config, "--phase", "forward", "--seq", "10", "--window",
                              "windowed", "--json", check=True).stdout)
    assert windowed["flops"] == forward_flops(SPEC, 1, 10, 10, conv=Conventions(window="windowed")).total


def test_a_window_larger_than_the_context_is_counted_not_refused(tmp_path):
    """It was refused ("it never applies; set it to null"), also where the window was the family's default, which
    the config does not state: it runs, as full attention within the window."""
    from flopplan.hf_config import to_hf_config

    wide = dict(to_hf_config(SPEC), max_position_embeddings=WINDOW - 1)
    counted = [json.loads(cli("estimate", "--model", str(write_config(tmp_path, name, cfg)), "--phase", "decode",
                              "--context", str(WINDOW - 2), "--json", check=True).stdout)["flops"]
               for name, cfg in (("wide", wide), ("dense", {**wide, "sliding_window": None}))]
    assert counted[0] == counted[1] > 0


@pytest.mark.parametrize("window", ["masked", "windowed"])
def test_the_planner_counts_windows_as_the_estimate_does(window):
    """A Gemma 2 policy (every other layer slides over 4,096 keys) with sequences across the window: each phase of
    the step equals the estimate's formulas, integers equal; decode steps one by one."""
    from flopplan.arch import REGISTRY
    from flopplan.cost import step_cost
    from flopplan.lengths import Length
    from flopplan.recipe import Recipe

    Q, G, P, K = 2, 4, 3000, 2000
    spec, conv = REGISTRY["gemma-2-2b"], Conventions(window=window)
    recipe = Recipe(policy="gemma-2-2b", lora_rank=16, prompts_per_step=Q, group_size=G, prompt_len=Length.fixed(P),
                    completion_len=Length.fixed(K), logprob_head="completion", window=window)
    phases = step_cost(recipe).step_phases
    lora = LoRA(16)
    generate = generate_flops(spec, Q * G, P, K, lora, conv)
    prefill = sum(v for k, v in generate.items() if k.startswith("prefill/"))
    assert phases["rollout.prefill"] == prefill
    assert phases["rollout.decode"] == generate.total - prefill
    assert phases["rollout.decode"] == sum(decode_flops(spec, Q * G, P + j, lora, conv).total for j in range(K - 1))
    assert phases["update"] == Q * train_flops(spec, G, P + K, K + 1, Training(lora, "non-reentrant"), conv).total


def test_length_distributions_across_a_window_are_summed_over_their_support():
    """Window caps are piecewise: the planner sums over the lengths' support, equal to the per-length counts."""
    from flopplan.cost import step_cost
    from flopplan.lengths import Length
    from flopplan.recipe import Recipe

    config_spec = dataclasses.replace(SPEC, max_position_embeddings=64, name="w4")
    completions = Length.empirical([2, 3, 7, 9])
    recipe = Recipe(policy="tiny", prompts_per_step=1, group_size=1, prompt_len=Length.fixed(3),
                    completion_len=completions, engine="vllm", update_padding="none")
    object.__setattr__(recipe, "policy_spec", config_spec)  # the cached spec: the tiny window model
    decode = step_cost(recipe).step_phases["rollout.decode"]
    expected = sum(p * generate_flops(config_spec, 1, 3, k)["decode/attn_scores"] for k, p in
                   zip(completions.support, completions.probs, strict=True))
    assert decode > 0
    ours = sum(v for k, v in step_cost(recipe).phases["rollout.decode"].items() if k.endswith("attn_scores"))
    assert ours == pytest.approx(expected, rel=1e-12)
