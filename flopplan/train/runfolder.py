"""A run folder on disk: created once (never over another run or someone's files), appended to step by step,
trimmed back to the checkpoint on resume, summarised atomically. The layout is :mod:`flopplan.runfile`'s."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flopplan import __version__, serial
from flopplan.errors import UserError
from flopplan.fileio import (
    atomic_write_json,
    atomic_write_text,
    folder_lock,
    read_json,
    read_step_log,
    temporary_of,
    writable_folder,
)
from flopplan.ledger import PhaseCharge
from flopplan.runfile import (
    CONFIG,
    EVALUATIONS,
    LEDGER,
    METRICS,
    RUN_VERSION,
    SUMMARY,
    TRL_LOST_WORK,
    LedgerRecord,
    RunSummary,
    last_complete_checkpoint,
    load_evaluations,
    read_ledger,
)
from flopplan.train.config import TrainConfig, replace_config
from flopplan.train.paths import PATH_FIELDS, anchored

CONFIG_LAYOUT = serial.Layout("run config", "flopplan_run_version", RUN_VERSION, unversioned=RUN_VERSION)
"""A run's config.json: the run layout's version, as its summary has it (one without it reads as this one)."""

PROGRESS = "progress.jsonl"
"""The units of the step in progress, each logged as it ends (cleared when the step commits): what a kill lost."""
RANK_PROGRESS = "progress.rank{rank}.jsonl"
"""The same for process ``rank`` > 0 of a metered TRL run: each process's own share of the round in progress (a
round's work is known whole only when the processes reduce it at its end), so a kill loses no process's share."""
RUN_FILES = frozenset({CONFIG, METRICS, LEDGER, EVALUATIONS, SUMMARY, PROGRESS, "report.png", "checkpoints",
                       "pilot.json", "pilot.log", "trl"})
# pilot.*: a RACE pilot's spec and stderr (race/user_pilot); trl: a metered TRL run's model configs and TRL's work
LOGS = (METRICS, LEDGER, EVALUATIONS)
"""The step logs, appended step by step and trimmed back to the checkpoint on resume."""


class RunFolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock: contextlib.ExitStack | None = None
        self.read_from_start: list[str] = []  # the relative paths a resume's read_config took from the start folder

    def lock(self) -> None:
        """Take the folder's one-writer lock for as long as this process runs (or until :meth:`unlock`): a second
        ``flopplan train`` on the same folder, fresh or resumed, is refused with one line."""
        if self._lock is None:
            stack = contextlib.ExitStack()
            stack.enter_context(folder_lock(self.path, "run folder"))
            self._lock = stack

    @property
    def locked(self) -> bool:
        """Whether this object holds the folder's lock (:meth:`lock`)."""
        return self._lock is not None

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def check_new(self) -> None:
        """Refuse a folder a new run must not use: one that already holds a run (it would be overwritten) or
        files that are not a run's. An existing folder is reused only when it holds nothing but an earlier run's
        files that never reached a checkpoint (a run stopped during its first step, or killed while writing its
        first checkpoint: a ``.tmp`` file, which :meth:`begin` removes)."""
        where = str(self.path)
        if self.path.is_dir():
            if self.has_checkpoint_files():
                raise UserError(f"{where!r} already holds a run: use --resume or another --out")
            metered = self._metered_trl_run()
            if metered:
                raise UserError(f"{where!r} already holds {metered}")
            others = sorted(p.name for p in self.path.iterdir()
                            if p.name not in RUN_FILES and not p.name.startswith(".") and not _rank_progress(p.name))
            if (self.path / CONFIG).exists() and not _is_run_config(self.path / CONFIG):
                others.append(CONFIG)  # e.g. a model folder
            if others:
                raise UserError(f"the run folder {where!r} holds files that are not a flopplan run "
                                f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): "
                                "use an empty or new folder")

    def _metered_trl_run(self) -> str:
        """Why a new run must not take this folder from a metered TRL run ("" where it may): one that can be resumed
        (a complete TRL checkpoint in the script's ``output_dir``, which the folder's configuration names, or in
        ``trl/``, where ``flopplan train --engine trl`` keeps them), or one that finished. A run that failed or was
        killed before its first checkpoint leaves nothing to resume, as a built-in run before its first checkpoint."""
        data = self._config_data()
        if not isinstance(data, dict) or data.get("engine") != "trl":
            return ""
        summary = self.path / SUMMARY
        found = self.trl_checkpoint(data)
        if summary.exists() and (found is None or _finished(summary)):  # the summary first: a finished run has
            # its final checkpoint too, and is not one to resume as if it were cut short
            return "a finished metered TRL run: give another folder"
        if found is not None:
            return (f"a metered TRL run with a checkpoint ({found}): resume it (meter(..., resume=True) and "
                    "trainer.train(resume_from_checkpoint=True); flopplan train --resume) or give another folder")
        return ""

    def _config_data(self) -> Any:
        """The folder's configuration as JSON (None where it cannot be read)."""
        try:
            return json.loads((self.path / CONFIG).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def trl_checkpoint(self, config: Any = None) -> Path | None:
        """The newest complete TRL checkpoint of the metered TRL run in this folder: in the script's ``output_dir``,
        which the folder's configuration (``config``: read here when None) names, or in ``trl/``, where ``flopplan
        train --engine trl`` keeps them."""
        data = self._config_data() if config is None else config
        grpo = data.get("grpo_config") if isinstance(data, dict) else None
        places = [self.path / "trl", *([Path(grpo["output_dir"])] if isinstance(grpo, dict) and isinstance(
            grpo.get("output_dir"), str) else [])]
        return next((c for c in map(last_complete_checkpoint, places) if c is not None), None)

    def clear_lock(self, made: bool) -> None:
        """Where the folder holds nothing but its lock file (a run refused after locking it), remove the lock file,
        and the folder too when the run ``made`` it; anything else stays."""
        with contextlib.suppress(OSError):
            if [p.name for p in self.path.iterdir()] == [".lock"]:
                (self.path / ".lock").unlink()
                if made:
                    self.path.rmdir()

    def create(self, config: TrainConfig | dict[str, Any]) -> None:
        """A new run folder (checked again under the lock), with empty logs and the run's configuration."""
        self.check_new()
        self.begin(config)

    def begin(self, config: TrainConfig | dict[str, Any]) -> None:
        """Empty logs and the run's configuration, in a folder :meth:`check_new` accepted under the lock."""
        writable_folder(self.path, "run folder")
        (self.path / TRL_LOST_WORK).unlink(missing_ok=True)  # an earlier run's record (a metered TRL run's)
        if self.checkpoints.is_dir():
            for left in self.checkpoints.glob("*.tmp"):  # a checkpoint a kill cut off before its rename
                left.unlink(missing_ok=True)
        self.remove_temporaries()
        for name in LOGS:
            atomic_write_text(self.path / name, "")
        self.drop_progress()  # an earlier run's step in progress is not this run's lost work
        self.write_config(config)

    def remove_temporaries(self) -> None:
        """Remove what a kill while one of the run's files was rewritten left beside it (a temporary of
        :func:`~flopplan.fileio.atomic_write_text`, named as :func:`~flopplan.fileio.temporary_of` reads it, of a
        file this folder's runs write there): only while this process holds the folder's lock, when no writer of
        the run is left to finish it. Anything else, a user's file of a like name included, stays."""
        if not self.locked:
            return
        for path in self.path.iterdir():
            name = temporary_of(path.name)
            if name is not None and (name in RUN_FILES or _rank_progress(name)) and path.is_file():
                path.unlink(missing_ok=True)

    def has_checkpoint_files(self) -> bool:
        """Whether any checkpoint was ever written (readable or not)."""
        return self.checkpoints.is_dir() and any(self.checkpoints.glob("step-*.pt"))

    def write_config(self, config: TrainConfig | dict[str, Any]) -> None:
        """The run's configuration: a TrainConfig, or (a run flopplan metered but did not build, as a TRL script
        with :func:`flopplan.trl.meter`) the fields describing it, with its ``recipe``."""
        data = config if isinstance(config, dict) else config.to_data()
        atomic_write_json(self.path / CONFIG, {"flopplan_version": __version__, "flopplan_run_version": RUN_VERSION,
                                               **data})

    def record_limits(self, limits: dict[str, Any]) -> None:
        """A resumed run's new limits (``max_steps``, ``budget_flops``, ``train_flops``) written into its config, in
        the current layout, its paths as recorded (not as this resume read them: :func:`anchored`)."""
        data = replace_config(self.read_config(resume=True), **limits).to_data()
        raw = read_json(self.path / CONFIG, "run config")
        data.update({name: raw[name] for name in (*PATH_FIELDS, "reward_funcs") if name in raw})
        if isinstance(raw.get("recipe"), dict):
            data["recipe"].update({key: raw["recipe"][key] for key in ("policy", "reward") if key in raw["recipe"]})
        self.write_config(data)

    def read_config(self, resume: bool = False) -> TrainConfig:
        """The run's configuration; ``resume``: its relative paths read as a resume reads them
        (:func:`flopplan.train.paths.anchored`), those read from the folder the run started in kept in
        ``read_from_start``, and a path that cannot be read refused saying so where that folder is gone."""
        path = self.path / CONFIG
        if not path.exists():
            raise UserError(f"nothing to resume in {str(self.path)!r}: no {CONFIG}")
        data = read_json(path, "run config")
        if not isinstance(data, dict) or "recipe" not in data:
            raise UserError(f"{str(path)!r} is not a flopplan run config")
        data.pop("flopplan_version", None)
        data = serial.upgrade(CONFIG_LAYOUT, data, repr(str(path)))  # the run version, as a summary's is read
        if resume:
            data, self.read_from_start = anchored(data)
        try:
            return TrainConfig.from_data(data, repr(str(path)))
        except TypeError as exc:
            raise UserError(f"{str(path)!r} is not a flopplan run config ({exc})") from None
        except UserError as exc:
            start = data.get("work_dir") if resume else None
            if not isinstance(start, str) or Path(start).is_dir():
                raise
            raise UserError(f"{exc} (the run started in {start!r}, which is gone: its relative paths were read "
                            "from there)") from None

    def append(self, step: int, charges: list[dict[str, Any]], metrics_line: dict[str, Any],
               evaluations: Sequence[dict[str, Any]] = (), commits: int | None = None,
               progress: Sequence[tuple[Any, ...]] = ()) -> None:
        """One step's ledger, evaluation and metrics lines (each a whole line: a kill leaves at most one cut
        short, and resume trims every log back to its checkpoint), then the step in progress is cleared, or
        replaced by ``progress`` (:meth:`set_progress`'s records: what has run since, such as a TRL round under
        way when an evaluation's line is written mid-round). ``commits``: a metered TRL run's commit count when the
        line is written (:meth:`lost_after`)."""
        with open(self.path / LEDGER, "a") as handle:
            handle.write(json.dumps({"step": step, "charges": charges,
                                     **({"commits": commits} if commits is not None else {})}) + "\n")
        if evaluations:
            with open(self.path / EVALUATIONS, "a") as handle:
                handle.write("".join(json.dumps(line) + "\n" for line in evaluations))
        with open(self.path / METRICS, "a") as handle:
            handle.write(json.dumps(metrics_line) + "\n")
        self.set_progress(progress)

    def append_partial(self, step: int, charge: dict[str, Any]) -> None:
        """A unit of the step in progress, as soon as it ran: a kill mid-step leaves a record of the work lost."""
        with open(self.path / PROGRESS, "a") as handle:
            handle.write(json.dumps({"step": step, "partial": True, "charges": [charge]}) + "\n")

    def set_progress(self, steps: Sequence[tuple[Any, ...]], rank: int = 0) -> None:
        """The work done since the last step logged, one record per step: (its number, everything it ran so far)
        or, from a metered TRL run, (number, charges, the process's commit count when it wrote them, whether they
        are committed already); replaced atomically: for an engine that knows a step's work as a whole, not unit by
        unit. Process ``rank`` > 0 writes its own share (:data:`RANK_PROGRESS`); see :meth:`lost_after`."""
        lines = []
        for step, charges, *tag in steps:
            if charges:
                extra = {"commits": tag[0], **({"done": True} if tag[1:] and tag[1] else {})} if tag else {}
                lines.append(json.dumps({"step": step, "partial": True, "charges": charges, **extra}) + "\n")
        atomic_write_text(self.path / (RANK_PROGRESS.format(rank=rank) if rank else PROGRESS), "".join(lines))

    def clear_progress(self) -> None:
        atomic_write_text(self.path / PROGRESS, "")

    def drop_progress(self) -> None:
        """Clear the step in progress, every process's share."""
        self.clear_progress()
        for path in self._progress_files()[1:]:
            path.unlink(missing_ok=True)

    def _progress_files(self) -> list[Path]:
        return [self.path / PROGRESS, *sorted(p for p in self.path.glob(RANK_PROGRESS.format(rank="*"))
                                              if _rank_progress(p.name))]

    def lost_after(self, step: int, commits: int | None = None) -> int:
        """Executed FLOPs the logs record after the checkpoint of ``step``: lines logged after it, and the units of
        the step in progress, all done and lost with the process.

        A metered TRL run's lines carry its commit count (rounds and evaluations, each summed over the processes
        when it ends; the same on every process), and ``commits`` is its checkpoint's: a logged line is after the
        checkpoint when its count is higher (an evaluation run after its round's line was logged, at an epoch's end
        or on resume, is a second line for that step, so the step does not tell), and a line in progress holds
        the charges of commit k (its count, or the next one for charges not committed yet), which are logged once
        a logged line's count reaches k. On several processes each keeps its own share of the work in progress
        (:data:`RANK_PROGRESS`); a share counts until then, or until rank 0 has written after commit k (its summed
        line not yet logged holds the share). Lines without a count (the built-in trainer's) go by step."""
        records = read_ledger(self.path, partial=False)  # every line: a step logged twice was run twice
        logged = max((r.commits for r in records if r.commits is not None), default=None)
        full = sum(r.executed_flops for r in records
                   if (r.commits > commits if commits is not None and r.commits is not None else r.step > step))
        steps = {r.step for r in records}
        shares = [[LedgerRecord.from_data(line) for line in read_step_log(path)] for path in self._progress_files()]
        seen = max((r.commits for r in shares[0] if r is not None and r.commits is not None), default=None)
        in_progress = 0
        for rank, lines in enumerate(shares):  # rank 0's file first
            for r in lines:
                if r is None:
                    continue
                if r.commits is None:  # units by step (the built-in trainer's)
                    in_progress += r.executed_flops if r.step not in steps else 0
                    continue
                k = r.commits if r.done else r.commits + 1  # the commit that holds these charges
                if (logged is not None and k <= logged) or (rank and seen is not None and k <= seen):
                    continue  # logged, or in rank 0's summed line
                in_progress += r.executed_flops
        return full + in_progress

    def check_history(self, step: int, baseline: bool) -> None:
        """The logs must hold every step up to the checkpoint's (and the baseline evaluation when one was done):
        resuming over a deleted or truncated log would lose the run's history without a word."""
        for name in (METRICS, LEDGER):
            path = self.path / name
            if not path.exists():
                raise UserError(f"cannot resume {str(self.path)!r}: {name} is missing, and with it the history of "
                                f"steps 1-{step} (restore it, or start a new run)")
            steps = {line["step"] for line in read_step_log(path)}
            missing = sorted(set(range(0 if baseline else 1, step + 1)) - steps)
            if missing:
                raise UserError(f"cannot resume {str(self.path)!r}: {name} lacks step{'s' if len(missing) > 1 else ''} "
                                f"{_ranges(missing)} of the {step} the checkpoint holds (restore it, or start a new "
                                "run)")

    def check_evaluations(self, step: int, targets: tuple[str, ...]) -> None:
        """Every evaluation the metrics record up to ``step`` must be in ``evaluations.jsonl``, each target once, and
        every complete line of it an evaluation (:func:`flopplan.runfile.load_evaluations`: a score of 2 was carried
        on, where the analysis of the run refuses it)."""
        evaluated = sorted(line["step"] for line in self.metrics() if "eval_accuracy" in line and line["step"] <= step)
        if not evaluated:
            return
        load_evaluations(self.path)
        path = self.path / EVALUATIONS
        have = {(line["step"], line.get("target")) for line in read_step_log(path)}
        missing = sorted({s for s in evaluated for t in targets if (s, t) not in have})
        if missing:
            raise UserError(f"cannot resume {str(self.path)!r}: {EVALUATIONS} lacks the evaluation"
                            f"{'s' if len(missing) > 1 else ''} of step{'s' if len(missing) > 1 else ''} "
                            f"{_ranges(missing)} (restore it, or start a new run)")

    def trim(self, step: int, commits: int | None = None) -> None:
        """Drop log lines of steps after ``step`` (done after the checkpoint, before a crash), a line a kill cut
        short, and the step in progress (every process's share). With ``commits`` (a metered TRL run's checkpoint:
        :meth:`lost_after`), the ledger lines whose count is higher go, and the metrics lines written with them (one
        each, in the same order)."""
        ledger = read_step_log(self.path / LEDGER)
        by_count = commits is not None and any(isinstance(line.get("commits"), int) for line in ledger)
        if by_count:  # (counts only grow down the ledger: the lines kept are its first ones)
            kept = [line for line in ledger if (line["commits"] <= commits if isinstance(line.get("commits"), int)
                                                else line["step"] <= step)]  # (a line an older flopplan wrote)
            metrics = read_step_log(self.path / METRICS)[:len(kept)]
            for name, lines in ((LEDGER, kept), (METRICS, metrics)):
                atomic_write_text(self.path / name, "".join(json.dumps(line) + "\n" for line in lines))
        names = [n for n in LOGS if n not in (LEDGER, METRICS)] if by_count else LOGS
        for name in names:
            kept = [line for line in read_step_log(self.path / name) if line["step"] <= step]
            atomic_write_text(self.path / name, "".join(json.dumps(line) + "\n" for line in kept))
        self.drop_progress()
        self.remove_temporaries()

    def metrics(self) -> list[dict[str, Any]]:
        return read_step_log(self.path / METRICS)

    def baseline(self) -> tuple[list[PhaseCharge], dict[str, float]] | None:
        """The baseline evaluation (step 0) as the logs committed it: its charges and its ``eval_accuracy``; None
        when the logs hold none."""
        charges = [PhaseCharge(**c) for r in read_ledger(self.path, partial=False) if r.step == 0 for c in r.charges]
        accuracy = [{"eval_accuracy": m["eval_accuracy"]} for m in self.metrics() if m["step"] == 0
                    and "eval_accuracy" in m]
        return (charges, accuracy[0]) if charges and accuracy else None

    def write_summary(self, summary: RunSummary) -> None:
        atomic_write_json(self.path / SUMMARY, summary.to_data())


def _finished(summary: Path) -> bool:
    """Whether a run summary records a final stop (its budget or its steps; a Ctrl-C's ``interrupted`` stop and a
    reward function's ``failed`` one are resumed). One that cannot be read counts as finished: the folder is not a
    new run's either way."""
    try:
        stop = json.loads(summary.read_text(encoding="utf-8")).get("stop")
    except (OSError, ValueError, AttributeError):
        return True
    return not (isinstance(stop, dict) and stop.get("reason") in ("interrupted", "failed"))


def _ranges(values: list[int]) -> str:
    return f"{values[0]}-{values[-1]}" if len(values) > 2 and values[-1] - values[0] == len(values) - 1 else \
        ", ".join(map(str, values[:5])) + (", ..." if len(values) > 5 else "")


def _is_run_config(path: Path) -> bool:
    try:
        return "flopplan_version" in json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False


def _rank_progress(name: str) -> bool:
    """Whether ``name`` is a process's progress file (:data:`RANK_PROGRESS`)."""
    head, _, tail = RANK_PROGRESS.partition("{rank}")
    middle = name.removeprefix(head).removesuffix(tail)
    return name == head + middle + tail and middle.isdigit() and middle != "0"
