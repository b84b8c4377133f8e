"""Synthetic run folders timed by a known model: what the fit from runs must recover (no training, milliseconds).

A folder holds what ``flopplan train`` writes (config.json, summary.json, ledger.jsonl, metrics.jsonl), with
every unit charged by the ledger's own functions at the recipe's shapes, its seconds given by ``TRUE_PHASES``
through the time-model forms, and every step's wall time its units plus the time outside them from
``TRUE_OUTSIDE``, whose features are derived here from the recipe (not by the code under test).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from flopplan.ledger import charge, ran
from flopplan.passes import BUCKET_OF, RoundLengths, RoundShape, by_bucket, step_passes
from flopplan.recipe import Recipe
from flopplan.runfile import RunSummary
from flopplan.timing import (
    ADAMW_BYTES_PER_PARAMETER,
    CHECKPOINT_BYTES_PER_PARAMETER,
    call_seconds,
    trainable_parameters,
)

TRUE_PHASES = {
    "train": {"form": "saturating", "throughput_max": 4e10, "tokens_half": 300.0, "overhead": 2e-3,
              "overhead_layer": 3e-4, "attention_throughput": 8e9, "adapter_throughput": 6e9,
              "adapter_token_layer": 2e-6},
    "forward": {"form": "saturating", "throughput_max": 9e10, "tokens_half": 200.0, "overhead": 1e-3,
                "overhead_layer": 1e-4, "attention_throughput": 2e10, "adapter_throughput": 1e10,
                "adapter_token_layer": 5e-7},
    "prefill": {"form": "saturating", "throughput_max": 7e10, "tokens_half": 150.0, "overhead": 4e-3,
                "overhead_layer": 2e-4, "attention_throughput": 1.5e10, "adapter_throughput": 8e9,
                "adapter_token_layer": 4e-7},
    "decode": {"form": "roofline", "throughput": 5e9, "bandwidth": 2e10, "overhead": 2e-3, "overhead_layer": 1e-4,
               "adapter_throughput": 3e9, "adapter_token_layer": 2e-5},
}
TRUE_OUTSIDE = {
    "round": {"seconds": 0.03, "seconds_per_rollout": 1e-4, "seconds_per_token": 4e-6,
              "seconds_per_scored_rollout": 3e-4},
    "optimizer_step": {"seconds": 5e-3, "seconds_per_tensor": 0.0, "seconds_per_byte": 1.5e-9},
    "evaluation": {"seconds": 0.02, "seconds_per_prompt": 0.0},
    "checkpoint": {"seconds": 0.015, "seconds_per_byte": 2e-9},
    "startup": {"seconds": 6.0, "seconds_per_parameter": 0.0},
}
BYTES_PER_ELEMENT = 4.0


def true_unit_seconds(charge_data: dict, recipe: Recipe) -> float:
    from flopplan.calibrate.runs import charge_calls

    calls, _ = charge_calls(charge_data, recipe)
    return sum(call_seconds(TRUE_PHASES[kind]["form"], TRUE_PHASES[kind], call, BYTES_PER_ELEMENT)
               for kind, call in calls)


def true_outside(recipe: Recipe, *, rollouts: int, evaluated: int, checkpoint: bool, tokens: int) -> float:
    """The time outside the phases of one step, from the recipe's counts (derived here, independently)."""
    params, tensors = trainable_parameters(recipe.policy_spec, recipe.lora)
    c = TRUE_OUTSIDE
    seconds = 0.0
    if rollouts:
        optimizer_steps = recipe.iterations * math.ceil(rollouts / recipe.optimizer_batch_size)
        scored = rollouts if recipe.reward_spec is not None else 0
        seconds += (c["round"]["seconds"] + c["round"]["seconds_per_rollout"] * rollouts
                    + c["round"]["seconds_per_token"] * tokens + c["round"]["seconds_per_scored_rollout"] * scored)
        seconds += optimizer_steps * (c["optimizer_step"]["seconds"] + c["optimizer_step"]["seconds_per_tensor"]
                                      * tensors + c["optimizer_step"]["seconds_per_byte"] * params
                                      * ADAMW_BYTES_PER_PARAMETER)
    if evaluated:
        seconds += c["evaluation"]["seconds"] + c["evaluation"]["seconds_per_prompt"] * evaluated
    if checkpoint:
        seconds += c["checkpoint"]["seconds"] + c["checkpoint"]["seconds_per_byte"] * params \
            * CHECKPOINT_BYTES_PER_PARAMETER
    return seconds


