"""What a run trains on: the policy (a local model or a random-initialised registry architecture, LoRA or full,
checkpointing), its reference, its optimizer, the reward model, and the data (the built-in task or a dataset,
flopplan.grpo.data)."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from flopplan.arch import ArchSpec, load_config, resolve
from flopplan.errors import UserError, first_line
from flopplan.formulas import Conventions, LoRA
from flopplan.grpo.codecs import Codec, char_codec, local_codec
from flopplan.grpo.data import load_problems, read_template
from flopplan.grpo.rewards import RewardModel
from flopplan.grpo.tasks import Problem, parse_task
from flopplan.grpo.tokenizer import CharTokenizer
from flopplan.measure.device import DevicePolicy
from flopplan.measure.models import add_lora, build_model, enable_checkpointing
from flopplan.train.config import WEIGHTLESS_POLICIES, TrainConfig
from flopplan.train.targets import target_problems, task_split

WEIGHTLESS_LR = {"tiny-s": 3e-3, "tiny": 3e-3, "tiny-l": 1e-3}
"""AdamW learning rates of the tiny family from random initialisation (full fine-tuning, the demo recipe), chosen
on seed 0 and checked on seed 1: tiny-l at 3e-3 rose to about 0.25 held-out accuracy and fell back (1e-3: 0.98 at
step 60); tiny-s at 5e-3 and 1e-2 learned more slowly than at 3e-3 (0.88 at step 200)."""


def default_lr(spec: ArchSpec, lora: LoRA | None) -> float:
    """The tiny family's own rates (:data:`WEIGHTLESS_LR`); 1e-5 with LoRA, 1e-6 full fine-tuning of a real
    policy."""
    if spec.name in WEIGHTLESS_POLICIES:
        return WEIGHTLESS_LR.get(spec.name, 3e-3)
    return 1e-5 if lora is not None else 1e-6


@dataclass
class Precision:
    """The run's device policy. Full fine-tuning on a GPU keeps float32 master weights and runs under bf16
    autocast: AdamW steps of lr ~1e-6 on bf16 weights (8 mantissa bits) round away. LoRA keeps a bf16 base
    (peft holds the adapters in float32). FLOPs are the same either way."""

    policy: DevicePolicy
    mixed: bool  # float32 weights under bf16 autocast

    @staticmethod
    def of(config: TrainConfig) -> Precision:
        device = DevicePolicy.of(config.device)
        return Precision(device, device.on_gpu and config.recipe.lora is None)

    @property
    def device(self) -> torch.device:
        return self.policy.device

    @property
    def policy_dtype(self) -> torch.dtype:
        return torch.float32 if self.mixed else self.policy.dtype

    def conventions(self, attention: str, experts: str) -> Conventions:
        """The run's counting conventions: the recipe's attention convention and experts implementation (the
        policy is built with it), the device's attention kernel, and ``window="masked"``: eager attention (CPU)
        and SDPA with a mask (GPU) both compute the full score matrix of a sliding-window layer."""
        return Conventions(attention, self.policy.attention, experts, "masked")

    def describe(self) -> str:
        return "float32 weights, bfloat16 autocast" if self.mixed else self.policy.dtype_name


@dataclass
class Policy:
    spec: ArchSpec
    codec: Codec
    vocab: int  # ids the codec can produce (a reward model that reads them must embed as many)
    model: Any
    reference: nn.Module | None  # a frozen copy under full fine-tuning with beta > 0 (LoRA: the adapter disabled)
    random_init: bool
    optimizer: torch.optim.Optimizer
    lr: float


def load_policy(config: TrainConfig, precision: Precision) -> Policy:
    """The policy with its adapters, checkpointing, reference and optimizer, on the run's device."""
    r = config.recipe
    device, attn = precision.device, precision.policy.attention
    if config.model_path:
        from transformers import AutoModelForCausalLM

        path = Path(config.model_path)
        if not (path / "config.json").exists():
            raise UserError(f"--model-path {str(path)!r} has no config.json")
        spec = load_config(path)
        codec, vocab = local_codec(path, f"--model-path {str(path)!r}", spec.vocab_size)
        try:
            experts = {"experts_implementation": r.experts} if spec.moe is not None else {}
            loaded: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                               dtype=precision.policy_dtype, attn_implementation=attn,
                                                               **experts)
        except (OSError, ValueError) as exc:  # no weights, unreadable files
            raise UserError(f"cannot load the model in {str(path)!r}: {first_line(exc)}") from None
        model: Any = loaded.to(device)
        random_init = False
    else:
        spec = resolve(r.policy)
        tokenizer = CharTokenizer()
        if tokenizer.vocab_size > spec.vocab_size:
            raise UserError(f"{spec.name}'s vocabulary is smaller than the built-in tokenizer")
        codec, vocab = char_codec(tokenizer), tokenizer.vocab_size
        model = build_model(spec, device=device, dtype=precision.policy_dtype, attn_implementation=attn,
                            seed=config.seed, experts_implementation=r.experts)
        random_init = True
    model.config.pad_token_id = codec.pad_id
    model.generation_config.pad_token_id = codec.pad_id
    model.generation_config.eos_token_id = codec.eos_id
    reference = None
    if r.beta > 0 and r.lora is None:
        reference = copy.deepcopy(model).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
    if r.grad_ckpt:
        enable_checkpointing(model, reentrant=False)
    if r.lora is not None:
        model = add_lora(model, r.lora, alpha=config.lora_alpha)
    trainable = [p for p in model.parameters() if p.requires_grad]
    lr = config.lr if config.lr is not None else default_lr(spec, r.lora)
    optimizer = torch.optim.AdamW(trainable, lr=lr, weight_decay=config.weight_decay)
    return Policy(spec, codec, vocab, model, reference, random_init, optimizer, lr)


