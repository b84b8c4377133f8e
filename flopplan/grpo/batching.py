"""Rollouts and the micro-batches that score and update them, padded as TRL lays them out: prompts left-padded,
completions right-padded, once for each generate call's rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


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


def left_pad(rows: list[list[int]], pad: int, device: torch.device,
             width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids and attention mask of rows left-padded to ``width`` (default: the longest row)."""
    width = width if width is not None else max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long, device=device)
            mask[i, width - len(row):] = 1
    return ids, mask


def right_pad(rows: list[list[int]], pad: int, width: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids and attention mask of rows right-padded to ``width``."""
    ids = torch.full((len(rows), width), pad, dtype=torch.long, device=device)
    mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
    for i, row in enumerate(rows):
        if row:
            ids[i, :len(row)] = torch.tensor(row, dtype=torch.long, device=device)
            mask[i, :len(row)] = 1
    return ids, mask


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


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


def scoring_batches(rollouts: Rollouts, pad_id: int, micro_batch: int, device: torch.device,
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
            p_ids, p_mask = left_pad(prompts, pad_id, device, p_width)
            c_ids, c_mask = right_pad(completions, pad_id, c_width, device)
            ids = torch.cat([p_ids, c_ids], dim=1)
            mask = torch.cat([p_mask, c_mask], dim=1)
            positions = (mask.cumsum(1) - 1).clamp(min=0)
            out.append(ScoringBatch(rows, ids, mask, positions, c_ids, c_mask, p_width, c_width))
    return out
