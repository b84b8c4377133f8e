"""The phases of a GRPO step as separate units: rollout, old logprobs, reference, reward, update, evaluation.

Each unit runs real transformers/peft code on a batch, returns its outputs and a :class:`PhaseCharge` with the
shapes it executed priced by the core formulas, and can be timed and counted on its own (``measure=True`` runs
it under torch's FlopCounterMode and records the count beside the closed form). The calibration command drives
these same units.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode
from transformers import GenerationConfig

from flopplan.arch import ArchSpec
from flopplan.formulas import Conventions, LoRA, Training
from flopplan.train.ledger import PhaseCharge, generate_charge, scoring_charge, update_charge


@dataclass
class Codec:
    """Text <-> ids for prompts and completions, whatever the tokenizer (built-in or Hugging Face)."""

    encode: Callable[[str], list[int]]  # a prompt (with BOS when the tokenizer uses one)
    encode_piece: Callable[[str], list[int]]  # text that continues a sequence (no BOS)
    decode: Callable[[list[int]], str]
    pad_id: int
    eos_id: int
    sep_id: int


@contextlib.contextmanager
def timed_and_counted(measure: bool, sync: bool) -> Iterator[dict[str, Any]]:
    """Time a block (with CUDA events when ``sync``, the GPU's own clock) and, with ``measure``, count it with
    FlopCounterMode."""
    out: dict[str, Any] = {"measured": None, "seconds": 0.0}
    counter = FlopCounterMode(display=False) if measure else contextlib.nullcontext()
    if sync:
        start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start_event.record()
    start = time.perf_counter()
    with counter:
        yield out
    if sync:
        end_event.record()
        end_event.synchronize()
        out["seconds"] = start_event.elapsed_time(end_event) / 1000.0
    else:
        out["seconds"] = time.perf_counter() - start
    if measure:
        out["measured"] = int(counter.get_total_flops())  # type: ignore[union-attr]


@dataclass
class Block:
    """One generate call's rollouts: rows ``start:start+size`` padded to ``prompt`` + ``completion`` tokens."""

    start: int
    size: int
    prompt: int
    completion: int


@dataclass
class Rollouts:
    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]  # up to and including EOS when one was produced
    completions: list[str]
    blocks: list[Block] = field(default_factory=list)

    def lengths(self) -> list[tuple[int, int]]:
        return [(len(p), len(c)) for p, c in zip(self.prompt_ids, self.completion_ids, strict=True)]


def _left_pad(rows: list[list[int]], pad: int, device: torch.device,
              width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    width = width if width is not None else max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long, device=device)
            mask[i, width - len(row):] = 1
    return ids, mask


