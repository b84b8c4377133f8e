"""Completion log-probabilities through a chunked LM head that keeps no logits: the built-in trainer's version of
TRL's fused head (trl >= 1.15, ``trl/trainer/utils.py`` ``add_fused_lm_head`` and
``trl/kernels/chunked_logprob.py`` ``_ChunkedLogProbFunction``), so a plan made for current TRL runs here as
priced.

The backbone's last hidden states are projected through the LM head tile by tile (:data:`TOKEN_CHUNK`
positions a tile); each tile keeps only the target's logit and the log-normaliser. Backward recomputes each
tile's logits with the same matmul, then forms the input gradient and, when the head is trained (full
fine-tuning, tied or not), the weight gradient. Matmuls per projected position, with h the hidden size and V
the vocabulary: forward 2hV; backward 2hV (recompute) + 2hV (input) + 2hV (weight, if trained), which is what
:func:`flopplan.formulas.train_terms` charges with ``Training.head_recompute``.

Which positions are projected is the recipe's ``logprob_head`` (:data:`flopplan.passes.LOGPROB_HEAD_RULES`):
``fused`` every position but the last (what TRL does without Triton), ``fused-compact`` only the positions whose
next token is a valid completion token (TRL with Triton). Unlike TRL's CPU path, the weight gradient here is an
out-of-place matmul accumulated into an fp32 buffer, so FlopCounterMode sees all of it.
"""

from __future__ import annotations

from typing import Any

import torch

TOKEN_CHUNK = 4096
"""Positions per tile (TRL's ``TOKEN_CHUNK_SIZE``); the FLOPs do not depend on it, the peak memory does."""


class _ChunkedLogProb(torch.autograd.Function):
    """log softmax(hidden @ weight.T * inv_t)[target] for [N, h] hidden states and [N] targets."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                inv_t: float) -> torch.Tensor:
        logps, lognorm = [], []
        for start in range(0, hidden.shape[0], TOKEN_CHUNK):
            z = (hidden[start:start + TOKEN_CHUNK] @ weight.t()).float() * inv_t
            norm = torch.logsumexp(z, dim=-1)
            logps.append(z.gather(1, targets[start:start + TOKEN_CHUNK, None]).squeeze(1) - norm)
            lognorm.append(norm)
        ctx.save_for_backward(hidden, weight, targets, torch.cat(lognorm) if lognorm else hidden.new_zeros(0))
        ctx.inv_t = inv_t
        return torch.cat(logps) if logps else hidden.new_zeros(0, dtype=torch.float32)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, targets, lognorm = ctx.saved_tensors
        grad_hidden = torch.empty_like(hidden) if ctx.needs_input_grad[0] else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) \
            if ctx.needs_input_grad[1] else None
        for start in range(0, hidden.shape[0], TOKEN_CHUNK):
            h = hidden[start:start + TOKEN_CHUNK]
            z = (h @ weight.t()).float() * ctx.inv_t  # recomputed: the forward kept no logits
            g_out = grad[start:start + TOKEN_CHUNK, None].float()
            g = -torch.exp(z - lognorm[start:start + TOKEN_CHUNK, None]) * g_out
            g.scatter_add_(1, targets[start:start + TOKEN_CHUNK, None], g_out)
            g = (g * ctx.inv_t).to(hidden.dtype)
            if grad_hidden is not None:
                grad_hidden[start:start + TOKEN_CHUNK] = g @ weight
            if grad_weight is not None:
                grad_weight.add_((g.t() @ h).float())
        return grad_hidden, None if grad_weight is None else grad_weight.to(weight.dtype), None, None


def chunked_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                     temperature: float) -> torch.Tensor:
    """Per-position log-probabilities of ``targets`` ([N]) from hidden states ([N, h]), fp32, without logits."""
    out: torch.Tensor = _ChunkedLogProb.apply(hidden, weight, targets, 1.0 / temperature)
    return out


def backbone_and_head(model: Any) -> tuple[Any, torch.Tensor]:
    """The decoder stack (LoRA layers included: peft injects them in place) and the LM head's weight."""
    lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = lm.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ValueError("the chunked log-prob head assumes a bias-free LM head (Qwen2 has none)")
    return lm.model, head.weight


def fused_completion_logprobs(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                              position_ids: torch.Tensor, completion_ids: torch.Tensor,
                              completion_mask: torch.Tensor, temperature: float, compact: bool) -> torch.Tensor:
    """[rows, K] log-probabilities of the completion tokens (the prompt left-padded, the completion right-padded
    to K), zero where ``completion_mask`` is 0. ``compact``: project only the masked positions."""
    backbone, weight = backbone_and_head(model)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      use_cache=False).last_hidden_state
    rows, k = completion_ids.shape
    if compact:
        mask = completion_mask.bool()
        before = hidden[:, -(k + 1):-1]  # the position before each completion token predicts it
        logps = chunked_logprobs(before[mask], weight, completion_ids[mask], temperature)
        return torch.zeros(rows, k, dtype=torch.float32, device=hidden.device).masked_scatter(mask, logps)
    shifted = hidden[:, :-1]  # every position but the last, prompt and padding included
    targets = input_ids[:, 1:]
    logps = chunked_logprobs(shifted.reshape(-1, shifted.shape[-1]), weight, targets.reshape(-1), temperature)
    return logps.view(rows, -1)[:, -k:] * completion_mask
