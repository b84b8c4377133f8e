"""Run folders: the typed, versioned seam between a metered run (the built-in trainer, the TRL meter, a RACE pilot)
and whatever reads it (``flopplan report``, RACE's analysis, the time-model fit).

A run folder holds ``config.json`` (what was asked), ``summary.json`` (a :class:`RunSummary`: what was spent,
by bucket, against the budget and the plan), ``metrics.jsonl`` (one :class:`StepRecord` per step: metrics and
cumulative FLOPs), ``ledger.jsonl`` (one :class:`LedgerRecord` per step: every phase call with its shapes,
FLOPs and seconds) and ``evaluations.jsonl`` (one :class:`EvalRecord` per evaluation and target: the score of
every evaluation prompt, what RACE fits; :func:`load_evaluations`). Reading a summary is one call
(:func:`load_summary`, :func:`load_run`) with one clear line for a bad file. The layout is versioned by
``RUN_VERSION``, recorded in the config and the summary.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flopplan import __version__
from flopplan.errors import UserError, is_int, is_number
from flopplan.fileio import read_json, read_step_log
from flopplan.passes import BUCKET_OF
from flopplan.planfile import PlanEntry, bucket_flops

RUN_VERSION = 1
SUMMARY = "summary.json"
METRICS = "metrics.jsonl"
LEDGER = "ledger.jsonl"
CONFIG = "config.json"
EVALUATIONS = "evaluations.jsonl"


@dataclass(frozen=True)
class PlanReference:
    """The plan a run validates: its steps and FLOPs by bucket, the recipe fields the run changed, and, for a plan
    priced with a profile, its seconds (per phase and per term outside the phases) and the profile's name."""

    steps: int
    flops: dict[str, int]
    budget_flops: int | None = None
    overridden: tuple[str, ...] = ()
    seconds: dict[str, float] | None = None
    profile: str | None = None
    core_share: float | None = None  # the share of a core the profile's times assume (a CPU profile from runs)

    @staticmethod
    def of(entry: PlanEntry) -> PlanReference:
        """The reference a run of the plan entry ``entry`` records."""
        profile = entry.profile or {}
        name = f"{profile.get('device', '?')}, {profile.get('source', 'profile')}" if entry.profile else None
        share = profile.get("core_share")
        return PlanReference(entry.steps, entry.flops, entry.budget_flops, entry.overridden,
                             dict(entry.seconds) if entry.seconds is not None else None, name,
                             float(share) if is_number(share) else None)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"steps": self.steps, "flops": self.flops, "budget_flops": self.budget_flops,
                                "overridden": list(self.overridden)}
        if self.seconds is not None:
            data["seconds"], data["profile"] = self.seconds, self.profile
        if self.core_share is not None:
            data["core_share"] = self.core_share
        return data

    @staticmethod
    def from_data(data: Any, where: str) -> PlanReference:
        if not isinstance(data, dict) or not is_int(data.get("steps")):
            raise UserError(f"{where}: plan is malformed")
        budget = data.get("budget_flops")
        if budget is not None and not is_number(budget):
            raise UserError(f"{where}: plan budget_flops is not a number")
        overridden = data.get("overridden") or []
        if not isinstance(overridden, list):
            raise UserError(f"{where}: plan overridden is not a list")
        seconds = data.get("seconds")
        if seconds is not None and (not isinstance(seconds, dict) or not all(
                is_number(v) and v >= 0 for v in seconds.values())):
            raise UserError(f"{where}: plan seconds must map phases to numbers >= 0")
        profile, share = data.get("profile"), data.get("core_share")
        if share is not None and not is_number(share):
            raise UserError(f"{where}: plan core_share is not a number")
        return PlanReference(int(data["steps"]), bucket_flops(data.get("flops"), f"{where}: plan flops"),
                             None if budget is None else int(budget), tuple(str(o) for o in overridden),
                             None if seconds is None else {str(k): float(v) for k, v in seconds.items()},
                             None if profile is None else str(profile), None if share is None else float(share))


