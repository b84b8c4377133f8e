"""The phases of a GRPO step as separate units: rollout (generate), scoring (old logprobs, reference), update.

Each unit runs real transformers/peft code on a batch and returns its outputs and a :class:`PhaseCharge`: the
round's pass it runs (``charge_as``, from :func:`flopplan.passes.step_passes`: its adapters, training and head) at
the shapes it executed, charged by :func:`flopplan.ledger.charge`. It can be timed and counted on its own
(``measure=True`` runs it under torch's FlopCounterMode and records the count beside the closed form). The
built-in trainer and the calibration drive these same units. Everything after the tensors is keyword-only.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from transformers import GenerationConfig

from flopplan.arch import ArchSpec
from flopplan.formulas import Conventions
from flopplan.grpo.batching import Block, Rollouts, ScoringBatch, left_pad, model_device
from flopplan.grpo.codecs import Codec
from flopplan.grpo.config import LossConfig
from flopplan.grpo.logprob_head import fused_completion_logprobs
from flopplan.grpo.loss import grpo_loss
from flopplan.ledger import PhaseCharge, charge, ran
from flopplan.measure.timer import timed_and_counted
from flopplan.passes import FUSED_HEADS, RoundPass


@dataclass(frozen=True)
class PhaseContext:
    """What the phase units charge with: the model's architecture and counting conventions, and whether each
    unit is also counted by FlopCounterMode (``measure``)."""

    spec: ArchSpec
    conv: Conventions
    measure: bool = False


def generate(model: Any, codec: Codec, prompt_ids: list[list[int]], *, ctx: PhaseContext,
             charge_as: tuple[RoundPass, ...], batch: int, max_new_tokens: int, temperature: float = 1.0,
             greedy: bool = False, min_new_tokens: int = 0) -> tuple[Rollouts, list[PhaseCharge]]:
    """Sample (or greedily decode) completions with transformers ``generate``, in calls of ``batch`` prompts
    left-padded to the call's longest; each call runs until its longest completion (``min_new_tokens`` forces
    a length, as calibration does). ``charge_as``: the prefill and decode passes (rollout or eval) each call
    is charged as."""
    device = model_device(model)
    was_training = model.training
    model.eval()  # with gradient checkpointing, transformers disables the KV cache in training mode
    rollouts = Rollouts(list(prompt_ids), [], [])
    charges = []
    sync = device.type == "cuda"
    for start in range(0, len(prompt_ids), batch):
        rows = prompt_ids[start:start + batch]
        ids, mask = left_pad(rows, codec.pad_id, device)
        # A clean generation config: the model's own (repetition penalties, top-k, ...) would change what is
        # sampled, and the loss assumes samples from softmax(logits / temperature).
        # transformers fills unset (None) fields from the model's own config, so every sampling knob is set.
        neutral = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0}
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
                    "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0}
        config = GenerationConfig(max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens or None,
                                  pad_token_id=codec.pad_id, eos_token_id=codec.eos_id, **neutral,
                                  **({"do_sample": False} if greedy else sampling))
        with torch.no_grad(), timed_and_counted(ctx.measure, sync) as info:
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        generated = out.shape[1] - ids.shape[1]
        for row in out[:, ids.shape[1]:].tolist():
            completion = row[:row.index(codec.eos_id) + 1] if codec.eos_id in row else row
            rollouts.completion_ids.append(completion)
            rollouts.completions.append(codec.decode([t for t in completion if t != codec.eos_id]))
        rollouts.blocks.append(Block(start, len(rows), ids.shape[1], generated))
        lengths = [(len(p), len(c)) for p, c in zip(rows, rollouts.completion_ids[start:], strict=False)]
        done = charge(*(ran(t, lengths, (ids.shape[1], generated)) for t in charge_as))
        _measured(done, info)
        charges.append(done)
    model.train(was_training)
    return rollouts, charges


def completion_logprobs(model: Any, batch: ScoringBatch, temperature: float,
                        head: str) -> torch.Tensor:
    """Per-token log-probabilities of the completion tokens, [rows, completion_width] (fp32), through the
    recipe's log-prob head: the model's own head (``completion``, ``all``) or the chunked one TRL fuses in
    (``fused``, ``fused-compact``: :mod:`flopplan.grpo.logprob_head`)."""
    k = batch.completion_width
    if head in FUSED_HEADS:
        return fused_completion_logprobs(model, batch.input_ids, batch.attention_mask, batch.position_ids,
                                         batch.completion_ids, batch.completion_mask, temperature,
                                         compact=head == "fused-compact")
    kwargs: dict[str, Any] = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                  position_ids=batch.position_ids, use_cache=False)
    kwargs["logits_to_keep"] = k + 1 if head == "completion" else 0
    logits = model(**kwargs).logits
    logits = logits[:, -(k + 1):-1, :].float() / temperature
    return torch.gather(F.log_softmax(logits, dim=-1), 2, batch.completion_ids.unsqueeze(-1)).squeeze(-1)


def score(model: Any, batches: list[ScoringBatch], rollouts: Rollouts, *, ctx: PhaseContext,
          charge_as: RoundPass, temperature: float,
          adapter_disabled: bool = False) -> tuple[dict[int, torch.Tensor], PhaseCharge]:
    """No-grad logprobs of every rollout through ``charge_as``'s head, charged as that pass: ``old_logprobs``
    (the sampling policy) or ``reference`` (LoRA: the base, adapter disabled)."""
    head = charge_as.head
    was_training = model.training
    model.eval()
    out: dict[int, torch.Tensor] = {}
    device = batches[0].input_ids.device
    context = model.disable_adapter() if adapter_disabled else contextlib.nullcontext()
    with torch.no_grad(), context, timed_and_counted(ctx.measure, device.type == "cuda") as info:
        for b in batches:
            logps = completion_logprobs(model, b, temperature, head)
            for j, row in enumerate(b.rows):
                out[row] = logps[j]
    model.train(was_training)
    done = _charge(charge_as, batches, rollouts)
    _measured(done, info)
    return out, done


def _measured(done: PhaseCharge, info: dict[str, Any]) -> None:
    """A unit's time and, when measured, its count (FlopCounterMode's plus its named blind spots, which the
    charge's shapes name: e.g. the ``grouped_mm`` experts of an MoE policy)."""
    done.measured, done.seconds = info["measured"], info["seconds"]
    if info["blind"]:
        done.shapes["blind_spots"] = dict(info["blind"])


