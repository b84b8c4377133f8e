"""TRL's GRPOTrainer as flopplan sees it (torch-free; torch only to read a saved ``training_args.bin``): a
GRPOConfig, by TRL's field names, <-> a Recipe.

The arithmetic of a TRL run (trl 1.16 ``grpo_config.py`` ``__post_init__``, ``grpo_trainer.py``
``_prepare_inputs``): every process takes ``per_device_train_batch_size`` (bs) completions per micro-step; a
*generation round* (a flopplan step) is ``steps_per_generation`` (spg) micro-steps' worth of rollouts, generated
at once on each of ``world_size`` processes (bs x spg rows per process, left-padded there) and reused
``num_iterations`` (mu) times; an optimizer step is ``gradient_accumulation_steps`` (ga) micro-steps. So a round
has ``bs x world x spg`` rollouts of ``num_generations`` per prompt and ``mu x spg / ga`` optimizer steps, and a run
of ``max_steps`` optimizer steps is ``ceil(max_steps x ga / (spg x mu))`` rounds. TRL computes old log-probs iff
``ga % (spg x mu) != 0`` or vLLM's importance-sampling correction is on (``grpo_trainer.py:2642``).

flopplan expresses rounds whose optimizer steps each lie within one pass (``ga`` divides ``spg``); an optimizer
step that takes micro-steps of two rounds (``ga`` does not divide ``spg x mu``), or of several passes of one round
(``ga`` divides ``spg x mu`` but not ``spg``), is refused, naming the fields. The log-prob head follows the TRL
version and the device (:func:`logprob_head_for`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopplan.arch import resolve, split_targets
from flopplan.engines.trl_checkpointing import check_checkpointing, resolve_checkpointing
from flopplan.engines.trl_fields import TRL_FIELDS, check_fields, check_text_keys, field_notes, flag
from flopplan.engines.trl_generation import check_generation
from flopplan.errors import UserError, is_int, is_number
from flopplan.lengths import Length
from flopplan.moe import all_linear_targets
from flopplan.passes import old_logprobs_run
from flopplan.projections import FUSED_PROJECTIONS, LORA_TARGETS, lora_modules
from flopplan.recipe import Recipe, RewardSystem, refuse_group_of_one

TESTED_TRL = ">=1.16,<1.17"
"""The TRL releases the meter and the exactness tests are run against (the ``[trl]`` extra pins them)."""

GRPO_DEFAULTS: dict[str, Any] = {
    "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "steps_per_generation": None,
    "generation_batch_size": None, "num_generations": 8, "num_iterations": 1, "beta": 0.0,
    "max_completion_length": 512, "gradient_checkpointing": True, "use_vllm": False, "vllm_mode": "colocate",
    "vllm_importance_sampling_correction": True, "max_steps": -1, "use_liger_kernel": False,
    "pad_to_multiple_of": "auto", "gradient_checkpointing_kwargs": None, "eval_strategy": "no",
    "temperature": 1.0, "epsilon": 0.2, "epsilon_high": None, "scale_rewards": "group", "loss_type": "dapo",
    "generation_kwargs": None, "cache_implementation": None, "num_train_epochs": 3.0,
}
"""GRPOConfig's defaults for the fields flopplan reads (trl 1.16.0; a test compares them with the installed TRL)."""

