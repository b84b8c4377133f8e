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
from typing import Any, ClassVar

from flopplan import __version__, serial
from flopplan.errors import UserError, first_problem, is_int, is_number
from flopplan.fileio import exists, is_file, read_json, read_step_log
from flopplan.ledger import charged_flops
from flopplan.passes import BUCKET_OF
from flopplan.planfile import PlanEntry, bucket_flops

RUN_VERSION = 1
SUMMARY = "summary.json"
METRICS = "metrics.jsonl"
LEDGER = "ledger.jsonl"
CONFIG = "config.json"
EVALUATIONS = "evaluations.jsonl"
TRL_LEDGER = "flopplan_ledger.json"
"""The TRL meter's ledger, saved in each TRL checkpoint folder so that a resumed run continues it."""
TRL_ABANDONED = "flopplan_ledger.abandoned.json"
"""The ledger of a TRL checkpoint newer than the one a run resumed from, renamed so (its history was abandoned): no
longer complete, so no resume picks it."""
TRL_LOST_WORK = "trl/lost_work.json"
"""In a metered TRL run's folder: the FLOPs a kill lost since the checkpoint the run last resumed from, kept until
the resumed run's next checkpoint holds them in its ledger (:mod:`flopplan.engines.trl_resume`)."""


def trl_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """A TRL run's ``checkpoint-N`` folders with their optimizer step N, oldest first (by N, not by name)."""
    found = [(int(p.name.split("-", 1)[1]), p) for p in Path(output_dir).glob("checkpoint-*")
             if p.name.split("-", 1)[1].isdigit()]
    return sorted(found, key=lambda item: item[0])


def last_complete_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest ``checkpoint-N`` folder of a TRL run that was written to the end: TRL's own state
    (``trainer_state.json``, written after the weights and optimizer) and the meter's ledger are both there. A kill
    during a save leaves a newer, partial folder, which ``resume_from_checkpoint=True`` would pick and fail on."""
    for _, folder in reversed(trl_checkpoints(output_dir)):
        if (folder / "trainer_state.json").is_file() and (folder / TRL_LEDGER).is_file():
            return folder
    return None


_COUNT = serial.spec(check=serial.NON_NEGATIVE)
_BUCKETS = serial.spec(read=bucket_flops)
_ROUND_3 = serial.spec(omit=True, write=lambda v: round(v, 3), check=serial.SHARE)
_AS_IS = serial.spec(omit=True, write=dict)  # metrics and engine checks: JSON as the run logged them (NaN kept)
SUMMARY_LAYOUT = serial.Layout("run summary", "flopplan_run_version", RUN_VERSION)


@dataclass(frozen=True)
class PlanReference:
    """The plan a run validates: its steps and FLOPs by bucket, the recipe fields the run changed, and, for a plan
    priced with a profile, its seconds (per phase and per term outside the phases) and the profile's name."""

    steps: int
    flops: dict[str, int] = field(metadata=_BUCKETS)
    budget_flops: int | None = None
    overridden: tuple[str, ...] = ()
    seconds: dict[str, float] | None = field(default=None, metadata=serial.spec(omit=True, check=serial.Check(
        lambda d: all(v >= 0 for v in d.values()), "a map of phases to seconds >= 0")))
    profile: str | None = field(default=None, metadata=serial.spec(omit=True))
    # the share of a core the profile's times assume (a CPU profile from runs)
    core_share: float | None = field(default=None, metadata=serial.spec(omit=True))

    @staticmethod
    def of(entry: PlanEntry) -> PlanReference:
        """The reference a run of the plan entry ``entry`` records."""
        profile = entry.profile or {}
        name = f"{profile.get('device', '?')}, {profile.get('source', 'profile')}" if entry.profile else None
        share = profile.get("core_share")
        return PlanReference(entry.steps, entry.flops, entry.budget_flops, entry.overridden,
                             dict(entry.seconds) if entry.seconds is not None else None, name,
                             float(share) if is_number(share) else None)


