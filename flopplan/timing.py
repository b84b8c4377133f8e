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

Active LoRA adapters (peft: per projection two skinny matmuls, then a scale and an add over the projection's
output) cost two things either form may model. Their FLOPs, at their own rate, ``+ adapter / adapter_throughput``
(those FLOPs then left out of the dense, or decode compute, term); a profile without ``adapter_throughput`` runs
them at the dense rate, and only a fit that sees the adapters' share of the FLOPs vary between LoRA calls (several
ranks or targets) can tell the two rates apart. And the work around those matmuls, which grows with the tokens but
not with the rank (the dropout, scale and add, the adapter input read again, their kernel launches),
``+ adapter_token_layer * tokens * layers`` when the call has adapters: on a small model on a CPU it is most of
what LoRA adds (rank 4 and rank 32 updates of the tiny policy take about the same time), and a fit needs calls
with and without adapters (LoRA and full runs, or the reference) to tell it from the per-token cost of the rest.

Every function is plain arithmetic (``max`` written as ``(a + b + |a - b|) / 2``), so it evaluates on floats for
planning and on numpy arrays for fitting.

:func:`phase_calls` turns the passes of a round (:func:`flopplan.passes.step_passes`, at expected lengths) into the
calls these models price: time models depend on the round's description, not the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopplan.attention import is_attention_term, kv_cache_elements
from flopplan.lengths import mean_of
from flopplan.passes import RoundLengths, RoundPass, RoundShape, step_passes

FORMS = ("saturating", "roofline")
PARAMETERS = {"saturating": ("throughput_max", "tokens_half", "overhead", "overhead_layer", "attention_throughput"),
              "roofline": ("throughput", "bandwidth", "overhead", "overhead_layer")}
OPTIONAL_PARAMETERS = ("adapter_throughput", "adapter_token_layer")
"""Parameters either form may have (absent: profiles written before they existed read as before)."""


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
    adapter_flops: Any = 0.0  # the part of ``flops`` in active LoRA adapters' matmuls; float or array


def max_(a: Any, b: Any) -> Any:
    """The larger of ``a`` and ``b``, exactly, written in arithmetic so that it evaluates on numpy arrays too."""
    return (a + b + abs(a - b)) / 2


def overhead_seconds(params: dict[str, float], layers: Any) -> Any:
    return params["overhead"] + params["overhead_layer"] * layers


def adapter_split(params: dict[str, float], adapter: Any, tokens: Any, layers: Any) -> tuple[Any, Any]:
    """(FLOPs taken out of the dense term, the adapters' own seconds: their FLOPs at their rate and their work per
    token and layer, for a call with adapters): nothing for a profile without those parameters."""
    seconds = params.get("adapter_token_layer", 0.0) * tokens * layers * (adapter > 0)
    if "adapter_throughput" not in params:
        return 0.0, seconds
    return adapter, adapter / params["adapter_throughput"] + seconds


def saturating_seconds(params: dict[str, float], flops: Any, tokens: Any, layers: Any, attention: Any,
                       adapter: Any = 0.0) -> Any:
    apart, adapter_seconds = adapter_split(params, adapter, tokens, layers)
    dense = (flops - attention - apart) * (tokens + params["tokens_half"]) / (params["throughput_max"] * tokens)
    return overhead_seconds(params, layers) + dense + attention / params["attention_throughput"] + adapter_seconds


def roofline_seconds(params: dict[str, float], flops: Any, elements: Any, layers: Any,
                     bytes_per_element: float, adapter: Any = 0.0, tokens: Any = 0.0) -> Any:
    apart, adapter_seconds = adapter_split(params, adapter, tokens, layers)
    return overhead_seconds(params, layers) + max_((flops - apart) / params["throughput"],
                                                   elements * bytes_per_element / params["bandwidth"]) + adapter_seconds