@dataclass(frozen=True)
class RunSummary:
    """What a run spent and learned. FLOPs are the ledger's exact integers: ``flops`` as executed (padding
    included), ``useful_flops`` without padding, ``measured_flops`` FlopCounterMode's count when measured;
    ``abandoned_flops`` (steps interrupted and rolled back) and ``lost_flops`` (steps a kill lost, redone on
    resume) were spent too and count against the budget, lost work unless ``lost_charged`` is false (a run asked
    to keep its steps those of an uninterrupted run: ``flopplan train --lost-outside-budget``)."""

    model: str
    reward: str
    steps: int
    budget_flops: int | None
    flops: dict[str, int]
    useful_flops: dict[str, int]
    phases: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    abandoned_flops: int = 0
    lost_flops: int = 0
    lost_charged: bool = True
    stop_reason: str = ""
    stop: dict[str, Any] | None = None  # the stop decision as data (flopplan.guard.StopDecision.to_data)
    final: dict[str, Any] | None = None
    eval_accuracy: tuple[tuple[int, float, int], ...] = ()  # (step, accuracy, FLOPs spent) per evaluation
    chance: float | None = None
    measured_flops: dict[str, int] | None = None
    measured_by_unit: dict[str, dict[str, Any]] | None = None
    measured_equals_closed_form: bool | None = None
    interrupted: dict[str, Any] | None = None
    random_init_policy: bool = False
    random_init_reward_model: bool = False
    conventions: dict[str, str] = field(default_factory=dict)
    device: str = ""
    dtype: str = ""
    engine: str = "builtin"
    engine_checks: dict[str, Any] = field(default_factory=dict)  # e.g. TRL's logged num_tokens against the meter's
    plan: PlanReference | None = None
    flopplan_version: str = __version__
    wall_seconds: float | None = None  # the run's processes, each from its start to its last summary (None: unknown)
    core_share: float | None = None  # a CPU run: the share of its cores the (last) process had

    @property
    def spent(self) -> int:
        """Everything the run spent: its buckets plus abandoned and lost work."""
        return self.flops["total"] + self.abandoned_flops + self.lost_flops

    @property
    def leftover_flops(self) -> int | None:
        return None if self.budget_flops is None else self.budget_flops - self.charged

    @property
    def charged(self) -> int:
        """What counts against the budget."""
        return self.spent - (0 if self.lost_charged else self.lost_flops)

    @property
    def within_budget(self) -> bool:
        return self.budget_flops is None or self.charged <= self.budget_flops

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "flopplan_run_version": RUN_VERSION, "flopplan_version": self.flopplan_version, "engine": self.engine,
            "model": self.model, "reward": self.reward, "steps": self.steps, "budget_flops": self.budget_flops,
            "flops": self.flops, "useful_flops": self.useful_flops, "phases": self.phases, "seconds": self.seconds,
            "leftover_flops": self.leftover_flops, "abandoned_flops": self.abandoned_flops,
            "lost_flops": self.lost_flops, "lost_charged": self.lost_charged,
            "within_budget": self.within_budget, "stop_reason": self.stop_reason,
            "final": self.final, "eval_accuracy": [list(e) for e in self.eval_accuracy], "chance": self.chance,
            "random_init_policy": self.random_init_policy, "random_init_reward_model": self.random_init_reward_model,
            "conventions": self.conventions, "device": self.device, "dtype": self.dtype,
        }
        if self.measured_flops is not None:
            data["measured_flops"] = self.measured_flops
            data["measured_by_unit"] = self.measured_by_unit
            data["measured_equals_closed_form"] = self.measured_equals_closed_form
        if self.stop is not None:
            data["stop"] = self.stop
        if self.interrupted:
            data["interrupted"] = self.interrupted
        if self.engine_checks:
            data["engine_checks"] = self.engine_checks
        if self.plan is not None:
            data["plan"] = self.plan.to_data()
        if self.wall_seconds is not None:
            data["wall_seconds"] = round(self.wall_seconds, 3)
        if self.core_share is not None:
            data["core_share"] = round(self.core_share, 3)
        return data

    @staticmethod
    def from_data(data: Any, where: str = "run summary") -> RunSummary:
        """A summary as :meth:`to_data` writes it; a malformed one is one line naming the first problem."""
        if not isinstance(data, dict):
            raise UserError(f"{where} is not a flopplan run summary: not an object")
        version = data.get("flopplan_run_version")
        if version != RUN_VERSION:
            raise UserError(f"{where} is not a flopplan run summary of version {RUN_VERSION} "
                            f"(flopplan_run_version {version!r})")

        def bad(problem: str) -> UserError:
            return UserError(f"{where} is not a flopplan run summary: {problem}")

        budget = data.get("budget_flops")
        if budget is not None and (not is_int(budget) or budget <= 0):
            raise bad("budget_flops is not a positive integer")
        for key in ("steps", "abandoned_flops", "lost_flops"):
            if not is_int(data.get(key, 0)) or data.get(key, 0) < 0:
                raise bad(f"{key} is not a non-negative integer")
        chance = data.get("chance")
        if chance is not None and (not is_number(chance) or not 0 <= chance <= 1):
            raise bad("chance is not a number between 0 and 1")
        evals = data.get("eval_accuracy") or []
        if not isinstance(evals, list) or not all(
                isinstance(e, list) and len(e) == 3 and all(is_number(v) for v in e) for e in evals):
            raise bad("eval_accuracy is malformed")
        measured = data.get("measured_flops")
        for key in ("phases", "seconds", "conventions"):
            if not isinstance(data.get(key, {}), dict):
                raise bad(f"{key} is not an object")
        final = data.get("final")
        if final is not None and not isinstance(final, dict):
            raise bad("final is not an object")
        wall, share = data.get("wall_seconds"), data.get("core_share")
        if wall is not None and (not is_number(wall) or wall < 0):
            raise bad("wall_seconds is not a number >= 0")
        if share is not None and (not is_number(share) or not 0 <= share <= 1):
            raise bad("core_share is not a share in [0, 1]")
        try:
            flops = bucket_flops(data.get("flops"), "flops")
            useful = bucket_flops(data.get("useful_flops"), "useful_flops")
            measured_flops = None if measured is None else bucket_flops(measured, "measured_flops")
            plan = None if data.get("plan") is None else PlanReference.from_data(data["plan"], "plan")
        except UserError as exc:
            raise bad(str(exc)) from None
        return RunSummary(
            model=str(data.get("model", "")), reward=str(data.get("reward", "")), steps=int(data.get("steps", 0)),
            budget_flops=budget, flops=flops, useful_flops=useful, phases=dict(data.get("phases", {})),
            seconds=dict(data.get("seconds", {})), abandoned_flops=int(data.get("abandoned_flops", 0)),
            lost_flops=int(data.get("lost_flops", 0)), lost_charged=data.get("lost_charged", True) is not False,
            stop_reason=str(data.get("stop_reason", "")),
            stop=data["stop"] if isinstance(data.get("stop"), dict) else None, final=final,
            eval_accuracy=tuple((int(s), float(a), int(f)) for s, a, f in evals),
            chance=None if chance is None else float(chance), measured_flops=measured_flops,
            measured_by_unit=data.get("measured_by_unit"),
            measured_equals_closed_form=data.get("measured_equals_closed_form"),
            interrupted=data.get("interrupted"), random_init_policy=bool(data.get("random_init_policy")),
            random_init_reward_model=bool(data.get("random_init_reward_model")),
            conventions=dict(data.get("conventions", {})), device=str(data.get("device", "")),
            dtype=str(data.get("dtype", "")), engine=str(data.get("engine", "builtin")),
            engine_checks=dict(data.get("engine_checks") or {}), plan=plan,
            flopplan_version=str(data.get("flopplan_version", "")),
            wall_seconds=None if wall is None else float(wall), core_share=None if share is None else float(share))


