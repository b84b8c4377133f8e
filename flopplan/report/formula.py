"""Symbolic formulas: the closed-form model evaluated on sympy symbols (``flopplan formula``).

Nothing here restates a formula: the functions of :mod:`flopplan.formulas` are called with symbols in place of
integers, so the printed LaTeX is, by construction, what the integer counts compute. sympy is imported lazily.
"""

from __future__ import annotations

from typing import Any

from flopplan.arch import HeadLayer
from flopplan.breakdown import Breakdown, component
from flopplan.formulas import (
    Conventions,
    LoRA,
    Training,
    decode_flops,
    forward_flops,
    generate_flops,
    train_flops,
)
from flopplan.projections import projection_shapes

SYMBOLS = {
    "h": "hidden size",
    "I": "MLP intermediate size",
    "L": "decoder layers",
    "n_q": "query heads",
    "n_kv": "key/value heads",
    "d": "head dimension",
    "V": "vocabulary (LM head rows)",
    "B": "batch (sequences)",
    "T": "sequence length",
    "N": "head (logit) positions per sequence",
    "C": "tokens already in the KV cache",
    "P": "prompt tokens",
    "K": "completion tokens",
    "r": "LoRA rank",
}


class SymbolicArch:
    """An architecture whose sizes are sympy symbols; quacks like :class:`flopplan.arch.ArchSpec` for formulas."""

    def __init__(self) -> None:
        import sympy

        sym = {name: sympy.Symbol(name, positive=True, integer=True) for name in ("h", "I", "L", "n_q", "n_kv", "d",
                                                                                   "V")}
        self.symbols = sym
        self.name = "symbolic"
        self.hidden_size = sym["h"]
        self.intermediate_size = sym["I"]
        self.num_layers = sym["L"]
        self.num_heads = sym["n_q"]
        self.num_kv_heads = sym["n_kv"]
        self.head_dim = sym["d"]
        self.vocab_size = sym["V"]
        self.q_dim = sym["n_q"] * sym["d"]
        self.kv_dim = sym["n_kv"] * sym["d"]
        self.head_layers = (HeadLayer(self.hidden_size, self.vocab_size, False),)

    def projection_shapes(self) -> dict[str, tuple[Any, Any]]:
        return projection_shapes(self.hidden_size, self.q_dim, self.kv_dim, self.intermediate_size)


def symbols(*names: str) -> tuple[Any, ...]:
    import sympy

    return tuple(sympy.Symbol(name, positive=True, integer=True) for name in names)


def symbolic_breakdown(phase: str, lora: bool = False, lora_targets: tuple[str, ...] | None = None,
                       checkpointing: str = "none", input_grads: bool | None = None,
                       conv: Conventions = Conventions()) -> Breakdown:
    """The breakdown of a phase with every size a symbol (see :data:`SYMBOLS`)."""
    arch = SymbolicArch()
    B, T, N, C, P, K, r = symbols("B", "T", "N", "C", "P", "K", "r")
    adapter = LoRA(r, lora_targets) if lora and lora_targets else (LoRA(r) if lora else None)
    if phase == "forward":
        return forward_flops(arch, B, T, N, adapter, conv)
    if phase == "decode":
        return decode_flops(arch, B, C, adapter, conv)
    if phase == "generate":
        return generate_flops(arch, B, P, K, adapter, conv)
    if phase == "train":
        return train_flops(arch, B, T, N, Training(adapter, checkpointing, input_grads), conv)
    raise ValueError(f"unknown phase {phase!r}")


def simplified(expr: Any) -> Any:
    """A readable form: expanded, then collected by the batch and layer symbols."""
    import sympy

    B, = symbols("B")
    L = sympy.Symbol("L", positive=True, integer=True)
    return sympy.collect(sympy.expand(expr), [B, L])


def formula_text(phase: str, latex: bool = False, **options: Any) -> dict[str, Any]:
    """Per-component expressions and the total, as text or LaTeX."""
    import sympy

    terms = symbolic_breakdown(phase, **options)
    grouped = terms.grouped(lambda key: _section(key) + component(key))
    render = sympy.latex if latex else sympy.sstr
    return {
        "phase": phase,
        "components": {key: render(sympy.factor(value)) for key, value in grouped.items()},
        "total": render(simplified(terms.total)),
        "symbols": SYMBOLS,
    }


def _section(key: str) -> str:
    return key.rsplit("/", 1)[0] + "/" if "/" in key else ""
