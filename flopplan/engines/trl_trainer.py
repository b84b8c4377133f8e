"""The recipe of a GRPOTrainer the user built, read from the trainer itself: its GRPOConfig, the policy (peft
adapters: rank, targets, layers; gradient checkpointing; attention implementation and the sliding-window
convention it implies; an MoE policy's experts implementation, else an MoE reward model's; dtype), the reference
model, the reward functions (callables are free; ``nn.Module`` s are reward models, charged) and the processes.

What flopplan cannot price is refused here, before anything runs or is written, with one line naming the field
(:class:`~flopplan.errors.UserError`). Model architectures are written as ``config.json`` files into ``folder``
(a :class:`~flopplan.recipe.Recipe` names its models by path), so the run folder describes the models it metered.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from flopplan.arch import spec_from_config
from flopplan.engines.trl import GRPO_DEFAULTS, TRLRun, installed_trl_version, recipe_from_trl
from flopplan.engines.trl_fields import check_batch_per_process
from flopplan.engines.trl_generation import CACHE_PRICED, CACHES, check_model_generation
from flopplan.errors import UserError
from flopplan.lengths import Length
from flopplan.moe import EXPERTS_IMPLEMENTATIONS, check_peft_experts, peft_expert_targets
from flopplan.projections import LORA_TARGETS
from flopplan.recipe import Recipe

ATTENTION_KERNELS = {"eager": "eager", "sdpa": "sdpa", "flash_attention_2": "sdpa", "flash_attention_3": "sdpa"}
"""transformers' attention implementations flopplan charges, and the attention kernel convention each executes:
eager computes the score matrix with matmuls (backward 2x the forward); SDPA's and flash attention's fused kernels
recompute the scores in the backward (2.5x). Hub kernels named ``...flash...`` are flash attention too."""

COMPARED = ("policy_spec", "lora_rank", "lora_targets", "prompts_per_step", "group_size", "iterations",
            "micro_batch_size", "generation_batch_size", "optimizer_batch_size", "grad_ckpt", "logprob_head",
            "engine", "prefix_sharing", "attention_kernel", "experts", "window", "reward_spec")
"""The recipe fields an explicit recipe must share with the trainer (what a round computes)."""


@dataclass(frozen=True)
class TrainerRecipe:
    """What a trainer runs: the recipe (a round's shape; prompt lengths are the data's longest), TRL's round
    arithmetic, the process rank, evaluation (None: off), and conventions read that do not change FLOPs."""

    recipe: Recipe
    run: TRLRun
    rank: int
    eval_generations: int | None
    conventions: dict[str, Any]
    notes: tuple[str, ...] = ()


def _base(model: Any) -> Any:
    """The transformers model under a peft wrapper."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def _config_dict(model: Any) -> dict[str, Any]:
    return _base(model).config.to_dict()


def _architecture(model: Any) -> Any:
    """What flopplan prices of a model: its architecture, whatever its name (a refusal names the folder or Hub id it
    was loaded from, else the trainer's model)."""
    where = getattr(_base(model).config, "_name_or_path", "") or "the trainer's model"
    return spec_from_config(_config_dict(model), name="", source=str(where))


def _write_config(model: Any, folder: Path, name: str, **overrides: Any) -> str:
    path = folder / name / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**_config_dict(model), **overrides}, indent=1, default=str))
    return str(path)