def _right_pad(rows: list[list[int]], pad: int, width: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.full((len(rows), width), pad, dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for i, row in enumerate(rows):
        if row:
            ids[i, :len(row)] = torch.tensor(row, dtype=torch.long, device=device)
            mask[i, :len(row)] = 1
    return ids, mask


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def generate(model: Any, codec: Codec, prompt_ids: list[list[int]], batch: int, max_new_tokens: int,
             temperature: float, greedy: bool, spec: ArchSpec, lora: LoRA | None, conv: Conventions,
             measure: bool = False, prefix: str = "rollout",
             min_new_tokens: int = 0) -> tuple[Rollouts, list[PhaseCharge]]:
    """Sample (or greedily decode) completions with transformers ``generate``, in calls of ``batch`` prompts
    left-padded to the call's longest; each call runs until its longest completion (``min_new_tokens`` forces
    a length, as calibration does)."""
    device = _device(model)
    was_training = model.training
    model.eval()  # with gradient checkpointing, transformers disables the KV cache in training mode
    rollouts = Rollouts(list(prompt_ids), [], [])
    charges = []
    sync = device.type == "cuda"
    for start in range(0, len(prompt_ids), batch):
        rows = prompt_ids[start:start + batch]
        ids, mask = _left_pad(rows, codec.pad_id, device)
        # A clean generation config: the model's own (repetition penalties, top-k, ...) would change what is
        # sampled, and the loss assumes samples from softmax(logits / temperature).
        # transformers fills unset (None) fields from the model's own config, so every sampling knob is set.
        neutral = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0}
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0, "min_p": 0.0,
                    "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0}
        config = GenerationConfig(max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens or None,
                                  pad_token_id=codec.pad_id, eos_token_id=codec.eos_id, **neutral,
                                  **({"do_sample": False} if greedy else sampling))
        with torch.no_grad(), timed_and_counted(measure, sync) as info:
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        generated = out.shape[1] - ids.shape[1]
        for row in out[:, ids.shape[1]:].tolist():
            completion = row[:row.index(codec.eos_id) + 1] if codec.eos_id in row else row
            rollouts.completion_ids.append(completion)
            rollouts.completions.append(codec.decode([t for t in completion if t != codec.eos_id]))
        rollouts.blocks.append(Block(start, len(rows), ids.shape[1], generated))
        charge = generate_charge(spec, lora, conv, len(rows), ids.shape[1], generated,
                                 [(len(p), len(c)) for p, c in zip(rows, rollouts.completion_ids[start:],
                                                                   strict=False)], prefix)
        charge.measured, charge.seconds = info["measured"], info["seconds"]
        charges.append(charge)
    model.train(was_training)
    return rollouts, charges


@dataclass
class ScoringBatch:
    """A micro-batch for scoring or updating: prompt left-padded, completion right-padded, as TRL lays it out."""

    rows: list[int]  # indices into the rollouts
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    prompt_width: int
    completion_width: int


def scoring_batches(rollouts: Rollouts, codec: Codec, micro_batch: int, device: torch.device,
                    padding: str = "batch") -> list[ScoringBatch]:
    """Micro-batches over the rollouts. ``batch``: each generate call's rollouts padded once to that call's
    longest prompt and completion (TRL); ``none``: one sequence per micro-batch, no padding."""
    out = []
    for block in rollouts.blocks:
        indices = list(range(block.start, block.start + block.size))
        step = micro_batch if padding == "batch" else 1
        for first in range(0, len(indices), step):
            rows = indices[first:first + step]
            prompts = [rollouts.prompt_ids[i] for i in rows]
            completions = [rollouts.completion_ids[i] for i in rows]
            if padding == "batch":
                p_width, c_width = block.prompt, block.completion
            else:
                p_width, c_width = len(prompts[0]), max(1, len(completions[0]))
            p_ids, p_mask = _left_pad(prompts, codec.pad_id, device, p_width)
            c_ids, c_mask = _right_pad(completions, codec.pad_id, c_width, device)
            ids = torch.cat([p_ids, c_ids], dim=1)
            mask = torch.cat([p_mask, c_mask], dim=1)
            positions = (mask.cumsum(1) - 1).clamp(min=0)
            out.append(ScoringBatch(rows, ids, mask, positions, c_ids, c_mask, p_width, c_width))
    return out


def completion_logprobs(model: Any, batch: ScoringBatch, temperature: float,
                        completion_only: bool) -> torch.Tensor:
    """Per-token log-probabilities of the completion tokens, [rows, completion_width] (fp32)."""
    k = batch.completion_width
    kwargs: dict[str, Any] = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                  position_ids=batch.position_ids, use_cache=False)
    kwargs["logits_to_keep"] = k + 1 if completion_only else 0
    logits = model(**kwargs).logits
    logits = logits[:, -(k + 1):-1, :].float() / temperature
    return torch.gather(F.log_softmax(logits, dim=-1), 2, batch.completion_ids.unsqueeze(-1)).squeeze(-1)


def score(phase: str, model: Any, batches: list[ScoringBatch], rollouts: Rollouts, temperature: float,
          completion_only: bool, spec: ArchSpec, lora: LoRA | None, conv: Conventions, measure: bool = False,
          adapter_disabled: bool = False) -> tuple[dict[int, torch.Tensor], PhaseCharge]:
    """No-grad logprobs of every rollout: ``old_logprobs`` (the sampling policy) or ``reference`` (LoRA: the base,
    adapter disabled)."""
    was_training = model.training
    model.eval()
    out: dict[int, torch.Tensor] = {}
    device = batches[0].input_ids.device
    context = model.disable_adapter() if adapter_disabled else contextlib.nullcontext()
    with torch.no_grad(), context, timed_and_counted(measure, device.type == "cuda") as info:
        for b in batches:
            logps = completion_logprobs(model, b, temperature, completion_only)
            for j, row in enumerate(b.rows):
                out[row] = logps[j]
    model.train(was_training)
    charge = scoring_charge(phase, spec, lora, conv, [(len(b.rows), b.prompt_width, b.completion_width)
                                                      for b in batches], rollouts.lengths(), completion_only)
    charge.measured, charge.seconds = info["measured"], info["seconds"]
    return out, charge


@dataclass
class LossConfig:
    clip_low: float = 0.2
    clip_high: float = 0.2
    beta: float = 0.0
    aggregation: str = "token"  # token: sum over all tokens / tokens (DAPO, TRL default); sequence: GRPO paper
    temperature: float = 1.0


