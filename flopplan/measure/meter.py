"""A FLOP meter that counts what torch's FlopCounterMode counts without changing what runs.

FlopCounterMode executes every op that has no FLOP formula but has a CompositeImplicitAutograd kernel through
that kernel (``func.decompose``) instead of the op's own kernel. The two are not bit-identical: on the CPU
``aten.silu_backward`` (the backward of every SwiGLU MLP) runs as ``math_silu_backward`` (separate sigmoid, mul,
add, ...) instead of the fused vectorised kernel, so gradients differ in the last bits and a run with
``--measure-flops`` drifts from the same run without it.

:class:`FlopMeter` runs every op with its own kernel, exactly as without a mode, and counts:

* an op FlopCounterMode would decompose (one with a CompositeImplicitAutograd kernel): its decomposition
  replayed on ``meta`` copies of the arguments, counted recursively by the same rules (shapes only, nothing
  computed, no random numbers drawn);
* any other op: its formula in torch's ``flop_registry``, 0 without one (as FlopCounterMode).

Higher-order operators (``cond``, flex attention, user Triton kernels), which FlopCounterMode also handles, are
not supported: eager transformers models do not emit them.

So the total equals FlopCounterMode's and the results equal those of an unmetered run.

FlopCounterMode's own blind spots (:data:`BLIND_SPOTS`: ops that run matmuls but have no formula, so count 0) are
counted apart, by name, in :attr:`FlopMeter.blind` with the formula of the op that does the same arithmetic:
in-place matmuls (``aten.addmm_``, ``baddbmm_``; TRL's chunked log-prob head accumulates its gradients with them on
the CPU) and the CPU's fused attention (``_scaled_dot_product_flash_attention_for_cpu`` and its backward, what SDPA
runs on the CPU; the forward is two score-sized matmuls, the backward five, since it recomputes the scores, as the
GPU flash kernels whose formulas they take) and the grouped matmul (``aten._grouped_mm``: transformers' default
``grouped_mm`` experts of a mixture-of-experts model, forward and backward; 2 FLOPs per multiply-add of the matmuls it
groups). ``total`` is what FlopCounterMode reports, :attr:`FlopMeter.executed` (``total`` + the blind spots) what ran.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map_only
from torch.utils.flop_counter import flop_registry, shape_wrapper

aten = torch.ops.aten


def grouped_mm_flops(a_shape: Any, b_shape: Any, *args: Any, **kwargs: Any) -> int:
    """``aten._grouped_mm`` on shapes, in torch's flop-formula convention: ``[S,K] x [E,K,N]`` (the experts'
    forward and input gradient: each of the S rows through its own expert's ``[K,N]``) or ``[K,S] x [S,N]`` split by
    expert into ``[E,K,N]`` (the weight gradient); either way ``2*S*K*N``, the FLOPs of the ungrouped matmuls. Also a
    ``FlopCounterMode(custom_mapping=...)`` entry, which is how the exactness tests count grouped experts."""
    if len(a_shape) == 2 and len(b_shape) == 3:
        return 2 * a_shape[0] * a_shape[1] * b_shape[2]
    if len(a_shape) == 2 and len(b_shape) == 2:
        return 2 * a_shape[0] * a_shape[1] * b_shape[1]
    raise ValueError(f"grouped_mm of shapes {tuple(a_shape)} x {tuple(b_shape)} is not counted")


BLIND_SPOTS: dict[str, dict[Any, Any]] = {
    "inplace_gemms": {aten.addmm_: aten.addmm, aten.baddbmm_: aten.baddbmm, aten.addbmm_: aten.addbmm},
    "cpu_sdpa": {aten._scaled_dot_product_flash_attention_for_cpu: aten._scaled_dot_product_flash_attention,
                 aten._scaled_dot_product_flash_attention_for_cpu_backward:
                     aten._scaled_dot_product_flash_attention_backward},
    "grouped_mm": {aten._grouped_mm: shape_wrapper(grouped_mm_flops)},
}
"""FlopCounterMode's blind spots by name: each op it counts as 0, and the op whose formula it shares (the argument
layouts agree on the tensors the formulas read: the query, key and value, and the backward's output gradient), or
a formula of its own (the grouped matmul)."""
INPLACE_GEMMS = BLIND_SPOTS["inplace_gemms"]
_BLIND_OF = {op: (name, flop_registry.get(formula, formula))
             for name, ops in BLIND_SPOTS.items() for op, formula in ops.items()}

# metadata queries FlopCounterMode hands back to the tensor (only tensor subclasses with a custom size/stride
# policy send them to a mode)
_METADATA = {aten.sym_is_contiguous.default, aten.is_contiguous.default, aten.is_contiguous.memory_format,
             aten.is_strides_like_format.default, aten.is_non_overlapping_and_dense.default, aten.size.default,
             aten.sym_size.default, aten.stride.default, aten.sym_stride.default, aten.storage_offset.default,
             aten.sym_storage_offset.default, aten.numel.default, aten.sym_numel.default, aten.dim.default,
             torch.ops.prim.layout.default}


@functools.cache
def _has_decomposition(func: Any) -> bool:
    """Whether FlopCounterMode runs ``func`` through ``func.decompose``: it does for every op with a
    CompositeImplicitAutograd kernel (its registry is keyed by packets, so an overload is never "in" it)."""
    if func is torch.ops.prim.device.default:
        return False
    key = torch._C.DispatchKey.CompositeImplicitAutograd
    return key in func.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), key)


def _to_meta(t: torch.Tensor) -> torch.Tensor:
    return t if t.device.type == "meta" else t.to("meta")


class FlopMeter(TorchDispatchMode):
    """``with FlopMeter() as meter: ...`` then ``meter.total``: FlopCounterMode's count, execution unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.blind = dict.fromkeys(BLIND_SPOTS, 0)  # FLOPs FlopCounterMode does not count, by blind spot
        self.by_op: dict[Any, int] = {}
        self.paused = 0  # > 0: ops run uncounted (an inner meter counts them: nested, both would, and this one
        #                  would count an inner meter's replays of decompositions on meta tensors as well)

    def get_total_flops(self) -> int:  # the name FlopCounterMode uses
        return self.total

    @property
    def inplace(self) -> int:
        """The in-place matmuls FlopCounterMode misses."""
        return self.blind["inplace_gemms"]

    @property
    def executed(self) -> int:
        """Every matmul FLOP that ran: FlopCounterMode's count and its blind spots."""
        return self.total + sum(self.blind.values())

    def _add(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        packet = func._overloadpacket
        if packet in _BLIND_OF:
            name, formula = _BLIND_OF[packet]
            self.blind[name] += int(formula(*args, **kwargs, out_val=out))
            return
        if packet in flop_registry:
            flops = int(flop_registry[packet](*args, **kwargs, out_val=out))
            self.total += flops
            self.by_op[packet] = self.by_op.get(packet, 0) + flops

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func in _METADATA:
            return NotImplemented
        out = func(*args, **kwargs)  # the op's own kernel, as without the meter
        if self.paused:
            return out
        if not (_has_decomposition(func) and self._count_decomposition(func, args, kwargs)):
            self._add(func, args, kwargs, out)
        return out

    def _count_decomposition(self, func: Any, args: tuple, kwargs: dict) -> bool:
        """Count what FlopCounterMode's decomposition of ``func`` would execute, on shapes only; a decomposition
        that needs values (meta tensors have none) is replayed on copies, its random draws undone. False: the
        op declined to decompose (FlopCounterMode then counts the op itself)."""
        before, by_op = self.total, dict(self.by_op)
        try:
            meta_args, meta_kwargs = tree_map_only(torch.Tensor, _to_meta, (args, kwargs))
            with self:
                return func.decompose(*meta_args, **meta_kwargs) is not NotImplemented
        except Exception:  # a data-dependent decomposition: count it on real copies instead
            self.total, self.by_op = before, by_op
        copies, copy_kwargs = tree_map_only(torch.Tensor, lambda t: t.detach().clone(), (args, kwargs))
        devices = sorted({t.device.index or 0 for t in torch.utils._pytree.tree_leaves((args, kwargs))
                          if isinstance(t, torch.Tensor) and t.device.type == "cuda"})
        with torch.random.fork_rng(devices=devices), self:
            return func.decompose(*copies, **copy_kwargs) is not NotImplemented
