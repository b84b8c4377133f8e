"""Properties of the closed form: monotone, additive, linear; ints, numpy and sympy agree."""

from __future__ import annotations

import dataclasses

import numpy as np
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from flopplan.arch import REGISTRY, ArchSpec
from flopplan.breakdown import Breakdown
from flopplan.formulas import (
    Conventions,
    LoRA,
    Pass,
    Training,
    decode_flops,
    forward_flops,
    generate_flops,
    pass_terms,
    train_flops,
)
from flopplan.projections import LORA_TARGETS
from flopplan.report.formula import SymbolicArch, symbolic_breakdown, symbols

# -- strategies -------------------------------------------------------------------------------------------------

@st.composite
def archs(draw):
    kv = draw(st.integers(1, 8))
    return ArchSpec(
        name="random", hidden_size=draw(st.integers(8, 8192)), intermediate_size=draw(st.integers(8, 30000)),
        num_layers=draw(st.integers(1, 96)), num_heads=kv * draw(st.integers(1, 8)), num_kv_heads=kv,
        head_dim=draw(st.integers(4, 256)), vocab_size=draw(st.integers(16, 200000)),
        tie_embeddings=draw(st.booleans()))


loras = st.one_of(st.none(), st.builds(
    LoRA, st.integers(1, 256), st.lists(st.sampled_from(LORA_TARGETS), min_size=1, unique=True).map(tuple)))
trainings = st.builds(Training, loras, st.sampled_from(["none", "non-reentrant", "reentrant"]),
                      st.sampled_from([None, True])).filter(lambda t: t is not None)
conventions = st.builds(Conventions, st.sampled_from(["dense", "causal"]), st.sampled_from(["eager", "sdpa"]))
sizes = st.integers(1, 4096)


def phase_total(arch, phase, s, training, conv):
    """One phase's total with every size taken from the dict ``s``."""
    lora = training.lora
    if phase == "forward":
        return forward_flops(arch, s["B"], s["T"], s["N"], lora, conv).total
    if phase == "decode":
        return decode_flops(arch, s["B"], s["C"], lora, conv).total
    if phase == "generate":
        return generate_flops(arch, s["B"], s["P"], s["K"], lora, conv).total
    return train_flops(arch, s["B"], s["T"], s["N"], training, conv).total


@st.composite
def shapes(draw):
    t = draw(sizes)
    return {"B": draw(st.integers(1, 64)), "T": t, "N": draw(st.integers(1, t)), "C": draw(st.integers(0, 8192)),
            "P": draw(sizes), "K": draw(sizes)}


PHASES = ["forward", "decode", "generate", "train"]
ARCH_FIELDS = ["hidden_size", "intermediate_size", "num_layers", "head_dim", "vocab_size"]


# -- monotone ---------------------------------------------------------------------------------------------------

USES = {"forward": {"B", "T", "N"}, "decode": {"B", "C"}, "generate": {"B", "P", "K"}, "train": {"B", "T", "N"}}


@settings(max_examples=300, deadline=None)
@given(archs(), shapes(), trainings, conventions, st.sampled_from(PHASES),
       st.sampled_from([*ARCH_FIELDS, "num_kv_heads", "B", "T", "N", "C", "P", "K", "rank"]))
def test_monotone_in_every_size(arch, s, training, conv, phase, grow):
    """Growing any size the phase depends on strictly raises its count; any other size leaves it unchanged."""
    before = phase_total(arch, phase, s, training, conv)
    bigger = dict(s)
    depends = True
    if grow in ARCH_FIELDS:
        arch = dataclasses.replace(arch, **{grow: getattr(arch, grow) + 1})
    elif grow == "num_kv_heads":  # one more kv head, same group size
        group = arch.num_heads // arch.num_kv_heads
        arch = dataclasses.replace(arch, num_kv_heads=arch.num_kv_heads + 1, num_heads=group * (arch.num_kv_heads + 1))
    elif grow == "rank":
        if training.lora is None:
            return
        training = dataclasses.replace(training, lora=LoRA(training.lora.rank + 1, training.lora.targets))
    else:
        bigger[grow] += 1
        depends = grow in USES[phase]
    after = phase_total(arch, phase, bigger, training, conv)
    assert after > before if depends else after == before, (phase, grow)