def call_seconds(form: str, params: dict[str, float], call: Call, bytes_per_element: float) -> float:
    """Seconds of a call (summed over the series when its fields are arrays)."""
    if form == "saturating":
        return total(saturating_seconds(params, call.flops, max(call.tokens, 1e-9), call.layers,
                                        call.attention_flops, call.adapter_flops))
    if form == "roofline":
        return total(roofline_seconds(params, call.flops, call.weight_elements + call.kv_elements, call.layers,
                                      bytes_per_element, call.adapter_flops, call.tokens))
    raise ValueError(f"unknown time-model form {form!r}")


def total(value: Any) -> float:
    """A float, or the sum of a numpy array."""
    return float(value.sum()) if hasattr(value, "sum") else float(value)


def attention_flops(terms: dict[str, Any]) -> Any:
    """The attention part of a breakdown (forward, backward and recompute of QK^T and AV)."""
    return sum((v for k, v in terms.items() if is_attention_term(k)), 0)


def adapter_flops(terms: dict[str, Any]) -> Any:
    """The LoRA part of a breakdown: every ``<projection>.lora_a``/``lora_b`` term, in any pass."""
    return sum((v for k, v in terms.items() if ".lora_" in k), 0)


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
    """The calls of one pass at its expected widths (a generate's decode steps: see :func:`generate_calls`)."""
    prompt, completion = float(mean_of(p.prompt)), float(mean_of(p.completion))
    if p.kind == "prefill":
        return [(p.count, generate_calls(p.spec, p.rows, prompt, 1, p.lora, p.conv)[0][1])]
    if p.kind == "decode":
        return [(p.count, call) for kind, call in generate_calls(p.spec, p.rows, prompt, completion, p.lora, p.conv)
                if kind == "decode"]
    terms = p.call_flops(p.rows, prompt, completion)
    return [(p.count, sequence_call(terms, p.rows * p.sequence_tokens(prompt, completion), p.spec.num_layers))]


def generate_calls(spec: Any, rows: float, prompt: float, completion: float, lora: Any,
                   conv: Any) -> list[tuple[str, Call]]:
    """(kind, call) of one ``generate`` of ``completion`` new tokens after a ``prompt``-token prompt on ``rows``
    sequences: the prefill (``prefill``: the prompt, logits at the last position) and, when ``completion`` > 1, its
    decode steps as one :class:`Call` whose FLOPs and KV-cache reads are arrays (step j attends to ``prompt + j +
    1`` keys; each step reads the weights and the KV cache): one numpy evaluation of the decode formula, not a loop
    over 32k steps of a long completion. The sum of the two is :func:`flopplan.formulas.generate_flops`."""
    import numpy as np

    from flopplan.formulas import decode_flops, forward_flops

    layers = spec.num_layers
    prefill = forward_flops(spec, rows, prompt, 1, lora, conv)
    out = [("prefill", sequence_call(prefill, rows * prompt, layers))]
    steps = max(0, round(completion) - 1)
    if steps:
        context = prompt + np.arange(steps, dtype=np.float64)
        terms = decode_flops(spec, rows, context, lora, conv)
        out.append(("decode", Call(terms.total, rows, spec.params, kv_cache_elements(spec, rows, context), layers,
                                   adapter_flops=adapter_flops(terms))))
    return out


def sequence_call(terms: Any, tokens: float, layers: int) -> Call:
    """A compute-bound call (a forward or a training pass; a prefill) from its FLOP breakdown and the tokens in
    flight."""
    return Call(float(terms.total), float(tokens), layers=layers, attention_flops=float(attention_flops(terms)),
                adapter_flops=float(adapter_flops(terms)))


# -- the time outside the FLOP phases ---------------------------------------------------------------------------
#
# A run's wall time is its phase calls (above) plus work no FLOP formula sees: a fixed cost per round and per
# rollout (the budget guard, tokenising prompts, decoding and rule-scoring completions, advantages, building the
# scoring batches, the ledger and metrics lines), the optimizer steps, the evaluations' bookkeeping, checkpoints
# and the process start-up (imports, building or loading the models, the data) and shut-down. Each term is linear
# in its coefficients: ``seconds = sum(coefficient * feature)``, the features below, the first of each a constant 1.

