"""The closed-form FLOP model: exact counts of what a transformers decoder executes.

Every pass through the model (a forward over a batch, a decode step, a whole ``generate``, a training step) is
linear in four quantities, summed over the batch:

* ``tokens``: token positions that go through the decoder layers (every linear projection runs once per token);
* ``pairs``:  query-key pairs per attention head (``QK^T`` and ``softmax(.)V`` each cost ``2 * q_dim`` per pair);
* ``positions``: positions whose hidden state goes through the head (LM head or score head);
* ``calls``: forward calls of the model (a ``generate``: its prefill and each decode step), for the work a call
  does whatever its rows and tokens: peft's merged weights of adapted routed experts (below).

So a pass is described by a :class:`Pass` of those four numbers, and one function, :func:`pass_terms`, turns it
into a breakdown (term -> FLOPs). Each term is written once in plain ``+`` and ``*`` arithmetic; the only other
operations are :func:`flopplan.attention.half`, exact on integers, and the window caps of
:mod:`flopplan.attention`. The same definitions therefore evaluate on Python ints (exact
integers), numpy arrays (whole grids at once; int64 is exact below 2**63, float64 for larger grids) and sympy
symbols (the LaTeX of ``flopplan formula``).

Conventions (each is a :class:`Conventions` field, documented in the README):

* A multiply-add is 2 FLOPs (``FMA_FLOPS``), a ``[M,K]x[K,N]`` matmul ``2*M*K*N``; biases, norms, softmax, RoPE,
  activations and embedding gathers count 0. This is what ``torch.utils.flop_counter.FlopCounterMode`` counts.
* Attention enters only through the number of query-key pairs, counted under the ``attention`` (dense or causal),
  ``attention_kernel`` (eager or sdpa) and ``window`` (masked or windowed) conventions: see
  :mod:`flopplan.attention`.
* Training counts what autograd executes: a frozen weight whose input needs a gradient costs its forward once more
  (dgrad, no wgrad); an op none of whose inputs needs a gradient has no backward at all. Under LoRA the layers
  before the first trainable module see inputs that need no gradient, unless the embedding output is made to
  require one (``input_requires_grad``, which transformers turns on with gradient checkpointing).
* Mixture-of-experts layers (:mod:`flopplan.moe`): the router runs on every token, the routed experts on
  ``tokens * top_k`` token-expert pairs (``routed_pairs``; the routing decides only how those rows split between
  experts), the shared expert and its gate (Qwen2-MoE) on every token. ``experts`` names transformers' experts
  implementation (default ``grouped_mm``, transformers' own); all three execute the same matmuls. LoRA targets
  name modules: in an MoE layer ``gate_proj``/``up_proj``/``down_proj`` are the shared expert's where it has one;
  Qwen3-MoE's routed experts (3-D parameters) are adapted by peft's ``ParamWrapper``
  (:data:`flopplan.moe.PEFT_EXPERT_LORA_FAMILIES`), which forms the merged weight ``W + s * B @ A`` twice in every
  forward call of the model: a per-call cost (``calls``), charged once per call made, never per row or token.
* Gradient checkpointing re-runs each decoder layer's forward during backward. Non-reentrant checkpointing (the
  transformers 5 default) stops the re-run as soon as the last tensor the backward needs is recomputed, so the
  final matmul of the layer, whose inputs are saved before it runs, is not re-executed. Reentrant checkpointing
  re-runs the whole layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flopplan.arch import FOUR_NORM_FAMILIES
from flopplan.attention import (
    ATTENTION_CONVENTIONS,
    ATTENTION_KERNELS,
    SDPA_BACKWARD_MATMULS,
    WINDOW_CONVENTIONS,
    Num,
    decode_pairs,
    decode_pairs_sum,
    prefill_pairs,
    sliding_layers,
    window_prefill_pairs,
)
from flopplan.breakdown import Breakdown
from flopplan.moe import EXPERTS_IMPLEMENTATIONS, adapts_nothing, expert_lora_targets, routed_pairs
from flopplan.projections import FUSED_FAMILIES, FUSED_PROJECTIONS, LORA_TARGETS, lora_modules

FMA_FLOPS = 2
"""FLOPs per multiply-add: a [M,K]x[K,N] matmul is 2*M*K*N FLOPs (FlopCounterMode; Megatron's fma factor)."""


def matmul_flops(rows: Num, n_in: Num, n_out: Num) -> Num:
    """FLOPs of ``[rows, n_in] x [n_in, n_out]``."""
    return FMA_FLOPS * rows * n_in * n_out


# -- conventions and fine-tuning set-up -------------------------------------------------------------------------

CHECKPOINTING = ("none", "non-reentrant", "reentrant")


@dataclass(frozen=True)
class Conventions:
    """The counting choices that differ between tools (see the module docstring)."""

    attention: str = "dense"
    attention_kernel: str = "eager"
    experts: str = "grouped_mm"
    window: str = "masked"

    def __post_init__(self) -> None:
        if self.window not in WINDOW_CONVENTIONS:
            raise ValueError(f"window convention must be one of {WINDOW_CONVENTIONS}, not {self.window!r}")
        if self.experts not in EXPERTS_IMPLEMENTATIONS:
            raise ValueError(f"experts implementation must be one of {EXPERTS_IMPLEMENTATIONS}, not {self.experts!r}")
        if self.attention not in ATTENTION_CONVENTIONS:
            raise ValueError(f"attention convention must be one of {ATTENTION_CONVENTIONS}, not {self.attention!r}")
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise ValueError(f"attention kernel must be one of {ATTENTION_KERNELS}, not {self.attention_kernel!r}")

    @property
    def causal(self) -> bool:
        return self.attention == "causal"


@dataclass(frozen=True)
class LoRA:
    """A LoRA adapter (peft): rank ``r`` on the named projections of every decoder layer, base weights frozen.
    Targets are the seven split projections or Phi-3's fused ``qkv_proj``/``gate_up_proj``
    (:func:`flopplan.projections.lora_modules` says which modules a family's layer adapts for them)."""

    rank: Num
    targets: tuple[str, ...] = LORA_TARGETS

    def __post_init__(self) -> None:
        symbolic = hasattr(self.rank, "free_symbols")  # a sympy symbol, for formulas
        if not symbolic and (isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank <= 0):
            raise ValueError(f"LoRA rank must be a positive integer, not {self.rank!r}")
        names = (*LORA_TARGETS, *FUSED_PROJECTIONS)
        unknown = [t for t in self.targets if t not in names]
        if unknown or not self.targets:
            raise ValueError(f"LoRA targets must be a non-empty subset of {', '.join(names)}"
                             + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
        # one canonical order, so that equal adapters compare equal
        object.__setattr__(self, "targets", tuple(t for t in names if t in self.targets))


@dataclass(frozen=True)
class Training:
    """How the policy is updated: full fine-tuning (``lora=None``) or LoRA, and activation checkpointing.

    ``input_requires_grad`` says whether the embedding output requires a gradient. ``None`` means what
    transformers does: yes under full fine-tuning (the embedding is trained) and whenever gradient checkpointing is
    enabled through transformers (it calls ``enable_input_require_grads``), no otherwise.
    """

    lora: LoRA | None = None
    checkpointing: str = "none"
    input_requires_grad: bool | None = None
    head_recompute: bool = False  # a chunked log-prob head (TRL >= 1.15) re-runs its matmul in backward

    def __post_init__(self) -> None:
        if self.checkpointing not in CHECKPOINTING:
            raise ValueError(f"checkpointing must be one of {CHECKPOINTING}, not {self.checkpointing!r}")
        if self.lora is not None and self.checkpointing == "reentrant" and self.input_requires_grad is False:
            raise ValueError("reentrant checkpointing under LoRA needs input_requires_grad: "
                             "otherwise no gradient reaches the adapters")

    @property
    def embedding_output_requires_grad(self) -> bool:
        if self.lora is None:
            return True
        if self.input_requires_grad is not None:
            return self.input_requires_grad
        return self.checkpointing != "none"


FULL = Training()
"""Full fine-tuning without checkpointing."""


# -- a pass through the model -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pass:
    """The quantities every FLOP of a pass is linear in, summed over the batch. ``local_pairs``: the pairs of a
    layer with a sliding window, where they differ from a full-attention layer's ``pairs`` (None: the same);
    which layers slide is the architecture's (:func:`flopplan.attention.sliding_layers`). ``calls``: the forward
    calls of the model the pass is made of (per-call work: see the module docstring)."""

    tokens: Num
    pairs: Num
    positions: Num
    local_pairs: Num = None
    calls: Num = 1

    @property
    def window_pairs(self) -> Num:
        return self.pairs if self.local_pairs is None else self.local_pairs

    def __add__(self, other: Pass) -> Pass:
        local = None if self.local_pairs is None and other.local_pairs is None \
            else self.window_pairs + other.window_pairs
        return Pass(self.tokens + other.tokens, self.pairs + other.pairs, self.positions + other.positions, local,
                    self.calls + other.calls)

    def scaled(self, factor: Num) -> Pass:
        return Pass(self.tokens * factor, self.pairs * factor, self.positions * factor,
                    None if self.local_pairs is None else self.local_pairs * factor, self.calls * factor)


def forward_pass(batch: Num, seq: Num, logits: Num, conv: Conventions = Conventions(),
                 window: int | None = None) -> Pass:
    """One forward call on ``batch`` sequences of ``seq`` tokens with the head applied to the last ``logits``
    positions of each; in layers with a sliding ``window``, the pairs the window convention counts."""
    local = None if window is None else batch * window_prefill_pairs(seq, conv.causal, window,
                                                                     conv.window == "windowed")
    return Pass(batch * seq, batch * prefill_pairs(seq, conv.causal), batch * logits, local)


def decode_pass(batch: Num, context: Num, window: int | None = None) -> Pass:
    """One decode step of ``batch`` sequences with ``context`` tokens in the KV cache."""
    local = None if window is None else batch * decode_pairs(context, window)
    return Pass(batch, batch * decode_pairs(context), batch, local)


def generate_passes(batch: Num, prompt: Num, completion: Num, conv: Conventions = Conventions(),
                    window: int | None = None) -> dict[str, Pass]:
    """transformers ``generate`` of ``completion`` new tokens after a ``prompt``-token prompt (no early stop).

    The prefill runs the whole prompt with logits for the last position only (``logits_to_keep=1``) and yields
    the first new token; each of the remaining ``completion - 1`` tokens costs one decode step, a forward call of
    its own (``calls``), whatever the batch.
    """
    steps = completion - 1
    local = None if window is None else batch * decode_pairs_sum(prompt, steps, window)
    return {
        "prefill": forward_pass(batch, prompt, 1, conv, window),
        "decode": Pass(batch * steps, batch * decode_pairs_sum(prompt, steps), batch * steps, local, steps),
    }


# -- the decoder layer as an ordered list of matmuls ------------------------------------------------------------

@dataclass(frozen=True)
class _Op:
    """One matmul of a pass: its forward FLOPs and, per operand, whether that operand needs a gradient.

    A matmul's gradient with respect to either operand costs exactly its forward FLOPs.
    """

    term: str
    flops: Num
    grads: tuple[tuple[str, bool], ...] = ()
    fused_backward: Num | None = None  # SDPA: the whole attention backward, charged once, if any input needs grad


@dataclass
class _LayerBuilder:
    arch: Any
    tokens: Num
    pairs: Num
    lora: LoRA | None
    trains_weights: bool
    kernel: str
    experts: str = "grouped_mm"
    calls: Num = 1  # forward calls: what per-call work (the experts' merged adapter weights) is charged for
    ops: list[_Op] = field(default_factory=list)
    adapted: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.lora is not None:
            self.adapted = lora_modules(getattr(self.arch, "family", ""), self.lora.targets)
            moe = getattr(self.arch, "moe", None)
            if moe is not None and adapts_nothing(self.arch.family, moe, self.lora.targets):
                raise ValueError(f"LoRA on {', '.join(self.lora.targets)} adapts nothing in a {self.arch.family} "
                                 "model: peft finds no module of those names (name an attention projection)")

    def linear(self, name: str, x_rg: bool) -> bool:
        """Append a projection (and its LoRA branch); return whether its output needs a gradient."""
        n_in, n_out = self.arch.projection_shapes()[name]
        self.ops.append(_Op(name, matmul_flops(self.tokens, n_in, n_out),
                            (("dgrad", x_rg), ("wgrad", self.trains_weights))))
        out_rg = x_rg or self.trains_weights
        if self.lora is not None and name in self.adapted:
            r = self.lora.rank
            # peft: result = base(x) + lora_B(lora_A(dropout(x))) * scaling; A and B are trained.
            self.ops.append(_Op(f"{name}.lora_a", matmul_flops(self.tokens, n_in, r),
                                (("dgrad", x_rg), ("wgrad", True))))
            self.ops.append(_Op(f"{name}.lora_b", matmul_flops(self.tokens, r, n_out),
                                (("dgrad", True), ("wgrad", True))))
            out_rg = True
        return out_rg

    def attention(self, q_rg: bool, k_rg: bool, v_rg: bool) -> bool:
        one = FMA_FLOPS * self.pairs * self.arch.q_dim  # one of the two attention matmuls, all heads
        if self.kernel == "sdpa":
            fused = SDPA_BACKWARD_MATMULS * one if (q_rg or k_rg or v_rg) else None
            self.ops.append(_Op("attn_scores", one))
            self.ops.append(_Op("attn_values", one, fused_backward=fused))
        else:
            self.ops.append(_Op("attn_scores", one, (("q", q_rg), ("k", k_rg))))
            self.ops.append(_Op("attn_values", one, (("probs", q_rg or k_rg), ("v", v_rg))))
        return q_rg or k_rg or v_rg

    def matmul(self, term: str, rows: Num, n_in: Num, n_out: Num, x_rg: bool, w_rg: bool | None = None) -> bool:
        """A matmul with a weight trained under full fine-tuning (or ``w_rg``); whether its output needs grad."""
        w_rg = self.trains_weights if w_rg is None else w_rg
        self.ops.append(_Op(term, matmul_flops(rows, n_in, n_out), (("dgrad", x_rg), ("wgrad", w_rg))))
        return x_rg or w_rg

    def expert_adapter(self, term: str, rank: Num, n_in: Num, n_out: Num) -> bool:
        """peft's LoRA on a 3-D expert parameter (``ParamWrapper``): every forward call forms ``W + s * B @ A``
        for every expert with one batched matmul (``experts x n_out x rank x n_in``), twice, since the call
        registers it with torch's ``register_parametrization``, which evaluates it once to check its shape;
        backward gives A and B their gradients and the expert matmuls a weight gradient (the merged weight needs
        one). Per call, whatever the tokens: ``calls`` times."""
        flops = self.calls * matmul_flops(self.arch.moe.experts * n_out, rank, n_in)
        self.ops.append(_Op(f"{term}.lora_check", flops))
        self.ops.append(_Op(f"{term}.lora", flops, (("lora_a.wgrad", True), ("lora_b.wgrad", True))))
        return True

    def moe_block(self, x_rg: bool) -> None:
        """An MoE block in transformers' order: (shared expert,) router, routed experts, (shared-expert gate).

        LoRA targets: see :data:`flopplan.moe.PEFT_EXPERT_LORA_FAMILIES` for when the routed experts get adapters."""
        moe, h = self.arch.moe, self.arch.hidden_size
        if moe.shared_intermediate:  # the shared expert is a gated MLP module, like a dense layer's
            gate = self.linear("gate_proj", x_rg)
            up = self.linear("up_proj", x_rg)
            self.linear("down_proj", gate or up)
        self.matmul("router", self.tokens, h, moe.experts, x_rg)
        pairs = routed_pairs(self.tokens, moe.top_k)
        width = moe.expert_intermediate
        adapted = expert_lora_targets(self.arch.family, self.lora.targets if self.lora is not None else ())
        if adapted and self.experts == "eager":
            raise ValueError("LoRA on routed experts under the eager experts loop recomputes the adapter once per "
                             "expert that receives tokens, which depends on the routing: use batched_mm or grouped_mm")
        rank = self.lora.rank if self.lora is not None else 0
        gate_up_w = self.expert_adapter("experts.gate_up_proj", 2 * rank, h, 2 * width) \
            if "gate_up_proj" in adapted else self.trains_weights
        down_w = self.expert_adapter("experts.down_proj", rank, width, h) \
            if "down_proj" in adapted else self.trains_weights
        gate_up = self.matmul("experts.gate_up_proj", pairs, h, 2 * width, x_rg, gate_up_w)
        self.matmul("experts.down_proj", pairs, width, h, gate_up, down_w)
        if moe.shared_gate:
            self.matmul("shared_expert_gate", self.tokens, h, 1, x_rg)


def _layer_ops(arch: Any, tokens: Num, pairs: Num, lora: LoRA | None, trains_weights: bool, input_rg: bool,
               kernel: str, experts: str = "grouped_mm", calls: Num = 1) -> list[_Op]:
    """The matmuls of one decoder layer in execution order, with gradient needs propagated from the input."""
    b = _LayerBuilder(arch, tokens, pairs, lora, trains_weights, kernel, experts, calls)
    if getattr(arch, "family", "") in FUSED_FAMILIES:  # Phi-3: one qkv_proj, one gate_up_proj
        qkv = b.linear("qkv_proj", input_rg)
        attn_out = b.linear("o_proj", b.attention(qkv, qkv, qkv))
        b.linear("down_proj", b.linear("gate_up_proj", input_rg or attn_out))
        return b.ops
    q = b.linear("q_proj", input_rg)
    k = b.linear("k_proj", input_rg)
    v = b.linear("v_proj", input_rg)
    context = b.attention(q, k, v)
    attn_out = b.linear("o_proj", context)
    mlp_in = input_rg or attn_out  # residual add
    if getattr(arch, "moe", None) is not None:
        b.moe_block(mlp_in)
        return b.ops
    gate = b.linear("gate_proj", mlp_in)
    up = b.linear("up_proj", mlp_in)
    b.linear("down_proj", gate or up)
    return b.ops


def _head_ops(arch: Any, positions: Num, trains_weights: bool) -> list[_Op]:
    ops = []
    for i, layer in enumerate(arch.head_layers):
        term = "head" if len(arch.head_layers) == 1 else f"head.{i}"
        ops.append(_Op(term, matmul_flops(positions, layer.in_features, layer.out_features),
                       (("dgrad", True), ("wgrad", trains_weights))))
    return ops


def _forward_terms(ops: Iterable[_Op], out: Breakdown, prefix: str = "", times: Num = 1) -> None:
    for op in ops:
        out.add(prefix + op.term, op.flops * times)


def _backward_terms(ops: Iterable[_Op], out: Breakdown, times: Num = 1) -> None:
    for op in ops:
        if op.fused_backward is not None:
            out.add("backward/attention.sdpa", op.fused_backward * times)
        for label, needs in op.grads:
            if needs:
                out.add(f"backward/{op.term}.{label}", op.flops * times)


def _recomputed(ops: list[_Op], checkpointing: str, whole: bool = False) -> list[_Op]:
    """The ops a checkpointed layer re-runs in backward.

    Non-reentrant checkpointing stops at the pack hook of the last saved tensor. The layer's last matmul (the
    down projection, or the LoRA B matrix of the down projection) saves its inputs before its kernel runs, and
    everything after it (the LoRA scaling, the residual add) saves nothing, so that matmul is not re-run. An MoE
    layer instead ends by multiplying the experts' output by the routing weights (and the shared expert's by its
    sigmoid gate), which saves that output: every matmul is re-run; so does a Gemma 2/3 layer, whose
    ``post_feedforward_layernorm`` saves the MLP's output (``whole``).
    """
    if checkpointing == "reentrant" or whole:
        return ops
    return ops[:-1]


def _layer_groups(arch: Any, p: Pass) -> tuple[list[tuple[Num, Num]], int]:
    """The decoder layers as (pairs, count) groups: full-attention layers, then sliding-window layers; and the
    index of the group the first layer belongs to (it may differ from the others in training)."""
    count, first_slides = sliding_layers(arch)
    if isinstance(count, int) and count == 0:
        return [(p.pairs, arch.num_layers)], 0
    return [(p.pairs, arch.num_layers - count), (p.window_pairs, count)], int(first_slides)


def _nonzero(count: Num) -> bool:
    return not (isinstance(count, int) and count == 0)


def pass_terms(arch: Any, p: Pass, lora: LoRA | None = None, conv: Conventions = Conventions()) -> Breakdown:
    """Forward FLOPs of a pass, by term. LoRA adapters, when given, are active (not merged)."""
    out = Breakdown()
    for pairs, count in _layer_groups(arch, p)[0]:
        if _nonzero(count):
            _forward_terms(_layer_ops(arch, p.tokens, pairs, lora, False, False, conv.attention_kernel,
                                      conv.experts, p.calls), out, times=count)
    _forward_terms(_head_ops(arch, p.positions, False), out)
    return out


def train_terms(arch: Any, p: Pass, training: Training = FULL, conv: Conventions = Conventions()) -> Breakdown:
    """Forward + backward (+ recompute) FLOPs of one training pass, by term (``forward/``, ``backward/``,
    ``recompute/``).

    With ``p`` from :func:`forward_pass` this is one optimizer micro-step on ``batch`` sequences.
    """
    full = training.lora is None
    first_rg = training.embedding_output_requires_grad
    kernel = conv.attention_kernel
    out = Breakdown()
    groups, first_group = _layer_groups(arch, p)
    layers = []
    for i, (pairs, count) in enumerate(groups):
        rest = _layer_ops(arch, p.tokens, pairs, training.lora, full, True, kernel, conv.experts, p.calls)
        if not first_rg and i == first_group:  # the first layer's input needs no gradient
            layers.append((_layer_ops(arch, p.tokens, pairs, training.lora, full, False, kernel, conv.experts,
                                      p.calls), 1))
            count = count - 1
        if _nonzero(count):
            layers.append((rest, count))
    head = _head_ops(arch, p.positions, full)
    for ops, times in layers:
        _forward_terms(ops, out, "forward/", times)
    _forward_terms(head, out, "forward/")
    for ops, times in layers:
        _backward_terms(ops, out, times)
    _backward_terms(head, out)
    if training.checkpointing != "none":
        # an MoE layer's routing weights, and Gemma's norm after the MLP, save the last matmul's output
        whole = getattr(arch, "moe", None) is not None or getattr(arch, "family", "") in FOUR_NORM_FAMILIES
        for ops, times in layers:
            _forward_terms(_recomputed(ops, training.checkpointing, whole), out, "recompute/", times)
    if training.head_recompute:
        # TRL's ChunkedLogProbFunction keeps no logits: its backward recomputes each logit tile with the head's
        # forward matmul before it forms the input (and, under full fine-tuning, the weight) gradient.
        _forward_terms(head, out, "recompute/")
    return out


# -- the phases of the CLI --------------------------------------------------------------------------------------

def forward_flops(arch: Any, batch: Num, seq: Num, logits: Num, lora: LoRA | None = None,
                  conv: Conventions = Conventions()) -> Breakdown:
    """A forward over ``batch`` x ``seq`` tokens with the head on the last ``logits`` positions per sequence."""
    return pass_terms(arch, forward_pass(batch, seq, logits, conv, _window(arch)), lora, conv)


def decode_flops(arch: Any, batch: Num, context: Num, lora: LoRA | None = None,
                 conv: Conventions = Conventions()) -> Breakdown:
    """One decode step of ``batch`` sequences with ``context`` tokens in the KV cache."""
    return pass_terms(arch, decode_pass(batch, context, _window(arch)), lora, conv)


def generate_flops(arch: Any, batch: Num, prompt: Num, completion: Num, lora: LoRA | None = None,
                   conv: Conventions = Conventions()) -> Breakdown:
    """transformers ``generate``: prefill (``prefill/`` terms) and ``completion - 1`` decode steps (``decode/``)."""
    return Breakdown.combine(pass_terms(arch, p, lora, conv).prefixed(name)
                             for name, p in generate_passes(batch, prompt, completion, conv, _window(arch)).items())


def train_flops(arch: Any, batch: Num, seq: Num, logits: Num, training: Training = FULL,
                conv: Conventions = Conventions()) -> Breakdown:
    """Forward + backward of ``batch`` x ``seq`` tokens with the loss on the last ``logits`` positions."""
    return train_terms(arch, forward_pass(batch, seq, logits, conv, _window(arch)), training, conv)


def _window(arch: Any) -> int | None:
    return getattr(arch, "sliding_window", None)
