"""The GRPO objective: group-normalised advantages and the clipped surrogate with an optional k3 KL term."""

from __future__ import annotations

import math

import torch

from flopplan.grpo.config import LossConfig
from flopplan.grpo.reward_funcs import RewardFailed


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


def finite_advantages(rewards: list[float], group: int, scale: str, device: torch.device) -> torch.Tensor:
    """:func:`group_advantages` of a step's rewards, refused before any update (a :class:`RewardFailed`, which the
    trainer abandons the step on) where they are not finite in float32: rewards near float32's limit, or weights
    that take their sum there, overflowed the group's mean, filled the policy with NaN and crashed the next step's
    sampling."""
    advantages = group_advantages(torch.tensor(rewards, dtype=torch.float32, device=device), group, scale)
    if not bool(torch.isfinite(advantages).all()):
        raise _overflow(rewards)
    return advantages


def check_trl_rewards(rewards_per_func: torch.Tensor, weights: torch.Tensor, group: int, scale: str = "group",
                      aggregation: str = "sum_then_normalize") -> None:
    """Refuse (a :class:`RewardFailed`) a round's rewards as TRL 1.16's GRPOTrainer gathers them (a row per
    completion, a column per function, NaN where a function returned None) where a sum TRL normalises them with is
    not finite in float32: the weighted rewards, their sum per completion, each group's sum (its mean), and the
    squared deviations its stds sum, as ``scale_rewards`` (group, batch; none takes no std) and
    ``multi_objective_aggregation`` (``normalize_then_sum``: each function's group std) ask for them. There TRL's
    advantages overflow: it sets a NaN one to 0 (``nan_to_num``; the run learns nothing from that group, silently)
    and an infinite one to float32's limit, which fills the policy with NaN under ``scale_rewards="none"``. Every
    process holds the same gathered rewards, so every one refuses alike."""
    weighted = rewards_per_func.float() * weights.float().to(rewards_per_func.device).unsqueeze(0)
    total = weighted.nansum(dim=1)

    def spread(values: torch.Tensor, dim: int) -> torch.Tensor:  # squared deviations about the mean, summed
        return (values - values.nanmean(dim=dim, keepdim=True)).square().nansum(dim=dim)

    parts = [weighted, total, total.view(-1, group).nansum(dim=1)]
    if aggregation == "normalize_then_sum":
        parts.append(spread(weighted.view(-1, group, weighted.shape[1]), 1))
    elif scale == "group":
        parts.append(spread(total.view(-1, group), 1))
    elif scale == "batch":
        parts.append(spread(total, 0))
    if any(bool(torch.isinf(part).any()) for part in parts):
        raise _overflow([v for v in rewards_per_func.flatten().tolist() if not math.isnan(v)])  # (NaN: None)


def _overflow(rewards: list[float]) -> RewardFailed:
    finite = [abs(v) for v in rewards if math.isfinite(v)]
    size = f"up to {max(finite):.3g} in size" if len(finite) == len(rewards) else "some not finite"
    return RewardFailed(f"the step's rewards ({size}) give group advantages that are not finite in float32: "
                        "scale the rewards or their weights down")


def group_advantages(rewards: torch.Tensor, group: int, scale: str = "group", eps: float = 1e-4) -> torch.Tensor:
    """GRPO advantages: reward minus its group mean, divided by the group's (unbiased, as TRL) std
    (``scale="group"``) or not (``"none"``, Dr. GRPO). A group of one has no spread: its advantage is 0."""
    grouped = rewards.view(-1, group)
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "group" and group > 1:
        centred = centred / (grouped.std(dim=1, keepdim=True) + eps)
    return centred.reshape(-1)
