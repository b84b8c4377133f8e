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

import functools
import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from flopplan.engines.trl import (
    EXTRA_KEYS,
    LOSS_TYPES,
    TRLRun,
    evaluation_kwargs,
    grpo_config_kwargs,
    trl_run,
    without_evaluation,
)
from flopplan.engines.trl_hook import meter as attach_meter
from flopplan.engines.trl_trainer import ATTENTION_KERNELS
from flopplan.errors import UserError
from flopplan.grpo.codecs import hf_char_tokenizer, local_tokenizer
from flopplan.grpo.data import read_template, trl_rows
from flopplan.grpo.loss import check_trl_rewards
from flopplan.grpo.reward_funcs import RewardFailed, RewardFuncs
from flopplan.grpo.tasks import parse_task
from flopplan.hardware import DATASHEETS
from flopplan.measure.device import DevicePolicy, hardware_name
from flopplan.measure.models import build_model
from flopplan.moe import fused_expert_patterns_quiet
from flopplan.projections import lora_modules
from flopplan.runfile import PlanReference, RunSummary, last_complete_checkpoint
from flopplan.train.config import TrainConfig
from flopplan.train.runfolder import RunFolder
from flopplan.train.targets import check_eval_set, task_split


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
    """The policy's path, its tokenizer, and the reward functions (:func:`_rewards`)."""
    if config.model_path:
        tokenizer = _local_tokenizer(config.model_path, "--model-path")
        path = Path(config.model_path)
    else:
        tokenizer, path = hf_char_tokenizer(), work / "policy"
        if not (path / "config.json").exists():
            model: Any = build_model(config.recipe.policy_spec, device="cpu", dtype=torch.float32,
                                     attn_implementation=policy.attention, seed=config.seed)
            for cfg in (model.config, model.generation_config):  # the tokenizer's special tokens: TRL checks them
                cfg.pad_token_id, cfg.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
                cfg.bos_token_id = tokenizer.bos_token_id
            model.save_pretrained(path)
            tokenizer.save_pretrained(path)
    if config.chat_template:
        tokenizer.chat_template = read_template(config.chat_template)
    return str(path), tokenizer, _rewards(config, work, policy, tokenizer)


def _rewards(config: TrainConfig, work: Path, policy: DevicePolicy, tokenizer: Any) -> list[Any]:
    """The reward functions: the rules; or a reward model's path (its own folder, or a random-initialised one saved
    with the policy's tokenizer) followed by the rules at weight 0 (:func:`reward_weights`), which TRL logs as they
    score (the run's accuracy, as the built-in trainer reports it), adding nothing to the reward."""
    r = config.recipe
    rules = _rule_funcs(config).guarded()  # (a failure is one line: run_trl)
    if r.reward.kind == "prm":
        raise UserError("--engine trl: TRL's GRPOTrainer takes outcome reward models, not a PRM")
    if r.reward.kind != "orm":
        return rules
    reward_path = Path(config.reward_model_path) if config.reward_model_path else work / "reward"
    if not (reward_path / "config.json").exists():
        spec = r.reward_spec
        assert spec is not None
        if len(tokenizer) > spec.vocab_size:
            raise UserError(f"the reward model {spec.name} has {spec.vocab_size:,} embeddings but reads the policy's "
                            f"{len(tokenizer):,} tokens: use a model with a larger vocabulary")
        model: Any = build_model(spec, device="cpu", dtype=torch.float32, attn_implementation=policy.attention,
                                 seed=config.seed + 1)  # a random-initialised sequence classifier
        model.config.pad_token_id = tokenizer.pad_token_id
        model.save_pretrained(reward_path)
        tokenizer.save_pretrained(reward_path)
    return [str(reward_path), *rules]


def _reward_model(path: str, args: Any, experts: str | None) -> Any:
    """The reward model loaded as TRL loads one (a one-label sequence classifier with the config's
    ``model_init_kwargs``), with the experts implementation ``experts`` where it has mixture-of-experts layers (else
    None): those kwargs are the policy's, which carry ``experts_implementation`` for an MoE policy only, so a dense
    policy's MoE reward model ran transformers' default whatever ``--experts`` said, and a dense reward model beside
    an MoE policy was refused by transformers (a traceback: it does not support setting experts implementation)."""
    from transformers import AutoModelForSequenceClassification

    kwargs = {"trust_remote_code": args.trust_remote_code, **(args.model_init_kwargs or {})}
    kwargs.pop("experts_implementation", None)
    return AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=1, **kwargs, **({"experts_implementation": experts} if experts is not None else {}))