@dataclass(frozen=True)
class RunSummary:
    """What a run spent and learned. FLOPs are the ledger's exact integers: ``flops`` as executed (padding
    included), ``useful_flops`` without padding, ``measured_flops`` FlopCounterMode's count when measured;
    ``abandoned_flops`` (steps interrupted and rolled back) and ``lost_flops`` (steps a kill lost, redone on
    resume) were spent too and count against the budget, unless ``lost_charged`` is false (a run asked to keep
    its steps those of an uninterrupted run: ``flopplan train --lost-outside-budget``). Written by
    :data:`SUMMARY_LAYOUT` (``leftover_flops`` and ``within_budget`` added for readers)."""

    DERIVED: ClassVar = ("leftover_flops", "within_budget")

    model: str
    reward: str
    steps: int = field(metadata=_COUNT)
    budget_flops: int | None = field(metadata=serial.spec(check=serial.POSITIVE))
    flops: dict[str, int] = field(metadata=_BUCKETS)
    useful_flops: dict[str, int] = field(metadata=_BUCKETS)
    phases: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    abandoned_flops: int = field(default=0, metadata=_COUNT)
    lost_flops: int = field(default=0, metadata=_COUNT)
    lost_charged: bool = True
    stop_reason: str = ""
    stop: dict[str, Any] | None = field(default=None, metadata=_AS_IS)  # the decision as data (guard.StopDecision)
    final: dict[str, Any] | None = field(default=None, metadata=serial.spec(write=dict))
    eval_accuracy: tuple[tuple[int, float, int], ...] = ()  # (step, accuracy, FLOPs spent) per evaluation
    chance: float | None = field(default=None, metadata=serial.spec(check=serial.SHARE))
    measured_flops: dict[str, int] | None = field(default=None, metadata=serial.spec(omit=True, read=bucket_flops))
    measured_by_unit: dict[str, dict[str, Any]] | None = field(default=None, metadata=serial.spec(omit=True))
    measured_equals_closed_form: bool | None = field(default=None, metadata=serial.spec(omit=True))
    interrupted: dict[str, Any] | None = field(default=None, metadata=_AS_IS)
    # whether the models had no trained weights; None: not known (a TRL script's own models, which flopplan did not
    # build: from_config and from_pretrained leave the same model behind)
    random_init_policy: bool | None = None
    random_init_reward_model: bool | None = None
    conventions: dict[str, str] = field(default_factory=dict)
    device: str = ""
    # the machine (measure.device.hardware_name: the GPU, or the CPU's model and threads); "" in older folders
    hardware: str = field(default="", metadata=serial.spec(omit=True))
    dtype: str = ""
    engine: str = "builtin"
    # e.g. TRL's logged num_tokens against the meter's
    engine_checks: dict[str, Any] = field(default_factory=dict, metadata=_AS_IS)
    plan: PlanReference | None = field(default=None, metadata=serial.spec(omit=True))
    flopplan_version: str = __version__
    # the run's processes, each from its start to its last summary (None: unknown)
    wall_seconds: float | None = field(default=None, metadata=serial.spec(
        omit=True, write=lambda v: round(v, 3), check=serial.NON_NEGATIVE))
    core_share: float | None = field(default=None, metadata=_ROUND_3)  # a CPU run: its (last) process's core share
    notes: tuple[str, ...] = field(default=(), metadata=serial.spec(omit=True))  # what the meter noticed

    @property
    def spent(self) -> int:
        """Everything the run spent: its buckets plus abandoned and lost work."""
        return self.flops["total"] + self.abandoned_flops + self.lost_flops

    @property
    def training_flops(self) -> int:
        """The run's FLOPs outside the evaluation bucket (abandoned and lost work excluded), as
        :attr:`flopplan.ledger.Ledger.training_flops` counts them."""
        return self.flops["total"] - self.flops.get("evaluation", 0)

    @property
    def leftover_flops(self) -> int | None:
        return None if self.budget_flops is None else self.budget_flops - self.charged

    @property
    def charged(self) -> int:
        """What counts against the budget, by the ledger's rule from the summary's fields."""
        return charged_flops(self.spent, self.lost_flops, self.abandoned_flops, self.lost_charged)

    @property
    def stopped_for(self) -> str:
        """Why the run stopped: ``budget``, ``steps``, ``interrupted``, ``stopped`` or ``failed``
        (:data:`flopplan.guard.REASONS`; ``stopped``: a script's own rule, a TRL callback, ended it short of its step
        limit; ``failed``: a reward function failed in a step, abandoned, resumable); "" while
        it goes on. Read from the decision the run recorded (``stop``), or, in a summary written without one, from
        its message (an interruption's starts with "interrupted"; any other stopped it for its budget)."""
        reason = self.stop.get("reason") if isinstance(self.stop, dict) else None
        if isinstance(reason, str):
            return reason
        return "interrupted" if self.stop_reason.startswith("interrupted") else "budget" if self.stop_reason else ""

    @property
    def within_budget(self) -> bool:
        return self.budget_flops is None or self.charged <= self.budget_flops

    def to_data(self) -> dict[str, Any]:
        return serial.write(SUMMARY_LAYOUT, self)

    @staticmethod
    def from_data(data: Any, where: str = "run summary") -> RunSummary:
        """A summary as :meth:`to_data` writes it; a malformed one is one line naming the first problem."""
        summary: RunSummary = serial.read(SUMMARY_LAYOUT, RunSummary, data, where)
        problem = summary._inconsistency(data)
        if problem:
            raise UserError(f"{where}: {problem} (a summary flopplan writes has it so)")
        return summary

    def _inconsistency(self, data: dict[str, Any]) -> str:
        """What in a read summary no run would have written, '' when nothing: a total that is not its buckets' sum,
        negative phase FLOPs or seconds, a final metric of the wrong kind, derived keys of the wrong type."""
        odd = [k for k, v in (self.final or {}).items() if _odd_metric(k, v)]
        within, leftover = data.get("within_budget", self.within_budget), data.get("leftover_flops")
        return first_problem((
            *((by_bucket_total(getattr(self, name)), f"{name}.total must be the sum of its buckets")
              for name in ("flops", "useful_flops")),
            (all(is_int(v) and v >= 0 for by_kind in self.phases.values() for v in by_kind.values()),
             "phases must map each phase to FLOPs (integers >= 0)"),
            (all(v >= 0 for v in self.seconds.values()), "seconds must be >= 0"),
            (not odd, f"final.{odd[0] if odd else ''} is not what the run logs (a number; a share for accuracy)"),
            (all(0 <= accuracy <= 1 for _, accuracy, _ in self.eval_accuracy), "eval_accuracy must hold shares"),
            # derived keys are recomputed when read (an older run's by an older charging rule): of their type
            (isinstance(within, bool), f"within_budget must be true or false, not {within!r:.60}"),
            (leftover is None or is_int(leftover), f"leftover_flops must be an integer or null, not {leftover!r:.60}"),
        ))


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


