"""Run folders as timing observations (torch-free): what a time model is fitted on when it learns from real runs.

A metered run (the built-in trainer, TRL through the meter, a RACE pilot: all write the same run folder) records
every phase call of every committed step with its shapes, its exact FLOPs and its seconds (``ledger.jsonl``), and
a wall-clock ``time`` per committed step (``metrics.jsonl``); the first line a process writes also carries
``process_started``. From these, per run:

* :class:`TimedUnit`: one ledger charge (a ``generate`` call, a scoring or update pass, a reward-model pass): its
  seconds and the model calls it ran, rebuilt from its shapes with the same formulas the ledger charged (the FLOPs
  must come out equal to the ledger's, or the unit is left out with a note);
* :class:`TimedStep`: one committed step after the first: its wall time since the previous line, the seconds of
  its phase calls, and the features of the work it did outside them (a round, its optimizer steps, an evaluation,
  the checkpoint written after the previous step): :data:`flopplan.timing.NON_PHASE_TERMS`;
* :class:`TimedStartup`: a process's start to its first committed line, with the work of that line.

On a CPU, other processes on the machine slow a run down by taking its cores; each metrics line also records the
process's CPU seconds and threads, so a run's share of its cores (CPU seconds over wall seconds and threads, over
its timed steps) is known, and :func:`at_typical_share` puts every run's timings at the runs' typical share before
they are fitted: a run that happened to share the machine does not pass for slower work.

Timings taken under the FLOP meter (``--measure-flops``: the summary has ``measured_flops``) include the meter's
own overhead, so such runs are skipped with a note and never fitted on.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeGuard

from flopplan.errors import UserError
from flopplan.fileio import read_json, read_text
from flopplan.passes import RoundLengths, RoundShape, step_passes
from flopplan.recipe import Recipe
from flopplan.runfile import CONFIG, LEDGER, METRICS, SUMMARY, LedgerRecord, RunSummary, load_summary
from flopplan.timing import (
    NON_PHASE_TERMS,
    Call,
    RunWork,
    generate_calls,
    non_phase_features,
    sequence_call,
    trainable_parameters,
)

FITTED_TERMS = ("round", "optimizer_step", "evaluation", "checkpoint")
"""The non-phase terms a step's wall time shows (the start-up is fitted apart, on :class:`TimedStartup`)."""
GAP_FACTOR = 20.0
GAP_SECONDS = 1.0
"""A step whose time outside its phases is more than ``GAP_FACTOR`` times its run's median and more than
``GAP_SECONDS`` is a gap (a resume without a recorded start, the machine suspended), not a round: left out."""
MAX_SHARE = 1.1
"""A process's CPU seconds per thread over its wall seconds above this cannot be its threads' work (a little over
1 allows for the two clocks being read apart and a helper thread's work): its times are impossible, and refused."""


@dataclass(frozen=True)
class TimedUnit:
    run: str
    step: int
    unit: str
    seconds: float
    calls: tuple[tuple[str, Call], ...]  # (kind of work, call)


@dataclass(frozen=True)
class TimedStep:
    run: str
    step: int
    wall_seconds: float  # since the previous committed line
    phase_seconds: float  # the step's units, as the ledger timed them
    features: dict[str, tuple[float, ...]]  # non-phase term -> its features summed over its occurrences
    cpu_seconds: float | None = None  # the process's CPU seconds over the same span, per thread

    @property
    def outside_seconds(self) -> float:
        return self.wall_seconds - self.phase_seconds


@dataclass(frozen=True)
class TimedStartup:
    run: str
    seconds: float  # the process's start to its first committed line
    first: TimedStep  # that line's own work (its wall_seconds is the whole span)
    features: tuple[float, ...]  # of the start-up term
    core_share: float | None = None  # its CPU seconds over its wall seconds and threads (CPU runs)


