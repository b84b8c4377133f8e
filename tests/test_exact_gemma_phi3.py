"""Gemma 2, Gemma 3 and Phi-3, and Qwen2's per-layer windows: the closed form equals torch's FlopCounterMode, as
integers, on real random-initialised tiny models on the CPU (eager attention), and on meta-device shapes of the
registry sizes.

What these models execute besides a Qwen2-style layer, and what FlopCounterMode counts of it: Gemma's attention and
final logit soft-capping (``tanh``), the query pre-attention scaling, the embedding scaling, the GeGLU activation
and the extra norms are elementwise (0 FLOPs counted, as in flopplan); its head_dim differs from hidden/heads;
Phi-3's fused ``qkv_proj`` and ``gate_up_proj`` run the same matmul FLOPs as split projections, but LoRA adapts the
fused modules (rank r on ``h -> q+2kv`` and ``h -> 2I``). Sliding-window layers (Gemma 2: every other; Gemma 3: five
of six; Qwen2: from ``max_window_layers`` on; Phi-3: all) are counted as eager executes them: the prefill's full
masked score matrix, and decode steps over at most ``window`` keys (transformers' per-layer sliding cache). The
tiny models have a 4-token window that every pass below crosses.
"""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

from helpers import tiered  # noqa: E402

from flopplan.arch import REGISTRY, ArchSpec  # noqa: E402
from flopplan.attention import FULL, SLIDING  # noqa: E402
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

B, T, N = 2, 10, 3
CONTEXT, PROMPT, COMPLETION = 7, 3, 5


def _tiny(family: str, **changes) -> ArchSpec:
    base = dict(name=f"tiny-{family}", family=family, hidden_size=32, intermediate_size=48, num_layers=3,
                num_heads=4, num_kv_heads=2, head_dim=16, vocab_size=64, tie_embeddings=True, qkv_bias=False,
                sliding_window=4)
    return ArchSpec(**{**base, **changes})


TINY = {
    "gemma2": _tiny("gemma2", layer_types=(SLIDING, FULL, SLIDING)),  # head_dim 16 != 32 / 4
    "gemma3_text": _tiny("gemma3_text", qk_norm=True, layer_types=(SLIDING, SLIDING, FULL)),
    "phi3": _tiny("phi3", tie_embeddings=False, head_dim=8),  # every layer slides
    "qwen2": _tiny("qwen2", qkv_bias=True, head_dim=8, layer_types=(FULL, SLIDING, SLIDING)),
}
ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
TRAININGS = {
    "full": Training(),
    "full+ckpt": Training(checkpointing="non-reentrant"),
    "lora": Training(LoRA(4, ALL)),
    "lora+ckpt": Training(LoRA(4, ALL), checkpointing="non-reentrant"),
    "lora qkv,down": Training(LoRA(4, ("q_proj", "k_proj", "v_proj", "down_proj"))),
}
FAST = ("full+ckpt", "lora+ckpt")
"""Each family's fast training steps (the first layer's and the recompute's rules both exercised); the others run in
`make test`."""


@functools.cache
def inference_model(family: str):
    return build_model(TINY[family], device="cpu", seed=0)


@pytest.mark.parametrize("family", sorted(TINY))
def test_inference_passes(family, record_exact):
    spec, model = TINY[family], inference_model(family)
    record_exact(f"{spec.name} forward B={B} T={T} logits=all", forward_flops(spec, B, T, T).total,
                 counters.forward(model, B, T, None))
    record_exact(f"{spec.name} forward B={B} T={T} logits={N}", forward_flops(spec, B, T, N).total,
                 counters.forward(model, B, T, N))
    record_exact(f"{spec.name} decode B={B} C={CONTEXT}", decode_flops(spec, B, CONTEXT).total,
                 counters.decode(model, B, CONTEXT))
    record_exact(f"{spec.name} generate B={B} P={PROMPT} K={COMPLETION}",
                 generate_flops(spec, B, PROMPT, COMPLETION).total, counters.generate(model, B, PROMPT, COMPLETION))


@pytest.mark.parametrize(("family", "label"), [
    pytest.param(family, label, marks=() if label in FAST else pytest.mark.slow)
    for family in sorted(TINY) for label in TRAININGS])
def test_train_step(family, label, record_exact):
    spec, training = TINY[family], TRAININGS[label]
    model = counters.prepare_training(build_model(spec, device="cpu", seed=0), training)
    record_exact(f"{spec.name} train {label} B={B} T={T} logits={N}", train_flops(spec, B, T, N, training).total,
                 counters.train_step(model, B, T, N, training))


def test_phi3_lora_adapts_the_fused_modules():
    """The seven split targets adapt Phi-3's four modules, one rank-r adapter each; part of a fused one is refused."""
    spec = TINY["phi3"]
    terms = train_flops(spec, B, T, N, TRAININGS["lora"])
    adapted = {key.split("/")[1].split(".")[0] for key in terms if ".lora_a" in key}
    assert adapted == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
    assert train_flops(spec, B, T, N, Training(LoRA(4, ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")))) == terms
    with pytest.raises(ValueError, match="qkv_proj"):
        train_flops(spec, B, T, N, Training(LoRA(4, ("q_proj", "v_proj"))))
    with pytest.raises(ValueError, match="Phi-3"):
        train_flops(TINY["qwen2"], B, T, N, Training(LoRA(4, ("qkv_proj",))))


FAMILIES = [name for name, spec in REGISTRY.items() if spec.family in ("gemma2", "gemma3_text", "phi3")]


@pytest.mark.parametrize("name", tiered((REGISTRY[name], (name,)) for name in FAMILIES))
def test_registry_sizes_on_meta(name, record_exact):
    """The registry's Gemma and Phi-3 sizes at full size on the meta device, across their windows (T=24 > the tiny
    window only; the shapes, not the windows, are what these add)."""
    spec = REGISTRY[name]
    model = build_model(spec)
    record_exact(f"{name} meta forward B=1 T=24 logits=4", forward_flops(spec, 1, 24, 4).total,
                 counters.forward(model, 1, 24, 4))