NO_FLOPS = frozenset({
    "output_dir", "learning_rate", "lr_scheduler_type", "warmup_steps", "weight_decay", "seed",
    "logging_steps", "logging_strategy", "save_steps", "save_strategy", "save_total_limit", "report_to", "run_name",
    "bf16", "fp16", "use_cpu", "optim", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "top_p",
    "top_k", "min_p", "repetition_penalty", "log_completions", "num_completions_to_print", "shuffle_dataset",
    "dataloader_num_workers", "push_to_hub", "hub_model_id", "model_init_kwargs", "ds3_gather_for_generation",
    "cast_lm_head_to_fp32", "disable_dropout", "sync_ref_model", "ref_model_sync_steps", "ref_model_mixup_alpha",
    "top_entropy_quantile", "importance_sampling_level", "delta", "reward_weights", "remove_unused_columns",
    "temperature", "epsilon", "epsilon_high", "scale_rewards", "loss_type", "mask_truncated_completions",
    "vllm_importance_sampling_clip_min", "vllm_importance_sampling_clip_max", "vllm_server_host",
    "vllm_server_port", "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size",
    "vllm_importance_sampling_cap",  # (TRL's deprecated alias of vllm_importance_sampling_clip_max)
})
"""Fields that change what is learned or logged, not what a round computes: read past (and the others of
:data:`flopplan.engines.trl_fields.READ_PAST`). mask_truncated_completions is the exception a price cannot follow: it
drops the truncated completions' rows from the update's log-prob head (the CPU's fused head and the GPU's
fused-compact one), and how many truncate is the run's to know; this prices none dropped, the meter charges what
runs."""
LOSS_TYPES = {"token": "dapo", "sequence": "grpo"}
"""flopplan's loss aggregation (TrainLoss.aggregation) and the TRL loss_type that averages the same way."""
PRICED = frozenset({k for k in GRPO_DEFAULTS} - NO_FLOPS)
EXTRA_KEYS = ("peft", "reward_funcs", "model_name_or_path", "reward_overhead_tokens")
"""flopplan's own keys beside GRPOConfig's (a LoraConfig's fields, the reward functions, the policy, the tokens a
reward model reads besides prompt and completion): ``export trl`` writes them to their own file, since GRPOConfig takes
none of them."""
REWARD_TEMPLATE = ("TRL's _calculate_rewards lays a conversational prompt and its completion out with the reward "
                   "tokenizer's chat template (its tokens are the overhead) and joins a plain-text prompt and "
                   "completion with none (overhead 0)")
"""What TRL 1.16 feeds a reward model (``grpo_trainer.py`` ``_calculate_rewards``), for notes on the overhead."""
BATCH_KEYS = ("steps_per_generation", "generation_batch_size", "use_transformers_continuous_batching")
MODEL_CONFIG_KEYS = ("model_type", "architectures", "_from_model_config", "transformers_version")
"""Keys of a model's config.json or generation_config.json, which no GRPOConfig has."""


def check_grpo_config(data: dict[str, Any], where: str) -> None:
    """Refuse what is not a TRL configuration: a model's configuration, or fields none of which GRPOConfig (or
    flopplan's own keys) has; an empty object is TRL's defaults."""
    check_text_keys(data, where)
    model_keys = [k for k in MODEL_CONFIG_KEYS if k in data]
    if model_keys:
        raise UserError(f"{where} is a model's configuration ({model_keys[0]}), not GRPOConfig fields")
    known = TRL_FIELDS | set(EXTRA_KEYS)
    if data and not set(data) & known:
        raise UserError(f"{where} holds no GRPOConfig field (it has {', '.join(sorted(data)[:3])}"
                        f"{', ...' if len(data) > 3 else ''})")


def read_training_args(path: str) -> dict[str, Any]:
    """The fields of a ``training_args.bin`` (transformers saves its TrainingArguments with ``torch.save``: a
    pickle, read only from a file you trust), read when torch is installed."""
    import importlib.util

    from flopplan.errors import first_line

    if not Path(path).is_file():
        raise UserError(f"cannot read the training arguments {path!r}: no such file")
    if importlib.util.find_spec("torch") is None:
        raise UserError(f"{path!r} is a torch pickle and torch is not installed: give the JSON of "
                        "GRPOConfig(...).to_dict() instead")
    import torch

    try:
        args = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as exc:  # unpickling runs the file's classes: any error says it is not readable here
        raise UserError(f"cannot read the training arguments {path!r}: {type(exc).__name__}: {first_line(exc)}") \
            from None
    data = args.to_dict() if callable(getattr(args, "to_dict", None)) else None
    if not isinstance(data, dict):
        raise UserError(f"{path!r} holds a {type(args).__name__}, not TrainingArguments")
    return data


def complete_dump(config: dict[str, Any]) -> bool:
    """Whether ``config`` is a whole saved GRPOConfig (``to_dict()``, a training_args file): then every field in it
    is TRL's, and none is a misspelling."""
    return "output_dir" in config and set(GRPO_DEFAULTS) <= set(config)