def _charges(value: Any, where: str) -> tuple[dict[str, Any], ...]:
    """A ledger line's charges: objects whose ``executed`` maps phases to integer FLOPs."""
    if not isinstance(value, list) or not all(
            isinstance(c, dict) and isinstance(c.get("executed"), dict)
            and all(k in BUCKET_OF and is_int(v) for k, v in c["executed"].items()) for c in value):
        raise UserError(f"{where} must be a list of charges, each with its executed FLOPs by phase")
    return tuple(value)


def _line(cls: type[Any], data: Any) -> Any:
    """A log line read as ``cls``, or None for a line that is not one (a kill can cut the last line short)."""
    try:
        return serial.from_data(cls, data, cls.__name__)
    except UserError:
        return None


@dataclass(frozen=True)
class LedgerRecord:
    """One line of ``ledger.jsonl``: the phase calls a step charged, each with its phase, FLOPs executed and
    useful by sub-phase, FlopCounterMode's count when measured, seconds and shapes."""

    step: int
    charges: tuple[dict[str, Any], ...] = field(metadata=serial.spec(read=_charges, write=list))
    # a unit of the step in progress (progress.jsonl), before the step commits
    partial: bool = field(default=False, metadata=serial.spec(omit=True))
    # a metered TRL run's: the commits (rounds and evaluations, each summed over the processes) made when the line
    # was written, and for a line in progress whether its charges are committed already (rank 0's summed line, not
    # yet logged); see flopplan.train.runfolder.RunFolder.lost_after
    commits: int | None = field(default=None, metadata=serial.spec(omit=True))
    done: bool = field(default=False, metadata=serial.spec(omit=True))

    @property
    def executed_flops(self) -> int:
        return sum(sum(c["executed"].values()) for c in self.charges)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = serial.to_data(self)
        return data

    @staticmethod
    def from_data(data: Any) -> LedgerRecord | None:
        """The record, or None for a line that is not one."""
        record: LedgerRecord | None = _line(LedgerRecord, data)
        return record


