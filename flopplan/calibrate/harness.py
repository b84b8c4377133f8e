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
from flopplan.passes import RoundPass, RoundShape


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
        shape = RoundShape.of(recipe)
        return PhaseHarness(spec, device, attn, policy, codec, optimizer, shape.training, shape.conv, shape.lora,
                            shape.logprob_head)

    def charged_as(self, phase: str) -> RoundPass:
        """The pass a unit is charged as: this harness's adapters (in rollouts and scoring), training and head."""
        lora = None if phase == "update" else self.lora
        return RoundPass(phase, self.spec, self.conv, lora, self.training if phase == "update" else None, 1, 1, 0,
                         0, head=self.head)

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
                                charge_as=(self.charged_as("rollout.prefill"), self.charged_as("rollout.decode")),
                                batch=batch, max_new_tokens=completion, greedy=True,
                                min_new_tokens=completion)
        return charges[0]

    def score(self, batch: int, prompt: int, completion: int, measure: bool = False) -> PhaseCharge:
        rollouts = self.rollouts(batch, prompt, completion)
        batches = scoring_batches(rollouts, self.codec.pad_id, batch, self.device)
        _, charge = P.score(self.policy, batches, rollouts, ctx=self.context(measure),
                            charge_as=self.charged_as("old_logprobs"), temperature=1.0)
        return charge

    def update(self, batch: int, prompt: int, completion: int, measure: bool = False) -> PhaseCharge:
        rollouts = self.rollouts(batch, prompt, completion)
        batches = scoring_batches(rollouts, self.codec.pad_id, batch, self.device)
        advantages = torch.linspace(-1, 1, batch, device=self.device)
        _, charge = P.update(self.policy, self.optimizer, batches, rollouts, advantages, ctx=self.context(measure),
                             charge_as=self.charged_as("update"), loss_cfg=LossConfig(),
                             optimizer_batch=batch, max_grad_norm=1.0)
        return charge
