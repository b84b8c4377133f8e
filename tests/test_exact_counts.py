"""The closed form equals torch's FlopCounterMode, as integers, on real transformers (and peft) models.

Models are built on the meta device (no weights, no memory) with eager attention and an explicit all-ones
attention mask. Every case is recorded and listed in the exactness summary at the end of the test run.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest

torch = pytest.importorskip("torch")

from configs import LLAMA_3_2_1B, MISTRAL_7B_V01, MISTRAL_7B_V03, QWEN3_0_6B  # noqa: E402
from helpers import tiered  # noqa: E402

from flopplan.arch import REGISTRY, TINY_FAMILY, orm_head, spec_from_config, with_head  # noqa: E402
from flopplan.formulas import (  # noqa: E402
    LoRA,
    Training,
    decode_flops,
    forward_flops,
    generate_flops,
    train_flops,
)
from flopplan.measure import counters  # noqa: E402
from flopplan.measure.models import build_model  # noqa: E402

B, T, N = 2, 24, 9          # forward/train: batch, sequence, last-N logits
PROMPT, COMPLETION = 11, 3  # generate: a prefill and two decode steps, at contexts 11 and 12

OTHER_FAMILIES = {
    "qwen3-0.6b": spec_from_config(QWEN3_0_6B, "qwen3-0.6b"),
    "llama-3.2-1b": spec_from_config(LLAMA_3_2_1B, "llama-3.2-1b"),
    "mistral-7b-v0.3": spec_from_config(MISTRAL_7B_V03, "mistral-7b-v0.3"),
    "mistral-7b-v0.1": spec_from_config(MISTRAL_7B_V01, "mistral-7b-v0.1"),
}
DENSE = [name for name, spec in REGISTRY.items() if spec.moe is None]  # MoE: tests/test_exact_moe.py
POLICIES = [name for name in DENSE if REGISTRY[name].head.kind == "lm"]
def _spec(name: str):
    return REGISTRY.get(name) or OTHER_FAMILIES[name]


def _shapes(spec):
    """What decides every pass's shapes: the spec without its name, context length and RoPE base."""
    return dataclasses.replace(spec, name="", max_position_embeddings=None, rope_theta=None, source="")


def sized(names):
    """The cases of ``names``, one per architecture whose passes differ in shape (Qwen2.5-Math-1.5B and -7B are
    Qwen2.5-1.5B and -7B with another RoPE base and context length, which change no shape and no FLOP: counting them
    again repeats the same FlopCounterMode run); the 7B class and up, and other sizes of a structure counted in the
    fast tier (helpers.tiered), marked slow."""
    seen, specs = set(), []
    for name in names:
        shapes = _shapes(_spec(name))
        if shapes in seen:
            continue
        seen.add(shapes)
        specs.append((_spec(name), (name,)))
    return tiered(specs)


@functools.cache  # meta models hold no storage
def inference_model(name: str):
    spec = _spec(name)
    return spec, build_model(spec)


@pytest.mark.parametrize("name", sized([*DENSE, *OTHER_FAMILIES]))
def test_forward_all_logits(name, record_exact):
    spec, model = inference_model(name)
    record_exact(f"{name} forward B={B} T={T} logits=all", forward_flops(spec, B, T, T).total,
                 counters.forward(model, B, T, None))


@pytest.mark.parametrize("name", sized([*POLICIES, *OTHER_FAMILIES]))
def test_forward_last_n_logits(name, record_exact):
    """A forward keeping the last N positions' logits (the last one alone: the prefill of test_generate)."""
    spec, model = inference_model(name)
    record_exact(f"{name} forward B={B} T={T} logits={N}", forward_flops(spec, B, T, N).total,
                 counters.forward(model, B, T, N))


@pytest.mark.parametrize("name", sized([*POLICIES, *OTHER_FAMILIES]))
def test_generate(name, record_exact):
    """``generate``'s total, and each of its forwards: the prefill is a forward with the last position's logits,
    and each later forward a decode step at the context the cache holds then (one run counts all three)."""
    spec, model = inference_model(name)
    total, passes = counters.generate_by_pass(model, B, PROMPT, COMPLETION)
    record_exact(f"{name} generate B={B} P={PROMPT} K={COMPLETION}",
                 generate_flops(spec, B, PROMPT, COMPLETION).total, total)
    assert len(passes) == COMPLETION
    record_exact(f"{name} forward B={B} T={PROMPT} logits=last (generate's prefill)",
                 forward_flops(spec, B, PROMPT, 1).total, passes[0])
    for step, measured in enumerate(passes[1:]):
        record_exact(f"{name} decode B={B} C={PROMPT + step} (generate's step {step + 2})",
                     decode_flops(spec, B, PROMPT + step).total, measured)


def test_outcome_reward_model_forward(record_exact):
    """AutoModelForSequenceClassification (a bias-free 1-label score layer on every position)."""
    base = REGISTRY["qwen2.5-1.5b"]
    spec = with_head(base, orm_head(base), "qwen2.5-1.5b-orm")
    record_exact(f"{spec.name} forward B={B} T={T}", forward_flops(spec, B, T, T).total,
                 counters.forward(build_model(spec), B, T, None))


TRAININGS = {
    "full": Training(),
    "full+ckpt": Training(checkpointing="non-reentrant"),
    "lora": Training(LoRA(16)),
    "lora+ckpt": Training(LoRA(16), checkpointing="non-reentrant"),
}