@dataclass
class RunTiming:
    """The timing observations of one run folder."""

    name: str
    folder: str
    model: str
    engine: str
    device: str
    dtype: str
    steps: int
    recipe: Recipe
    units: list[TimedUnit] = field(default_factory=list)
    rounds: list[TimedStep] = field(default_factory=list)
    startups: list[TimedStartup] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    core_share: float | None = None  # of its timed steps: CPU seconds over wall seconds and threads (CPU runs)
    hardware: str = ""  # the machine, as its summary records it ("" in folders older than the record)

    def describe(self) -> dict[str, Any]:
        r = self.recipe
        return {"name": self.name, "model": self.model, "engine": self.engine, "steps": self.steps,
                "tuning": "full" if r.lora is None else f"lora r={r.lora_rank}", "reward": str(r.reward),
                "prompts_per_step": r.prompts_per_step, "group_size": r.group_size,
                "micro_batch": r.micro_batch_size, "iterations": r.iterations, "units": len(self.units),
                "rounds": len(self.rounds), "startups": len(self.startups), "core_share": self.core_share}


def read_runs(folders: list[str]) -> tuple[list[RunTiming], list[str]]:
    """The timing of each run folder, and a note per run left out (measured with the FLOP meter, or holding no
    timed step). A folder that is not a run, or a corrupt one, is a :class:`UserError` (one line)."""
    runs, notes = [], []
    names = _names(folders)
    for folder, name in zip(folders, names, strict=True):
        summary = load_summary(folder)
        if summary.measured_flops is not None:
            notes.append(f"{name}: skipped, it was measured with --measure-flops (its timings include the FLOP "
                         "meter's overhead)")
            continue
        run = read_run(folder, name, summary)
        if not run.units:
            notes.append(f"{name}: skipped, it holds no timed phase call")
            continue
        runs.append(run)
        notes += [f"{name}: {n}" for n in run.notes]
    return runs, notes


def _names(folders: list[str]) -> list[str]:
    """Short names of the folders: the last path component, or more of the path where those collide."""
    paths = [Path(f).resolve() for f in folders]
    for depth in range(1, 8):
        names = ["/".join(p.parts[-depth:]) for p in paths]
        if len(set(names)) == len(names):
            return names
    return [str(p) for p in paths]


def read_run(folder: str, name: str, summary: RunSummary) -> RunTiming:
    config = read_json(Path(folder) / CONFIG, "run config")
    if not isinstance(config, dict) or not isinstance(config.get("recipe"), dict):
        raise UserError(f"{str(Path(folder) / CONFIG)!r} is not a flopplan run config")
    recipe = Recipe.from_data(config["recipe"], f"run config {str(Path(folder) / CONFIG)!r}")
    run = RunTiming(name, str(folder), summary.model, summary.engine, summary.device, summary.dtype,
                    summary.steps, recipe, hardware=summary.hardware)
    records, ledger_cut = _ledger(Path(folder) / LEDGER)
    ledger = {record.step: record for record in records}
    logged, metrics_cut = _log(Path(folder) / METRICS, "metrics")
    run.notes += check_complete(name, {METRICS: ([line["step"] for line in logged], metrics_cut),
                                       LEDGER: (list(ledger), ledger_cut)}, summary.steps)
    bad = next((line for line in logged if "time" in line and not _number(line["time"])), None)
    if bad is not None:  # (a line without a time is a trainer's that did not date them; one dated so is corrupt)
        raise UserError(f"run {name}: {METRICS}: step {bad['step']}'s time {bad['time']!r} is not a number of seconds")
    metrics = [line for line in logged if _number(line.get("time"))]
    check_clocks(metrics, f"run {name}: {METRICS}", run.device)
    every = config.get("checkpoint_every")
    every = every if isinstance(every, int) and every > 0 else None
    work = RunWork.of(recipe)
    previous: dict[str, Any] | None = None
    mismatched = 0
    for line in metrics:
        record = ledger.get(line["step"])
        if record is None:
            previous = None
            continue
        units = []
        for charge in record.charges:
            unit = timed_unit(name, line["step"], charge, recipe)
            if unit is None:
                mismatched += 1
            else:
                units.append(unit)
        run.units += units
        step = TimedStep(name, line["step"], 0.0, sum(float(c.get("seconds", 0.0)) for c in record.charges),
                         step_features(record.charges, recipe, work, line["step"], every))
        started = line.get("process_started")
        cpu = _cpu(line, run.device)
        if _number(started):  # a process's first line: its start-up, and no round (the span includes it)
            span = float(line["time"]) - float(started)
            # imports and loading run on one thread: the start-up's share is its CPU seconds over its span
            share = min(cpu[0] / span, 1.0) if cpu is not None and span > 0 else None
            run.startups.append(TimedStartup(name, span, step, non_phase_features("startup", work), share))
        elif previous is not None:
            before = _cpu(previous, run.device)
            run.rounds.append(TimedStep(name, step.step, float(line["time"]) - float(previous["time"]),
                                        step.phase_seconds, step.features,
                                        (cpu[0] - before[0]) / cpu[1] if cpu is not None and before is not None
                                        else None))
        previous = line
    if mismatched:
        run.notes.append(f"{mismatched} phase call{'s' if mismatched > 1 else ''} left out: untimed, or their shapes "
                         "do not give the FLOPs the ledger charged (a multi-process run?)")
    run.rounds, gaps = _without_gaps(run.rounds)
    if gaps:
        run.notes.append(f"{gaps} step{'s' if gaps > 1 else ''} left out as gaps (far more time outside the phases "
                         "than the run's other steps: a resume or a pause)")
    timed = [r for r in run.rounds if r.cpu_seconds is not None]
    wall = sum(r.wall_seconds for r in timed)
    if timed and len(timed) == len(run.rounds) and wall > 0:
        run.core_share = sum(r.cpu_seconds or 0.0 for r in timed) / wall
        if run.core_share > MAX_SHARE:
            raise UserError(f"run {name}: {METRICS} gives its timed steps {run.core_share:.2f} CPU seconds per thread "
                            "per wall second (at most 1 is possible): its times are not real")
    return run


