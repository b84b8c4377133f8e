"""Timing sweeps: each kind of work timed through the phase units over a grid of shapes (warm-up, repeats,
median; CUDA events on a GPU), with the closed-form FLOPs and the shape quantities the time model needs."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from flopplan.attention import kv_cache_elements
from flopplan.calibrate.fit import Measurement
from flopplan.calibrate.harness import PhaseHarness
from flopplan.calibrate.specs import sweepable
from flopplan.formulas import forward_flops, generate_flops, train_flops
from flopplan.measure.device import DevicePolicy
from flopplan.measure.models import recommended_threads
from flopplan.timing import attention_flops

QUICK_GRID = {
    "prefill": [(b, p, 1) for b in (1, 4, 16) for p in (16, 48, 128)],
    "forward": [(b, p, 32) for b in (1, 4, 16) for p in (16, 48, 96)],
    "train": [(b, p, 32) for b in (1, 4, 8) for p in (16, 48, 96)],
    "decode": [(b, p, 17) for b in (1, 4, 16) for p in (16, 96, 256)],
}
FULL_GRID = {  # CPU, a real size (e.g. qwen2.5-0.5b in fp32): minutes per model
    "prefill": [(b, p, 1) for b in (1, 2, 4) for p in (32, 128, 256)],
    "forward": [(b, p, 32) for b in (1, 2, 4) for p in (32, 96, 224)],
    "train": [(b, p, 32) for b in (1, 2, 4) for p in (32, 96, 224)],
    "decode": [(b, p, 9) for b in (1, 4, 16) for p in (32, 256, 512)],
}
GPU_GRID = {  # one GPU, 0.5B-1.5B in bf16: a few minutes per model
    "prefill": [(b, p, 1) for b in (1, 8, 32) for p in (128, 512, 2048)],
    "forward": [(b, p, 256) for b in (1, 8, 32) for p in (128, 512, 1792)],
    "train": [(b, p, 256) for b in (1, 4, 16) for p in (128, 512, 1792)],
    "decode": [(b, p, 33) for b in (1, 16, 64) for p in (128, 1024, 2048)],
}


def _timed(fn: Callable[[], Any], repeats: int) -> list[float]:
    fn()  # warm-up
    return [fn().seconds for _ in range(repeats)]


def measure_point(s: PhaseHarness, name: str, kind: str, b: int, p: int, k: int, repeats: int) -> Measurement:
    """Time one shape of one kind of work through the phase units; the FLOPs are the closed form's."""
    spec = s.spec
    L = spec.num_layers
    if kind == "prefill":
        times = _timed(lambda: s.generate(b, p, 1), repeats)
        terms = forward_flops(spec, b, p, 1, s.lora, s.conv)
        return Measurement(name, kind, b, p, 1, float(terms.total), b * p, 0, 0, statistics.median(times), L,
                           float(attention_flops(terms)), times)
    if kind == "decode":  # k - 1 decode steps: the difference of two generate calls, prefill cancelled
        s.generate(b, p, k), s.generate(b, p, 1)  # warm-up
        per_step = []
        for _ in range(repeats):
            longer = s.generate(b, p, k).seconds
            per_step.append(max(longer - s.generate(b, p, 1).seconds, 1e-9) / (k - 1))
        steps = generate_flops(spec, b, p, k, s.lora, s.conv).total - forward_flops(spec, b, p, 1, s.lora,
                                                                                     s.conv).total
        context = p + (k - 2) / 2  # mean tokens already cached over the decode steps
        kv = kv_cache_elements(spec, b, context)
        return Measurement(name, kind, b, p, k, float(steps) / (k - 1), b, spec.params, kv,
                           statistics.median(per_step), L, 0.0, per_step)
    if kind == "forward":
        times = _timed(lambda: s.score(b, p, k), repeats)
        terms = forward_flops(spec, b, p + k, k + 1, s.lora, s.conv)
    else:
        times = _timed(lambda: s.update(b, p, k), repeats)
        terms = train_flops(spec, b, p + k, k + 1, s.training, s.conv)
    return Measurement(name, kind, b, p, k, float(terms.total), b * (p + k), 0, 0, statistics.median(times), L,
                       float(attention_flops(terms)), times)


def sweep(models: list[str], device: torch.device, quick: bool, repeats: int = 5,
          progress: Callable[[str, int, int], None] = lambda *_: None) -> list[Measurement]:
    """Time every kind of work over the grid, through the phase units; median of ``repeats`` after a warm-up."""
    grid = QUICK_GRID if quick else (GPU_GRID if device.type == "cuda" else FULL_GRID)
    policy = DevicePolicy(device)
    dtype, attn = policy.dtype, policy.attention
    out: list[Measurement] = []
    total = len(models) * sum(len(v) for v in grid.values())
    for name in models:
        spec = sweepable(name)
        threads = recommended_threads(spec.params) if device.type == "cpu" else None
        with _threads(threads):
            s = PhaseHarness.build(spec, device, dtype, attn)
            for kind, points in grid.items():
                for b, p, k in points:
                    progress(f"{name} {kind} B={b} P={p}" + (f" K={k}" if kind != "prefill" else ""), len(out),
                             total)
                    out.append(measure_point(s, name, kind, b, p, k, repeats))
    progress("done", len(out), total)
    return out


@contextmanager
def _threads(n: int | None) -> Iterator[None]:
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