def load_reward_model(config: TrainConfig, precision: Precision, policy: Policy) -> RewardModel | None:
    """The reward model, scoring in batches of the recipe's micro-batch (G unless set: a group per forward)."""
    r = config.recipe
    if r.reward.kind == "rule":
        return None
    return RewardModel.load(r.reward, precision.device, precision.policy.dtype, precision.policy.attention,
                            config.seed + 1, policy.codec, policy.vocab, config.reward_model_path,
                            config.prm_aggregate, r.prm_steps, batch=r.micro_batch_size,
                            output=config.reward_output)


@dataclass
class Data:
    train: list[Problem]
    targets: dict[str, list[Problem]]  # evaluation target -> its fixed problems (flopplan.train.targets), in order
    chance: float | None  # accuracy of a uniform guess (the built-in task), None for a dataset

    @property
    def evaluation(self) -> list[Problem]:
        """The first target's problems (``heldout`` unless the run chose otherwise)."""
        return next(iter(self.targets.values()), [])

    def digests(self) -> dict[str, str]:
        """A SHA-256 of each part's rows as the data holds them (the prompt's text or conversation, not as a chat
        template renders it, which may print the date; the answer; the columns), in order: ``train`` and each
        evaluation target. A checkpoint keeps them, so that a resume on data that changed since (an edited,
        reordered or replaced dataset) is refused: the checkpoint's data position counts rows of the data it was
        trained on."""
        def digest(problems: list[Problem]) -> str:
            h = hashlib.sha256()
            for p in problems:
                row = [p.prompt if p.messages is None else p.messages, p.answer,
                       None if p.columns is None else dict(p.columns)]
                h.update(json.dumps(row, sort_keys=True, default=repr).encode() + b"\n")
            return h.hexdigest()

        return {"train": digest(self.train), **{f"evaluation target {name}": digest(problems)
                                                 for name, problems in self.targets.items()}}


def load_data(config: TrainConfig, codec: Codec) -> Data:
    """The training problems and every evaluation target's; every prompt must tokenize to at least one token."""
    r = config.recipe
    render = codec.renderer(read_template(config.chat_template))

    def load(path: str) -> list[Problem]:
        return load_problems(path, render, config.system_prompt)

    if config.dataset:
        train = load(config.dataset)
        chance = None
    else:
        task = parse_task(config.builtin_task)
        train = task_split(config.builtin_task, config.train_size, r.eval_prompts)[0]
        chance = task.chance
    targets: dict[str, list[Problem]] = {}
    if r.eval_prompts:
        targets = target_problems(config.eval_targets, r.eval_prompts, task=config.task,
                                  train_size=config.train_size, dataset=config.dataset,
                                  eval_dataset=config.eval_dataset, load=load)
    longest = {"train": 0, "evaluation": 0}
    parts = [("train", train)] + [("evaluation", problems) for problems in targets.values()]
    for part, problems in parts:
        for problem in problems:
            try:
                ids = codec.prompt_ids(problem)
            except ValueError as exc:
                raise UserError(f"prompt {problem.prompt[:40]!r} cannot be tokenized: {exc}") from None
            if not ids:
                raise UserError(f"prompt {problem.prompt[:40]!r} encodes to no tokens: generation needs at least "
                                "one")
            longest[part] = max(longest[part], len(ids))
    check_lengths(config, longest["train"], longest["evaluation"])
    return Data(train, targets, chance)


ATTENTION_COPIES = 3
"""Eager attention keeps the scores, the probabilities and (in backward) their gradient: three tensors of
``rows x heads x seq x seq`` at a time."""


def check_lengths(config: TrainConfig, prompt: int, eval_prompt: int) -> None:
    """Refuse, before any batch is built, sequences the policy cannot take (beyond its context) and calls whose
    eager attention scores alone would not fit the free memory (a rough bound: the largest generate call's
    prefill and the largest scoring/update micro-batch; checkpointing keeps one layer's)."""
    from flopplan.measure.models import available_memory

    r = config.recipe
    spec = r.policy_spec
    completion, eval_completion = r.completion_len.max, r.evaluation_completion_len.max
    context = spec.max_position_embeddings
    for what, p, k in (("a training prompt", prompt, completion), ("an evaluation prompt", eval_prompt,
                                                                   eval_completion)):
        if context and p and p + k > context:
            raise UserError(f"{what} of {p:,} tokens and {k:,} completion tokens exceed {spec.name}'s {context:,}-"
                            "token context (max_position_embeddings): shorten the prompts or the completion")
    policy = DevicePolicy.of(config.device)
    if policy.attention != "eager":  # SDPA/flash kernels never hold the score matrix
        return
    seq = prompt + completion
    layers = 1 if r.grad_ckpt else spec.num_layers
    element = 4  # float32 on the CPU
    need = ATTENTION_COPIES * element * spec.num_heads * max(r.generation_batch_size * prompt ** 2,
                                                             r.micro_batch_size * layers * seq ** 2)
    free = available_memory(policy.device)
    if free is not None and need > 0.8 * free:
        raise UserError(f"sequences of {seq:,} tokens need about {need / 2**30:.1f} GiB for eager attention scores "
                        f"alone, more than the {free / 2**30:.1f} GiB free: shorten the prompts, or lower "
                        "--generation-batch / --micro-batch")
