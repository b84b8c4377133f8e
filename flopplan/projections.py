"""A decoder layer's linear projections: their names, their (in, out) shapes, Phi-3's fused ones, and the modules a
LoRA on them adapts (peft's ``target_modules``). Torch-free; works on ints and sympy symbols alike."""

from __future__ import annotations

from typing import Any

LORA_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The seven linear projections of a decoder layer, in the order a layer executes them."""

FUSED_PROJECTIONS: dict[str, tuple[str, ...]] = {"qkv_proj": ("q_proj", "k_proj", "v_proj"),
                                                 "gate_up_proj": ("gate_proj", "up_proj")}
"""Phi-3's fused projections and the projections each stands for (the same matmul FLOPs as the split ones)."""
FUSED_FAMILIES = ("phi3",)
"""Families whose decoder layers hold the fused modules: ``qkv_proj``, ``o_proj``, ``gate_up_proj``, ``down_proj``."""


def lora_modules(family: str, targets: tuple[str, ...]) -> tuple[str, ...]:
    """The module names a LoRA on ``targets`` adapts in a ``family`` layer (peft's ``target_modules``).

    Phi-3 (:data:`FUSED_FAMILIES`): ``qkv_proj`` when q, k and v are all named (or ``qkv_proj`` itself),
    ``gate_up_proj`` for gate and up, one adapter of rank r on the fused output; naming only part of a fused
    projection is refused, as peft would adapt nothing there. Other families: the targets as given; the fused names
    are refused there."""
    fused = [name for name in targets if name in FUSED_PROJECTIONS]
    if family not in FUSED_FAMILIES:
        if fused:
            raise ValueError(f"{', '.join(fused)}: fused projections exist in Phi-3 only; name the split ones")
        return targets
    out = []
    for name in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        parts = FUSED_PROJECTIONS.get(name, (name,))
        named = [part for part in parts if part in targets]
        if name in targets or len(named) == len(parts):
            out.append(name)
        elif named:
            raise ValueError(f"Phi-3 fuses {', '.join(parts)} into {name}: LoRA adapts all of them or none "
                             f"(named: {', '.join(named)})")
    return tuple(out)


def fused_shapes(hidden: Any, q_dim: Any, kv_dim: Any, intermediate: Any) -> dict[str, tuple[Any, Any]]:
    """(in_features, out_features) of Phi-3's four projections: ``qkv_proj`` and ``gate_up_proj`` fused."""
    return {"qkv_proj": (hidden, q_dim + 2 * kv_dim), "o_proj": (q_dim, hidden),
            "gate_up_proj": (hidden, 2 * intermediate), "down_proj": (intermediate, hidden)}


def projection_shapes(hidden: Any, q_dim: Any, kv_dim: Any, intermediate: Any) -> dict[str, tuple[Any, Any]]:
    """(in_features, out_features) of the seven projections of a GQA decoder layer with a gated MLP.

    Works on ints and on sympy symbols alike (the symbolic architecture of ``flopplan formula`` uses it too).
    """
    return {
        "q_proj": (hidden, q_dim),
        "k_proj": (hidden, kv_dim),
        "v_proj": (hidden, kv_dim),
        "o_proj": (q_dim, hidden),
        "gate_proj": (hidden, intermediate),
        "up_proj": (hidden, intermediate),
        "down_proj": (intermediate, hidden),
    }
