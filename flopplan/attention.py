"""Attention's query-key pairs under the counting conventions: dense or causal, full or sliding-window (torch-free).

Every attention FLOP of a pass is ``2 * FMA * q_dim`` per query-key pair per layer (``QK^T`` and ``softmax(.)V``),
so attention enters :mod:`flopplan.formulas` only through the number of pairs, counted here:

* ``attention="dense"`` (default) counts every query against every key of the (masked) score matrix, as
  FlopCounterMode and eager attention do; ``"causal"`` counts only the computed triangle (``s*(s+1)/2`` pairs for a
  prefill of ``s`` tokens), the work a causal flash kernel really does, for time estimates.
* ``attention_kernel="eager"`` (default): attention is two batched matmuls, each of whose operands gets a gradient
  of the same cost (backward = 2x forward). ``"sdpa"``: a fused SDPA/flash kernel, whose backward FlopCounterMode
  counts as 2.5x the forward (five matmuls: the recomputed scores, dV, dP, dQ and dK).
* A sliding window of ``w`` keys (Mistral, Phi-3; Gemma 2/3 and Qwen2 on some layers only): a decode step attends
  to at most ``w`` keys, since transformers' sliding cache keeps the last ``w - 1`` tokens, whatever the kernel.
  In a prefill, ``window="masked"`` (default) counts what the attention convention counts, as eager attention
  computes the full score matrix and masks it; ``"windowed"`` leaves out the pairs beyond the window (query ``i``
  and key ``j`` with ``i - j >= w``), which a windowed SDPA/flash kernel never computes. A layer without a window
  counts full attention under either.

The functions are plain arithmetic on Python ints (exact), numpy arrays (a grid) and floats (quadrature nodes);
window caps go through :func:`cap`, the one operation that is not ``+`` or ``*``.
"""

from __future__ import annotations

from typing import Any

Num = Any
"""A count: a Python int (exact), a numpy array (a grid) or a sympy expression (a formula)."""

ATTENTION_MATMULS = 2
"""Attention does two matmuls per head per query-key pair: the scores QK^T and the weighted sum softmax(.)V."""

SDPA_BACKWARD_MATMULS = 5
"""FlopCounterMode's count for a fused SDPA backward: recomputed QK^T, dV, dP, dQ and dK (2.5x the forward)."""

ATTENTION_CONVENTIONS = ("dense", "causal")
ATTENTION_KERNELS = ("eager", "sdpa")
WINDOW_CONVENTIONS = ("masked", "windowed")


def half(x: Num) -> Num:
    """``x / 2``, exact for Python ints and integer numpy arrays (every caller passes an even number)."""
    if isinstance(x, int):
        if x % 2:
            raise ValueError(f"half() of an odd integer {x}")
        return x // 2
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind in ("i", "u"):
        return x // 2
    return x / 2


def cap(x: Num, low: Num, high: Num) -> Num:
    """``x`` clipped to ``[low, high]``, elementwise on numpy arrays (``high`` may be None: no upper bound)."""
    if hasattr(x, "clip"):
        return x.clip(low, high)
    x = max(x, low)
    return x if high is None else min(x, high)


def prefill_pairs(seq: Num, causal: bool = False) -> Num:
    """Query-key pairs of a forward over ``seq`` fresh tokens: ``seq**2`` dense, ``seq*(seq+1)/2`` causal."""
    if causal:
        return half(seq * (seq + 1))
    return seq * seq


def beyond_window(seq: Num, window: int | None) -> Num:
    """Pairs of a ``seq``-token prefill outside a sliding window (query ``i``, key ``j <= i - window``):
    ``d * (d + 1) / 2`` with ``d = seq - window``; 0 without a window or within it (``d <= 0``)."""
    if window is None:
        return 0
    d = cap(seq - window, 0, None)
    return half(d * (d + 1))


def window_prefill_pairs(seq: Num, causal: bool, window: int | None, windowed: bool) -> Num:
    """Pairs of a ``seq``-token prefill in a layer with ``window`` (None: full attention): the attention
    convention's pairs, less those beyond the window under the ``windowed`` convention."""
    pairs = prefill_pairs(seq, causal)
    return pairs - beyond_window(seq, window) if windowed else pairs


def decode_pairs(context: Num, window: int | None = None) -> Num:
    """Query-key pairs of one decode step with ``context`` tokens cached: the new token attends to context + 1
    (at most ``window``: the sliding cache keeps the last ``window - 1`` tokens)."""
    return context + 1 if window is None else cap(context + 1, 0, window)


def decode_pairs_sum(prompt: Num, steps: Num, window: int | None = None) -> Num:
    """Pairs of ``steps`` consecutive decode steps after a ``prompt``-token prefill.

    Step j (0-based) has ``prompt + j`` tokens cached and attends to ``prompt + j + 1`` keys, so the sum is
    ``steps*(prompt+1) + steps*(steps-1)/2``, an arithmetic series in closed form. With a sliding window the
    first ``u = clip(window - prompt - 1, 0, steps)`` steps attend to fewer than ``window`` keys (the same series
    over ``u`` steps) and the other ``steps - u`` to ``window`` keys each.
    """
    if window is None:
        return steps * (prompt + 1) + half(steps * (steps - 1))
    u = cap(window - prompt - 1, 0, steps)
    return u * (prompt + 1) + half(u * (u - 1)) + (steps - u) * window


SLIDING, FULL = "sliding_attention", "full_attention"
"""transformers' names of the two layer types (``config.layer_types``)."""


def sliding_layers(arch: Any) -> tuple[Num, bool]:
    """How many decoder layers have a sliding window, and whether the first one does. A spec's ``layer_types``
    say it layer by layer (Gemma 2/3, Qwen2's ``max_window_layers``); without them a ``sliding_window`` applies
    to every layer (Mistral, Phi-3) and no window to none."""
    types = getattr(arch, "layer_types", None)
    if getattr(arch, "sliding_window", None) is None:
        return 0, False
    if types is None:
        return arch.num_layers, True
    return sum(1 for t in types if t == SLIDING), types[0] == SLIDING


def kv_cache_elements(arch: Any, batch: Num, context: Num) -> Num:
    """Elements a decode step reads from the KV cache: keys and values of ``context + 1`` positions (the cached
    tokens and the new one; in a sliding layer at most its window's) in every layer, ``batch * 2 * kv_dim`` times
    that summed over the layers."""
    local, _ = sliding_layers(arch)
    pairs = (arch.num_layers - local) * decode_pairs(context)
    if local:
        pairs = pairs + local * decode_pairs(context, arch.sliding_window)
    return batch * (2 * arch.kv_dim) * pairs


def is_attention_term(term: str) -> bool:
    """Whether a breakdown term is attention (QK^T, AV, or a fused SDPA backward), in any pass."""
    return "attn_" in term or "attention" in term