def step_charges(recipe: Recipe, evaluate: bool, rounds: bool = True) -> list:
    """The units of one step at the recipe's fixed shapes, charged by the ledger as the round's passes."""
    r = recipe
    passes = {x.phase: x for x in step_passes(RoundShape.of(r), RoundLengths.of(r))}
    p, k = int(r.prompt_len.mean), int(r.completion_len.mean)
    rows = r.rollouts_per_step
    charges = []
    if rounds:
        n = r.generation_batch_size
        charges += [charge(*(ran(passes[phase], [(p, k)] * n, (p, k)) for phase in ("rollout.prefill",
                                                                                   "rollout.decode")))
                    for _ in range(rows // n)]
        m = r.micro_batch_size

        def micro(phase: str):
            return charge(*(ran(passes[phase], [(p, k)] * m, (p, k)) for _ in range(rows // m)))

        charges += [micro(phase) for phase in ("old_logprobs", "reference") if phase in passes]
        if "reward" in passes:
            width = p + k + r.reward_overhead_tokens
            charges.append(charge(*(ran(passes["reward"], [(width, 0)] * r.group_size, (width, 0))
                                    for _ in range(r.prompts_per_step))))
        charges += [micro("update") for _ in range(r.iterations)]
    if evaluate:
        e, ek = r.eval_prompts, int(r.evaluation_completion_len.mean)
        ep = int(r.evaluation_prompt_len.mean)
        charges.append(charge(*(ran(passes[phase], [(ep, ek)] * e, (ep, ek)) for phase in ("eval.prefill",
                                                                                          "eval.decode"))))
    return charges


def write_run(folder: Path, recipe: Recipe, steps: int, *, seed: int = 0, noise: float = 0.0,
              measured: bool = False, checkpoint_every: int = 4, started: bool = True,
              share: float | None = None) -> Path:
    """A run folder of ``steps`` steps (a baseline evaluation first when the recipe evaluates), timed by the true
    model with log-normal ``noise``; ``measured``: the summary says it was counted with the FLOP meter; ``share``:
    the run had that share of its core (every time the truth over it) and its lines record its CPU seconds."""
    rng = random.Random(seed)
    folder.mkdir(parents=True)

    def jitter(seconds: float) -> float:
        return (seconds * math.exp(rng.gauss(0.0, noise)) if noise else seconds) / (share or 1.0)

    r = recipe
    p, k = int(r.prompt_len.mean), int(r.completion_len.mean)
    executed = dict.fromkeys(BUCKET_OF, 0)
    clock = 1.7e9
    process_started = clock - TRUE_OUTSIDE["startup"]["seconds"] / (share or 1.0)
    ledger, metrics = [], []
    first = True
    for step in range(0 if r.eval_every else 1, steps + 1):
        evaluate = bool(r.eval_every) and step % r.eval_every == 0
        charges = step_charges(r, evaluate, rounds=step > 0)
        lines = []
        for unit in charges:
            data = unit.to_data()
            data["seconds"] = round(jitter(true_unit_seconds(data, r)), 6)
            data["measured"] = unit.executed_total if measured else None
            lines.append(data)
            for phase, value in unit.executed.items():
                executed[phase] += value
        rollouts = r.rollouts_per_step if step > 0 else 0
        checkpoint = step - 1 > 0 and (step - 1) % checkpoint_every == 0
        outside = jitter(true_outside(r, rollouts=rollouts, evaluated=r.eval_prompts if evaluate else 0,
                                      checkpoint=checkpoint, tokens=rollouts * (p + k)))
        clock += sum(c["seconds"] for c in lines) + outside
        line = {"step": step, "flops": by_bucket(executed), "useful_flops": 0, "time": clock}
        if share is not None:
            line.update(cpu_seconds=(clock - process_started) * share, threads=1)
        if first and started:
            line["process_started"] = process_started
        first = False
        ledger.append({"step": step, "charges": lines})
        metrics.append(line)
    flops = by_bucket(executed)
    summary = RunSummary(model=r.policy, reward=str(r.reward), steps=steps, budget_flops=None, flops=flops,
                         useful_flops=flops, device="cpu", dtype="float32",
                         measured_flops=flops if measured else None,
                         measured_equals_closed_form=True if measured else None)
    (folder / "summary.json").write_text(json.dumps(summary.to_data()))
    (folder / "config.json").write_text(json.dumps({"flopplan_version": "test", "recipe": r.to_data(),
                                                    "checkpoint_every": checkpoint_every,
                                                    "measure_flops": measured}))
    (folder / "ledger.jsonl").write_text("".join(json.dumps(x) + "\n" for x in ledger))
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in metrics))
    return folder