def grpo_loss(logps: torch.Tensor, old: torch.Tensor, ref: torch.Tensor | None, advantages: torch.Tensor,
              mask: torch.Tensor, cfg: LossConfig, normaliser: float) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped surrogate with optional k3 KL to the reference, summed and divided by ``normaliser`` (the token
    or sequence count of the whole optimizer batch, so micro-batches accumulate to the batch mean)."""
    ratio = torch.exp(logps - old)
    clipped = torch.clamp(ratio, 1 - cfg.clip_low, 1 + cfg.clip_high)
    adv = advantages.unsqueeze(1)
    per_token = -torch.min(ratio * adv, clipped * adv)
    kl = None
    if ref is not None and cfg.beta > 0:
        delta = ref - logps
        kl = torch.exp(delta) - delta - 1
        per_token = per_token + cfg.beta * kl
    maskf = mask.float()
    if cfg.aggregation == "token":
        loss = (per_token * maskf).sum() / normaliser
    else:
        loss = ((per_token * maskf).sum(1) / maskf.sum(1).clamp(min=1)).sum() / normaliser
    with torch.no_grad():
        tokens = maskf.sum().clamp(min=1)
        stats = {"clip_fraction": float((((ratio - clipped).abs() > 0).float() * maskf).sum() / tokens),
                 "kl": float((kl * maskf).sum() / tokens) if kl is not None else 0.0}
    return loss, stats


def update(model: Any, optimizer: torch.optim.Optimizer, batches: list[ScoringBatch], rollouts: Rollouts,
           advantages: torch.Tensor, old: dict[int, torch.Tensor] | None, ref: dict[int, torch.Tensor] | None,
           loss_cfg: LossConfig, completion_only: bool, optimizer_batch: int, max_grad_norm: float,
           spec: ArchSpec, training: Training, conv: Conventions,
           measure: bool = False) -> tuple[dict[str, float], PhaseCharge]:
    """One pass of policy updates over all rollouts: optimizer steps over ``optimizer_batch`` sequences each,
    accumulated over micro-batches."""
    model.train()
    device = batches[0].input_ids.device
    stats = {"loss": 0.0, "clip_fraction": 0.0, "kl": 0.0, "grad_norm": 0.0}  # means over the pass
    groups: list[list[ScoringBatch]] = [[]]
    for b in batches:
        if sum(len(x.rows) for x in groups[-1]) + len(b.rows) > optimizer_batch:
            groups.append([])
        groups[-1].append(b)
    measured = 0
    seconds = 0.0
    for group in groups:
        if loss_cfg.aggregation == "token":
            normaliser = max(1.0, float(sum(int(b.completion_mask.sum()) for b in group)))
        else:
            normaliser = float(sum(len(b.rows) for b in group))
        optimizer.zero_grad(set_to_none=True)
        for b in group:
            with timed_and_counted(measure, device.type == "cuda") as info:
                logps = completion_logprobs(model, b, loss_cfg.temperature, completion_only)
                rows = torch.tensor(b.rows, device=device)
                old_b = torch.stack([old[r] for r in b.rows]) if old is not None else logps.detach()
                ref_b = torch.stack([ref[r] for r in b.rows]) if ref is not None else None
                loss, s = grpo_loss(logps, old_b, ref_b, advantages[rows], b.completion_mask, loss_cfg,
                                    normaliser)
                loss.backward()
            measured += info["measured"] or 0
            seconds += info["seconds"]
            stats["loss"] += float(loss.detach()) / len(groups)  # each group's loss is its own mean
            weight = len(b.rows) / len(rollouts.completion_ids)
            stats["clip_fraction"] += s["clip_fraction"] * weight
            stats["kl"] += s["kl"] * weight
        params = [p for p in model.parameters() if p.requires_grad]
        stats["grad_norm"] += float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm)) / len(groups)
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    charge = update_charge(spec, training, conv, [(len(b.rows), b.prompt_width, b.completion_width)
                                                  for b in batches], rollouts.lengths(), completion_only)
    charge.measured = measured if measure else None
    charge.seconds = seconds
    return stats, charge


def group_advantages(rewards: torch.Tensor, group: int, scale: str = "group", eps: float = 1e-4) -> torch.Tensor:
    """GRPO advantages: reward minus its group mean, divided by the group's (unbiased, as TRL) std
    (``scale="group"``) or not (``"none"``, Dr. GRPO). A group of one has no spread: its advantage is 0."""
    grouped = rewards.view(-1, group)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "group" and group > 1:
        centred = centred / (grouped.std(dim=1, keepdim=True) + eps)
    return centred.reshape(-1)