@dataclass(frozen=True)
class StepRecord:
    """One line of ``metrics.jsonl``: a step's metrics (step 0: the baseline evaluation) and the FLOPs spent so
    far, by bucket."""

    step: int
    metrics: dict[str, Any]
    flops: dict[str, int]
    useful_flops: int
    time: float

    def to_data(self) -> dict[str, Any]:
        return {"step": self.step, **self.metrics, "flops": self.flops, "useful_flops": self.useful_flops,
                "time": self.time}

    @staticmethod
    def from_data(data: dict[str, Any]) -> StepRecord | None:
        """The record, or None for a line that is not one (a kill can cut the last line short)."""
        try:
            flops = bucket_flops(data.get("flops"), "flops")
        except UserError:
            return None
        useful = data.get("useful_flops")
        metrics = {k: v for k, v in data.items() if k not in ("step", "flops", "useful_flops", "time")}
        return StepRecord(int(data["step"]), metrics, flops, useful if is_int(useful) else 0,
                          float(data.get("time", 0.0)) if is_number(data.get("time", 0.0)) else 0.0)


@dataclass(frozen=True)
class LedgerRecord:
    """One line of ``ledger.jsonl``: the phase calls a step charged, each with its phase, FLOPs executed and
    useful by sub-phase, FlopCounterMode's count when measured, seconds and shapes."""

    step: int
    charges: tuple[dict[str, Any], ...]
    partial: bool = False  # a unit of the step in progress (progress.jsonl), before the step commits

    @property
    def executed_flops(self) -> int:
        return sum(sum(c["executed"].values()) for c in self.charges)

    def to_data(self) -> dict[str, Any]:
        return {"step": self.step, "charges": list(self.charges), **({"partial": True} if self.partial else {})}

    @staticmethod
    def from_data(data: dict[str, Any]) -> LedgerRecord | None:
        charges = data.get("charges")
        if not isinstance(charges, list) or not all(
                isinstance(c, dict) and isinstance(c.get("executed"), dict)
                and all(k in BUCKET_OF and is_int(v) for k, v in c["executed"].items()) for c in charges):
            return None
        return LedgerRecord(int(data["step"]), tuple(charges), bool(data.get("partial", False)))