@dataclass(frozen=True)
class TRLRun:
    """The round arithmetic of a GRPOConfig on ``world`` processes (see the module docstring)."""

    bs: int
    ga: int
    spg: int
    mu: int
    generations: int
    world: int
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    importance_sampling: bool = True

    @property
    def rollouts(self) -> int:
        """Rollouts of a round, over all processes."""
        return self.bs * self.world * self.spg

    @property
    def optimizer_steps_per_round(self) -> int:
        return self.mu * self.spg // self.ga

    @property
    def old_logprobs(self) -> bool:
        """TRL's rule (grpo_trainer.py:2642-2645)."""
        return self.ga % (self.spg * self.mu) != 0 or (self.use_vllm and self.importance_sampling)

    def rounds(self, max_steps: int) -> int:
        """Rounds a run of ``max_steps`` optimizer steps generates: ceil(max_steps x ga / (spg x mu))."""
        return -(-max_steps * self.ga // (self.spg * self.mu))


def _field(config: dict[str, Any], name: str) -> Any:
    return config.get(name, GRPO_DEFAULTS.get(name))


def _flag(config: dict[str, Any], name: str) -> bool:
    """A boolean field (:func:`~flopplan.engines.trl_fields.flag`), GRPOConfig's default where unset."""
    return flag(name, _field(config, name))


def _positive(config: dict[str, Any], name: str) -> int:
    value = _field(config, name)
    if not is_int(value) or value < 1:
        raise UserError(f"GRPOConfig {name} must be a positive integer, not {value!r}")
    return int(value)


def trl_run(config: dict[str, Any], world_size: int = 1) -> TRLRun:
    """The round arithmetic of a GRPOConfig (by TRL's field names), after TRL's own checks (its messages)."""
    if not is_int(world_size) or world_size < 1:
        raise UserError(f"the world size must be a positive integer, not {world_size!r}")
    bs, ga = _positive(config, "per_device_train_batch_size"), _positive(config, "gradient_accumulation_steps")
    generations, mu = _positive(config, "num_generations"), _positive(config, "num_iterations")
    spg, gbs = config.get("steps_per_generation"), config.get("generation_batch_size")
    if spg is not None and gbs is not None:  # a saved GRPOConfig (to_dict, training_args): __post_init__ set both
        if not is_int(spg) or spg < 1 or not is_int(gbs) or gbs != bs * world_size * spg:
            made_on = gbs / (bs * spg) if is_int(spg) and spg > 0 and is_number(gbs) else None
            hint = f": it was made on {made_on:.0f} process(es): give --world-size {made_on:.0f}" if made_on and \
                made_on.is_integer() and made_on >= 1 else ""
            raise UserError(f"GRPOConfig generation_batch_size ({gbs}) is not per_device_train_batch_size ({bs}) x "
                            f"steps_per_generation ({spg}) x {world_size} process{'es' if world_size > 1 else ''}"
                            f"{hint}")
        gbs = None
    if gbs is not None:
        if not is_int(gbs) or gbs < 1 or gbs % (bs * world_size):
            raise UserError(f"GRPOConfig: generation_batch_size ({gbs}) must be divisible by the global batch size "
                            f"({bs * world_size})")
        spg = gbs // (bs * world_size)
    elif spg is None:
        spg = ga  # TRL's default
    elif not is_int(spg) or spg < 1:
        raise UserError(f"GRPOConfig steps_per_generation must be a positive integer, not {spg!r}")
    if (bs * world_size * spg) % generations:
        raise UserError(f"GRPOConfig: generation_batch_size ({bs * world_size * spg}) must be divisible by "
                        f"num_generations ({generations})")
    if generations < 2:
        raise UserError(f"GRPOConfig: GRPO requires at least 2 generations per prompt to calculate the advantages; "
                        f"num_generations is {generations}")
    if (spg * mu) % ga:  # a round is spg x mu micro-steps (TRL generates every spg x mu)
        raise UserError(f"GRPOConfig gradient_accumulation_steps ({ga}) does not divide a generation round's "
                        f"{spg * mu} micro-steps (steps_per_generation {spg} x num_iterations {mu}): an optimizer step "
                        "would take micro-steps of two generation rounds, which flopplan does not express")
    if spg % ga:  # one step over several of the round's mu passes: the FLOPs of mu passes, but fewer optimizer steps
        raise UserError(f"GRPOConfig gradient_accumulation_steps ({ga}) does not divide steps_per_generation ({spg}):"
                        f" an optimizer step would hold micro-steps of {'all' if ga == spg * mu else 'several'} of the "
                        f"round's num_iterations ({mu}) passes over its rollouts, and flopplan's optimizer steps each "
                        "lie within one pass: it does not express this yet")
    mode = _field(config, "vllm_mode")
    if mode not in ("colocate", "server"):
        raise UserError(f"GRPOConfig vllm_mode must be colocate or server, not {mode!r}")
    return TRLRun(bs, ga, int(spg), mu, generations, world_size, _flag(config, "use_vllm"), mode,
                  _flag(config, "vllm_importance_sampling_correction"))


def logprob_head_for(trl_version: str, device: str) -> str:
    """Which log-prob head a TRL release runs on a device (trl/trainer/utils.py add_fused_lm_head,
    trl/kernels/chunked_logprob.py ``_use_triton``): <= 1.14 keeps K + 1 logits; 1.15 needs Triton; >= 1.16 runs
    the chunked head, compact with Triton (CUDA), on every position but the last without (CPU)."""
    release = re.match(r"\s*v?(\d+)\.(\d+)", trl_version)  # PEP 440's release: "1.16rc1", "1.16.0.dev0", "1.16+cu"
    if release is None:
        raise UserError(f"cannot read the TRL version {trl_version!r}")
    parts = (int(release[1]), int(release[2]))
    if parts < (1, 15):
        return "completion"
    if device not in ("cpu", "cuda"):
        raise UserError(f"the device must be cpu or cuda, not {device!r}")
    if parts < (1, 16) and device == "cpu":
        raise UserError("trl 1.15 needs Triton for its fused log-prob head (it fails on the CPU): use trl >= 1.16")
    return "fused-compact" if device == "cuda" else "fused"


def check_export_head(recipe: Recipe) -> None:
    """Refuse to export a plan priced with a log-prob head the exported TRL release (:data:`TESTED_TRL`) does not run
    on either device: its update and scoring would cost otherwise than planned."""
    release = TESTED_TRL.split(",")[0].removeprefix(">=")
    runs = {logprob_head_for(release, device): device for device in ("cuda", "cpu")}
    if recipe.logprob_head not in runs:
        gpu, cpu = (next(h for h, d in runs.items() if d == device) for device in ("cuda", "cpu"))
        raise UserError(f"logprob_head {recipe.logprob_head}: the exported GRPOConfig is for trl {TESTED_TRL}, which "
                        f"runs the {gpu} head on CUDA and {cpu} on the CPU: plan with --logprob-head {gpu} "
                        f"(--logprob-head {cpu} for a CPU run)")


def recipe_for_trl_run(recipe: Recipe, changes: dict[str, Any], from_file: bool, *, device: str = "auto") -> Recipe:
    """What ``flopplan train --engine trl`` runs of a recipe: the log-prob head the installed TRL runs on this
    device (refusing a different one asked for by name), and no evaluation unless a file or option asked for it
    (TRL's evaluation loop is costlier than the demo's greedy one: :func:`evaluation_kwargs`). The shapes TRL can
    run are checked here, before torch is imported."""
    import os

    if not from_file and not ({"eval_every", "eval_prompts"} & set(changes)):
        recipe = without_evaluation(recipe)  # the demo's evaluation
    world = os.environ.get("WORLD_SIZE", "1")
    world_size = int(world) if world.isdigit() else 1
    run = trl_run({k: v for k, v in grpo_config_kwargs(without_evaluation(recipe).with_(logprob_head="fused"),
                                                       world_size=world_size).items()
                   if k not in EXTRA_KEYS}, world_size)  # (any head will do)
    evaluation_kwargs(recipe, run)
    from flopplan.measure.device import pick_device  # a TRL run needs torch anyway

    kind = pick_device(device).type
    head = logprob_head_for(installed_trl_version(), kind)
    if "logprob_head" in changes and changes["logprob_head"] != head:
        raise UserError(f"--logprob-head {changes['logprob_head']}: TRL {installed_trl_version()} on {kind} "
                        f"runs the {head} head")
    return recipe.with_(logprob_head=head)  # what TRL will run (a plan that assumed another says so)


def without_evaluation(recipe: Recipe) -> Recipe:
    """The recipe's training rounds alone (flopplan's evaluation fields cleared)."""
    return recipe.with_(eval_every=None, eval_prompts=0, eval_batch=None)


def evaluation_kwargs(recipe: Recipe, run: TRLRun) -> dict[str, Any]:
    """The GRPOConfig fields that run the recipe's evaluation (``eval_every`` rounds, ``eval_prompts`` held-out
    prompts) as TRL's evaluation loop: ``eval_strategy="steps"`` at the optimizer step that closes every
    ``eval_every``-th round, ``eval_on_start`` for the baseline, and ``per_device_eval_batch_size`` so that a
    generate call holds ``eval_batch`` prompts (default all) over the processes. TRL samples
    ``num_generations`` completions per prompt, scores them and runs its loss forward: the meter charges that to
    the evaluation bucket (``eval.*`` phases), not flopplan's greedy evaluation. Empty without evaluation."""
    r = recipe
    if r.eval_every is None:
        return {}
    if r.eval_completion_len is not None and r.eval_completion_len != r.completion_len:
        raise UserError("eval_completion_len: TRL evaluates at max_completion_length, the training completions'")
    rows = r.evaluation_batch_size * run.generations
    if rows % run.world:
        raise UserError(f"an evaluation batch of {r.evaluation_batch_size} prompts x {run.generations} generations "
                        f"does not split over {run.world} processes (TRL's per_device_eval_batch_size)")
    return {"eval_strategy": "steps", "eval_steps": r.eval_every * run.optimizer_steps_per_round,
            "eval_on_start": r.eval_at_start, "per_device_eval_batch_size": rows // run.world}


def installed_trl_version() -> str:
    """The installed TRL's version, read from its metadata (TRL is not imported); 1.16.0 when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("trl")
    except metadata.PackageNotFoundError:
        return "1.16.0"


def lora_targets(targets: list[str], policy: str) -> tuple[str, ...]:
    """peft ``target_modules`` (a list of names) as the recipe's split projection names: Phi-3's fused names where
    the policy is a Phi-3 (:func:`flopplan.arch.split_targets`), refused elsewhere, as is any name flopplan does
    not count."""
    names = split_targets(tuple(targets), policy, "peft.target_modules")
    unknown = [t for t in names if t not in LORA_TARGETS]
    if unknown:
        raise UserError(f"peft.target_modules: flopplan counts LoRA on {', '.join(LORA_TARGETS)} (Phi-3: "
                        f"{', '.join(FUSED_PROJECTIONS)}), not {', '.join(unknown)}")
    return names


def _lora(peft: Any, policy: str) -> tuple[int | None, tuple[str, ...]]:
    if peft is None:
        return None, LORA_TARGETS
    if not isinstance(peft, dict) or not is_int(peft.get("r")) or peft["r"] < 1:
        raise UserError("peft must be a LoraConfig as an object with a positive integer r")
    targets = peft.get("target_modules", "all-linear")
    if targets == "all-linear":  # (what peft adapts on an MoE policy: flopplan.moe.PEFT_ALL_LINEAR)
        return int(peft["r"]), all_linear_targets(resolve(policy).family, "peft.target_modules")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        raise UserError("peft.target_modules must be a list of projection names or 'all-linear'")
    return int(peft["r"]), lora_targets(targets, policy)


def _reward(reward_funcs: Any) -> RewardSystem:
    """A string is a reward model's path or registry name (an ORM: AutoModelForSequenceClassification, one label);
    the string ``rule`` (what ``export trl`` writes for a Python reward function) or anything else is a rule (no
    model FLOPs)."""
    funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs] if reward_funcs is not None else []
    models = [f for f in funcs if isinstance(f, str) and f.strip().lower() != "rule"]
    if len(models) > 1:
        raise UserError(f"reward_funcs holds {len(models)} reward models: flopplan prices one reward model a round")
    return RewardSystem("orm", models[0]) if models else RewardSystem("rule")


def recipe_from_trl(config: dict[str, Any], *, model: str | None = None, prompt_len: Length | None = None,
                    completion_len: Length | None = None, world_size: int = 1, device: str = "cuda",
                    trl_version: str | None = None) -> tuple[Recipe, TRLRun, list[str]]:
    """The Recipe flopplan prices for a TRL configuration: GRPOConfig fields by their TRL names, plus optionally
    ``peft`` (LoraConfig fields), ``reward_funcs``, ``model_name_or_path`` and ``reward_overhead_tokens`` (the reward
    model's template tokens: 0 when absent, as TRL reads plain-text data, :data:`REWARD_TEMPLATE`). Returns the
    recipe, the round arithmetic and notes (fields read past because flopplan does not know them)."""
    if not isinstance(config, dict):
        raise UserError("a TRL configuration must be an object of GRPOConfig fields")
    config = resolve_checkpointing(config)
    run = trl_run(config, world_size)
    for name, bad in (("use_liger_kernel", True), ("use_transformers_continuous_batching", True),
                      ("use_transformers_paged", True)):  # (TRL's deprecated alias of the one before)
        if config.get(name) is bad:
            raise UserError(f"GRPOConfig {name}: flopplan does not price that path yet")
    if is_int(config.get("pad_to_multiple_of")):
        raise UserError("GRPOConfig pad_to_multiple_of: flopplan prices padding to each batch's longest, not to a "
                        "multiple")
    if _field(config, "eval_strategy") not in ("no", None):  # the meter charges it as it runs
        raise UserError(f"GRPOConfig eval_strategy {_field(config, 'eval_strategy')!r}: an evaluation's FLOPs depend "
                        "on the eval dataset (its rows and prompt lengths), which the config does not hold: price "
                        "the training with eval_strategy no")
    check_generation(config)
    check_fields(config)
    if _flag(config, "gradient_checkpointing"):  # (its keywords do nothing without it)
        check_checkpointing(config.get("gradient_checkpointing_kwargs"))
    policy = model or config.get("model_name_or_path")
    if not isinstance(policy, str) or not policy:
        raise UserError("name the policy: --model NAME|CONFIG (or model_name_or_path in the file)")
    if prompt_len is None:
        raise UserError("TRL takes its prompt lengths from the data: give --prompt-len N, MEAN:MAX or @FILE")
    completion = completion_len
    if completion is None:
        limit = _field(config, "max_completion_length")
        if not is_int(limit) or limit < 1:
            raise UserError(f"GRPOConfig max_completion_length must be a positive integer, not {limit!r}")
        completion = Length.fixed(int(limit))
    beta = _field(config, "beta")
    if not is_number(beta) or beta < 0:
        raise UserError(f"GRPOConfig beta must be a number >= 0, not {beta!r}")
    rank, targets = _lora(config.get("peft"), policy)
    overhead = config.get("reward_overhead_tokens", 0)  # (absent: plain-text data, REWARD_TEMPLATE)
    if not is_int(overhead) or overhead < 0:
        raise UserError(f"reward_overhead_tokens must be an integer >= 0 (the reward model's template tokens), not "
                        f"{overhead!r:.60}")
    notes = field_notes(config, EXTRA_KEYS, complete_dump(config))
    engine = "vllm" if run.use_vllm else "hf"
    recipe = Recipe(
        policy=policy, lora_rank=rank, lora_targets=targets, prompts_per_step=run.rollouts // run.generations,
        group_size=run.generations, prompt_len=prompt_len, completion_len=completion, iterations=run.mu,
        beta=float(beta), old_logprobs="on" if run.old_logprobs else "off",
        grad_ckpt=_flag(config, "gradient_checkpointing"),
        logprob_head=logprob_head_for(trl_version or installed_trl_version(), device), engine=engine,
        prefix_sharing=run.use_vllm and run.vllm_mode == "server",
        generation_batch=run.bs * run.spg if engine == "hf" else None, micro_batch=run.bs,
        optimizer_batch=run.bs * run.world * run.ga, reward=_reward(config.get("reward_funcs")),
        reward_overhead_tokens=int(overhead))
    return recipe, run, notes


def implied_world_size(recipe: Recipe) -> int:
    """The processes a recipe's round implies on TRL: with HF generation each process generates its share of the
    round's rollouts in one call, so a generation batch of a share (``--generation-batch 8`` of 16 rollouts) is 2
    processes; 1 for vLLM (its scheduler sets no batch) or where the batch does not divide the round (refused by
    :func:`grpo_config_kwargs`)."""
    rollouts, batch = recipe.rollouts_per_step, recipe.generation_batch_size
    return rollouts // batch if recipe.engine == "hf" and rollouts % batch == 0 else 1


def grpo_config_kwargs(recipe: Recipe, *, world_size: int = 1, steps: int | None = None) -> dict[str, Any]:
    """GRPOConfig keyword arguments (and ``peft``/``reward_funcs`` entries) that run ``recipe`` on ``world_size``
    processes for ``steps`` rounds; what TRL cannot run as planned is refused, naming the field."""
    r = recipe
    if not is_int(world_size) or world_size < 1:
        raise UserError(f"the world size must be a positive integer, not {world_size!r}")
    refuse_group_of_one(r.group_size, "run on TRL")
    if r.reward.kind == "prm":
        raise UserError("reward: TRL's GRPOTrainer takes outcome reward models (sequence classification), not a "
                        "process reward model")
    if r.update_padding != "batch":
        raise UserError("update_padding none (packed sequences) is verl's; TRL pads to each generation batch")
    if r.eval_every is not None:
        raise UserError("eval_every: export the training run without flopplan's evaluation (--no-eval)")
    if r.logprob_head == "all":
        raise UserError("logprob_head all: TRL computes log-probs on the completion: plan with the head your TRL runs "
                        "(trl 1.16: fused-compact on CUDA, fused on the CPU; trl <= 1.14: completion)")
    rollouts = r.rollouts_per_step
    if rollouts % world_size:
        raise UserError(f"{rollouts} rollouts a round do not split over {world_size} processes")
    per_process = rollouts // world_size
    if r.engine == "hf" and r.generation_batch_size != per_process:
        raise UserError(f"the plan generates in calls of {r.generation_batch_size} rollouts; on {world_size} "
                        f"process{'es' if world_size > 1 else ''} TRL generates {per_process} per process: plan (or "
                        f"design the race) with --generation-batch {per_process}")
    bs = r.micro_batch_size
    if per_process % bs or r.optimizer_batch_size % (bs * world_size):
        raise UserError(f"micro_batch {bs} must divide the {per_process} rollouts of each process and an optimizer "
                        f"batch of {r.optimizer_batch_size} over {world_size} processes (plan, or design the race, "
                        "with another --micro-batch)")
    spg, ga = per_process // bs, r.optimizer_batch_size // (bs * world_size)
    run = TRLRun(bs, ga, spg, r.iterations, r.group_size, world_size, r.engine == "vllm",
                 "server" if r.prefix_sharing else "colocate", True)
    if run.old_logprobs != old_logprobs_run(r.old_logprobs, r.optimizer_steps_per_round, r.engine):
        raise UserError(f"old_logprobs {r.old_logprobs}: TRL {'computes' if run.old_logprobs else 'skips'} them for "
                        f"this round ({spg} micro-steps a round, {ga} an optimizer step, mu {r.iterations})")
    kwargs: dict[str, Any] = {
        "per_device_train_batch_size": bs, "gradient_accumulation_steps": ga, "steps_per_generation": spg,
        "num_generations": r.group_size, "num_iterations": r.iterations, "beta": r.beta,
        "max_completion_length": r.completion_len.max, "gradient_checkpointing": r.grad_ckpt,
        "use_vllm": r.engine == "vllm",
    }
    if r.engine == "vllm":
        kwargs["vllm_mode"] = "server" if r.prefix_sharing else "colocate"
    if steps is not None:
        kwargs["max_steps"] = steps * run.optimizer_steps_per_round
    if r.lora_rank is not None:
        kwargs["peft"] = {"r": r.lora_rank, "lora_alpha": 2 * r.lora_rank,  # peft's names (Phi-3: fused)
                          "target_modules": list(lora_modules(r.policy_spec.family, r.lora_targets))}
    kwargs["reward_funcs"] = [r.reward.model] if r.reward.kind == "orm" else ["rule"]
    if r.reward.kind == "orm":  # the template tokens the plan charges a reward call (REWARD_TEMPLATE)
        kwargs["reward_overhead_tokens"] = r.reward_overhead_tokens
    return kwargs


def rounds_of(run: TRLRun, max_steps: Any) -> int | None:
    """Rounds of a run of ``max_steps`` optimizer steps (None when max_steps is unset, -1)."""
    if max_steps is None or max_steps == -1:
        return None
    if not is_int(max_steps) or max_steps < 1:
        raise UserError(f"GRPOConfig max_steps must be a positive integer (or -1), not {max_steps!r}")
    return run.rounds(int(max_steps))


def mfu(flops: float, seconds: float, peak_flops: float | None) -> float | None:
    """Model FLOP utilisation: FLOPs executed over the time, as a share of the peak (None without one)."""
    if not peak_flops or seconds <= 0 or not math.isfinite(seconds):
        return None
    return flops / seconds / peak_flops
