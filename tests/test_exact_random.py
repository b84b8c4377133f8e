"""Exactness beyond the fixed cases: random architectures, shapes and training set-ups vs FlopCounterMode.

hypothesis draws a family (qwen2, qwen3, llama, mistral), sizes (GQA groups, explicit head_dim != hidden/heads,
tied or not), a phase, LoRA targets and rank, checkpointing mode and input-grad setting; the real transformers
(+ peft) model is built on the meta device and counted.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flopplan.arch import ArchSpec
from flopplan.formulas import LoRA, Training, decode_flops, forward_flops, generate_flops, train_flops
from flopplan.measure import counters
from flopplan.measure.models import build_model
from flopplan.projections import LORA_TARGETS


@st.composite
def small_archs(draw):
    family = draw(st.sampled_from(["qwen2", "qwen3", "llama", "mistral"]))
    kv = draw(st.integers(1, 4))
    heads = kv * draw(st.integers(1, 4))
    head_dim = 2 * draw(st.integers(2, 16))  # RoPE needs an even head dimension
    # transformers validates hidden % heads == 0 even when head_dim is explicit (so heads*head_dim may differ)
    hidden = heads * head_dim if family == "qwen2" else heads * 2 * draw(st.integers(1, 12))
    bias = draw(st.booleans()) if family in ("qwen3", "llama") else family == "qwen2"
    return ArchSpec(name=f"random-{family}", family=family, hidden_size=hidden,
                    intermediate_size=draw(st.integers(4, 200)), num_layers=draw(st.integers(1, 4)),
                    num_heads=heads, num_kv_heads=kv, head_dim=head_dim, vocab_size=draw(st.integers(8, 500)),
                    tie_embeddings=draw(st.booleans()), qkv_bias=bias, o_bias=bias and family != "qwen2",
                    qk_norm=family == "qwen3")


lora_targets = st.lists(st.sampled_from(LORA_TARGETS), min_size=1, max_size=7, unique=True).map(tuple)


@st.composite
def trainings(draw):
    lora = draw(st.one_of(st.none(), st.builds(LoRA, st.integers(1, 8), lora_targets)))
    checkpointing = draw(st.sampled_from(["none", "non-reentrant", "reentrant"]))
    input_grads = draw(st.sampled_from([None, True, False]))
    if lora is not None and checkpointing == "reentrant" and input_grads is False:
        input_grads = True
    return Training(lora, checkpointing, input_grads)


# FLOPPLAN_RANDOM_CASES=500 pytest tests/test_exact_random.py for a longer sweep
@settings(max_examples=int(os.environ.get("FLOPPLAN_RANDOM_CASES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(small_archs(), st.sampled_from(["forward", "decode", "generate", "train"]), st.integers(1, 3),
       st.integers(1, 20), st.integers(0, 20), st.integers(1, 4), trainings(), st.data())
def test_random_configurations_are_exact(arch, phase, batch, seq, context, completion, training, data):
    model = build_model(arch)
    if phase == "forward":
        logits = data.draw(st.integers(1, seq))
        ours = forward_flops(arch, batch, seq, logits).total
        measured = counters.forward(model, batch, seq, logits)
    elif phase == "decode":
        ours, measured = decode_flops(arch, batch, context).total, counters.decode(model, batch, max(context, 1))
        if context == 0:  # transformers needs a non-empty cache for a decode step; count C = 1 instead
            ours = decode_flops(arch, batch, 1).total
    elif phase == "generate":
        lora = training.lora
        if lora is not None:
            model = counters.prepare_training(model, Training(lora))
        ours = generate_flops(arch, batch, seq, completion, lora).total
        measured = counters.generate(model, batch, seq, completion)
    else:
        logits = data.draw(st.integers(1, seq))
        model = counters.prepare_training(model, training)
        ours = train_flops(arch, batch, seq, logits, training).total
        measured = counters.train_step(model, batch, seq, logits, training)
    assert ours == measured, (arch, phase, batch, seq, context, completion, training)
