"""Real transformers models built from an :class:`ArchSpec`, on any device (``meta``: no weights, no memory)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from flopplan.arch import ArchSpec
from flopplan.formulas import LoRA
from flopplan.hf_config import to_hf_config
from flopplan.moe import check_peft_experts, fused_expert_patterns_quiet
from flopplan.projections import lora_modules


def hf_config(spec: ArchSpec, attn_implementation: str = "eager", experts_implementation: str = "eager") -> Any:
    """The transformers ``PretrainedConfig`` of a spec; ``experts_implementation`` matters for MoE specs only."""
    from transformers import AutoConfig

    cfg = dict(to_hf_config(spec))
    model_type = cfg.pop("model_type")
    cfg.pop("architectures")
    cfg.setdefault("pad_token_id", 0)
    config = AutoConfig.for_model(model_type, **cfg)
    config._attn_implementation = attn_implementation
    if spec.moe is not None:
        config._experts_implementation = experts_implementation
    return config


class ProcessRewardModel(nn.Module):
    """A Qwen2.5-Math-PRM-style model: the transformers backbone plus a score head on every position.

    The public Qwen2.5-Math-PRM-7B ships this as custom code (``Qwen2ForProcessRewardModel``): the Qwen2 backbone,
    then ``Linear(h, h) -> ReLU -> Linear(h, 2)``; a step's reward is the softmax probability of class 1 at the
    separator token after the step. This module builds the same layers for any score head of the spec.
    """

    def __init__(self, spec: ArchSpec, config: Any) -> None:
        super().__init__()
        from transformers import AutoModel

        self.config = config
        self.model = AutoModel.from_config(config)
        layers: list[nn.Module] = []
        for i, layer in enumerate(spec.head.layers):
            if i:
                layers.append(nn.ReLU())
            layers.append(nn.Linear(layer.in_features, layer.out_features, bias=layer.bias))
        self.score = nn.Sequential(*layers)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> Any:
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state
        return self.score(hidden)


def build_model(spec: ArchSpec, device: str | torch.device = "meta", dtype: torch.dtype = torch.float32,
                attn_implementation: str = "eager", seed: int | None = None,
                experts_implementation: str = "eager") -> nn.Module:
    """A random-initialised transformers model of the spec (weights do not change FLOPs or timings).

    An MoE spec's experts run through ``experts_implementation`` (one of :data:`flopplan.moe.EXPERTS_IMPLEMENTATIONS`).
    ``eager`` (the default here) loops over the experts with plain matmuls that FlopCounterMode counts, but reads
    the routing's values, so it needs real weights (CPU/GPU); ``batched_mm`` also runs on the meta device;
    ``grouped_mm``, transformers' own default, runs a grouped matmul FlopCounterMode does not count.

    LM head -> ``AutoModelForCausalLM``; a single bias-free score layer -> ``AutoModelForSequenceClassification``
    (an outcome reward model); any other score head -> :class:`ProcessRewardModel`.
    """
    import contextlib

    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    meta = torch.device(device).type == "meta"
    if not meta:
        check_memory(spec, torch.device(device), dtype)
    if seed is not None:
        torch.manual_seed(seed)
    config = hf_config(spec, attn_implementation, experts_implementation)
    # On the meta device there are no values to initialise: skipping transformers' initialisation builds a 72B
    # model in a fraction of a second instead of tens of seconds (the FLOPs do not depend on weights).
    skip_init: Any = contextlib.nullcontext()
    if meta:
        from transformers.initialization import no_init_weights

        skip_init = no_init_weights()
    with torch.device(device), skip_init:
        if spec.head.kind == "lm":
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
        elif len(spec.head.layers) == 1 and not spec.head.layers[0].bias:
            config.num_labels = spec.head.layers[0].out_features
            model = AutoModelForSequenceClassification.from_config(config, dtype=dtype)
        else:
            model = ProcessRewardModel(spec, config).to(dtype)
    return model


def available_memory(device: torch.device) -> int | None:
    """Bytes free for new tensors: the device's free memory on CUDA, MemAvailable (Linux) on the CPU."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_memory(spec: ArchSpec, device: torch.device, dtype: torch.dtype) -> None:
    """Refuse a model whose weights alone would not fit the free memory (with a 20 % margin for activations),
    rather than letting the kernel's out-of-memory killer end the process without a word."""
    free = available_memory(device)
    weights = spec.params * torch.empty((), dtype=dtype).element_size()
    if free is not None and weights * 1.2 > free:
        from flopplan.errors import UserError

        raise UserError(f"{spec.name}: {weights / 2**30:.1f} GiB of {str(dtype).replace('torch.', '')} weights do "
                        f"not fit the {free / 2**30:.1f} GiB free on {device.type}; use a smaller model"
                        + (" or a GPU" if device.type == "cpu" else ""))


def add_lora(model: nn.Module, lora: LoRA, alpha: int | None = None, dropout: float = 0.0) -> nn.Module:
    """Wrap a model with a peft LoRA adapter on the spec's target projections (base frozen); on Phi-3 the fused
    modules that stand for them (:func:`flopplan.projections.lora_modules`)."""
    from peft import LoraConfig, __version__, get_peft_model

    family = getattr(model.config, "model_type", "")
    check_peft_experts(family, lora.targets, __version__)
    modules = lora_modules(family, lora.targets)
    config = LoraConfig(r=lora.rank, lora_alpha=alpha if alpha is not None else 2 * lora.rank,
                        target_modules=list(modules), lora_dropout=dropout, bias="none")
    with fused_expert_patterns_quiet(family, lora.targets):  # peft's spurious warning on an MoE model's experts
        return get_peft_model(model, config)


def enable_checkpointing(model: Any, reentrant: bool = False) -> None:
    """Gradient (activation) checkpointing as transformers enables it, which also makes the embedding output
    require grad. ``activation_checkpointing_enable`` is the transformers >= 5.x name."""
    kwargs = {"use_reentrant": reentrant}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:  # pragma: no cover - older transformers
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def recommended_threads(params: int) -> int | None:
    """CPU threads for a model: 1 below 50M parameters (per-op overhead dominates and extra threads only add
    synchronisation), torch's default above (None)."""
    return 1 if params < 50_000_000 else None
