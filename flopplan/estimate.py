"""``flopplan estimate``: one phase of one model, validated options in, an exact breakdown out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flopplan.arch import ArchSpec
from flopplan.breakdown import Breakdown, component
from flopplan.budget import BUDGET_LIMITS, budget_cap
from flopplan.errors import UserError
from flopplan.formulas import (
    Conventions,
    LoRA,
    Training,
    decode_flops,
    forward_flops,
    generate_flops,
    train_flops,
)
from flopplan.units import eng

PHASES = ("forward", "decode", "generate", "train")

# which size options each phase takes (the others are refused, so a typo cannot pass silently)
_APPLIES = {
    "forward": {"seq", "logits", "lora"},
    "decode": {"context", "lora"},
    "generate": {"prompt", "completion", "lora"},
    "train": {"seq", "logits", "lora", "checkpointing", "input_grads"},
}
_REQUIRED = {"forward": ("seq",), "decode": ("context",), "generate": ("prompt", "completion"), "train": ("seq",)}
_FLAG = {"seq": "--seq", "context": "--context", "prompt": "--prompt", "completion": "--completion",
         "logits": "--logits", "lora": "--lora-rank", "checkpointing": "--grad-ckpt",
         "input_grads": "--input-grads/--no-input-grads"}


@dataclass(frozen=True)
class EstimateRequest:
    phase: str
    batch: int = 1
    seq: int | None = None
    context: int | None = None
    prompt: int | None = None
    completion: int | None = None
    logits: str | int | None = None  # "all", "last" or a count of last positions; None = all
    lora: LoRA | None = None
    checkpointing: str = "none"
    input_grads: bool | None = None
    conventions: Conventions = field(default_factory=Conventions)


def _check_size(name: str, value: int | None, minimum: int = 1) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise UserError(f"{_FLAG.get(name, '--' + name)} must be {what}, not {value!r}")


def logit_positions(spec: ArchSpec, logits: str | int | None, seq: int) -> int:
    """Resolve ``all``/``last``/N into a count of head positions per sequence."""
    if spec.head.kind == "score":
        if logits not in (None, "all", seq):
            raise UserError(f"{spec.name} has a score head, which runs on every position: --logits must be 'all'")
        return seq
    if logits is None or logits == "all":
        return seq
    if logits == "last":
        return 1
    if isinstance(logits, str):
        try:
            logits = int(logits)
        except ValueError:
            raise UserError(f"--logits must be 'all', 'last' or a positive integer, not {logits!r}") from None
    if logits <= 0:
        raise UserError(f"--logits must be 'all', 'last' or a positive integer, not {logits}")
    if logits > seq:
        raise UserError(f"--logits {logits} exceeds the sequence length {seq}")
    return logits


def window_note(spec: ArchSpec, req: EstimateRequest) -> str | None:
    """What a request whose sequences outgrow the model's sliding window counts there, or None."""
    window = spec.sliding_window
    longest = {"forward": req.seq, "train": req.seq, "decode": (req.context or 0) + 1,
               "generate": (req.prompt or 0) + (req.completion or 0) - 1}[req.phase] or 0
    if window is None or longest <= window:
        return None
    parts = []
    if req.phase != "decode":
        parts.append("a prefill counts only the pairs within it (--window windowed)" if req.conventions.window
                     == "windowed" else "a prefill counts the full masked score matrix (eager; --window windowed: "
                     "only the pairs within it)")
    if req.phase in ("decode", "generate"):
        parts.append(f"a decode step attends to the last {window} keys (transformers' sliding cache)")
    return f"{longest} tokens cross {spec.name}'s sliding window of {window}: {'; '.join(parts)}"