def policy_lora(model: Any) -> tuple[int | None, tuple[str, ...] | None]:
    """The policy's LoRA rank and targets, from the peft config the trainer wrapped it with (None: full)."""
    configs = getattr(model, "peft_config", None)
    if not configs:
        return None, None
    if set(configs) == {"default", "ref"}:  # TRL 1.16 grpo_trainer.py:478-501 adds it (beta > 0, a PeftModel given)
        raise UserError("peft: TRL added a 'ref' copy of the adapter of the PeftModel you gave (beta > 0) and runs the "
                        "reference forward with it (grpo_trainer.py:2727), which flopplan does not price (it prices "
                        "the reference as the base model, adapters off): give the model unwrapped with "
                        "peft_config=LoraConfig(...), or beta=0")
    if len(configs) != 1:
        raise UserError(f"peft: the policy carries {len(configs)} adapters; flopplan prices one")
    config = next(iter(configs.values()))
    if type(config).__name__ != "LoraConfig":
        raise UserError(f"peft: {type(config).__name__} adapters are not priced (LoRA only)")
    for name, priced in (("use_dora", False), ("layers_to_transform", None), ("modules_to_save", None),
                         ("exclude_modules", None), ("layers_pattern", None), ("trainable_token_indices", None)):
        value = getattr(config, name, priced)
        if value not in (priced, None) and not (isinstance(value, (set, frozenset, list, tuple, dict)) and not value):
            raise UserError(f"peft {name}={value!r} is not priced: flopplan prices plain LoRA of one rank on every "
                            "layer's projections")
    # a Qwen3-MoE's MLP names, which peft moved into target_parameters (and rank/alpha patterns), read back; the
    # model's type is read only where peft wrote either (a policy without them needs no config)
    parameters, patterns = getattr(config, "target_parameters", None), getattr(config, "rank_pattern", None)
    experts = peft_expert_targets(_config_dict(model).get("model_type", ""), parameters, config.r, config.lora_alpha,
                                  patterns, getattr(config, "alpha_pattern", None)) if parameters or patterns else ()
    modules = config.target_modules
    if isinstance(modules, str) and modules != "all-linear":  # a regex (peft documents it): what peft adapted,
        modules = set(getattr(getattr(model, "base_model", None), "targeted_module_names", ()))  # resolved by peft
    targets = modules if not experts else {*modules, *experts}
    if isinstance(targets, (set, frozenset, list, tuple)) and any("." in t for t in targets):
        targets = _layer_targets(targets, _architecture(model).num_layers)
    order = {name: i for i, name in enumerate(LORA_TARGETS)}  # flopplan's order; unknown names refused later
    names = tuple(sorted(targets, key=lambda t: (order.get(t, len(order)), t))) \
        if isinstance(targets, (set, list, tuple)) else targets
    if isinstance(names, tuple):
        from peft import __version__

        check_peft_experts(_config_dict(model).get("model_type", ""), names, __version__)
    return int(config.r), names


def _layer_targets(names: Any, layers: int) -> set[str]:
    """Full module names (peft writes ``target_modules="all-linear"`` out as every linear layer's:
    ``model.layers.0.mlp.down_proj``, ...) as the projection names they adapt, when each projection is adapted on
    every one of the ``layers`` decoder layers (flopplan prices LoRA of one rank on every layer's projections)."""
    found: dict[str, set[int]] = {}
    for name in names:
        parts = name.split(".")
        index = next((parts[i + 1] for i, part in enumerate(parts[:-2]) if part == "layers" and parts[i + 1].isdigit()),
                     None)
        if index is None:
            raise UserError(f"peft target_modules {name!r}: flopplan prices LoRA on the decoder layers' projections")
        found.setdefault(parts[-1], set()).add(int(index))
    for projection, on in sorted(found.items()):
        if len(on) != layers:
            raise UserError(f"peft target_modules: {projection} on {len(on)} of the {layers} layers; flopplan prices "
                            "LoRA on every layer's projections")
    return set(found)


def _reward_models(funcs: list[Any]) -> list[nn.Module]:
    models = [f for f in funcs if isinstance(f, nn.Module)]
    for f in funcs:
        if not isinstance(f, nn.Module) and not callable(f):
            raise UserError(f"reward_funcs: {f!r} is neither a function nor a model")
    if len(models) > 1:
        raise UserError(f"reward_funcs holds {len(models)} reward models: flopplan prices one reward model a round")
    return models