def check_clocks(lines: list[dict[str, Any]], where: str, device: str) -> None:
    """Refuse (one line) a log whose times cannot be real: a wall time before the previous line's, a process that
    started after its first line, CPU seconds below 0 or going back within a process, or a start-up with more CPU
    seconds per thread than wall seconds (:data:`MAX_SHARE`)."""
    previous: dict[str, Any] | None = None
    for line in lines:
        step, now, started = line.get("step"), float(line["time"]), line.get("process_started")
        if previous is not None and now < float(previous["time"]):
            raise UserError(f"{where}: step {step}'s time {now!r} is before step {previous.get('step')}'s "
                            f"({previous['time']!r}): its times go backwards")
        if started is not None and (not _number(started) or started > now):
            raise UserError(f"{where}: step {step}'s process started at {started!r}, after its line's time {now!r} "
                            "(a negative start-up)")
        cpu = _cpu(line, device)
        if cpu is not None:
            before = _cpu(previous, device) if previous is not None and started is None else None
            if cpu[0] < 0 or (before is not None and cpu[0] < before[0]):
                raise UserError(f"{where}: step {step}'s CPU seconds {cpu[0]!r} are negative or below the previous "
                                "line's in the same process")
            if _number(started) and now > started and cpu[0] / cpu[1] / (now - started) > MAX_SHARE:
                raise UserError(f"{where}: step {step}'s process used {cpu[0] / cpu[1] / (now - started):.2f} CPU "
                                "seconds per thread per wall second since it started (at most 1 is possible)")
        previous = line


def _cpu(line: dict[str, Any], device: str) -> tuple[float, int] | None:
    """A CPU run's CPU seconds at ``line`` and the threads it computed on (None on other devices, or from a trainer
    that did not record them)."""
    cpu, threads = line.get("cpu_seconds"), line.get("threads")
    if not device.startswith("cpu") or not _number(cpu) or not isinstance(threads, int) or threads < 1:
        return None
    return float(cpu), threads


def at_typical_share(runs: list[RunTiming]) -> tuple[list[RunTiming], float | None]:
    """The runs with their timings scaled to the typical (median) share of a core the runs' timed steps had (a
    process that had half a core took twice as long): a run's phase calls and steps by its own share over the
    typical one, a start-up (with the first line's own work within it) by the start-up's own share over the same
    typical one, so that every term of the profile assumes the one share it records; timings whose share is
    unknown are kept as they are. The runs' typical share, or None when no run records one."""
    shares = [r.core_share for r in runs if r.core_share is not None]
    if not shares:
        return runs, None
    typical = statistics.median(shares)
    out = []
    for run in runs:
        f = run.core_share / typical if run.core_share is not None else 1.0
        startups = []
        for s in run.startups:
            g = s.core_share / typical if s.core_share else 1.0
            startups.append(replace(s, seconds=s.seconds * g, first=_scaled(s.first, g)))
        out.append(replace(run, units=[replace(u, seconds=u.seconds * f) for u in run.units],
                           rounds=[_scaled(r, f) for r in run.rounds], startups=startups))
    return out, typical