@dataclass(frozen=True)
class EvalRecord:
    """One line of ``evaluations.jsonl``: one evaluation target scored after ``step`` (0: the baseline before any
    update). ``scores``: 1 or 0 per evaluation prompt (greedy completion correct by the task's rule), in the
    target's fixed prompt order, the same for every run of the task (:mod:`flopplan.train.targets`), so runs pair
    prompt by prompt. ``train_flops``: the ledger's rollout + learning + feedback FLOPs so far (evaluations
    excluded: 0 at the baseline); ``flops``: every bucket so far, evaluations included (this one's too). Both leave
    out abandoned and lost work, so a resumed run's records equal an uninterrupted run's."""

    step: int
    target: str
    train_flops: int
    flops: int
    accuracy: float
    scores: tuple[int, ...]

    @property
    def prompts(self) -> int:
        return len(self.scores)

    def to_data(self) -> dict[str, Any]:
        return {"step": self.step, "target": self.target, "train_flops": self.train_flops, "flops": self.flops,
                "accuracy": self.accuracy, "scores": list(self.scores), "prompts": self.prompts}

    @staticmethod
    def from_data(data: Any) -> EvalRecord | None:
        """The record, or None for a line that is not one (a kill can cut the last line short)."""
        if not isinstance(data, dict):
            return None
        scores = data.get("scores")
        ok = (is_int(data.get("step")) and isinstance(data.get("target"), str) and is_int(data.get("train_flops"))
              and is_int(data.get("flops")) and is_number(data.get("accuracy")) and isinstance(scores, list)
              and all(s in (0, 1) and is_int(s) for s in scores) and data.get("prompts") == len(scores))
        if not ok:
            return None
        return EvalRecord(int(data["step"]), data["target"], int(data["train_flops"]), int(data["flops"]),
                          float(data["accuracy"]), tuple(int(s) for s in scores or ()))


