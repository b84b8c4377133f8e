"""flopplan.projections: a decoder layer's projections, Phi-3's fused ones, and what a LoRA on them adapts."""

from __future__ import annotations

import pytest
import sympy

from flopplan.projections import FUSED_PROJECTIONS, LORA_TARGETS, fused_shapes, lora_modules, projection_shapes


def test_split_families_adapt_the_targets_as_named_and_refuse_fused_names():
    assert lora_modules("qwen2", ("q_proj", "v_proj")) == ("q_proj", "v_proj")
    with pytest.raises(ValueError, match="Phi-3 only"):
        lora_modules("llama", ("qkv_proj",))


def test_phi3_adapts_a_fused_module_when_all_its_parts_are_named():
    assert lora_modules("phi3", LORA_TARGETS) == ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
    assert lora_modules("phi3", ("q_proj", "k_proj", "v_proj", "down_proj")) == ("qkv_proj", "down_proj")
    assert lora_modules("phi3", ("gate_up_proj",)) == ("gate_up_proj",)


def test_phi3_refuses_part_of_a_fused_projection():
    with pytest.raises(ValueError, match="all of them or none"):
        lora_modules("phi3", ("q_proj", "v_proj"))


def test_fused_shapes_hold_the_same_weights_as_the_split_ones():
    h, q, kv, i = sympy.symbols("h q kv i", positive=True)
    split, fused = projection_shapes(h, q, kv, i), fused_shapes(h, q, kv, i)
    assert list(split) == list(LORA_TARGETS)
    for name, parts in FUSED_PROJECTIONS.items():
        assert fused[name][0] == split[parts[0]][0]  # one input for the parts
        assert sympy.simplify(fused[name][1] - sum(split[p][1] for p in parts)) == 0
    weights = lambda shapes: sum(a * b for a, b in shapes.values())  # noqa: E731
    assert sympy.simplify(weights(split) - weights(fused)) == 0


def test_integer_shapes_of_a_gqa_layer():
    shapes = projection_shapes(896, 896, 128, 4864)  # Qwen2.5-0.5B: 14 heads of 64, 2 KV heads
    assert shapes["k_proj"] == (896, 128) and shapes["down_proj"] == (4864, 896) and shapes["o_proj"] == (896, 896)