def _reward_output(module: Any, output: str) -> None:
    """TRL's reward is the reward model's first logit; the run's ``--reward-output`` turns it into the reward as the
    built-in trainer does (:func:`flopplan.grpo.rewards.orm_output`: a binary classifier's probability under
    ``auto``). An elementwise map of the logits: no FLOPs are counted for it on either engine."""
    import functools

    from flopplan.grpo.rewards import orm_output, orm_reward

    resolved = orm_output(output, module)
    if resolved == "score":
        return
    forward = module.forward

    @functools.wraps(forward)
    def rewarded(*args: Any, **kwargs: Any) -> Any:
        out = forward(*args, **kwargs)
        out.logits = orm_reward(out.logits, resolved)
        return out

    module.forward = rewarded


def reward_weights(config: TrainConfig) -> list[float] | None:
    """TRL's ``reward_weights`` for :func:`_rewards`: the rules' own, or 1 for the reward model and 0 for each rule."""
    if config.recipe.reward.kind == "orm":
        return [1.0] + [0.0] * len(config.reward_funcs)
    return list(config.reward_weights) if config.reward_weights else None


def accuracy_metric(config: TrainConfig) -> str | None:
    """The metric TRL logs that is the run's accuracy, as the built-in trainer reports it
    (:meth:`flopplan.grpo.reward_funcs.RewardFuncs.score_problems`): the math verdict's mean where ``math`` is among
    the rules, else the exact match's; None where neither is (the built-in trainer's own check has no TRL metric)."""
    funcs = _rule_funcs(config)
    for name in ("math", "exact"):
        if name in funcs.specs:
            return f"rewards/{funcs.funcs[funcs.specs.index(name)].__name__}/mean"
    return None


def _local_tokenizer(path: str, option: str) -> Any:
    """The tokenizer of a local model folder, as saved, refused in one line where it cannot feed the model."""
    from flopplan.arch import load_config

    return local_tokenizer(path, f"{option} {path!r}", load_config(Path(path)).vocab_size)


def _rule_funcs(config: TrainConfig) -> RewardFuncs:
    return RewardFuncs.load(config.reward_funcs, config.reward_weights)