def load_evaluations(folder: str | Path, target: str | None = None) -> list[EvalRecord]:
    """The evaluations of a run folder in the order they ran (each step's targets in the run's order), optionally
    of one target; a line a kill cut short is skipped; no file (a run without evaluation): none."""
    records = (EvalRecord.from_data(d) for d in read_step_log(Path(folder) / EVALUATIONS))
    return [r for r in records if r is not None and (target is None or r.target == target)]


REWARD_MODEL_CARD = "reward_model.json"
REWARD_MODEL_VERSION = 1


@dataclass(frozen=True)
class RewardModelCard:
    """``reward_model.json`` beside a learned reward model (``flopplan reward-model train``): how it was trained
    and what it cost, the upfront FLOPs a feedback arm pays before its first step, and how well it agrees with the
    rule it stands in for.

    ``training_flops``: forward + backward of every training batch as executed (right-padded to its longest row),
    flopplan's exact count; ``measured_training_flops``: FlopCounterMode's count of the same (``--measure-flops``).
    ``evaluation_flops``: the forwards that checked it, the early stop's validation samples and the held-out ones
    of ``agreement`` (accuracy at 0.5, AUC, accuracy by kind of completion: the answer, a wrong digit, two
    digits, random tokens).
    ``steps``: the optimizer steps it ran, ``max_steps`` at most (it stops at the first check reaching
    ``target_agreement``)."""

    architecture: str
    params: int
    task: str
    samples: int
    held_out_samples: int
    steps: int
    batch: int
    lr: float
    seed: int
    training_flops: int
    evaluation_flops: int
    agreement: dict[str, Any]
    mix: dict[str, float] = field(default_factory=dict)
    measured_training_flops: int | None = None
    measured_evaluation_flops: int | None = None
    max_steps: int | None = None
    target_agreement: float | None = None
    validation_samples: int = 0
    command: str = ""
    flopplan_version: str = __version__

    @property
    def upfront_flops(self) -> int:
        """What the reward model cost before any policy used it: its training and its agreement check."""
        return self.training_flops + self.evaluation_flops

    def to_data(self) -> dict[str, Any]:
        data = {"flopplan_reward_model_version": REWARD_MODEL_VERSION, "flopplan_version": self.flopplan_version,
                "architecture": self.architecture, "params": self.params, "task": self.task,
                "samples": self.samples, "held_out_samples": self.held_out_samples, "mix": self.mix,
                "steps": self.steps, "max_steps": self.max_steps, "target_agreement": self.target_agreement,
                "validation_samples": self.validation_samples, "batch": self.batch, "lr": self.lr, "seed": self.seed,
                "training_flops": self.training_flops, "measured_training_flops": self.measured_training_flops,
                "evaluation_flops": self.evaluation_flops,
                "measured_evaluation_flops": self.measured_evaluation_flops, "upfront_flops": self.upfront_flops,
                "agreement": self.agreement, "output": "probability", "command": self.command}
        if self.measured_training_flops is not None:
            data["measured_equals_closed_form"] = (self.measured_training_flops == self.training_flops
                                                   and self.measured_evaluation_flops == self.evaluation_flops)
        return data

    @staticmethod
    def from_data(data: Any, where: str = "reward model card") -> RewardModelCard:
        if not isinstance(data, dict) or data.get("flopplan_reward_model_version") != REWARD_MODEL_VERSION:
            raise UserError(f"{where} is not a flopplan reward model card of version {REWARD_MODEL_VERSION}")
        problem = _card_problem(data)
        if problem:
            raise UserError(f"{where} is malformed: {problem}")
        return RewardModelCard(
            architecture=data["architecture"], params=data["params"], task=data["task"], samples=data["samples"],
            held_out_samples=data["held_out_samples"], steps=data["steps"], batch=data["batch"],
            lr=float(data["lr"]), seed=data["seed"], training_flops=data["training_flops"],
            evaluation_flops=data["evaluation_flops"], agreement=dict(data["agreement"]),
            mix=dict(data.get("mix") or {}), measured_training_flops=data.get("measured_training_flops"),
            measured_evaluation_flops=data.get("measured_evaluation_flops"), max_steps=data.get("max_steps"),
            target_agreement=data.get("target_agreement"), validation_samples=data.get("validation_samples", 0),
            command=str(data.get("command", "")), flopplan_version=str(data.get("flopplan_version", "")))


