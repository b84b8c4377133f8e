"""The passes of one GRPO round: the one place that says which phases run, on which model, with which adapters,
in how many calls of how many sequences, and at which padded lengths.

Glossary (used everywhere in flopplan):

* a **step** is one *generation round*: ``prompts_per_step`` prompts, ``group_size`` completions each, scored, then
  ``iterations`` (mu) update passes over them. TRL's ``global_step`` counts *optimizer* steps instead; a round has
  ``Recipe.optimizer_steps_per_round`` of them.
* a **phase** is one kind of model work inside a round (``rollout.prefill``, ``rollout.decode``, ``old_logprobs``,
  ``reference``, ``update``, ``reward``, ``eval.prefill``, ``eval.decode``); each belongs to one **bucket**
  (rollout, learning, feedback, evaluation) and is one **kind** of work for time models (prefill, decode,
  forward, train). The runtime's **units** (a ``generate`` call, a scoring pass) may charge several phases.
* a **pass** (:class:`RoundPass`) is a group of identical model calls of one phase: ``calls`` calls of ``rows``
  sequences padded to ``prompt`` + ``completion`` tokens.

:func:`step_passes` turns a :class:`RoundShape` (the counts of a round) and :class:`RoundLengths` (where the
lengths come from) into the list of passes. Four consumers evaluate that same list:

* :func:`flopplan.cost.step_cost`: the expectation over length distributions (exact integers for fixed lengths);
* :func:`flopplan.cost.worst_case_round`: the budget guard's upper bound for the next round, from the prompt
  lengths observed and the maximum completion length (the built-in trainer, an engine callback and RACE);
* :func:`flopplan.timing.phase_calls`: the calls a fitted time model prices, at expected lengths;
* :func:`flopplan.grid.plan_grid`: numpy arrays of recipes with fixed lengths;

and the runtime charges each unit it ran (a generate call, a scoring or update pass) as one of them, at the lengths
it observed (:func:`flopplan.ledger.charge`): the built-in trainer, the TRL meter and the calibration reader.

A length *source* is a :class:`~flopplan.lengths.Length` (a distribution), a number or numpy array (fixed
lengths), or :class:`~flopplan.lengths.Observed` (the lengths of the round's sequences, one per row, in round
order). Padding rules apply to a source through :func:`~flopplan.lengths.prompt_width` and
:func:`~flopplan.lengths.completion_width` (both in :mod:`flopplan.lengths`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from flopplan.arch import ArchSpec
from flopplan.attention import Num
from flopplan.breakdown import Breakdown
from flopplan.formulas import (
    Conventions,
    LoRA,
    Training,
    forward_pass,
    generate_passes,
    pass_terms,
    train_terms,
)
from flopplan.lengths import Length, Observed, completion_width, mean_of, per_prompt, prompt_width

BUCKETS = ("rollout", "learning", "feedback", "evaluation")


@dataclass(frozen=True)
class Phase:
    """One phase of a round: its bucket, the kind of work it is for time models, and what it charges."""

    name: str
    bucket: str
    kind: str  # prefill | decode | forward (no-grad, teacher-forced) | train (forward + backward)
    charges: str


PHASE_TABLE = (
    Phase("rollout.prefill", "rollout", "prefill", "prompt prefill of every rollout (generate: last-position "
          "logits); with vLLM prefix sharing once per prompt instead of once per sample"),
    Phase("rollout.decode", "rollout", "decode", "the decode steps of every rollout (adapters active under HF "
          "generate; TRL merges LoRA into the weights it syncs to vLLM)"),
    Phase("old_logprobs", "learning", "forward", "a no-grad policy forward over prompt + completion (when "
          "recomputed)"),
    Phase("reference", "learning", "forward", "a no-grad forward of the reference (the base, adapter disabled) "
          "when beta > 0"),
    Phase("update", "learning", "train", "iterations x forward + backward (+ recompute) over prompt + completion"),
    Phase("reward", "feedback", "forward", "the reward model's forward over each templated completion (none for "
          "rules)"),
    Phase("eval.prefill", "evaluation", "prefill", "greedy generate over the eval set: the prompt prefill"),
    Phase("eval.decode", "evaluation", "decode", "greedy generate over the eval set: the decode steps"),
    Phase("eval.forward", "evaluation", "forward", "an engine's evaluation loop (TRL's): its no-grad policy and "
          "reference forwards (old log-probs, reference, the loss)"),
    Phase("eval.reward", "evaluation", "forward", "an engine's evaluation loop (TRL's): the reward model's forwards"),
)
PHASES = {phase.name: phase for phase in PHASE_TABLE}
ENGINE_PHASES = ("eval.forward", "eval.reward")
"""Phases only an engine's own loop runs (TRL's evaluation, metered by the TRL hook): charged, never planned."""
STEP_PHASES = tuple(p.name for p in PHASE_TABLE if p.bucket != "evaluation")
EVAL_PHASES = tuple(p.name for p in PHASE_TABLE if p.bucket == "evaluation" and p.name not in ENGINE_PHASES)
"""The phases of one planned evaluation (flopplan's own greedy generate); an engine's own loop charges
:data:`ENGINE_PHASES` instead."""
BUCKET_OF = {p.name: p.bucket for p in PHASE_TABLE}
PHASE_KIND = {p.name: p.kind for p in PHASE_TABLE}
"""What kind of work each phase is, for time models: prefill, decode, forward (no-grad, teacher-forced), train."""


def by_bucket(per_phase: dict[str, Any]) -> dict[str, Any]:
    """FLOPs by bucket (every bucket present) and their ``total``, from FLOPs by phase."""
    out: dict[str, Any] = dict.fromkeys(BUCKETS, 0)
    for phase, value in per_phase.items():
        out[BUCKET_OF[phase]] += value
    out["total"] = sum(out[b] for b in BUCKETS)
    return out


# -- the rules of the round, written once ----------------------------------------------------------------------

def old_logprobs_run(mode: str, optimizer_steps_per_round: Num, engine: str) -> Any:
    """Whether the old-policy logprob forward runs. ``auto`` follows TRL: when the rollouts of a round feed more
    than one optimizer step (mu > 1, or an optimizer batch smaller than the round: the policy moves before the
    last one is used), and for vLLM's importance-sampling correction. Works on numpy arrays (a grid)."""
    if mode == "on":
        return True
    if mode == "off":
        return False
    return (optimizer_steps_per_round > 1) | (engine == "vllm")


FUSED_HEADS = ("fused", "fused-compact")
LOGPROB_HEAD_RULES = {
    "completion": "logits_to_keep = K + 1 (then the last dropped): trl <= 1.14 _full_logits_logps, flopplan train",
    "all": "the head on every position of the sequence",
    "fused": "trl >= 1.16 add_fused_lm_head without Triton: hidden_states[:, :-1], every position but the last "
             "(prompt and padding included); ChunkedLogProbFunction recomputes the tile in backward",
    "fused-compact": "trl >= 1.15 with Triton (cuda/xpu): hidden_states[mask], the valid completion tokens only; "
                     "recomputed in backward",
}
"""The log-prob heads flopplan counts, with the code they follow (trl/trainer/grpo_trainer.py, trl/trainer/utils.py
``add_fused_lm_head``, trl/kernels/chunked_logprob.py). On the CPU the fused head's gradient matmuls run as
in-place ``addmm_``, which FlopCounterMode counts as 0; flopplan counts them (they execute)."""


def head_positions(prompt: Num, completion: Num, head: str, completion_tokens: Num | None = None) -> Num:
    """Positions per sequence the LM head of a scoring or update pass projects (see :data:`LOGPROB_HEAD_RULES`);
    ``completion_tokens``: the sequence's own completion length, unpadded (``fused-compact`` only)."""
    if head == "completion":
        return completion + 1
    if head == "all":
        return prompt + completion
    if head == "fused":
        return prompt + completion - 1
    if head == "fused-compact":
        return completion if completion_tokens is None else completion_tokens
    raise ValueError(f"unknown log-prob head {head!r}")


def reward_extra_tokens(kind: str, overhead: Num, prm_steps: Num) -> Num:
    """Tokens a reward model reads besides prompt and completion: the chat template, plus one separator token
    per step for a PRM."""
    return overhead + (prm_steps if kind == "prm" else 0)


# -- the shape of a round ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RoundShape:
    """The counts and traits of one round. Counts may be numpy arrays of one shape (a grid of recipes); traits
    (models, adapters, engine, padding) are scalars."""

    policy: ArchSpec
    conv: Conventions
    lora: LoRA | None  # the policy's adapters (None: full fine-tuning)
    rollout_lora: LoRA | None  # adapters active during generation (HF generate: the peft model; vLLM: merged)
    training: Training
    engine: str
    prefix_sharing: bool
    logprob_head: str  # how scoring and update passes compute log-probs (LOGPROB_HEAD_RULES)
    update_padding: str  # batch: padded to the generation batch's longest (TRL); none: packed, one per pass
    prompts: Num
    group: Num
    generation_batch: Num  # hf: sequences per generate call
    micro_batch: Num  # sequences per scoring/update forward (update_padding batch)
    iterations: Num
    old_logprobs: Any  # bool, or a bool array on a grid
    reference: bool
    reward: ArchSpec | None = None
    reward_kind: str = "rule"
    eval_prompts: int = 0  # 0: no evaluation
    eval_batch: int = 1

    @property
    def rollouts(self) -> Num:
        return self.prompts * self.group

    @staticmethod
    def of(recipe: Any) -> RoundShape:
        """The shape of a :class:`~flopplan.recipe.Recipe`'s round: the rules of the round, applied once. The
        reference runs when beta > 0; the old-policy forward by :func:`old_logprobs_run`; generation runs with
        the adapters under HF generate (the peft model) and without them under vLLM (TRL merges them into the
        weights it syncs); the update checkpoints when ``grad_ckpt`` and recomputes a fused log-prob head."""
        r = recipe
        lora = r.lora
        training = Training(lora, "non-reentrant" if r.grad_ckpt else "none",
                            head_recompute=r.logprob_head in FUSED_HEADS)
        return RoundShape(
            policy=r.policy_spec, conv=r.conventions, lora=lora, rollout_lora=lora if r.engine == "hf" else None,
            training=training, engine=r.engine, prefix_sharing=r.prefix_sharing, logprob_head=r.logprob_head,
            update_padding=r.update_padding, prompts=r.prompts_per_step, group=r.group_size,
            generation_batch=r.generation_batch_size, micro_batch=r.micro_batch_size, iterations=r.iterations,
            old_logprobs=bool(old_logprobs_run(r.old_logprobs, r.optimizer_steps_per_round, r.engine)),
            reference=r.beta > 0, reward=r.reward_spec, reward_kind=r.reward.kind,
            eval_prompts=r.eval_prompts if r.eval_every is not None else 0, eval_batch=r.evaluation_batch_size)


@dataclass(frozen=True)
class RoundLengths:
    """Where the lengths of a round's sequences come from (see the module docstring for the kinds of source)."""

    prompt: Any
    completion: Any
    reward_prompt: Any  # the prompt as the reward model reads it (its own tokenizer may differ)
    reward_extra: Num  # template and separator tokens the reward model reads besides prompt and completion
    eval_prompt: Any = None
    eval_completion: Any = None

    @staticmethod
    def of(recipe: Any) -> RoundLengths:
        """The recipe's length distributions: what the planner expects a round to run at."""
        r = recipe
        return RoundLengths(r.prompt_len, r.completion_len, r.prompt_len,
                            reward_extra_tokens(r.reward.kind, r.reward_overhead_tokens, r.prm_steps),
                            r.evaluation_prompt_len, r.evaluation_completion_len)


@dataclass(frozen=True)
class RoundPass:
    """``calls`` calls of one phase, each on ``rows`` sequences of ``prompt`` + ``completion`` tokens (padded
    widths when ``padded``, else each row at its own lengths), the whole pass run ``repeats`` times (the update:
    mu passes over the same rollouts)."""

    phase: str
    spec: ArchSpec  # the model that runs (policy or reward model)
    conv: Conventions
    lora: LoRA | None  # adapters active in a forward pass
    training: Training | None  # the update pass: how the policy is trained
    calls: Num
    rows: Num
    prompt: Any
    completion: Any
    padded: bool = True
    head: str = "completion"  # scoring and update heads: LOGPROB_HEAD_RULES; a reward model's score head: all
    extra: Num = 0  # tokens read besides prompt and completion (a reward model's template and separators)
    head_tokens: Any = None  # fused-compact: each row's own (unpadded) completion length, a length source
    present: Any = True  # a bool array on a grid: the pass runs for some of its recipes
    repeats: Num = 1

    @property
    def count(self) -> Num:
        """Calls per round (eval phases: per evaluation), repeats included."""
        return self.calls * self.repeats

    @property
    def bucket(self) -> str:
        return BUCKET_OF[self.phase]

    @property
    def kind(self) -> str:
        return PHASE_KIND[self.phase]

    def sequence_tokens(self, prompt: Num, completion: Num) -> Num:
        """Tokens one sequence of a scoring, update or reward pass runs through the model."""
        return prompt + completion + self.extra

    def call_flops(self, rows: Num, prompt: Num, completion: Num, own_tokens: Num | None = None,
                   per_call: bool = True) -> Breakdown:
        """FLOPs of one call on ``rows`` sequences at the given widths (plain arithmetic: ints, floats, arrays);
        ``own_tokens``: the completion tokens the call's rows hold in total, unpadded (what a ``fused-compact``
        head projects; default: rows x the mean of ``head_tokens``). ``per_call`` False: without the work the
        call's forward calls do whatever their rows (:attr:`flopplan.formulas.Pass.calls`)."""
        spec, conv = self.spec, self.conv
        if self.kind == "prefill":  # generate's prefill: logits for the last position only
            p = forward_pass(rows, prompt, 1, conv, spec.sliding_window)
        elif self.kind == "decode":  # the completion - 1 decode steps after the prefill
            p = generate_passes(rows, prompt, completion, conv, spec.sliding_window)["decode"]
        else:
            seq = self.sequence_tokens(prompt, completion)
            if self.head == "all":
                positions = rows * seq
            elif self.head == "fused-compact" and own_tokens is not None:
                positions = own_tokens
            else:  # fused-compact projects each row's own completion tokens: linear, so their mean does
                own = mean_of(self.head_tokens) if self.head_tokens is not None else None
                positions = rows * head_positions(prompt, completion, self.head, own)
            p = replace(forward_pass(rows, seq, 0, conv, spec.sliding_window), positions=positions)
        if not per_call:
            p = replace(p, calls=0)
        if self.kind == "train":
            assert self.training is not None
            return train_terms(spec, p, self.training, conv)
        return pass_terms(spec, p, self.lora, conv)

    def per_call_flops(self, prompt: Num, completion: Num) -> Breakdown:
        """The work of one call that no row causes: the call on 0 rows (every other term is linear in rows)."""
        return self.call_flops(0, prompt, completion, 0)

    def unpadded(self) -> RoundPass:
        """The same pass with every row at its own lengths: the useful work of what ran padded. Per-call work
        (:attr:`flopplan.formulas.Pass.calls`) is not padding: it stays once per call as the calls ran."""
        return replace(self, padded=False)


def step_passes(shape: RoundShape, lengths: RoundLengths) -> list[RoundPass]:
    """The passes of one round (and of one evaluation, the ``eval.*`` phases, when the shape has one)."""
    s = shape
    rollouts = s.rollouts
    out: list[RoundPass] = []

    def add(phase: str, spec: ArchSpec, calls: Num, rows: Num, prompt: Any, completion: Any, *,
            lora: LoRA | None = None, training: Training | None = None, padded: bool = True, head: str = "completion",
            extra: Num = 0, present: Any = True, repeats: Num = 1, head_tokens: Any = None) -> None:
        if present is False:  # a scalar "does not run" (on a grid, the mask multiplies instead)
            return
        out.append(RoundPass(phase, spec, s.conv, lora, training, calls, rows, prompt, completion, padded=padded,
                             head=head, extra=extra, head_tokens=head_tokens, present=present, repeats=repeats))

    # rollouts. HF generate: calls of generation_batch sequences, left-padded to the call's longest prompt and run
    # until its longest completion (padded positions cost). vLLM: every sequence at its own lengths.
    if s.engine == "hf":
        n = s.generation_batch
        p, k = prompt_width(lengths.prompt, n, s.group), completion_width(lengths.completion, n)
        for phase in ("rollout.prefill", "rollout.decode"):
            add(phase, s.policy, rollouts // n, n, p, k, lora=s.rollout_lora)
    else:
        if s.prefix_sharing:  # the prefill once per prompt
            add("rollout.prefill", s.policy, 1, s.prompts, per_prompt(lengths.prompt, s.group),
                per_prompt(lengths.completion, s.group), lora=s.rollout_lora, padded=False)
        else:
            add("rollout.prefill", s.policy, 1, rollouts, lengths.prompt, lengths.completion, lora=s.rollout_lora,
                padded=False)
        add("rollout.decode", s.policy, 1, rollouts, lengths.prompt, lengths.completion, lora=s.rollout_lora,
            padded=False)

    # scoring and update passes. TRL pads prompts (left) and completions (right) once for the whole generation
    # batch and slices micro-batches from it, so every micro-batch has the generation batch's longest prompt and
    # completion; with vLLM the padded batch is all rollouts of the round. "none": packed, one sequence a pass.
    if s.update_padding == "batch":
        m = s.micro_batch
        padded_rows = s.generation_batch if s.engine == "hf" else rollouts
        p = prompt_width(lengths.prompt, padded_rows, s.group)
        k = completion_width(lengths.completion, padded_rows)
    else:
        m, p, k = 1, lengths.prompt, lengths.completion
    micro_batches = rollouts // m
    head, own = s.logprob_head, lengths.completion  # own: each row's unpadded completion (fused-compact)
    add("old_logprobs", s.policy, micro_batches, m, p, k, lora=s.lora, head=head, present=s.old_logprobs,
        head_tokens=own)
    add("reference", s.policy, micro_batches, m, p, k, head=head, present=s.reference,  # the base: no adapters
        head_tokens=own)
    add("update", s.policy, micro_batches, m, p, k, training=s.training, head=head, repeats=s.iterations,
        head_tokens=own)

    # the reward model scores a group at a time, each completion at its own length, the head on every position
    if s.reward is not None:
        add("reward", s.reward, s.prompts, s.group, lengths.reward_prompt, lengths.completion, padded=False,
            head="all", extra=lengths.reward_extra)

    # evaluation: greedy generate over the eval set in calls of eval_batch prompts (one per prompt)
    if s.eval_prompts:
        e, b = s.eval_prompts, s.eval_batch
        if s.engine == "hf":
            p, k = prompt_width(lengths.eval_prompt, b, 1), completion_width(lengths.eval_completion, b)
            for phase in ("eval.prefill", "eval.decode"):
                add(phase, s.policy, e // b, b, p, k, lora=s.rollout_lora)
        else:
            for phase in ("eval.prefill", "eval.decode"):
                add(phase, s.policy, 1, e, lengths.eval_prompt, lengths.eval_completion, lora=s.rollout_lora,
                    padded=False)
    return out


# -- evaluating a pass ------------------------------------------------------------------------------------------

def expected(fn: Any, prompt: Any, completion: Any, exact: bool = False) -> Any:
    """E[fn(P, K)] for independent P and K, exact for fn of degree <= 3 in each (two-point Gauss rules).

    ``fn`` returns a Breakdown; a fixed length (or a plain number) is one node with weight 1, so fixed lengths
    call it once with integers and stay exact. ``exact``: fn is only piecewise polynomial (a sliding window caps
    it), so distributions are summed over their whole support instead (numpy, in float64).
    """
    if exact and any(isinstance(s, Length) and not s.is_fixed for s in (prompt, completion)):
        return _support_sum(fn, prompt, completion)
    total: Breakdown | None = None
    for p, wp in _nodes(prompt):
        for k, wk in _nodes(completion):
            value = fn(p, k)
            weight = wp * wk
            term = value if weight == 1.0 else value.scaled(weight)
            total = term if total is None else Breakdown.combine([total, term])
    assert total is not None
    return total


def _support_sum(fn: Any, prompt: Any, completion: Any) -> Breakdown:
    """E[fn(P, K)] as the probability-weighted sum over the joint support, in blocks of prompt lengths."""
    import numpy as np

    def support(source: Any) -> tuple[Any, Any]:
        if isinstance(source, Length):
            return np.asarray(source.support, dtype=np.float64), np.asarray(source.probs, dtype=np.float64)
        return np.asarray([source], dtype=np.float64), np.ones(1)

    (ps, pw), (ks, kw) = support(prompt), support(completion)
    out = Breakdown()
    block = max(1, 1_000_000 // len(ks))
    for start in range(0, len(ps), block):
        weights = pw[start:start + block, None] * kw[None, :]
        for key, value in fn(ps[start:start + block, None], ks[None, :]).items():
            out.add(key, float(np.sum(np.broadcast_to(value, weights.shape) * weights)))
    return out


def _nodes(source: Any) -> list[tuple[Any, float]]:
    return source.quadrature() if isinstance(source, Length) else [(source, 1.0)]


def pass_flops(p: RoundPass) -> Breakdown:
    """All FLOPs of a pass: ``calls`` x the expected FLOPs of one call, or, with observed lengths, the sum over
    its calls (padded: each call at the widest its rows ran at) or rows (unpadded: each at its own lengths)."""
    if any(isinstance(s, Observed) for s in (p.prompt, p.completion, p.head_tokens)):
        once = _observed_flops(p)
        return once if p.repeats == 1 else once.scaled(p.repeats)
    exact = p.spec.sliding_window is not None  # window caps are piecewise: no two-point rule is exact for them
    return expected(lambda pr, k: p.call_flops(p.rows, pr, k), p.prompt, p.completion, exact).scaled(p.count)


def _observed_flops(p: RoundPass) -> Breakdown:
    """A padded pass: each call at its widths. An unpadded one: each row at its own lengths, and the work a call
    does whatever its rows (:meth:`RoundPass.per_call_flops`) once per call as it ran, as a padded pass charges
    it: the useful work of a pass never exceeds its executed work."""
    if p.padded:
        return Breakdown.combine(p.call_flops(*call) for call in observed_calls(p))
    calls = observed_calls(replace(p, padded=True))  # the calls as they ran (each at its rows' widths)
    return Breakdown.combine([*(p.call_flops(*row, per_call=False) for row in observed_calls(p)),
                              *(p.per_call_flops(prompt, completion) for _, prompt, completion, _ in calls)])


def observed_calls(p: RoundPass) -> list[tuple[int, int, int, int]]:
    """(rows, prompt, completion, completion tokens held) of each call of a pass at observed lengths: a padded
    call at the widest its rows ran at, holding its rows' own completion tokens (what a ``fused-compact`` head
    projects); an unpadded pass one call per row at its own lengths."""
    rows = p.calls * p.rows
    own = _per_row(p.head_tokens if p.head_tokens is not None else p.completion, rows, p.phase, False)
    if not p.padded:
        prompts, completions = (_per_row(s, rows, p.phase, False) for s in (p.prompt, p.completion))
        return [(1, pr, k, o) for pr, k, o in zip(prompts, completions, own, strict=True)]
    prompts, completions = (_per_row(s, rows, p.phase, True) for s in (p.prompt, p.completion))
    return [(len(own[start:start + p.rows]), max(prompts[start:start + p.rows]),
             max(completions[start:start + p.rows]), sum(own[start:start + p.rows]))
            for start in range(0, rows, p.rows)]


def _per_row(source: Any, rows: int, phase: str, ran: bool) -> Sequence[int]:
    """One length per row: observed (each row's own, or the width it ran at), or a fixed length repeated."""
    if isinstance(source, Observed):
        if len(source.values) != rows:
            raise ValueError(f"{phase}: {len(source.values)} observed lengths for {rows} rows")
        return source.ran if ran else source.values
    if isinstance(source, Length):
        raise ValueError(f"{phase}: observed lengths cannot mix with a length distribution")
    return [source] * rows
