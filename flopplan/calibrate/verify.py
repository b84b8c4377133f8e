"""Verify the closed form against FlopCounterMode for the phases of a GRPO step of every registry model, built on
the meta device (no weights, no memory); a small MoE policy on the CPU (:data:`CPU_MOE_PARAMS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flopplan.arch import ArchSpec, orm_head, prm_head, with_head
from flopplan.calibrate.specs import spec_named
from flopplan.formulas import Conventions, LoRA, Training, forward_flops, generate_flops, train_flops
from flopplan.measure import counters
from flopplan.measure.models import build_model

VERIFY = {"batch": 2, "prompt": 16, "completion": 3, "seq": 24, "logits": 9, "rank": 16}


CPU_MOE_PARAMS = 50_000_000
"""An MoE policy this small is verified on the CPU with real (seeded random) weights and transformers' eager
experts; a larger one on the meta device with ``batched_mm`` experts (the eager loop reads routing values, which
meta tensors lack) and LoRA on attention only (peft's adapters on the routed experts run under ``torch.autocast``,
which has no meta device)."""

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def verify(models: list[str], progress: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """FlopCounterMode vs closed form for the phases of a GRPO step, per registry model (meta device): generate
    and the old-logprob forward with LoRA active, the reference forward (adapter disabled), a LoRA update with
    checkpointing, a full fine-tuning update, and PRM- and ORM-head forwards (a score-head model: its forward).
    An MoE policy: see :data:`CPU_MOE_PARAMS`."""
    b, p, k, t, n, r = (VERIFY[x] for x in ("batch", "prompt", "completion", "seq", "logits", "rank"))
    rows: list[dict[str, Any]] = []
    for name in models:
        spec = spec_named(name)
        build, conv, lora = _how_built(spec, r)
        training = Training(lora, "non-reentrant")
        adapted = "LoRA" if lora.targets == LoRA(r).targets else "LoRA (attention)"
        if spec.head.kind == "score":
            progress(f"{name}: PRM forward")
            rows.append(_row(name, f"reward forward B={b} T={t}", forward_flops(spec, b, t, t, conv=conv).total,
                             counters.forward(build(spec), b, t, None)))
            continue
        progress(f"{name}: generate")
        policy: Any = counters.prepare_training(build(spec), Training(lora))
        rows.append(_row(name, f"generate+{adapted} B={b} P={p} K={k}",
                         generate_flops(spec, b, p, k, lora, conv).total, counters.generate(policy, b, p, k)))
        progress(f"{name}: old logprobs and reference forwards")
        rows.append(_row(name, f"old-logprob forward+{adapted} B={b} T={t} logits={n}",
                         forward_flops(spec, b, t, n, lora, conv).total, counters.forward(policy, b, t, n)))
        with policy.disable_adapter():
            rows.append(_row(name, f"reference forward B={b} T={t} logits={n}",
                             forward_flops(spec, b, t, n, conv=conv).total, counters.forward(policy, b, t, n)))
        progress(f"{name}: LoRA update")
        policy = counters.prepare_training(build(spec), training)
        rows.append(_row(name, f"{adapted} r={r} update+ckpt B={b} T={t} logits={n}",
                         train_flops(spec, b, t, n, training, conv).total,
                         counters.train_step(policy, b, t, n, training)))
        progress(f"{name}: full fine-tuning update")
        full = Training()
        policy = counters.prepare_training(build(spec), full)
        rows.append(_row(name, f"full update B={b} T={t} logits={n}", train_flops(spec, b, t, n, full, conv).total,
                         counters.train_step(policy, b, t, n, full)))
        progress(f"{name}: reward heads")
        prm = with_head(spec, prm_head(spec.hidden_size), f"{name}-prm")
        rows.append(_row(name, f"PRM-head forward B={b} T={t}", forward_flops(prm, b, t, t, conv=conv).total,
                         counters.forward(build(prm), b, t, None)))
        orm = with_head(spec, orm_head(spec), f"{name}-orm")
        rows.append(_row(name, f"ORM-head forward B={b} T={t}", forward_flops(orm, b, t, t, conv=conv).total,
                         counters.forward(build(orm), b, t, None)))
    return rows


def _how_built(spec: ArchSpec, rank: int) -> tuple[Callable[[ArchSpec], Any], Conventions, LoRA]:
    """How ``spec``'s models are built for verification, the conventions that count them and the LoRA they
    carry: on the meta device with LoRA on every target, or for an MoE policy as :data:`CPU_MOE_PARAMS` says."""
    if spec.moe is None:
        return build_model, Conventions(), LoRA(rank)
    if spec.params <= CPU_MOE_PARAMS:
        return (lambda s: build_model(s, device="cpu", seed=0)), Conventions(), LoRA(rank)
    return ((lambda s: build_model(s, experts_implementation="batched_mm")), Conventions(experts="batched_mm"),
            LoRA(rank, ATTENTION))


def _row(model: str, phase: str, closed: int, measured: int) -> dict[str, Any]:
    return {"model": model, "phase": phase, "closed_form": int(closed), "flop_counter": int(measured),
            "exact": int(closed) == int(measured)}
