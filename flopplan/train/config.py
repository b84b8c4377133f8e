"""What a ``flopplan train`` run is asked to do: a recipe plus the training knobs a plan does not fix (torch-free)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from flopplan.errors import UserError
from flopplan.planner import Budget
from flopplan.recipe import Recipe

WEIGHTLESS_POLICIES = ("tiny",)
"""Policies that are trained from random initialisation by design (no weights exist for them)."""
SCALE_REWARDS = ("group", "none")
AGGREGATIONS = ("token", "sequence")
DEVICES = ("auto", "cpu", "cuda")


MAX_TRAIN_SIZE = 1_000_000  # problems of the built-in task held in memory


@dataclass(frozen=True)
class TrainConfig:
    recipe: Recipe
    out_dir: str
    budget_flops: int | None = None
    max_steps: int | None = None
    plan: dict[str, Any] | None = None  # the plan entry this run validates
    task: str = "digits"  # built-in task when no dataset is given
    dataset: str | None = None
    eval_dataset: str | None = None
    train_size: int = 20000  # problems generated for the built-in task
    model_path: str | None = None
    random_init: bool = False
    reward_model_path: str | None = None
    lr: float | None = None  # None: 3e-3 for the tiny policy, 1e-5 with LoRA, 1e-6 full fine-tuning
    lora_alpha: int | None = None  # None: 2 x rank
    temperature: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.2
    scale_rewards: str = "group"  # group: divide by the group std; none: Dr. GRPO
    loss_aggregation: str = "token"
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    seed: int = 0
    checkpoint_every: int | None = 10
    measure_flops: bool = False
    device: str = "auto"
    format_reward: float = 0.0
    prm_aggregate: str = "min"
    prm_max_steps: int = 32
    eval_batch: int | None = None  # prompts per evaluation generate call; None: all (one call, as planned)
    threads: int | None = None  # CPU threads for torch; None: 1 for policies under 50M parameters, else torch's

    def __post_init__(self) -> None:
        r = self.recipe
        if self.budget_flops is None and self.max_steps is None:
            raise UserError("give a budget (--budget FLOPS or --plan FILE) or a number of steps (--steps N)")
        for name in ("budget_flops", "max_steps", "train_size", "checkpoint_every", "eval_batch", "prm_max_steps",
                     "threads"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise UserError(f"{name} must be a positive integer, not {value!r}")
        if self.train_size > MAX_TRAIN_SIZE:
            raise UserError(f"train_size is at most {MAX_TRAIN_SIZE:,} problems, not {self.train_size:,}")
        if r.old_logprobs == "off" and r.optimizer_steps_per_step > 1:
            raise UserError("old_logprobs off with several optimizer steps per round (mu > 1 or an optimizer batch "
                            "below the round) would leave the ratio at 1, so the clip never acts; the run computes "
                            "them with a forward pass: use --old-logprobs auto or on")
        for name in ("temperature", "max_grad_norm"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise UserError(f"{name} must be a positive number, not {value!r}")
        for name in ("clip_low", "clip_high", "weight_decay", "format_reward"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise UserError(f"{name} must be a number >= 0, not {value!r}")
        if self.lr is not None and (not math.isfinite(self.lr) or self.lr <= 0):
            raise UserError(f"lr must be a positive number, not {self.lr!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise UserError(f"seed must be an integer from 0 to 2**32 - 1, not {self.seed!r}")
        if self.lora_alpha is not None and (isinstance(self.lora_alpha, bool) or not isinstance(self.lora_alpha, int)
                                            or self.lora_alpha <= 0):
            raise UserError(f"lora_alpha must be a positive integer, not {self.lora_alpha!r}")
        if self.clip_low >= 1:
            raise UserError(f"the lower clip must be below 1 (the ratio is clipped at 1 - eps), not {self.clip_low}")
        if self.budget_flops is not None:
            Budget(flops=self.budget_flops)  # the planner's limits
        if self.reward_model_path is not None and r.reward.kind == "rule":
            raise UserError("--reward-model-path needs a model reward (--reward orm:MODEL), not a rule")
        for name, allowed in (("scale_rewards", SCALE_REWARDS), ("loss_aggregation", AGGREGATIONS),
                              ("device", DEVICES), ("prm_aggregate", ("min", "prod", "last"))):
            if getattr(self, name) not in allowed:
                raise UserError(f"{name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        if r.engine != "hf":
            raise UserError("flopplan train generates with transformers (engine hf); the vllm engine is for planning")
        if r.update_padding == "batch" and r.generation_batch_size % r.micro_batch_size:
            raise UserError(f"micro_batch {r.micro_batch_size} must divide the generation batch "
                            f"{r.generation_batch_size}")
        if r.optimizer_batch_size % r.micro_batch_size:
            raise UserError("optimizer_batch must be a multiple of micro_batch")
        if self.dataset is None:
            from flopplan.train.tasks import parse_task

            parse_task(self.task)
        for name in ("dataset", "eval_dataset", "model_path", "reward_model_path"):
            value = getattr(self, name)
            if value is not None and not Path(value).exists():
                raise UserError(f"cannot read {name.replace('_', ' ')} {value!r}: no such file or folder")
        if self.model_path is None:
            name = r.policy_spec.name  # an LM head is required of a policy
            if not self.random_init and name not in WEIGHTLESS_POLICIES:
                raise UserError(f"no weights for {name} on disk: pass --model-path DIR (a downloaded model) or "
                                "--random-init (the architecture without weights)")
        if self.model_path is not None and self.random_init:
            raise UserError("--model-path loads weights; --random-init builds the registry architecture without "
                            "them: give one")

    @property
    def max_new_tokens(self) -> int:
        return self.recipe.completion_len.max

    def to_data(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "recipe"}
        data["recipe"] = self.recipe.to_data()
        return data

    @staticmethod
    def from_data(data: dict[str, Any]) -> TrainConfig:
        data = dict(data)
        recipe = Recipe.from_data(data.pop("recipe"), "run config")
        return TrainConfig(recipe=recipe, **data)


def replace_config(config: TrainConfig, **changes: Any) -> TrainConfig:
    data = asdict(config)
    data.update(changes)
    data["recipe"] = changes.get("recipe", config.recipe)
    return TrainConfig(**data)