def _charge(template: RoundPass, batches: list[ScoringBatch], rollouts: Rollouts) -> PhaseCharge:
    """The micro-batches as they ran: each at its padded widths, its rows at their own lengths."""
    lengths = rollouts.lengths()
    return charge(*(ran(template, [lengths[i] for i in b.rows], (b.prompt_width, b.completion_width))
                    for b in batches))


def update(model: Any, optimizer: torch.optim.Optimizer, batches: list[ScoringBatch], rollouts: Rollouts,
           advantages: torch.Tensor, *, ctx: PhaseContext, charge_as: RoundPass, loss_cfg: LossConfig,
           optimizer_batch: int, max_grad_norm: float,
           old: dict[int, torch.Tensor] | None = None,
           ref: dict[int, torch.Tensor] | None = None) -> tuple[dict[str, float], PhaseCharge]:
    """One pass of policy updates over all rollouts: optimizer steps over ``optimizer_batch`` sequences each,
    accumulated over micro-batches; ``charge_as``: the update pass (its head and training)."""
    head = charge_as.head
    model.train()
    device = batches[0].input_ids.device
    stats = {"loss": 0.0, "clip_fraction": 0.0, "kl": 0.0, "grad_norm": 0.0}  # means over the pass
    groups: list[list[ScoringBatch]] = [[]]
    for b in batches:
        if sum(len(x.rows) for x in groups[-1]) + len(b.rows) > optimizer_batch:
            groups.append([])
        groups[-1].append(b)
    total: dict[str, Any] = {"measured": 0, "seconds": 0.0, "blind": {}}
    for group in groups:
        if loss_cfg.aggregation == "token":
            normaliser = max(1.0, float(sum(int(b.completion_mask.sum()) for b in group)))
        else:
            normaliser = float(sum(len(b.rows) for b in group))
        optimizer.zero_grad(set_to_none=True)
        for b in group:
            with timed_and_counted(ctx.measure, device.type == "cuda") as info:
                logps = completion_logprobs(model, b, loss_cfg.temperature, head)
                rows = torch.tensor(b.rows, device=device)
                old_b = torch.stack([old[r] for r in b.rows]) if old is not None else logps.detach()
                ref_b = torch.stack([ref[r] for r in b.rows]) if ref is not None else None
                loss, s = grpo_loss(logps, old_b, ref_b, advantages[rows], b.completion_mask, loss_cfg,
                                    normaliser)
                loss.backward()
            total["measured"] += info["measured"] or 0
            total["seconds"] += info["seconds"]
            for name, flops in info["blind"].items():
                total["blind"][name] = total["blind"].get(name, 0) + flops
            stats["loss"] += float(loss.detach()) / len(groups)  # each group's loss is its own mean
            weight = len(b.rows) / len(rollouts.completion_ids)
            stats["clip_fraction"] += s["clip_fraction"] * weight
            stats["kl"] += s["kl"] * weight
        params = [p for p in model.parameters() if p.requires_grad]
        stats["grad_norm"] += float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm)) / len(groups)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    done = _charge(charge_as, batches, rollouts)
    _measured(done, {**total, "measured": total["measured"] if ctx.measure else None})
    return stats, done
