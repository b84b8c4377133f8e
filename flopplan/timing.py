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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def smooth_max(a: Any, b: Any) -> Any:
    return (a + b + abs(a - b)) / 2


def overhead_seconds(params: dict[str, float], layers: Any) -> Any:
    return params["overhead"] + params["overhead_layer"] * layers


def saturating_seconds(params: dict[str, float], flops: Any, tokens: Any, layers: Any, attention: Any) -> Any:
    dense = (flops - attention) * (tokens + params["tokens_half"]) / (params["throughput_max"] * tokens)
    return overhead_seconds(params, layers) + dense + attention / params["attention_throughput"]


def roofline_seconds(params: dict[str, float], flops: Any, elements: Any, layers: Any,
                     bytes_per_element: float) -> Any:
    return overhead_seconds(params, layers) + smooth_max(flops / params["throughput"],
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
    return sum((v for k, v in terms.items() if "attn_" in k or "attention" in k), 0)
