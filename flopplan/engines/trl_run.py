"""``flopplan train --engine trl``: the validating run on TRL's GRPOTrainer, metered into the same run folder (ledger,
step log, summary) as the built-in trainer, so ``flopplan report`` reads either.

The policy is a local model folder or a random-initialised registry architecture (saved to ``RUN/trl/policy`` with
the built-in character tokenizer, since TRL loads its full-fine-tuning reference from a path); an ORM reward is a
random-initialised sequence classifier saved beside it. The data is the built-in task or a dataset
(flopplan.grpo.data: TRL applies the chat template); the rule rewards are the run's reward functions
(flopplan.grpo.reward_funcs) with their weights. TRL's checkpoints (``RUN/trl/checkpoint-N``, at round boundaries)
carry the ledger.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from flopplan.engines.trl import LOSS_TYPES, TRLRun, grpo_config_kwargs, trl_run
from flopplan.engines.trl_hook import meter as attach_meter
from flopplan.engines.trl_trainer import ATTENTION_KERNELS
from flopplan.errors import UserError
from flopplan.grpo.codecs import hf_char_tokenizer
from flopplan.grpo.data import read_template, trl_rows
from flopplan.grpo.reward_funcs import RewardFuncs
from flopplan.grpo.tasks import parse_task
from flopplan.hardware import DATASHEETS
from flopplan.measure.device import DevicePolicy
from flopplan.measure.models import build_model
from flopplan.runfile import PlanReference, RunSummary
from flopplan.train.config import TrainConfig
from flopplan.train.runfolder import RunFolder


def _datasheet_peak(device: torch.device) -> float | None:
    """The dense bf16 peak of a known GPU (for the MFU TRL's logs get); None on a CPU."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device).lower().replace(" ", "")
    for key, sheet in DATASHEETS.items():
        if key.replace("-", "") in name:
            return sheet.peak_flops
    return None


def _save_models(config: TrainConfig, work: Path, policy: DevicePolicy) -> tuple[str, Any, list[Any]]:
    """The policy's path, its tokenizer, and the reward functions (a rule, or a reward model's path)."""
    r = config.recipe
    if config.model_path:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(config.model_path, local_files_only=True)
        if config.chat_template:
            tokenizer.chat_template = read_template(config.chat_template)
        return config.model_path, tokenizer, (
            [config.reward_model_path] if config.reward_model_path else list(_rule_funcs(config).funcs))
    tokenizer = hf_char_tokenizer()
    if config.chat_template:
        tokenizer.chat_template = read_template(config.chat_template)
    path = work / "policy"
    if not (path / "config.json").exists():
        model: Any = build_model(r.policy_spec, device="cpu", dtype=torch.float32,
                                 attn_implementation=policy.attention, seed=config.seed)
        for cfg in (model.config, model.generation_config):  # the tokenizer's special tokens: TRL checks them
            cfg.pad_token_id, cfg.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
            cfg.bos_token_id = tokenizer.bos_token_id
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    rewards: list[Any] = list(_rule_funcs(config).funcs)
    if r.reward.kind == "orm":
        reward_path = work / "reward"
        if not (reward_path / "config.json").exists():
            spec = r.reward_spec
            assert spec is not None
            model = build_model(spec, device="cpu", dtype=torch.float32, attn_implementation=policy.attention,
                                seed=config.seed + 1)  # a random-initialised sequence classifier
            model.config.pad_token_id = tokenizer.pad_token_id
            model.save_pretrained(reward_path)
            tokenizer.save_pretrained(reward_path)
        rewards = [str(config.reward_model_path or reward_path)]
    elif r.reward.kind == "prm":
        raise UserError("--engine trl: TRL's GRPOTrainer takes outcome reward models, not a PRM")
    return str(path), tokenizer, rewards


def _rule_funcs(config: TrainConfig) -> RewardFuncs:
    return RewardFuncs.load(config.reward_funcs, config.reward_weights)


def _dataset(config: TrainConfig) -> Any:
    from datasets import Dataset

    if config.dataset:
        return Dataset.from_list(trl_rows(config.dataset, config.system_prompt))
    problems = parse_task(config.task).split(config.train_size, 0, seed=config.seed)[0]
    return Dataset.from_list([{"prompt": p.prompt, "answer": p.answer} for p in problems])


def grpo_config(config: TrainConfig, run: TRLRun, work: Path, policy: DevicePolicy) -> Any:
    from trl import GRPOConfig

    r = config.recipe
    kwargs = grpo_config_kwargs(r, world_size=run.world, steps=config.max_steps)
    kwargs.pop("peft", None)
    kwargs.pop("reward_funcs", None)
    rounds_per_checkpoint = config.checkpoint_every or 10
    return GRPOConfig(
        output_dir=str(work), use_cpu=not policy.on_gpu, bf16=policy.on_gpu, report_to=config.report_to,
        logging_steps=1,
        save_strategy="steps", save_steps=rounds_per_checkpoint * run.optimizer_steps_per_round,
        save_total_limit=config.keep_checkpoints, seed=config.seed, learning_rate=config.lr or 1e-5,
        temperature=config.temperature, epsilon=config.loss.clip_low, epsilon_high=config.loss.upper_clip,
        scale_rewards=config.loss.scale_rewards, loss_type=LOSS_TYPES[config.loss.aggregation],
        max_grad_norm=config.max_grad_norm, weight_decay=config.weight_decay, disable_tqdm=True,
        reward_weights=list(config.reward_weights) if config.reward_weights and config.recipe.reward.kind == "rule"
        else None,
        model_init_kwargs={"attn_implementation": policy.attention, "dtype": policy.dtype},
        generation_kwargs=_fixed_lengths(r.completion_len.max, r.policy_spec.vocab_size) if config.fixed_completion
        else None,
        **{"max_steps": 10**9, **kwargs})  # without --steps the budget guard ends the run


def _fixed_lengths(tokens: int, vocab: int) -> dict[str, Any]:
    """Every completion ``tokens`` long: EOS held back until then, and nothing sampled that decoding would drop (a
    special token, or an id past the character vocabulary in a head padded to ``vocab`` rows), since the reward
    model re-reads the decoded text."""
    from flopplan.grpo.tokenizer import SPECIALS, CharTokenizer

    dropped = [i for i, t in enumerate(SPECIALS) if t != "<eos>"] + list(range(CharTokenizer().vocab_size, vocab))
    return {"min_new_tokens": tokens, "suppress_tokens": dropped}


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def run_trl(config: TrainConfig, resume: bool = False) -> tuple[RunSummary, list[str]]:
    """Train ``config`` on TRL's GRPOTrainer with the FLOP meter; the run folder is flopplan's."""
    from peft import LoraConfig

    r = config.recipe
    folder = RunFolder(config.out_dir)
    rank0 = int(os.environ.get("RANK", "0")) == 0
    if rank0:
        if not resume:
            folder.check_new()
        folder.lock()
        if not resume:
            folder.create(config)
    work = folder.path / "trl"
    policy = DevicePolicy.of(config.device)
    kwargs = grpo_config_kwargs(r, world_size=world_size(), steps=config.max_steps)
    run = trl_run({k: v for k, v in kwargs.items() if k not in ("peft", "reward_funcs")}, world_size())
    args = grpo_config(config, run, work, policy)  # sets up the processes (accelerate's state)
    from accelerate import PartialState

    state = PartialState()
    if state.is_main_process:  # one process writes the models; the others wait for them
        _save_models(config, work, policy)
    state.wait_for_everyone()
    model_path, tokenizer, rewards = _save_models(config, work, policy)
    # a local model is charged as its own config.json describes it
    meter_recipe = r.with_(policy=str(Path(config.model_path) / "config.json")) if config.model_path else r
    peft = None
    if r.lora is not None:
        peft = LoraConfig(r=r.lora.rank, lora_alpha=config.lora_alpha or 2 * r.lora.rank,
                          target_modules=list(r.lora.targets), lora_dropout=0.0, bias="none")
    # the reward model reads with the policy's tokenizer object: loaded back from its folder, transformers would
    # give a Qwen2 tokenizer (the folder's model type), not the character one it was saved with
    reward_tokenizers = [tokenizer if isinstance(f, str) and not config.reward_model_path else None for f in rewards]
    from trl import GRPOTrainer

    trainer = GRPOTrainer(model=model_path, reward_funcs=rewards, args=args, train_dataset=_dataset(config),
                          processing_class=tokenizer, peft_config=peft, reward_processing_classes=reward_tokenizers)
    # the one meter: the recipe read from the trainer must be the one asked for
    meter = attach_meter(trainer, budget=config.budget_flops, out=folder.path, config=config, resume=resume,
                         recipe=meter_recipe.with_(attention_kernel=ATTENTION_KERNELS[policy.attention]),
                         measure=config.measure_flops, peak_flops=_datasheet_peak(policy.device),
                         lost_outside_budget=not config.charge_lost)
    meter.accuracy_metric = "reward"  # the exact-match rule: its mean is accuracy
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for quiet in (PrinterCallback, ProgressCallback):  # flopplan prints its own summary
        trainer.remove_callback(quiet)
    checkpoint = None
    if resume:
        checkpoints = sorted(work.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        if not checkpoints:
            raise UserError(f"nothing to resume in {str(folder.path)!r}: no TRL checkpoint")
        checkpoint = str(checkpoints[-1])
    plan = config.plan
    meter.summary_fields.update(
        chance=None if config.dataset else parse_task(config.task).chance, random_init_policy=not config.model_path,
        random_init_reward_model=r.reward.kind == "orm" and not config.reward_model_path,
        device=str(policy.device), dtype=policy.dtype_name, final=None,
        plan=None if plan is None else PlanReference.of(plan))
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    finally:
        if rank0:
            folder.unlock()
    return meter.summary(**meter.summary_fields), meter.notes