# -- additive and linear ----------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(archs(), st.integers(1, 16), st.integers(1, 300), st.integers(1, 200), loras, conventions)
def test_generate_equals_prefill_plus_each_decode_step(arch, b, prompt, completion, lora, conv):
    """The closed-form series equals a loop over the decode steps that generate executes."""
    closed = generate_flops(arch, b, prompt, completion, lora, conv)
    prefill = forward_flops(arch, b, prompt, 1, lora, conv).total
    steps = sum(decode_flops(arch, b, prompt + j, lora, conv).total for j in range(completion - 1))
    assert closed.total == prefill + steps
    assert sum(v for k, v in closed.items() if k.startswith("prefill/")) == prefill


@settings(max_examples=200, deadline=None)
@given(archs(), shapes(), trainings, conventions)
def test_linear_in_batch_and_parts_add_up(arch, s, training, conv):
    one = train_flops(arch, 1, s["T"], s["N"], training, conv)
    many = train_flops(arch, s["B"], s["T"], s["N"], training, conv)
    assert many.total == s["B"] * one.total
    assert many == one.scaled(s["B"])
    forward_part = sum(v for k, v in many.items() if k.startswith("forward/"))
    assert forward_part == forward_flops(arch, s["B"], s["T"], s["N"], training.lora, conv).total
    assert many.total == sum(many.values())


@settings(max_examples=200, deadline=None)
@given(archs(), st.tuples(sizes, sizes, sizes), st.tuples(sizes, sizes, sizes), loras, conventions)
def test_passes_are_additive(arch, a, b, lora, conv):
    pa, pb = Pass(*a), Pass(*b)
    assert pass_terms(arch, pa + pb, lora, conv) == Breakdown.combine(
        [pass_terms(arch, pa, lora, conv), pass_terms(arch, pb, lora, conv)])


def test_full_fine_tuning_is_three_forwards():
    spec = REGISTRY["qwen2.5-7b"]
    assert train_flops(spec, 4, 512, 512).total == 3 * forward_flops(spec, 4, 512, 512).total


def test_causal_counts_the_triangle():
    spec = REGISTRY["qwen2.5-1.5b"]
    dense = forward_flops(spec, 1, 100, 100)
    causal = forward_flops(spec, 1, 100, 100, conv=Conventions(attention="causal"))
    assert causal["attn_scores"] * 100 * 100 == dense["attn_scores"] * (100 * 101 // 2)
    assert causal["q_proj"] == dense["q_proj"]


# -- ints, numpy, sympy -----------------------------------------------------------------------------------------

@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(archs(), shapes()), min_size=1, max_size=6), trainings, conventions,
       st.sampled_from(PHASES))
def test_numpy_grid_equals_integer_evaluation(cases, training, conv, phase):
    """One numpy evaluation over a grid of batch/length values equals the integer count of each point."""
    arch = cases[0][0]
    grid = {key: np.array([s[key] for _, s in cases], dtype=np.int64) for key in cases[0][1]}
    grid["N"] = np.minimum(grid["N"], grid["T"])
    vector = phase_total(arch, phase, grid, training, conv)
    exact = [phase_total(arch, phase, {k: int(v[i]) for k, v in grid.items()}, training, conv)
             for i in range(len(cases))]
    if max(exact) < 2**62:  # int64 is exact below overflow
        assert vector.tolist() == exact
    as_float = phase_total(arch, phase, {k: v.astype(np.float64) for k, v in grid.items()}, training, conv)
    assert np.allclose(as_float, np.array(exact, dtype=np.float64), rtol=1e-12, atol=0)


@settings(max_examples=60, deadline=None)
@given(archs(), shapes(), st.sampled_from(PHASES), st.booleans(),
       st.sampled_from(["none", "non-reentrant", "reentrant"]), conventions)
def test_sympy_formula_evaluates_to_the_integer_count(arch, s, phase, lora, checkpointing, conv):
    r = 16
    if phase != "train":
        checkpointing = "none"
    training = Training(LoRA(r) if lora else None, checkpointing)
    expr = symbolic_breakdown(phase, lora=lora, checkpointing=checkpointing, conv=conv).total
    sym = SymbolicArch().symbols
    values = {sym["h"]: arch.hidden_size, sym["I"]: arch.intermediate_size, sym["L"]: arch.num_layers,
              sym["n_q"]: arch.num_heads, sym["n_kv"]: arch.num_kv_heads, sym["d"]: arch.head_dim,
              sym["V"]: arch.vocab_size}
    values.update(zip(symbols("B", "T", "N", "C", "P", "K", "r"),
                      (s["B"], s["T"], s["N"], s["C"], s["P"], s["K"], r), strict=True))
    evaluated = expr.subs(values)
    assert isinstance(evaluated, sympy.Integer)
    assert int(evaluated) == phase_total(arch, phase, s, training, conv)
