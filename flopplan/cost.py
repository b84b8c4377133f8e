"""Recipe -> StepCost: the FLOPs of one GRPO step by phase, grouped into buckets.

Phases of one step (one generation round) and what each charges, all through :mod:`flopplan.formulas`:

=================  ==========  ==================================================================================
phase              bucket      FLOPs
=================  ==========  ==================================================================================
rollout.prefill    rollout     prompt prefill of every rollout (``generate``: last-position logits); with vLLM
                               prefix sharing once per prompt instead of once per sample
rollout.decode     rollout     the decode steps of every rollout (adapters active under HF generate; TRL merges
                               LoRA into the weights it syncs to vLLM)
old_logprobs       learning    a no-grad policy forward over prompt + completion (when recomputed)
reference          learning    a no-grad forward of the reference (the base, adapter disabled) when beta > 0
update             learning    ``iterations`` x forward + backward (+ recompute) over prompt + completion
reward             feedback    the reward model's forward over each templated completion (none for rules)
eval.prefill/      evaluation  greedy ``generate`` over the eval set, once per evaluation (every k steps)
eval.decode
=================  ==========  ==================================================================================

Lengths: per-phase costs are polynomials of degree <= 2 in the prompt and completion lengths, so their
expectation is exact with the two-point rules of :mod:`flopplan.lengths`; padded batches (HF generate; TRL's
scoring and update passes, padded once for the whole generation batch) use the distribution of the batch
maximum. Fixed lengths give exact integers.

Every function below is plain arithmetic on its numeric arguments, so the vectorized planner evaluates the same
definitions on numpy arrays of recipes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flopplan.arch import ArchSpec
from flopplan.formulas import (
    Breakdown,
    Conventions,
    LoRA,
    Num,
    Training,
    decode_flops,
    forward_flops,
    forward_pass,
    generate_passes,
    pass_terms,
    train_flops,
)
from flopplan.lengths import Length
from flopplan.recipe import Recipe
from flopplan.timing import Call, attention_flops

BUCKETS = ("rollout", "learning", "feedback", "evaluation")


def is_bucket_flops(value: object) -> bool:
    """FLOPs by bucket as plans, ledgers and summaries store them: a non-negative integer per bucket and total."""
    return isinstance(value, dict) and all(
        isinstance(value.get(b), int) and not isinstance(value.get(b), bool) and value[b] >= 0
        for b in (*BUCKETS, "total"))

STEP_PHASES = ("rollout.prefill", "rollout.decode", "old_logprobs", "reference", "update", "reward")
EVAL_PHASES = ("eval.prefill", "eval.decode")
BUCKET_OF = {
    "rollout.prefill": "rollout", "rollout.decode": "rollout",
    "old_logprobs": "learning", "reference": "learning", "update": "learning",
    "reward": "feedback",
    "eval.prefill": "evaluation", "eval.decode": "evaluation",
}
PHASE_KIND = {
    "rollout.prefill": "prefill", "rollout.decode": "decode", "old_logprobs": "forward", "reference": "forward",
    "update": "train", "reward": "forward", "eval.prefill": "prefill", "eval.decode": "decode",
}
"""What kind of work each phase is, for time models: prefill, decode, forward (no-grad, teacher-forced), train."""


# -- per-phase FLOPs on plain numbers (ints, floats or numpy arrays) ---------------------------------------------

def head_positions(prompt: Num, completion: Num, completion_only: bool) -> Num:
    """Logit positions of a scoring pass: TRL keeps ``completion + 1`` (then drops the last), or all."""
    return completion + 1 if completion_only else prompt + completion


def rollout_flops(policy: ArchSpec, conv: Conventions, lora: LoRA | None, engine: str, prefix_sharing: bool,
                  prompts: Num, group: Num, generation_batch: Num, prompt: Num,
                  completion: Num) -> dict[str, Breakdown]:
    """Generation of ``prompts x group`` completions.

    ``hf``: ``generate`` calls of ``generation_batch`` sequences, each left-padded to its longest prompt and run
    until its longest completion (``prompt``/``completion`` are then those batch maxima); padded positions cost.
    ``vllm``: every sequence at its own lengths; with prefix sharing the prompt prefill runs once per group.
    """
    rollouts = prompts * group
    if engine == "hf":
        calls = rollouts // generation_batch
        passes = generate_passes(generation_batch, prompt, completion, conv)
        return {f"rollout.{name}": pass_terms(policy, p.scaled(calls), lora, conv) for name, p in passes.items()}
    passes = generate_passes(rollouts, prompt, completion, conv)
    prefill = forward_pass(prompts, prompt, 1, conv) if prefix_sharing else passes["prefill"]
    return {"rollout.prefill": pass_terms(policy, prefill, lora, conv),
            "rollout.decode": pass_terms(policy, passes["decode"], lora, conv)}


def scoring_flops(policy: ArchSpec, conv: Conventions, lora: LoRA | None, rollouts: Num, batch: Num, prompt: Num,
                  completion: Num, completion_only: bool) -> Breakdown:
    """A no-grad forward over prompt + completion of every rollout, in batches of ``batch`` sequences."""
    return forward_flops(policy, batch, prompt + completion, head_positions(prompt, completion, completion_only),
                         lora, conv).scaled(rollouts // batch)


def update_flops(policy: ArchSpec, conv: Conventions, training: Training, rollouts: Num, batch: Num, prompt: Num,
                 completion: Num, completion_only: bool, iterations: Num) -> Breakdown:
    """``iterations`` passes of forward + backward over every rollout, in micro-batches of ``batch``."""
    return train_flops(policy, batch, prompt + completion, head_positions(prompt, completion, completion_only),
                       training, conv).scaled((rollouts // batch) * iterations)


def reward_tokens(kind: str, prompt: Num, completion: Num, overhead: Num, steps: Num) -> Num:
    """Tokens a reward model reads per completion: the templated text, plus one separator per step for a PRM."""
    return prompt + completion + overhead + (steps if kind == "prm" else 0)


def reward_flops(reward: ArchSpec | None, kind: str, conv: Conventions, rollouts: Num, prompt: Num, completion: Num,
                 overhead: Num, steps: Num) -> Breakdown:
    """One reward-model forward per completion, the score head on every position (none for rule rewards)."""
    if reward is None:
        return Breakdown()
    tokens = reward_tokens(kind, prompt, completion, overhead, steps)
    return forward_flops(reward, rollouts, tokens, tokens, None, conv)


# -- expectation over length distributions ----------------------------------------------------------------------

def expected(fn: Any, prompt: Length, completion: Length) -> Any:
    """E[fn(P, K)] for independent P and K, exact for fn of degree <= 3 in each (two-point Gauss rules).

    ``fn`` returns a Breakdown or a dict of Breakdowns; fixed lengths call it once with integers.
    """
    total: Any = None
    for p, wp in prompt.quadrature():
        for k, wk in completion.quadrature():
            value = fn(p, k)
            weight = wp * wk
            term = value if weight == 1.0 else _scale(value, weight)
            total = term if total is None else _add(total, term)
    return total


def _scale(value: Any, weight: float) -> Any:
    if isinstance(value, Breakdown):
        return value.scaled(weight)
    return {key: part.scaled(weight) for key, part in value.items()}


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, Breakdown):
        return Breakdown.combine([a, b])
    return {key: Breakdown.combine([a[key], b[key]]) for key in a}


def _prompts_in(batch: int, group: int) -> int:
    """Distinct prompts in a batch of ``batch`` sequences laid out group by group."""
    return max(1, -(-batch // group))


@dataclass
class StepCost:
    """FLOPs of one GRPO step by phase (and of one evaluation), with the counts they buy."""

    recipe: Recipe
    phases: dict[str, Breakdown]  # per step; eval.* phases per evaluation run
    counts: dict[str, float] = field(default_factory=dict)  # per step

    def phase_total(self, phase: str) -> Num:
        return self.phases[phase].total if phase in self.phases else 0

    @property
    def step_phases(self) -> dict[str, Num]:
        return {phase: self.phase_total(phase) for phase in STEP_PHASES if phase in self.phases}

    @property
    def eval_phases(self) -> dict[str, Num]:
        return {phase: self.phase_total(phase) for phase in EVAL_PHASES if phase in self.phases}

    @property
    def step_flops(self) -> Num:
        return sum(self.step_phases.values(), 0)

    @property
    def eval_flops(self) -> Num:
        """FLOPs of one evaluation run (0 without evaluation)."""
        return sum(self.eval_phases.values(), 0)

    def buckets(self) -> dict[str, Num]:
        """Per-step FLOPs by bucket (evaluation: one evaluation run)."""
        out: dict[str, Num] = dict.fromkeys(BUCKETS, 0)
        for phase, flops in {**self.step_phases, **self.eval_phases}.items():
            out[BUCKET_OF[phase]] += flops
        return out


def step_cost(recipe: Recipe) -> StepCost:
    """The per-phase FLOPs of one GRPO step of ``recipe`` (exact integers for fixed lengths)."""
    r = recipe
    policy, conv = r.policy_spec, r.conventions
    rollouts, group = r.rollouts_per_step, r.group_size
    completion_only = r.logits == "completion"
    P, K = r.prompt_len, r.completion_len
    phases: dict[str, Breakdown] = {}

    if r.engine == "hf":
        n = r.generation_batch_size
        gen_p, gen_k = P.max_of(_prompts_in(n, group)), K.max_of(n)
    else:
        n, gen_p, gen_k = rollouts, P, K
    phases.update(expected(lambda p, k: rollout_flops(policy, conv, r.rollout_lora, r.engine, r.prefix_sharing,
                                                      r.prompts_per_step, group, n, p, k), gen_p, gen_k))

    if r.update_padding == "batch":
        # TRL pads prompts (left) and completions (right) once for the whole generation batch and slices
        # micro-batches from it: every micro-batch has the generation batch's longest prompt and completion.
        # With vLLM the padded batch is all rollouts of the step, whatever the engine did not pad.
        m = r.micro_batch_size
        if r.engine == "hf":
            upd_p, upd_k = gen_p, gen_k
        else:
            upd_p, upd_k = P.max_of(r.prompts_per_step), K.max_of(rollouts)
    else:
        m, upd_p, upd_k = 1, P, K
    if r.computes_old_logprobs:
        phases["old_logprobs"] = expected(lambda p, k: scoring_flops(policy, conv, r.lora, rollouts, m, p, k,
                                                                     completion_only), upd_p, upd_k)
    if r.uses_reference:
        phases["reference"] = expected(lambda p, k: scoring_flops(policy, conv, None, rollouts, m, p, k,
                                                                  completion_only), upd_p, upd_k)
    phases["update"] = expected(lambda p, k: update_flops(policy, conv, r.training, rollouts, m, p, k,
                                                          completion_only, r.iterations), upd_p, upd_k)
    reward = r.reward_spec
    if reward is not None:
        phases["reward"] = expected(lambda p, k: reward_flops(reward, r.reward.kind, conv, rollouts, p, k,
                                                              r.reward_overhead_tokens, r.prm_steps), P, K)
    if r.eval_every is not None:
        e = r.eval_prompts
        EP, EK = r.evaluation_prompt_len, r.evaluation_completion_len
        if r.engine == "hf":
            ev_p, ev_k = EP.max_of(e), EK.max_of(e)
        else:
            ev_p, ev_k = EP, EK
        evaluation = expected(lambda p, k: rollout_flops(policy, conv, r.rollout_lora, r.engine, False, e, 1, e, p,
                                                         k), ev_p, ev_k)
        phases["eval.prefill"] = evaluation["rollout.prefill"]
        phases["eval.decode"] = evaluation["rollout.decode"]

    update_tokens_useful = r.iterations * rollouts * (P.mean + K.mean)
    update_tokens_executed = r.iterations * rollouts * (upd_p.mean + upd_k.mean)
    counts = {
        "prompts": r.prompts_per_step,
        "rollouts": rollouts,
        "generated_tokens": rollouts * K.mean,
        "generated_tokens_executed": rollouts * gen_k.mean,
        "update_tokens": update_tokens_useful,
        "update_tokens_executed": update_tokens_executed,
        "optimizer_steps": r.optimizer_steps_per_step,
        "reward_evaluations": rollouts if reward is not None else 0,
    }
    return StepCost(r, phases, counts)


# -- the calls of a step, for time models -------------------------------------------------------------------------

def _decode_calls(spec: ArchSpec, lora: LoRA | None, conv: Conventions, batch: int, prompt: float,
                  completion: float) -> list[Call]:
    """The decode steps after a ``prompt``-token prefill, as one :class:`Call` whose FLOPs and KV-cache reads are
    arrays (one entry per step: step j attends to ``prompt + j + 1`` keys); each step reads the weights and the
    KV cache. One numpy evaluation of the decode formula, not a loop over 32k steps of a long completion."""
    import numpy as np

    steps = max(0, round(completion) - 1)
    if steps == 0:
        return []
    context = prompt + np.arange(steps, dtype=np.float64)
    flops = decode_flops(spec, batch, context, lora, conv).total
    kv = batch * (context + 1) * (2 * spec.num_layers * spec.kv_dim)
    return [Call(flops, batch, spec.params, kv, spec.num_layers)]


def phase_calls(recipe: Recipe) -> dict[str, list[tuple[float, Call]]]:
    """(count, call) pairs per phase of one step (eval phases: one evaluation), at expected lengths.

    This is what a fitted time model prices; the FLOPs of the calls come from the same formulas as
    :func:`step_cost` (evaluated at the expected, possibly padded, lengths).
    """
    r = recipe
    policy, conv = r.policy_spec, r.conventions
    rollouts, group = r.rollouts_per_step, r.group_size
    completion_only = r.logits == "completion"
    P, K = r.prompt_len, r.completion_len
    out: dict[str, list[tuple[float, Call]]] = {}

    def call(terms: Breakdown, tokens: float, layers: int) -> Call:
        return Call(float(terms.total), tokens, layers=layers, attention_flops=float(attention_flops(terms)))

    def generation(prefix: str, calls: float, batch: int, prefill_batch: int, p: float, k: float) -> None:
        prefill = forward_flops(policy, prefill_batch, p, 1, r.rollout_lora, conv)
        out[f"{prefix}.prefill"] = [(calls, call(prefill, prefill_batch * p, policy.num_layers))]
        out[f"{prefix}.decode"] = [(calls, c) for c in _decode_calls(policy, r.rollout_lora, conv, batch, p, k)]

    if r.engine == "hf":
        n = r.generation_batch_size
        generation("rollout", rollouts // n, n, n, P.max_of(_prompts_in(n, group)).mean, K.max_of(n).mean)
    else:
        generation("rollout", 1, rollouts, r.prompts_per_step if r.prefix_sharing else rollouts, P.mean, K.mean)
    if r.update_padding == "batch":
        m = r.micro_batch_size
        if r.engine == "hf":
            n = r.generation_batch_size
            up, uk = P.max_of(_prompts_in(n, group)).mean, K.max_of(n).mean
        else:
            up, uk = P.max_of(r.prompts_per_step).mean, K.max_of(rollouts).mean
    else:
        m, up, uk = 1, P.mean, K.mean
    micro = rollouts // m
    positions = head_positions(up, uk, completion_only)
    L = policy.num_layers
    if r.computes_old_logprobs:
        out["old_logprobs"] = [(micro, call(forward_flops(policy, m, up + uk, positions, r.lora, conv),
                                            m * (up + uk), L))]
    if r.uses_reference:
        out["reference"] = [(micro, call(forward_flops(policy, m, up + uk, positions, None, conv), m * (up + uk),
                                         L))]
    out["update"] = [(micro * r.iterations, call(train_flops(policy, m, up + uk, positions, r.training, conv),
                                                 m * (up + uk), L))]
    reward = r.reward_spec
    if reward is not None:  # scored a group at a time
        tokens = reward_tokens(r.reward.kind, P.mean, K.mean, r.reward_overhead_tokens, r.prm_steps)
        out["reward"] = [(r.prompts_per_step, call(forward_flops(reward, group, tokens, tokens, None, conv),
                                                   group * tokens, reward.num_layers))]
    if r.eval_every is not None:
        e = r.eval_prompts
        EP, EK = r.evaluation_prompt_len, r.evaluation_completion_len
        if r.engine == "hf":
            generation("eval", 1, e, e, EP.max_of(e).mean, EK.max_of(e).mean)
        else:
            generation("eval", 1, e, e, EP.mean, EK.mean)
    return out