def _card_problem(data: dict[str, Any]) -> str | None:
    """The first thing wrong with a card's fields, or None."""
    for key in ("architecture", "task"):
        if not isinstance(data.get(key), str) or not data[key]:
            return f"{key} is not a name"
    for key in ("params", "samples", "held_out_samples", "steps", "batch", "seed", "training_flops",
                "evaluation_flops"):
        if not is_int(data.get(key)) or data[key] < 0:
            return f"{key} is not a count"
    for key in ("measured_training_flops", "measured_evaluation_flops", "max_steps", "validation_samples"):
        if data.get(key) is not None and (not is_int(data[key]) or data[key] < 0):
            return f"{key} is not a count"
    if not is_number(data.get("lr")) or data["lr"] <= 0:
        return "lr is not a positive number"
    target = data.get("target_agreement")
    if target is not None and (not is_number(target) or not 0 < target <= 1):
        return "target_agreement is not in (0, 1]"
    agreement = data.get("agreement")
    if not isinstance(agreement, dict) or not is_number(agreement.get("accuracy")) \
            or not 0 <= agreement["accuracy"] <= 1:
        return "agreement has no accuracy in [0, 1]"
    if data.get("mix") is not None and not isinstance(data["mix"], dict):
        return "mix is not a table"
    # the stored total must be the sum of its parts: a card edited by hand (or cut short) is caught here
    if "upfront_flops" in data and data["upfront_flops"] != data["training_flops"] + data["evaluation_flops"]:
        return "upfront_flops is not training_flops + evaluation_flops"
    return None


def load_reward_model_card(path: str | Path) -> RewardModelCard:
    """The card of a learned reward model: ``path`` is its folder (``flopplan reward-model train --out``) or its
    ``reward_model.json``. Torch-free; a missing or bad card is one clear :class:`UserError`."""
    path = Path(path)
    file = path / REWARD_MODEL_CARD if path.is_dir() else path
    if not file.exists():
        if path.is_dir():
            raise UserError(f"{str(path)!r} is not a flopplan reward model (no {REWARD_MODEL_CARD})")
        raise UserError(f"cannot read the reward model card {str(path)!r}: no such file or folder")
    return RewardModelCard.from_data(read_json(file, "reward model card"), f"reward model card {str(file)!r}")


def read_metrics(folder: str | Path) -> list[StepRecord]:
    return [r for r in (StepRecord.from_data(d) for d in read_step_log(Path(folder) / METRICS)) if r is not None]


def read_ledger(folder: str | Path, partial: bool = True) -> list[LedgerRecord]:
    """The ledger lines of a run (``partial=False``: committed steps only)."""
    records = (LedgerRecord.from_data(d) for d in read_step_log(Path(folder) / LEDGER))
    return [r for r in records if r is not None and (partial or not r.partial)]


def load_summary(folder: str | Path) -> RunSummary:
    """The summary of a run folder, checked; one clear line when the folder is not a run."""
    path = Path(folder) / SUMMARY
    if not path.exists():
        raise UserError(f"{str(folder)!r} is not a flopplan run folder (no {SUMMARY})")
    return RunSummary.from_data(read_json(path, "run summary"), repr(str(path)))


def load_run(folder: str | Path) -> tuple[RunSummary, list[StepRecord]]:
    return load_summary(folder), read_metrics(folder)


def jsonl(records: Iterable[StepRecord | LedgerRecord]) -> str:
    import json

    return "".join(json.dumps(r.to_data()) + "\n" for r in records)