def _train_case(spec, training, label, record_exact, logits=N):
    model = counters.prepare_training(build_model(spec), training)
    record_exact(f"{spec.name} train {label} B={B} T={T} logits={logits}",
                 train_flops(spec, B, T, logits, training).total,
                 counters.train_step(model, B, T, logits, training))


@pytest.mark.parametrize("name", sized(["qwen2.5-0.5b", "qwen2.5-7b", "qwen2.5-72b", *TINY_FAMILY]))
@pytest.mark.parametrize("label", ["full", "lora", "lora+ckpt"])
def test_train_registry_sizes(name, label, record_exact):
    _train_case(REGISTRY[name], TRAININGS[label], label, record_exact)


@pytest.mark.parametrize("label", ["full", "full+ckpt"])
def test_train_sequence_classifier(label, record_exact):
    """The learned reward model's training step (``flopplan reward-model train``): full fine-tuning of tiny-rm, the
    score head on every position (transformers pools its output at the last token afterwards)."""
    _train_case(REGISTRY["tiny-rm"], TRAININGS[label], label, record_exact, logits=T)


@pytest.mark.parametrize("name", sized(["qwen2.5-0.5b", "qwen2.5-14b"]))
def test_train_full_with_checkpointing(name, record_exact):
    _train_case(REGISTRY[name], TRAININGS["full+ckpt"], "full+ckpt", record_exact)


@pytest.mark.parametrize("name", sized(sorted(OTHER_FAMILIES)))
@pytest.mark.parametrize("label", ["full", "lora+ckpt"])
def test_train_other_families(name, label, record_exact):
    _train_case(OTHER_FAMILIES[name], TRAININGS[label], label, record_exact)


# Which layers see inputs that need a gradient, and what the checkpoint re-runs, depends on the LoRA targets:
# e.g. with only v_proj adapted, the first layer's QK^T has no backward at all.
VARIANTS = {
    "lora q,v": Training(LoRA(8, ("q_proj", "v_proj"))),
    "lora v": Training(LoRA(8, ("v_proj",))),
    "lora o": Training(LoRA(8, ("o_proj",))),
    "lora mlp": Training(LoRA(8, ("gate_proj", "up_proj", "down_proj"))),
    "lora down+ckpt": Training(LoRA(8, ("down_proj",)), checkpointing="non-reentrant"),
    "lora q,v+ckpt no-input-grads": Training(LoRA(8, ("q_proj", "v_proj")), "non-reentrant", False),
    "lora+input-grads": Training(LoRA(4), input_requires_grad=True),
    "lora+reentrant": Training(LoRA(4), checkpointing="reentrant"),
    "full+reentrant": Training(checkpointing="reentrant"),
}


@pytest.mark.parametrize("label", sorted(VARIANTS))
def test_train_variants(label, record_exact):
    _train_case(REGISTRY["qwen2.5-0.5b"], VARIANTS[label], label, record_exact)


@pytest.mark.slow
def test_train_with_all_logits_and_last_logit(record_exact):
    _train_case(REGISTRY["qwen2.5-1.5b"], TRAININGS["lora"], "lora", record_exact, logits=T)
    _train_case(REGISTRY["qwen2.5-1.5b"], TRAININGS["lora"], "lora", record_exact, logits=1)


def test_generate_with_active_lora(record_exact):
    spec = REGISTRY["qwen2.5-0.5b"]
    lora = LoRA(32, ("q_proj", "k_proj", "v_proj", "o_proj"))
    model = counters.prepare_training(build_model(spec), Training(lora))
    record_exact(f"{spec.name} generate+lora B={B} P={PROMPT} K={COMPLETION}",
                 generate_flops(spec, B, PROMPT, COMPLETION, lora).total,
                 counters.generate(model, B, PROMPT, COMPLETION))


def test_sdpa_convention_matches_torch_sdpa_formulas():
    """The ``sdpa`` kernel convention equals torch's registered SDPA forward/backward formulas.

    On CPU, SDPA runs a kernel FlopCounterMode does not count, so the GPU convention is checked against the
    formulas FlopCounterMode applies to the flash/efficient/cudnn kernels on GPU.
    """
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    from flopplan.formulas import Conventions, Pass, pass_terms, train_terms

    spec = REGISTRY["qwen2.5-7b"]
    sdpa = Conventions(attention_kernel="sdpa")
    q = (B, spec.num_heads, T, spec.head_dim)
    kv = (B, spec.num_kv_heads, T, spec.head_dim)
    p = Pass(B * T, B * T * T, B * T)
    fwd = pass_terms(spec, p, conv=sdpa)
    assert fwd["attn_scores"] + fwd["attn_values"] == spec.num_layers * sdpa_flop_count(q, kv, kv)
    bwd = train_terms(spec, p, Training(), sdpa)
    assert bwd["backward/attention.sdpa"] == spec.num_layers * sdpa_backward_flop_count(q, q, kv, kv)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (SDPA kernels are counted there)")
def test_sdpa_training_on_gpu(record_exact):
    from flopplan.formulas import Conventions

    spec = REGISTRY["qwen2.5-0.5b"]
    training = Training(LoRA(16), checkpointing="non-reentrant")
    model = counters.prepare_training(
        build_model(spec, device="cuda", dtype=torch.bfloat16, attn_implementation="sdpa"), training)
    record_exact(f"{spec.name} train lora+ckpt sdpa cuda", train_flops(
        spec, B, 128, 64, training, Conventions(attention_kernel="sdpa")).total,
        counters.train_step(model, B, 128, 64, training))
