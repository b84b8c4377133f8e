"""FlopCounterMode counts of real transformers passes: forward, decode step, ``generate``, training step.

Every function runs the real transformers/peft code; on the ``meta`` device no weights exist and nothing is
computed, only shapes flow, so a 72B model is counted in seconds. An explicit all-ones attention mask is always
passed, since transformers otherwise inspects tensor values, which meta tensors do not have.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from flopplan.formulas import Training


def flop_counter() -> FlopCounterMode:
    """The counter every function here runs under (a test gives it formulas torch lacks by replacing this)."""
    return FlopCounterMode(display=False)


def count_flops(fn: Callable[[], Any]) -> int:
    """FlopCounterMode's total for everything ``fn`` executes."""
    with flop_counter() as counter:
        fn()
    return int(counter.get_total_flops())


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _causal_lm(model: Any) -> Any:
    """The transformers model under a peft wrapper (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def _inputs(model: nn.Module, batch: int, seq: int) -> dict[str, torch.Tensor]:
    device = model_device(model)
    return {"input_ids": torch.ones(batch, seq, dtype=torch.long, device=device),
            "attention_mask": torch.ones(batch, seq, dtype=torch.long, device=device)}


def _is_causal_lm(model: nn.Module) -> bool:
    return hasattr(_causal_lm(model), "generate")


def forward(model: nn.Module, batch: int, seq: int, logits: int | None = None) -> int:
    """A forward over ``batch`` x ``seq`` tokens; ``logits`` = positions kept for the LM head (None: all)."""
    kwargs: dict[str, Any] = dict(_inputs(model, batch, seq))
    if _is_causal_lm(model):
        kwargs["logits_to_keep"] = 0 if logits is None else logits
    elif logits is not None and logits != seq:
        raise ValueError("score-head models compute the head on every position")
    with torch.no_grad():
        return count_flops(lambda: model(**kwargs))


def decode(model: nn.Module, batch: int, context: int) -> int:
    """One decode step with ``context`` tokens already in the KV cache (the prefill is not counted)."""
    inputs = _inputs(model, batch, context)
    device = model_device(model)
    with torch.no_grad():
        out = model(**inputs, use_cache=True, logits_to_keep=1)
        step = {"input_ids": torch.ones(batch, 1, dtype=torch.long, device=device),
                "attention_mask": torch.ones(batch, context + 1, dtype=torch.long, device=device),
                "cache": out.cache, "use_cache": True, "logits_to_keep": 1}
        return count_flops(lambda: model(**step))


@contextlib.contextmanager
def _forward_wrapped(lm: Any, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """Replace ``lm.forward`` by ``wrap(lm.forward)`` for the duration (``functools.wraps`` keeps the forward
    signature, from which ``generate`` decides ``logits_to_keep``), then put back what was there: the class's
    forward, or a wrapper an enclosing context installed."""
    inner = lm.forward
    had_own = "forward" in vars(lm)
    lm.forward = functools.wraps(inner)(wrap(inner))
    try:
        yield
    finally:
        if had_own:
            lm.forward = inner
        else:
            del lm.forward


def _meta_compute(lm: Any) -> contextlib.AbstractContextManager[None]:
    """Let ``generate`` run on a meta-device model: control on the CPU, compute on meta.

    ``generate`` reads tensor values (the attention mask, finished sequences), which meta tensors lack. Inside
    this context the model's forward receives CPU inputs, moves them to meta, runs the real forward there (which
    FlopCounterMode counts) and returns zero logits of the right shape on the CPU, so generate's own logic runs on
    real values.
    """
    def to_meta(x: Any) -> Any:
        return x.to("meta") if isinstance(x, torch.Tensor) and x.device.type != "meta" else x

    def on_meta(original: Callable[..., Any]) -> Callable[..., Any]:
        def forward_on_meta(*args: Any, **kwargs: Any) -> Any:
            out = original(*[to_meta(a) for a in args], **{k: to_meta(v) for k, v in kwargs.items()})
            out.logits = torch.zeros(out.logits.shape, dtype=out.logits.dtype)
            return out
        return forward_on_meta

    return _forward_wrapped(lm, on_meta)


def generate(model: Any, batch: int, prompt: int, completion: int) -> int:
    """``model.generate`` of exactly ``completion`` new tokens after a ``prompt``-token prompt (greedy)."""
    return generate_by_pass(model, batch, prompt, completion)[0]


def generate_by_pass(model: Any, batch: int, prompt: int, completion: int) -> tuple[int, list[int]]:
    """:func:`generate`'s total, and the part of it each forward of the model ran, in order: the prefill (the
    prompt, logits at its last position) and one decode step per new token after the first, the step after the
    prefill at context ``prompt``. The parts are read from the one FlopCounterMode's running total before and after
    each forward, so they and the total come from a single ``generate``."""
    lm = _causal_lm(model)
    on_meta = model_device(model).type == "meta"
    device = torch.device("cpu") if on_meta else model_device(model)
    ids = torch.ones(batch, prompt, dtype=torch.long, device=device)
    mask = torch.ones(batch, prompt, dtype=torch.long, device=device)
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=completion, min_new_tokens=completion,
                  do_sample=False, pad_token_id=0)
    passes: list[int] = []
    context = _meta_compute(lm) if on_meta else contextlib.nullcontext()
    with context, torch.no_grad(), flop_counter() as counter, _each_forward(lm, counter, passes):
        model.generate(**kwargs)
    return int(counter.get_total_flops()), passes


def _each_forward(lm: Any, counter: FlopCounterMode, passes: list[int]) -> contextlib.AbstractContextManager[None]:
    """Append to ``passes`` what ``counter`` counts during each call of ``lm.forward`` (the one in place now: on
    the meta device, :func:`_meta_compute`'s)."""
    def counted(inner: Callable[..., Any]) -> Callable[..., Any]:
        def forward_counted(*args: Any, **kwargs: Any) -> Any:
            before = counter.get_total_flops()
            out = inner(*args, **kwargs)
            passes.append(int(counter.get_total_flops() - before))
            return out
        return forward_counted

    return _forward_wrapped(lm, counted)


def train_step(model: nn.Module, batch: int, seq: int, logits: int | None, training: Training) -> int:
    """Forward + backward of one micro-batch with the loss on the last ``logits`` positions (None: all).

    The model must already carry the set-up of ``training`` (see :func:`prepare_training`).
    """
    model.train()
    kwargs: dict[str, Any] = dict(_inputs(model, batch, seq))
    if _is_causal_lm(model):
        kwargs["logits_to_keep"] = 0 if logits is None else logits

    def step() -> None:
        out = model(**kwargs)
        scores = out.logits if hasattr(out, "logits") else out
        scores.float().sum().backward()

    return count_flops(step)


def prepare_training(model: Any, training: Training) -> Any:
    """Apply ``training`` to a freshly built model: peft LoRA or full fine-tuning, checkpointing, input grads."""
    from flopplan.measure.models import add_lora, enable_checkpointing

    if training.checkpointing != "none":
        lm = _causal_lm(model)
        enable_checkpointing(lm, reentrant=training.checkpointing == "reentrant")
    if training.lora is not None:
        model = add_lora(model, training.lora)
    lm = _causal_lm(model)
    wants = training.embedding_output_requires_grad
    if training.lora is not None:
        embedding = lm.get_input_embeddings()
        # transformers (with checkpointing) and peft each may have hooked the embedding to require grads; the
        # embedding carries no other forward hooks, so clearing them is the one sure way to turn it off.
        embedding._forward_hooks.clear()
        if wants:
            embedding.register_forward_hook(lambda module, args, output: output.requires_grad_(True))
    return model