def reward_model_class(model: nn.Module) -> str:
    """A reward model is priced from its config as transformers' ``<Family>ForSequenceClassification`` computes it:
    the decoder, then one bias-free ``hidden -> num_labels`` score layer. TRL scores with any ``nn.Module`` that has
    a config and returns logits, so a module of another class (a team's own pooling head, an ensemble of
    backbones), one whose forward is its own, a replaced score head or adapters are refused: each runs what the
    config does not describe (a held-out user's ensemble of two backbones ran 47 % beyond the budget with its
    ledger at the budget). A compiled model is read through ``torch.compile``'s wrapper, and a subclass that keeps
    transformers' forward is its class. Returns the transformers class that runs."""
    from transformers import PreTrainedModel

    model = getattr(model, "_orig_mod", model)  # torch.compile's OptimizedModule (TRL takes compiled models)
    name = type(model).__name__
    if getattr(model, "peft_config", None):
        raise UserError(f"reward model {name} carries adapters, which flopplan does not price on a reward model: "
                        "merge them into its weights first (peft's merge_and_unload()), or remove them")
    runs = next((k for k in type(model).__mro__ if k.__name__.endswith("ForSequenceClassification")
                 and k.__module__.startswith("transformers.")), None)
    forward = next((k for k in type(model).__mro__ if "forward" in vars(k)), object)
    if not (isinstance(model, PreTrainedModel) and runs is not None and forward.__module__.startswith("transformers.")):
        raise UserError(f"reward model {name}: flopplan prices transformers' <Family>ForSequenceClassification "
                        "(a decoder and a score head, from its config); a reward model of another class, or with "
                        "a forward of its own, runs what its config does not describe")
    score, labels = getattr(model, "score", None), model.config.num_labels
    if not (isinstance(score, nn.Linear) and score.bias is None and score.out_features == labels
            and score.in_features == model.config.get_text_config().hidden_size):
        raise UserError(f"reward model {name}: its score head is not the bias-free hidden_size -> num_labels "
                        f"({labels}) layer transformers builds, which is what flopplan prices")
    return runs.__name__


def _refuse_paths(trainer: Any) -> None:
    """Generation paths flopplan does not price: multi-turn tools and environments, custom rollouts,
    vision-language inputs, transformers' continuous batching."""
    for attribute, what in (("rollout_func", "rollout_func (a custom rollout)"), ("tools", "tools (multi-turn)"),
                            ("environment_factories", "environment_factory (multi-turn)")):
        if getattr(trainer, attribute, None):
            raise UserError(f"GRPOTrainer {what}: flopplan does not price that path")
    if getattr(trainer, "_is_vlm", False):
        raise UserError("GRPOTrainer model: a vision-language model is not priced (text decoders only)")
    if getattr(trainer.args, "use_transformers_continuous_batching", False):
        raise UserError("GRPOConfig use_transformers_continuous_batching (or use_transformers_paged, its deprecated "
                        "alias): flopplan does not price that path yet")
    accelerator = trainer.accelerator
    check_batch_per_process(bool(getattr(accelerator, "split_batches", False)),
                            getattr(getattr(accelerator, "parallelism_config", None), "tp_size", 1))


def attention_kernel(model: Any) -> tuple[str, str]:
    """The attention implementation the policy runs, and the kernel convention flopplan charges it with."""
    config = _base(model).config
    impl = getattr(config, "_attn_implementation", None) or "eager"
    kernel = ATTENTION_KERNELS.get(impl, "sdpa" if "flash" in str(impl) else None)
    if kernel is None:
        raise UserError(f"attn_implementation {impl!r}: flopplan charges eager, sdpa and flash attention")
    return impl, kernel


def experts_implementation(model: Any) -> str | None:
    """The experts implementation a mixture-of-experts model runs (transformers' ``_experts_implementation``;
    ``grouped_mm`` when unset, transformers' default), None for a dense model; one that flopplan does not count
    is refused."""
    if _architecture(model).moe is None:
        return None
    impl = getattr(_base(model).config, "_experts_implementation", None) or "grouped_mm"
    if impl not in EXPERTS_IMPLEMENTATIONS:
        raise UserError(f"experts_implementation {impl!r}: flopplan charges {', '.join(EXPERTS_IMPLEMENTATIONS)}")
    return impl


def window_convention(model: Any, impl: str) -> str:
    """How the policy's sliding-window layers are counted in a prefill under its attention implementation: flash
    attention's kernels skip the pairs beyond the window (``windowed``); eager and SDPA compute the full score
    matrix and mask it (``masked``, also the answer for a model without windows)."""
    return "windowed" if "flash" in impl and _architecture(model).sliding_window is not None else "masked"