def _datasets(config: TrainConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The training rows and, when evaluating, the held-out rows: the ``eval_prompts`` first of ``--eval-dataset``,
    or the built-in task's held-out problems (the built-in trainer's split)."""
    held = config.recipe.eval_prompts if config.recipe.eval_every is not None else 0
    if config.dataset:
        rows = trl_rows(config.dataset, config.system_prompt)
        heldout = trl_rows(config.eval_dataset, config.system_prompt) if config.eval_dataset and held else []
        check_eval_set(held, len(heldout), given=bool(config.eval_dataset))
        return rows, heldout[:held] if held else None
    if held:
        train, test = task_split(config.builtin_task, config.train_size, held)
    else:
        train, test = parse_task(config.builtin_task).split(config.train_size, 0, seed=config.seed)[0], []
    train_rows: list[dict[str, Any]] = [{"prompt": p.prompt, "answer": p.answer} for p in train]
    return train_rows, [{"prompt": p.prompt, "answer": p.answer} for p in test] if held else None


def grpo_config(config: TrainConfig, run: TRLRun, work: Path, policy: DevicePolicy) -> Any:
    from trl import GRPOConfig

    r = config.recipe
    kwargs = grpo_config_kwargs(without_evaluation(r), world_size=run.world, steps=config.max_steps)
    kwargs.update(evaluation_kwargs(r, run))  # TRL's evaluation loop, metered into the evaluation bucket
    for key in EXTRA_KEYS:
        kwargs.pop(key, None)
    rounds_per_checkpoint = config.checkpoint_every or 10
    return GRPOConfig(
        output_dir=str(work), use_cpu=not policy.on_gpu, bf16=policy.on_gpu, report_to=config.report_to,
        logging_steps=1,
        save_strategy="steps", save_steps=rounds_per_checkpoint * run.optimizer_steps_per_round,
        save_total_limit=config.keep_checkpoints, seed=config.seed, learning_rate=config.lr or 1e-5,
        temperature=config.temperature, epsilon=config.loss.clip_low, epsilon_high=config.loss.upper_clip,
        scale_rewards=config.loss.scale_rewards, loss_type=LOSS_TYPES[config.loss.aggregation],
        max_grad_norm=config.max_grad_norm, weight_decay=config.weight_decay, disable_tqdm=True,
        reward_weights=reward_weights(config),
        model_init_kwargs={"attn_implementation": policy.attention, "dtype": policy.dtype,
                           **({"experts_implementation": r.experts} if r.policy_spec.moe is not None else {})},
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


def run_trl(config: TrainConfig, resume: bool = False,
            on_resumed: Callable[[], None] | None = None) -> tuple[RunSummary, list[str]]:
    """Train ``config`` on TRL's GRPOTrainer with the FLOP meter; the run folder is flopplan's. A new run that is
    refused before training starts (what the meter cannot price, a budget that buys no round) leaves nothing:
    what this invocation created in the folder is removed. ``on_resumed``: called on the main process once a
    resumed run's checkpoint accepted its limits (flopplan train records them in the run's config)."""
    folder = RunFolder(config.out_dir)
    rank0 = int(os.environ.get("RANK", "0")) == 0
    fresh = rank0 and not resume
    if fresh:
        folder.check_new()
    before = set(folder.path.iterdir()) if fresh and folder.path.is_dir() else None
    if rank0:
        folder.lock()  # (refused while another process holds it: nothing of ours to remove)
    try:
        if fresh:
            folder.check_new()  # again, under the lock
        trainer, meter, checkpoint = _build(config, folder, resume)
        meter.on_resumed = on_resumed
        if fresh:
            folder.begin(config)  # the run can start: its logs and configuration
    except BaseException:
        if fresh:
            _remove_created(folder, before)
        raise
    meter.raise_on_ctrl_c = False  # a Ctrl-C's stop is reported by the caller (flopplan train), as the built-in's
    meter.says_budget_stop = False  # (and a budget's, in its summary)
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    except RewardFailed as exc:  # inside a round: what ran since the last checkpoint is lost, charged on resume
        raise UserError(f"{exc}: the run stopped in round {meter.rounds + 1}, and what it ran since its last "
                        f"checkpoint is {'charged' if config.charge_lost else 'recorded, not charged,'} as lost when "
                        "it resumes; fix the function and continue with flopplan "
                        f"train --out {shlex.quote(config.out_dir)} --resume") from None
    finally:
        if rank0:
            folder.unlock()
    return meter.summary(**meter.summary_fields), meter.notes


def _remove_created(folder: RunFolder, before: set[Path] | None) -> None:
    """Undo a refused start: the folder if this invocation made it, else the entries it added (check_new allowed
    only an empty folder or a run's files that never reached a checkpoint, which stay as they were)."""
    import shutil

    folder.unlock()
    for path in [folder.path] if before is None else sorted(set(folder.path.iterdir()) - before):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _refuse_overflow(trainer: Any) -> None:
    """A round whose rewards overflow float32 where TRL normalises them stops as a failing function does
    (:func:`check_trl_rewards`), before their NaN advantages reach the policy."""
    calculate = trainer._calculate_rewards

    @functools.wraps(calculate)
    def checked(*args: Any, **kwargs: Any) -> Any:
        rewards = calculate(*args, **kwargs)
        check_trl_rewards(rewards, trainer.reward_weights,
                          trainer.num_generations if trainer.model.training else trainer.num_generations_eval,
                          trainer.scale_rewards, trainer.multi_objective_aggregation)
        return rewards

    trainer._calculate_rewards = checked


def _build(config: TrainConfig, folder: RunFolder, resume: bool) -> tuple[Any, Any, str | None]:
    """The GRPOTrainer of ``config`` with the meter attached (which refuses what it cannot price), and the
    checkpoint to resume from."""
    from peft import LoraConfig

    r = config.recipe
    work = folder.path / "trl"
    policy = DevicePolicy.of(config.device)
    kwargs = grpo_config_kwargs(without_evaluation(r), world_size=world_size(), steps=config.max_steps)
    run = trl_run({k: v for k, v in kwargs.items() if k not in EXTRA_KEYS}, world_size())
    train_rows, eval_rows = _datasets(config)
    args = grpo_config(config, run, work, policy)  # sets up the processes (accelerate's state; a resumed run's
    # eval_on_start is turned off by the meter, whose checkpoint holds that baseline)
    from accelerate import PartialState

    state = PartialState()
    if state.is_main_process:  # one process writes the models; the others wait for them
        _save_models(config, work, policy)
    state.wait_for_everyone()
    model_path, tokenizer, rewards = _save_models(config, work, policy)
    # a local model is charged as its own config.json describes it
    meter_recipe = r.with_(policy=str(Path(config.model_path) / "config.json")) if config.model_path else r
    peft = None
    if r.lora is not None:  # peft's module names (Phi-3: the fused ones)
        peft = LoraConfig(r=r.lora.rank, lora_alpha=config.lora_alpha or 2 * r.lora.rank, lora_dropout=0.0,
                          target_modules=list(lora_modules(meter_recipe.policy_spec.family, r.lora.targets)),
                          bias="none")
    # a reward model reads with the tokenizer saved beside it, as saved (local_tokenizer: transformers 5 can rebuild
    # it as another kind); the built-in one with the policy's object (a folder an older flopplan wrote holds a
    # tokenizer transformers rebuilds)
    reward_tokenizers = [None if not isinstance(f, str) else _local_tokenizer(f, "--reward-model-path")
                         if config.reward_model_path else tokenizer for f in rewards]
    if r.reward_spec is not None:
        rewards[0] = _reward_model(rewards[0], args, r.experts if r.reward_spec.moe is not None else None)
    from datasets import Dataset
    from trl import GRPOTrainer

    with fused_expert_patterns_quiet(meter_recipe.policy_spec.family, r.lora.targets if r.lora else ()):
        trainer = GRPOTrainer(model=model_path, reward_funcs=rewards, args=args,
                              train_dataset=Dataset.from_list(train_rows),
                              eval_dataset=None if eval_rows is None else Dataset.from_list(eval_rows),
                              processing_class=tokenizer, peft_config=peft,
                              reward_processing_classes=reward_tokenizers)
    if r.reward.kind == "orm":
        _reward_output(trainer.reward_funcs[0], config.reward_output)
    # the one meter: the recipe read from the trainer must be the one asked for
    meter = attach_meter(trainer, budget=config.budget_flops, out=folder.path, config=config, resume=resume,
                         recipe=meter_recipe.with_(attention_kernel=ATTENTION_KERNELS[policy.attention]),
                         measure=config.measure_flops, peak_flops=_datasheet_peak(policy.device),
                         lost_outside_budget=not config.charge_lost)
    meter.accuracy_metric = accuracy_metric(config)
    _refuse_overflow(trainer)
    meter.names = (meter_recipe.policy_spec.name, str(r.reward))  # (the meter reads the models from TRL's folders)
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for quiet in (PrinterCallback, ProgressCallback):  # flopplan prints its own summary
        trainer.remove_callback(quiet)
    # none complete (killed before its first): the run starts again, the meter charging what its logs record as lost,
    # as the built-in trainer's resume does
    last = last_complete_checkpoint(work) if resume else None
    checkpoint = None if last is None else str(last)
    plan = config.plan
    meter.summary_fields.update(
        chance=None if config.dataset else parse_task(config.builtin_task).chance,
        random_init_policy=not config.model_path,
        random_init_reward_model=r.reward.kind == "orm" and not config.reward_model_path,
        device=str(policy.device), hardware=hardware_name(policy.device), dtype=policy.dtype_name, final=None,
        plan=None if plan is None else PlanReference.of(plan))
    return trainer, meter, checkpoint