ADAMW_BYTES_PER_PARAMETER = 40
"""Bytes one optimizer step moves per trainable fp32 parameter: torch AdamW (single-tensor loop on a CPU) reads the
gradient (4) and reads and writes the parameter and both moments (3 x 8); ``clip_grad_norm_`` reads the gradient
for the norm and scales it in place (4 + 8). The fitted seconds per byte absorbs what this leaves out."""
CHECKPOINT_BYTES_PER_PARAMETER = 12
"""Bytes a checkpoint writes per trainable fp32 parameter: the parameter and AdamW's two moments (4 + 8)."""
DEFAULT_CHECKPOINT_EVERY = 10
"""Steps between checkpoints when a plan does not say: ``flopplan train --checkpoint-every``'s default."""

NON_PHASE_TERMS: dict[str, dict[str, str]] = {
    "round": {"seconds": "per round: the budget guard, sampling set-up, advantages, ledger and metrics lines",
              "seconds_per_rollout": "per rollout: tokenising its prompt, decoding and scoring its completion, "
                                     "its rows in the scoring batches",
              "seconds_per_token": "per prompt + completion token of the rollouts (string and tensor work)",
              "seconds_per_scored_rollout": "per rollout a reward model scores: its template and tokenisation"},
    "optimizer_step": {"seconds": "per optimizer step: zero_grad, the clip and step calls",
                       "seconds_per_tensor": "per trainable tensor (the CPU AdamW loop runs tensor by tensor)",
                       "seconds_per_byte": f"per byte of optimizer traffic ({ADAMW_BYTES_PER_PARAMETER} per trainable "
                                           "parameter)"},
    "evaluation": {"seconds": "per evaluation: encoding the eval prompts, grading, its metrics",
                   "seconds_per_prompt": "per eval prompt"},
    "checkpoint": {"seconds": "per checkpoint: RNG and ledger state, the atomic rename, the summary",
                   "seconds_per_byte": f"per byte written ({CHECKPOINT_BYTES_PER_PARAMETER} per trainable "
                                       "parameter)"},
    "startup": {"seconds": "per process: interpreter, imports, data, the run folder",
                "seconds_per_parameter": "per parameter of the models it builds or loads"},
    "shutdown": {"seconds": "per process: its tables, and the interpreter's and torch's teardown after the run's "
                            "last file (no run folder dates it: flopplan calibrate --probe-shutdown times it)"},
}
"""The non-phase terms and their coefficients (seconds per unit of each feature of :func:`non_phase_features`)."""


@dataclass(frozen=True)
class RunWork:
    """What the non-phase terms depend on, per round unless stated (from a recipe, or from a run's ledger)."""

    rollouts: float
    rollout_tokens: float  # rollouts x (prompt + completion)
    scored_rollouts: float  # rollouts a reward model scores (0 for rules)
    optimizer_steps: float
    trainable_tensors: int
    trainable_parameters: int
    eval_prompts: int  # per evaluation
    parameters_loaded: int  # per process: the policy, a separate reference copy, the reward model

    @staticmethod
    def of(recipe: Any) -> RunWork:
        """The work of a recipe's round (expected lengths), as the planner prices it."""
        r = recipe
        spec, rm = r.policy_spec, r.reward_spec
        params, tensors = trainable_parameters(spec, r.lora)
        rollouts = r.rollouts_per_step
        separate_reference = r.beta > 0 and r.lora is None  # full fine-tuning keeps a frozen copy
        return RunWork(rollouts, rollouts * (r.prompt_len.mean + r.completion_len.mean), rollouts if rm else 0,
                       r.optimizer_steps_per_round, tensors, params, r.eval_prompts if r.eval_every else 0,
                       spec.params * (2 if separate_reference else 1) + (rm.params if rm else 0))