def check_generation_configs(trainer: Any) -> None:
    """Refuse generation settings HF ``generate`` would run and the meter does not price
    (:func:`~flopplan.engines.trl_generation.check_model_generation`): the policy's ``generation_config``, whose
    settings TRL leaves unset are inherited, and TRL's own ``trainer.generation_config``, which a script can change
    after building the trainer. Checked when the meter attaches and again when ``train()`` starts (a setting made
    in between ran uncharged: a re-check's ``prefill_chunk_size`` 1, 8,200,192 FLOPs). vLLM samples with its own
    SamplingParams, not these."""
    args = trainer.args
    if args.use_vllm:
        return
    extra = args.generation_kwargs
    overridden = set(json.loads(extra) if isinstance(extra, str) else extra or {})
    set_by_trl = getattr(trainer, "generation_kwargs", None) or {}
    own, config = set(set_by_trl), getattr(trainer, "generation_config", None)
    if config is not None and "max_new_tokens" in set_by_trl and config.max_new_tokens != set_by_trl["max_new_tokens"]:
        raise UserError(f"trainer.generation_config.max_new_tokens is {config.max_new_tokens!r}, not the "
                        f"{set_by_trl.get('max_new_tokens')!r} TRL set from max_completion_length, which the budget's "
                        "guard bounds a round with: set GRPOConfig max_completion_length instead")
    if config is not None and getattr(config, "cache_implementation", None) not in CACHES:
        raise UserError(f"trainer.generation_config.cache_implementation {config.cache_implementation!r}: "
                        f"{CACHE_PRICED}")
    for gen, keys, where in ((getattr(_base(trainer.model), "generation_config", None), overridden,
                              "the policy's generation_config"),
                             (getattr(trainer, "generation_config", None), own, "trainer.generation_config")):
        if gen is not None:
            check_model_generation(gen.to_diff_dict(), keys, args.cache_implementation, where)


def read_trainer(trainer: Any, folder: Path, prompt_max: int) -> TrainerRecipe:
    """The recipe of ``trainer`` (see the module docstring); ``prompt_max``: the data's longest prompt in tokens
    (the recipe's prompt length: the meter charges observed lengths, the guard bounds with this)."""
    args = trainer.args
    _refuse_paths(trainer)
    model = trainer.model
    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(args)
              if f.name in GRPO_DEFAULTS or f.name == "steps_per_generation"}
    fields["eval_strategy"] = "no"  # evaluation is metered apart (its own bucket)
    fields.pop("generation_batch_size", None)  # TRL fills both it and steps_per_generation
    fields.pop("max_steps", None)
    # the Trainer enables checkpointing when training starts (GRPOConfig's); a model the user checkpointed stays so
    fields["gradient_checkpointing"] = bool(args.gradient_checkpointing) or bool(
        getattr(_base(model), "is_gradient_checkpointing", False))
    accelerator = trainer.accelerator
    world, rank = int(accelerator.num_processes), int(accelerator.process_index)
    rank_lora, targets = policy_lora(model)
    if rank_lora is not None:
        fields["peft"] = {"r": rank_lora, "target_modules": list(targets) if isinstance(targets, tuple)
                          else targets}
    rewards = _reward_models(list(trainer.reward_funcs))
    folder.mkdir(parents=True, exist_ok=True)
    policy = _write_config(model, folder, "policy")
    if rewards:
        # the class that runs names the head: a causal LM's checkpoint loaded for classification keeps architectures
        # ["...ForCausalLM"], which priced a one-label head whatever its num_labels
        runs = reward_model_class(rewards[0])
        fields["reward_funcs"] = [_write_config(rewards[0], folder, "reward", architectures=[runs])]
    check_generation_configs(trainer)
    impl, kernel = attention_kernel(model)
    if rewards:
        reward_impl, _ = attention_kernel(rewards[0])
        if reward_impl != impl:
            raise UserError(f"reward model attn_implementation {reward_impl!r}: flopplan charges both models with "
                            f"one convention (the policy runs {impl!r})")
    ref = getattr(trainer, "ref_model", None)
    if ref is not None:
        if priced_spec(_architecture(ref)) != priced_spec(_architecture(model)):  # (not where each was loaded)
            raise UserError("ref_model: its config differs from the policy's; flopplan prices a reference of the "
                            "policy's architecture")
        ref_impl, _ = attention_kernel(ref)
        if ref_impl != impl:
            raise UserError(f"ref_model attn_implementation {ref_impl!r} differs from the policy's {impl!r}")
    device = accelerator.device.type
    recipe, run, notes = recipe_from_trl(fields, model=policy, prompt_len=Length.fixed(max(prompt_max, 1)),
                                         world_size=world, device=device if device in ("cpu", "cuda") else "cuda",
                                         trl_version=installed_trl_version())
    experts = experts_implementation(model)
    if experts is None and rewards:  # a dense policy's: the reward model's, which --experts also names
        experts = experts_implementation(rewards[0])
    recipe = recipe.with_(attention_kernel=kernel, window=window_convention(model, impl),
                          **({"experts": experts} if experts is not None else {}))
    base = _base(model)
    checkpointing = recipe.grad_ckpt
    evaluation = None
    if args.eval_strategy not in ("no", None) and getattr(trainer, "eval_dataset", None) is not None:
        evaluation = int(trainer.num_generations_eval)
    conventions = {"attention": recipe.attention, "attention_kernel": recipe.attention_kernel,
                   "attn_implementation": impl, "dtype": str(getattr(base, "dtype", "")).removeprefix("torch."),
                   "gradient_checkpointing": "non-reentrant" if checkpointing else "none",
                   "window": recipe.window, **({"experts_implementation": experts} if experts is not None else {})}
    return TrainerRecipe(recipe, run, rank, evaluation, conventions, tuple(notes))