def _scaled(step: TimedStep, factor: float) -> TimedStep:
    return replace(step, wall_seconds=step.wall_seconds * factor, phase_seconds=step.phase_seconds * factor)


def _without_gaps(rounds: list[TimedStep]) -> tuple[list[TimedStep], int]:
    if not rounds:
        return rounds, 0
    typical = statistics.median(max(r.outside_seconds, 0.0) for r in rounds)
    kept = [r for r in rounds if r.outside_seconds <= max(GAP_SECONDS, GAP_FACTOR * typical)]
    return kept, len(rounds) - len(kept)


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _log(path: Path, what: str) -> tuple[list[dict[str, Any]], bool]:
    """The records of a JSONL log, and whether its last line was cut short; a line that is not a record is a
    corrupt log, unless it is the last (a kill can cut the last line short)."""
    if not path.exists():
        raise UserError(f"{str(path.parent)!r} is not a flopplan run folder (no {path.name})")
    text = read_text(path, f"run {what}")
    lines = [line for line in text.splitlines() if line.strip()]
    out: list[dict[str, Any]] = []
    for i, line in enumerate(lines):
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            item = None
        if not isinstance(item, dict) or not isinstance(item.get("step"), int):
            if i == len(lines) - 1:
                return out, True
            raise UserError(f"{str(path)!r} is corrupt: line {i + 1} is not a {what} record")
        out.append(item)
    return out, bool(text.strip()) and not text.endswith("\n")


def _ledger(path: Path) -> tuple[list[LedgerRecord], bool]:
    records = []
    lines, cut = _log(path, "ledger")
    for i, line in enumerate(lines):
        record = LedgerRecord.from_data(line)
        if record is None:
            raise UserError(f"{str(path)!r} is corrupt: record {i + 1} is not a ledger line")
        records.append(record)
    return records, cut


def check_complete(name: str, logs: dict[str, tuple[list[int], bool]], steps: int) -> list[str]:
    """Refuse (one line) a run whose ``logs`` (file -> its steps, and whether its last line was cut short) stop
    before the last step its summary records: cut short after the run (a copy, a full disk), its timings would be
    a part of the run passing for all of it. A last line cut short by a kill, with the steps the summary records
    all there, is read up to its last whole line: the notes say so."""
    notes = []
    for file, (logged, cut) in logs.items():
        last = max(logged, default=0)
        if last < steps:
            raise UserError(f"run {name}: {file} ends at step {last}{' in a line cut short' if cut else ''}, but "
                            f"its {SUMMARY} records {steps} steps: the log is incomplete (restore it, or leave the "
                            "run out)")
        if cut:
            notes.append(f"{file} ends in a line cut short (a kill?): read up to its last whole line")
    return notes


# -- a charge -> the calls it ran --------------------------------------------------------------------------------

def timed_unit(run: str, step: int, charge: dict[str, Any], recipe: Recipe) -> TimedUnit | None:
    """The calls of one ledger charge, rebuilt from its shapes; None when they do not give the FLOPs it charged, or
    when it took no measurable time (the ledger keeps microseconds)."""
    seconds = charge.get("seconds")
    if not _number(seconds) or seconds < 0:
        raise UserError(f"run {run}: step {step}'s {charge.get('unit')!r} charge has no time (seconds {seconds!r})")
    if seconds == 0:
        return None
    try:
        calls, flops = charge_calls(charge, recipe)
    except (KeyError, TypeError, ValueError, IndexError):
        raise UserError(f"run {run}: step {step}'s {charge.get('unit')!r} charge has malformed shapes") from None
    if flops != sum(charge["executed"].values()):
        return None
    return TimedUnit(run, step, str(charge["unit"]), float(seconds), tuple(calls))