@dataclass(frozen=True)
class EvalRecord:
    """One line of ``evaluations.jsonl``: one evaluation target scored after ``step`` (0: the baseline before any
    update). ``scores``: 1 or 0 per evaluation prompt (greedy completion correct by the task's rule), in the
    target's fixed prompt order, the same for every run of the task (:mod:`flopplan.train.targets`), so runs pair
    prompt by prompt. ``train_flops``: the ledger's rollout + learning + feedback FLOPs so far (evaluations
    excluded: 0 at the baseline); ``flops``: every bucket so far, evaluations included (this one's too). Both leave
    out abandoned and lost work, so a resumed run's records equal an uninterrupted run's."""

    DERIVED: ClassVar = ("prompts",)

    step: int
    target: str
    train_flops: int
    flops: int
    accuracy: float
    scores: tuple[int, ...] = field(metadata=serial.spec(check=serial.Check(
        lambda s: all(v in (0, 1) for v in s), "a list of 0 and 1")))

    @property
    def prompts(self) -> int:
        return len(self.scores)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = serial.to_data(self)
        return data


def load_evaluations(folder: str | Path, target: str | None = None) -> list[EvalRecord]:
    """The evaluations of a run folder in the order they ran (each step's targets in the run's order), optionally
    of one target; a line a kill cut short is skipped (:func:`flopplan.fileio.read_step_log`); no file (a run
    without evaluation): none. A complete line that is not an evaluation (a score other than 0 or 1, FLOPs that are
    not a count, ``prompts`` that disagree with its scores) is no kill's doing and would drop a point from every
    analysis of the run without a word: a one-line :class:`UserError` naming the file and step."""
    path = Path(folder) / EVALUATIONS
    out = []
    for data in read_step_log(path):
        try:
            record: EvalRecord = serial.from_data(EvalRecord, data, "evaluation")
        except UserError as exc:
            raise UserError(f"{str(path)!r}, step {data['step']}: {exc}") from None
        if data.get("prompts", record.prompts) != record.prompts:
            raise UserError(f"{str(path)!r}, step {data['step']}: prompts {data['prompts']!r} disagrees with its "
                            f"{record.prompts} scores")
        if target is None or record.target == target:
            out.append(record)
    return out


REWARD_MODEL_CARD = "reward_model.json"
REWARD_MODEL_VERSION = 2  # 2: agreement_without_eos (a version-1 card's model was trained on rows with EOS only)


CARD_LAYOUT = serial.Layout("reward model card", "flopplan_reward_model_version", REWARD_MODEL_VERSION,
                            upgrades={1: dict})
_NAME = serial.spec(check=serial.Check(bool, "a name"))