def validate(spec: ArchSpec, req: EstimateRequest) -> None:
    if req.phase not in PHASES:
        raise UserError(f"unknown phase {req.phase!r}: use one of {', '.join(PHASES)}")
    given = {name for name in ("seq", "context", "prompt", "completion", "logits", "lora")
             if getattr(req, name) is not None}
    if req.checkpointing != "none":
        given.add("checkpointing")
    if req.input_grads is not None:
        given.add("input_grads")
    extra = sorted(given - _APPLIES[req.phase])
    if extra:
        raise UserError(f"{', '.join(_FLAG[e] for e in extra)} does not apply to --phase {req.phase}")
    missing = [name for name in _REQUIRED[req.phase] if getattr(req, name) is None]
    if missing:
        raise UserError(f"--phase {req.phase} needs {', '.join(_FLAG[m] for m in missing)}")
    for name in ("batch", "seq", "prompt", "completion"):
        _check_size(name, getattr(req, name))
    _check_size("context", req.context, minimum=0)  # an empty cache is a valid decode step
    if spec.head.kind == "score" and req.phase in ("decode", "generate"):
        raise UserError(f"{spec.name} has a score head and does not generate: use --phase forward")
    if req.lora is not None:
        spec.check_lora_rank(req.lora.rank)


def estimate(spec: ArchSpec, req: EstimateRequest) -> Breakdown:
    """The exact FLOP breakdown of the requested phase."""
    validate(spec, req)
    try:  # bad checkpointing options, or LoRA the experts implementation cannot run (the eager loop)
        terms = _breakdown(spec, req)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    check_within_cap(terms.total, f"--phase {req.phase} of {spec.name} at these sizes")
    return terms


def check_within_cap(flops: float, what: str) -> None:
    """Refuse a count past the 1e30 FLOPs flopplan plans (sizes no run could have: --seq 1e26)."""
    if flops > BUDGET_LIMITS["flops"]:
        raise UserError(f"{what} would take {eng(flops)}, past the {budget_cap('flops')} FLOPs flopplan plans: "
                        "are the sizes right?")


def _breakdown(spec: ArchSpec, req: EstimateRequest) -> Breakdown:
    conv = req.conventions
    if req.phase == "forward":
        assert req.seq is not None
        return forward_flops(spec, req.batch, req.seq, logit_positions(spec, req.logits, req.seq), req.lora, conv)
    if req.phase == "decode":
        assert req.context is not None
        return decode_flops(spec, req.batch, req.context, req.lora, conv)
    if req.phase == "generate":
        assert req.prompt is not None and req.completion is not None
        return generate_flops(spec, req.batch, req.prompt, req.completion, req.lora, conv)
    assert req.seq is not None
    training = Training(req.lora, req.checkpointing, req.input_grads)
    return train_flops(spec, req.batch, req.seq, logit_positions(spec, req.logits, req.seq), training, conv)


def tokens_of(req: EstimateRequest) -> int:
    """Token positions the phase processes (for per-token figures)."""
    if req.phase in ("forward", "train"):
        return req.batch * (req.seq or 0)
    if req.phase == "decode":
        return req.batch
    return req.batch * ((req.prompt or 0) + (req.completion or 0))


def result_json(spec: ArchSpec, req: EstimateRequest, terms: Breakdown) -> dict[str, Any]:
    """The JSON object ``estimate --json`` prints: the exact total, every term, and what was asked."""
    total = int(terms.total)
    return {
        "model": spec.name,
        "phase": req.phase,
        "flops": total,
        "terms": {key: int(value) for key, value in terms.items()},
        "by_component": {key: int(value) for key, value in terms.grouped(component).items()},
        "tokens": tokens_of(req),
        "request": {
            "batch": req.batch, "seq": req.seq, "context": req.context, "prompt": req.prompt,
            "completion": req.completion, "logits": req.logits if req.logits is not None else (
                "all" if req.phase in ("forward", "train") else None),
            "lora": None if req.lora is None else {"rank": req.lora.rank, "targets": list(req.lora.targets)},
            "checkpointing": req.checkpointing,
            "input_requires_grad": (Training(req.lora, req.checkpointing, req.input_grads)
                                    .embedding_output_requires_grad if req.phase == "train" else None),
        },
        "conventions": {"attention": req.conventions.attention,
                        "attention_kernel": req.conventions.attention_kernel,
                        **({"experts": req.conventions.experts} if spec.moe is not None else {}),
                        **({"window": req.conventions.window} if spec.sliding_window is not None else {}),
                        "flop": "2 per multiply-add (FlopCounterMode)"},
        **({"notes": [note]} if (note := window_note(spec, req)) else {}),
    }