def charge_calls(charge: dict[str, Any], recipe: Recipe) -> tuple[list[tuple[str, Call]], int]:
    """(kind, call) of every model call a charge ran, and their exact FLOPs in total (what the ledger charged):
    each call evaluated as the round's pass of its unit (:func:`flopplan.passes.step_passes`: the model, adapters,
    training and head), at the widths the charge recorded."""
    unit, shapes = charge["unit"], charge["shapes"]
    passes = {p.phase: p for p in step_passes(RoundShape.of(recipe), RoundLengths.of(recipe))}
    if unit in ("rollout", "eval"):  # a run's eval calls charge as its rollouts do (the same adapters)
        prefill, decode = passes["rollout.prefill"], passes["rollout.decode"]
        b, p, k = int(shapes["batch"]), int(shapes["prompt_padded"]), int(shapes["generated"])
        total = prefill.call_flops(b, p, k).total + decode.call_flops(b, p, k).total
        return generate_calls(prefill.spec, b, p, k, prefill.lora, prefill.conv), int(total)
    if unit not in ("old_logprobs", "reference", "update", "reward"):
        raise ValueError(f"unknown unit {unit!r}")
    if unit not in passes:
        raise ValueError(f"a {unit} charge in a run whose round has no {unit} pass")
    # a reward model's recorded width holds its template; a micro-batch without its own tokens: rows x width
    step_pass = replace(passes[unit], extra=0, head_tokens=None)
    calls: list[tuple[int, int, int, int | None]] = [
        (int(rows), int(width), 0, None) for rows, width in shapes["batches"]] if unit == "reward" else [
        (int(b[0]), int(b[1]), int(b[2]), int(b[3]) if len(b) > 3 else None) for b in shapes["micro_batches"]]
    out, total = [], 0
    for rows, p, k, own in calls:
        terms = step_pass.call_flops(rows, p, k, own)
        out.append((step_pass.kind, sequence_call(terms, rows * (p + k), step_pass.spec.num_layers)))
        total += int(terms.total)
    return out, total


# -- a step -> the features of its work outside the phases -------------------------------------------------------

def step_features(charges: tuple[dict[str, Any], ...], recipe: Recipe, work: RunWork, step: int,
                  checkpoint_every: int | None) -> dict[str, tuple[float, ...]]:
    """The non-phase features of one committed step, from what its charges ran: a round (its rollouts, their
    tokens, those a reward model scored), its optimizer steps (an update pass makes one per ``optimizer_batch``
    rows), an evaluation when it ran one, and the checkpoint written after the previous step."""
    rollouts = [c["shapes"] for c in charges if c.get("unit") == "rollout"]
    rows = sum(int(s["batch"]) for s in rollouts)
    tokens = sum(int(s["batch"]) * (int(s["prompt_padded"]) + int(s["generated"])) for s in rollouts)
    scored = rows if any(c.get("unit") == "reward" for c in charges) else 0
    passes = sum(1 for c in charges if c.get("unit") == "update")
    evaluated = sum(int(c["shapes"]["batch"]) for c in charges if c.get("unit") == "eval")
    params, tensors = trainable_parameters(recipe.policy_spec, recipe.lora)
    batch = recipe.optimizer_batch_size
    mine = RunWork(rows, tokens, scored, passes * -(-rows // batch) if rows else 0, tensors, params, evaluated,
                   work.parameters_loaded)
    out: dict[str, tuple[float, ...]] = {}
    if rows:
        out["round"] = non_phase_features("round", mine)
        out["optimizer_step"] = tuple(mine.optimizer_steps * f for f in non_phase_features("optimizer_step", mine))
    if evaluated:
        out["evaluation"] = non_phase_features("evaluation", mine)
    previous = step - 1
    if checkpoint_every and previous > 0 and previous % checkpoint_every == 0:
        out["checkpoint"] = non_phase_features("checkpoint", mine)
    return out


def design_row(features: dict[str, tuple[float, ...]]) -> list[float]:
    """One step's features in the order of :data:`FITTED_TERMS` and their coefficients (0 where absent)."""
    row: list[float] = []
    for term in FITTED_TERMS:
        row += list(features.get(term, (0.0,) * len(NON_PHASE_TERMS[term])))
    return row


def coefficient_names() -> list[tuple[str, str]]:
    """(term, coefficient) in the order of :func:`design_row`."""
    return [(term, name) for term in FITTED_TERMS for name in NON_PHASE_TERMS[term]]