def trainable_parameters(spec: Any, lora: Any) -> tuple[int, int]:
    """(parameters, tensors) the optimizer updates. Full fine-tuning: every parameter of the model (a tied LM head
    once) in its tensors (per layer seven projection weights, their biases, two RMSNorms and optional q/k norms;
    the embedding, the final norm, an untied head). LoRA (peft): per target projection and layer an A (r x in) and
    a B (out x r) matrix."""
    shapes = spec.projection_shapes()
    if lora is not None:
        params = spec.num_layers * sum(lora.rank * (shapes[t][0] + shapes[t][1]) for t in lora.targets)
        return params, 2 * spec.num_layers * len(lora.targets)
    per_layer = len(shapes) + 3 * spec.qkv_bias + spec.o_bias + 3 * spec.mlp_bias + 2 + 2 * spec.qk_norm
    head = 0 if spec.tie_embeddings and spec.head.kind == "lm" else len(spec.head_layers) + sum(
        layer.bias for layer in spec.head_layers)
    return spec.params, spec.num_layers * per_layer + 2 + head


def non_phase_features(term: str, work: RunWork) -> tuple[float, ...]:
    """The features of ``term`` (one per coefficient of :data:`NON_PHASE_TERMS`, in order) for one occurrence: one
    round, one optimizer step, one evaluation, one checkpoint, one start-up."""
    w = work
    if term == "round":
        return (1.0, w.rollouts, w.rollout_tokens, w.scored_rollouts)
    if term == "optimizer_step":
        return (1.0, w.trainable_tensors, w.trainable_parameters * ADAMW_BYTES_PER_PARAMETER)
    if term == "evaluation":
        return (1.0, w.eval_prompts)
    if term == "checkpoint":
        return (1.0, w.trainable_parameters * CHECKPOINT_BYTES_PER_PARAMETER)
    if term == "startup":
        return (1.0, w.parameters_loaded)
    if term == "shutdown":
        return (1.0,)
    raise ValueError(f"unknown non-phase term {term!r}")


def non_phase_seconds(coefficients: dict[str, dict[str, float]], term: str, work: RunWork) -> float:
    """Seconds of one occurrence of ``term``: its coefficients times its features (0 for a term not modelled)."""
    if term not in coefficients:
        return 0.0
    names = NON_PHASE_TERMS[term]
    return sum(coefficients[term].get(name, 0.0) * f
               for name, f in zip(names, non_phase_features(term, work), strict=True))


def checkpoints_in(steps: int, every: int | None) -> int:
    """Checkpoints a run of ``steps`` steps writes: after every ``every``-th step, and a last one when it ends (the
    built-in trainer writes it even when the last step was a checkpoint step)."""
    return (steps // every if every else 0) + 1


def run_non_phase_seconds(coefficients: dict[str, dict[str, float]], work: RunWork, steps: int, evaluations: int,
                          checkpoint_every: int | None = DEFAULT_CHECKPOINT_EVERY) -> dict[str, float]:
    """The non-phase seconds of a whole run, by term: ``steps`` rounds (each with its optimizer steps),
    ``evaluations`` evaluations, its checkpoints, one start-up and one shut-down."""
    return {
        "round": steps * non_phase_seconds(coefficients, "round", work),
        "optimizer_step": steps * work.optimizer_steps * non_phase_seconds(coefficients, "optimizer_step", work),
        "evaluation": evaluations * non_phase_seconds(coefficients, "evaluation", work),
        "checkpoint": checkpoints_in(steps, checkpoint_every) * non_phase_seconds(coefficients, "checkpoint", work),
        "startup": non_phase_seconds(coefficients, "startup", work) if steps or evaluations else 0.0,
        "shutdown": non_phase_seconds(coefficients, "shutdown", work) if steps or evaluations else 0.0,
    }