def priced_spec(spec: Any) -> Any:
    """A model spec as far as it sets FLOPs: without its name and source, and without the context length and the
    RoPE base (a model with another, such as Qwen2.5-Math's 4,096 tokens and base 10,000, computes the same
    passes)."""
    if spec is None:
        return None
    return dataclasses.replace(spec, name="", source="", max_position_embeddings=None, rope_theta=None)


def first_difference(explicit: Recipe, read: Recipe, skip: tuple[str, ...] = ()) -> tuple[str, Any, Any] | None:
    """The first :data:`COMPARED` field (but ``skip``) on which ``explicit`` differs from the recipe read from a
    trainer, with its value in each (the model specs as far as they set FLOPs: :func:`priced_spec`); None when they
    describe the same round."""
    for name in (n for n in COMPARED if n not in skip):
        mine, theirs = getattr(explicit, name), getattr(read, name)
        if name in ("policy_spec", "reward_spec"):
            mine, theirs = priced_spec(mine), priced_spec(theirs)
        if mine != theirs:
            return name, mine, theirs
    return None


def describe_difference(name: str, priced: Any, runs: Any, conventions: dict[str, Any],
                        whose: str = "the recipe's") -> str:
    """A :func:`first_difference` in words: the trainer's value, then the recipe's (``whose``); a model by the fields
    that set its FLOPs, the attention kernel with the implementation the trainer's policy runs (``conventions``:
    :class:`TrainerRecipe`'s)."""
    if name == "attention_kernel":
        return (f"attention_kernel {runs!r} (attn_implementation {conventions.get('attn_implementation')!r}), "
                f"{whose} {priced!r}")
    if name.endswith("_spec"):
        fields = [f"{f.name} {getattr(runs, f.name)!r} ({whose} {getattr(priced, f.name)!r})"
                  for f in dataclasses.fields(priced) if getattr(priced, f.name) != getattr(runs, f.name)] \
            if priced is not None and runs is not None else []
        return f"{name} is another model than {whose}" + (f": {', '.join(fields[:3])}" if fields else "")
    return f"{name} {runs!r}, {whose} {priced!r}"


def check_explicit(explicit: Recipe, read: TrainerRecipe) -> None:
    """An explicit recipe must describe what the trainer runs: the first field that differs is named."""
    difference = first_difference(explicit, read.recipe)
    if difference is not None:
        raise UserError("the recipe given does not match the trainer: its "
                        + describe_difference(*difference, read.conventions))
