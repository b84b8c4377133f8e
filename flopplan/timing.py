"""Time models: how long one model call takes, from its FLOPs and shape (torch-free; fitted by calibration).

Two forms, one per kind of work (``cost.PHASE_KIND``):

* ``saturating`` (train, forward, prefill: compute-bound): the matmul FLOPs of a call over ``tokens`` tokens in
  flight run at a throughput that saturates with the tokens,
  ``throughput(tokens) = throughput_max * tokens / (tokens + tokens_half)``; the attention FLOPs (QK^T and AV,
  with the softmax and masking that go with them, which FLOPs do not count) at their own rate; plus a fixed
  overhead per call and per layer (Python and kernel launches, paid whatever the size):
  ``seconds = overhead + overhead_layer * layers + (flops - attention) * (tokens + tokens_half) /
  (throughput_max * tokens) + attention / attention_throughput``.
* ``roofline`` (decode: one token per sequence per step): the larger of the compute time and the time to read
  the weights and the KV cache once, plus the same overheads:
  ``seconds = overhead + overhead_layer * layers + max(flops / throughput, bytes / bandwidth)``,
  ``bytes = (weight_elements + kv_elements) * bytes_per_element``.

Every function is plain arithmetic (``max`` written as ``(a + b + |a - b|) / 2``), so it evaluates on floats for
planning and on numpy arrays for fitting.

:func:`phase_calls` turns the passes of a round (:func:`flopplan.passes.step_passes`, at expected lengths) into the
calls these models price: time models depend on the round's description, not the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopplan.formulas import is_attention_term, kv_cache_elements
from flopplan.passes import RoundLengths, RoundPass, RoundShape, mean_of, step_passes

FORMS = ("saturating", "roofline")
PARAMETERS = {"saturating": ("throughput_max", "tokens_half", "overhead", "overhead_layer", "attention_throughput"),
              "roofline": ("throughput", "bandwidth", "overhead", "overhead_layer")}


@dataclass(frozen=True)
class Call:
    """One model call: its FLOPs and what bounds it besides them. ``flops``, ``kv_elements`` and
    ``attention_flops`` may be numpy arrays: a series of calls that differ only in those (decode steps)."""

    flops: Any  # float, or an array over a series of calls
    tokens: float  # tokens in flight: rows x positions (a decode step: rows)
    weight_elements: float = 0.0  # parameters read once per call (decode)
    kv_elements: Any = 0.0  # KV-cache elements read (decode); float or array
    layers: float = 1.0  # decoder layers the call runs through
    attention_flops: Any = 0.0  # the part of ``flops`` in attention matmuls; float or array


def max_(a: Any, b: Any) -> Any:
    """The larger of ``a`` and ``b``, exactly, written in arithmetic so that it evaluates on numpy arrays too."""
    return (a + b + abs(a - b)) / 2


def overhead_seconds(params: dict[str, float], layers: Any) -> Any:
    return params["overhead"] + params["overhead_layer"] * layers


def saturating_seconds(params: dict[str, float], flops: Any, tokens: Any, layers: Any, attention: Any) -> Any:
    dense = (flops - attention) * (tokens + params["tokens_half"]) / (params["throughput_max"] * tokens)
    return overhead_seconds(params, layers) + dense + attention / params["attention_throughput"]


def roofline_seconds(params: dict[str, float], flops: Any, elements: Any, layers: Any,
                     bytes_per_element: float) -> Any:
    return overhead_seconds(params, layers) + max_(flops / params["throughput"],
                                                         elements * bytes_per_element / params["bandwidth"])


def call_seconds(form: str, params: dict[str, float], call: Call, bytes_per_element: float) -> float:
    """Seconds of a call (summed over the series when its fields are arrays)."""
    if form == "saturating":
        return total(saturating_seconds(params, call.flops, max(call.tokens, 1e-9), call.layers,
                                        call.attention_flops))
    if form == "roofline":
        return total(roofline_seconds(params, call.flops, call.weight_elements + call.kv_elements, call.layers,
                                      bytes_per_element))
    raise ValueError(f"unknown time-model form {form!r}")


def total(value: Any) -> float:
    """A float, or the sum of a numpy array."""
    return float(value.sum()) if hasattr(value, "sum") else float(value)


def attention_flops(terms: dict[str, Any]) -> Any:
    """The attention part of a breakdown (forward, backward and recompute of QK^T and AV)."""
    return sum((v for k, v in terms.items() if is_attention_term(k)), 0)


# -- the calls of a round ---------------------------------------------------------------------------------------

def phase_calls(recipe: Any) -> dict[str, list[tuple[float, Call]]]:
    """(count, call) pairs per phase of one step (eval phases: one evaluation), at expected lengths.

    This is what a fitted time model prices; the calls are the passes of :func:`flopplan.passes.step_passes`
    (the same ones :func:`flopplan.cost.step_cost` counts), each evaluated at its expected (padded) widths.
    """
    out: dict[str, list[tuple[float, Call]]] = {}
    for p in step_passes(RoundShape.of(recipe), RoundLengths.of(recipe)):
        out.setdefault(p.phase, []).extend(pass_calls(p))
    return out


def pass_calls(p: RoundPass) -> list[tuple[float, Call]]:
    """The calls of one pass at its expected widths. A generate's decode steps are one :class:`Call` whose FLOPs
    and KV-cache reads are arrays (step j attends to ``prompt + j + 1`` keys; each step reads the weights and the
    KV cache): one numpy evaluation of the decode formula, not a loop over 32k steps of a long completion."""
    prompt, completion = float(mean_of(p.prompt)), float(mean_of(p.completion))
    spec, layers = p.spec, p.spec.num_layers
    if p.kind == "decode":
        import numpy as np

        from flopplan.formulas import decode_flops

        steps = max(0, round(completion) - 1)
        if steps == 0:
            return []
        context = prompt + np.arange(steps, dtype=np.float64)
        flops = decode_flops(spec, p.rows, context, p.lora, p.conv).total
        return [(p.count, Call(flops, p.rows, spec.params, kv_cache_elements(spec, p.rows, context), layers))]
    terms = p.call_flops(p.rows, prompt, completion)
    tokens = p.rows * (prompt if p.kind == "prefill" else p.sequence_tokens(prompt, completion))
    return [(p.count, Call(float(terms.total), tokens, layers=layers, attention_flops=float(attention_flops(terms))))]