def _agreement(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not is_number(value.get("accuracy")) or not 0 <= value["accuracy"] <= 1:
        raise UserError(f"{where} must be an object with an accuracy in [0, 1]")
    return dict(value)


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
    ``agreement`` is measured on rows as the built-in trainer reads them (prompt, completion, EOS),
    ``agreement_without_eos`` on the same samples as TRL's ``GRPOTrainer`` reads them (the text prompt +
    completion, no EOS); the model is trained on both reads. A version-1 card has none (None): its model was trained
    on rows with EOS only and scores TRL's reads near chance.
    ``steps``: the optimizer steps it ran, ``max_steps`` at most (it stops at the first check where both reads'
    validation agreement reaches ``target_agreement``). Written by :data:`CARD_LAYOUT`."""

    DERIVED: ClassVar = ("upfront_flops", "output", "measured_equals_closed_form")

    architecture: str = field(metadata=_NAME)
    params: int = field(metadata=_COUNT)
    task: str = field(metadata=_NAME)
    samples: int = field(metadata=_COUNT)
    held_out_samples: int = field(metadata=_COUNT)
    steps: int = field(metadata=_COUNT)
    batch: int = field(metadata=_COUNT)
    lr: float = field(metadata=serial.spec(check=serial.POSITIVE))
    seed: int = field(metadata=_COUNT)
    training_flops: int = field(metadata=_COUNT)
    evaluation_flops: int = field(metadata=_COUNT)
    agreement: dict[str, Any] = field(metadata=serial.spec(read=_agreement))
    agreement_without_eos: dict[str, Any] | None = field(default=None, metadata=serial.spec(read=_agreement))
    mix: dict[str, float] = field(default_factory=dict)
    measured_training_flops: int | None = field(default=None, metadata=_COUNT)
    measured_evaluation_flops: int | None = field(default=None, metadata=_COUNT)
    max_steps: int | None = field(default=None, metadata=_COUNT)
    target_agreement: float | None = field(default=None, metadata=serial.spec(check=serial.Check(
        lambda v: 0 < v <= 1, "in (0, 1]")))
    validation_samples: int = field(default=0, metadata=_COUNT)
    command: str = ""
    flopplan_version: str = __version__

    @property
    def upfront_flops(self) -> int:
        """What the reward model cost before any policy used it: its training and its agreement check."""
        return self.training_flops + self.evaluation_flops

    @property
    def output(self) -> str:
        """What the model's score is: a probability that the completion is correct."""
        return "probability"

    @property
    def measured_equals_closed_form(self) -> bool | None:
        if self.measured_training_flops is None:
            return None
        return (self.measured_training_flops == self.training_flops
                and self.measured_evaluation_flops == self.evaluation_flops)

    def to_data(self) -> dict[str, Any]:
        return serial.write(CARD_LAYOUT, self)

    @staticmethod
    def from_data(data: Any, where: str = "reward model card") -> RewardModelCard:
        card: RewardModelCard = serial.read(CARD_LAYOUT, RewardModelCard, data, where)
        # the stored total must be the sum of its parts: a card edited by hand (or cut short) is caught here
        if data.get("upfront_flops", card.upfront_flops) != card.upfront_flops:
            raise UserError(f"{where}: upfront_flops is not training_flops + evaluation_flops")
        return card


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


def _odd_metric(key: str, value: Any) -> bool:
    """Whether a value of the last metrics line is one no run logs: they are numbers (a diverged loss is NaN, as
    logged) or FLOPs by bucket; the step an integer, accuracies shares, the reward finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float, dict)):
        return True
    if key == "step":
        return not (is_int(value) and value >= 0)
    if key == "accuracy" or key.startswith("eval_accuracy"):
        return not (is_number(value) and 0 <= value <= 1)
    return key == "reward" and not is_number(value)


def by_bucket_total(flops: dict[str, int]) -> bool:
    """Whether FLOPs by bucket have the sum of the buckets as their total, as every writer makes it."""
    return flops["total"] == sum(v for b, v in flops.items() if b != "total")


def ledger_holds(folder: str | Path) -> tuple[int, int]:
    """The committed steps of a run folder's ledger (its highest step) and the FLOPs they executed."""
    lines = read_ledger(folder, partial=False)
    return max((line.step for line in lines), default=0), sum(line.executed_flops for line in lines)


def load_summary(folder: str | Path) -> RunSummary:
    """The summary of a run folder, checked; one clear line when the folder is not a run."""
    path = Path(folder) / SUMMARY
    found = exists(path, "run summary ")
    if not found and is_file(Path(folder) / CONFIG, "run config "):  # a run that has not written its summary yet
        rounds, executed = ledger_holds(folder)
        raise UserError(f"{str(folder)!r} holds a run still going or killed (no {SUMMARY} yet): its ledger holds "
                        f"{rounds} committed steps, {executed:,} FLOPs; resume "
                        "it (flopplan train --resume; a TRL script: meter(..., resume=True) and "
                        "trainer.train(resume_from_checkpoint=True)) or wait for it to end")
    if not found:
        raise UserError(f"{str(folder)!r} is not a flopplan run folder (no {SUMMARY})")
    return RunSummary.from_data(read_json(path, "run summary"), repr(str(path)))


def load_run(folder: str | Path) -> tuple[RunSummary, list[StepRecord]]:
    return load_summary(folder), read_metrics(folder)


def jsonl(records: Iterable[StepRecord | LedgerRecord]) -> str:
    import json

    return "".join(json.dumps(r.to_data()) + "\n" for r in records)
