"""A small policy with LoRA on one device, driving the training run's own phase units (rollout generate, scoring
forward, update) at a chosen shape: what the counter comparison and the timing sweep run."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import torch

from flopplan.arch import ArchSpec
from flopplan.formulas import Conventions, LoRA, Training
from flopplan.grpo import phases as P
from flopplan.grpo.batching import Block, Rollouts, scoring_batches
from flopplan.grpo.codecs import Codec, char_codec
from flopplan.grpo.config import LossConfig
from flopplan.grpo.tokenizer import CharTokenizer
from flopplan.ledger import PhaseCharge
from flopplan.measure.models import add_lora, build_model, enable_checkpointing


@dataclass
class PhaseHarness:
    """The phase units on one policy (:meth:`build`: LoRA rank ``rank`` on all seven projections, checkpointing
    on; :meth:`for_recipe`: as a recipe trains it)."""

    spec: ArchSpec
    device: torch.device
    attn: str
    policy: Any
    codec: Codec
    optimizer: torch.optim.Optimizer
    training: Training
    conv: Conventions
    lora: LoRA | None  # the adapters active in rollouts and scoring (None: full fine-tuning)
    head: str = "completion"  # the log-prob head of scoring and update passes

    @staticmethod
    def build(spec: ArchSpec, device: torch.device, dtype: torch.dtype, attn: str, seed: int = 0,
              rank: int = 16) -> PhaseHarness:
        torch.manual_seed(seed)
        policy: Any = build_model(spec, device=device, dtype=dtype, attn_implementation=attn, seed=seed)
        codec = char_codec(CharTokenizer())
        policy.config.pad_token_id = codec.pad_id
        enable_checkpointing(policy)
        lora = LoRA(rank)
        policy = add_lora(policy, lora)
        optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-5)
        conv = Conventions("dense", "sdpa" if attn == "sdpa" else "eager")
        return PhaseHarness(spec, device, attn, policy, codec, optimizer, Training(lora, "non-reentrant"), conv,
                            lora)

    @staticmethod
    def for_recipe(recipe: Any, device: torch.device, dtype: torch.dtype, attn: str, seed: int = 0) -> PhaseHarness:
        """The recipe's policy (random init) trained as the recipe says: LoRA or full, checkpointing or not, its
        log-prob head and FLOP conventions."""
        torch.manual_seed(seed)
        spec = recipe.policy_spec
        policy: Any = build_model(spec, device=device, dtype=dtype, attn_implementation=attn, seed=seed)
        codec = char_codec(CharTokenizer())
        policy.config.pad_token_id = codec.pad_id
        if recipe.grad_ckpt:
            enable_checkpointing(policy)
        if recipe.lora is not None:
            policy = add_lora(policy, recipe.lora)
        optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-6)
        return PhaseHarness(spec, device, attn, policy, codec, optimizer, recipe.training, recipe.conventions,
                            recipe.lora, recipe.logprob_head)

    def context(self, measure: bool) -> P.PhaseContext:
        return P.PhaseContext(self.spec, self.conv, measure)

    def prompts(self, batch: int, length: int, seed: int = 0) -> list[list[int]]:
        rng = random.Random(seed)
        return [[self.codec.pad_id + 4 + rng.randrange(10) for _ in range(length)] for _ in range(batch)]

    def rollouts(self, batch: int, prompt: int, completion: int) -> Rollouts:
        rng = random.Random(1)
        prompts = self.prompts(batch, prompt)
        completions = [[4 + rng.randrange(10) for _ in range(completion)] for _ in range(batch)]
        return Rollouts(prompts, completions, ["" for _ in range(batch)], [Block(0, batch, prompt, completion)])

    # the phase units, as the training run calls them
    def generate(self, batch: int, prompt: int, completion: int, measure: bool = False) -> PhaseCharge:
        _, charges = P.generate(self.policy, self.codec, self.prompts(batch, prompt), ctx=self.context(measure),
                                lora=self.lora, batch=batch, max_new_tokens=completion, greedy=True,
                                min_new_tokens=completion)
        return charges[0]

    def score(self, batch: int, prompt: int, completion: int, measure: bool = False) -> PhaseCharge:
        rollouts = self.rollouts(batch, prompt, completion)
        batches = scoring_batches(rollouts, self.codec.pad_id, batch, self.device)
        _, charge = P.score("old_logprobs", self.policy, batches, rollouts, ctx=self.context(measure), lora=self.lora,
                            temperature=1.0, head=self.head)
        return charge

    def update(self, batch: int, prompt: int, completion: int, measure: bool = False) -> PhaseCharge:
        rollouts = self.rollouts(batch, prompt, completion)
        batches = scoring_batches(rollouts, self.codec.pad_id, batch, self.device)
        advantages = torch.linspace(-1, 1, batch, device=self.device)
        _, charge = P.update(self.policy, self.optimizer, batches, rollouts, advantages, ctx=self.context(measure),
                             training=self.training, loss_cfg=LossConfig(), head=self.head,
                             optimizer_batch=batch, max_grad_norm=1.0)
        return charge
