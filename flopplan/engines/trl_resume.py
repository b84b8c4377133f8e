"""What a metered TRL run resumed after a kill had spent and lost, and whether it may start again from step 0.

A kill loses the rounds committed after the checkpoint a run resumes from (and the round in progress): their FLOPs
were spent, so they are charged as lost work (recorded, not charged, for a race pilot), and the run folder's logs
are trimmed back to the checkpoint so that no step appears twice. A run killed before its first checkpoint was
complete has nothing to continue: ``meter(..., resume=True)`` starts it again from step 0, as ``flopplan train
--resume`` does a built-in run, charging everything its logs record.

The lost FLOPs reach a checkpoint's ledger only when the resumed run saves its next checkpoint; until then they are
kept in the run folder (:data:`~flopplan.runfile.TRL_LOST_WORK`, with the checkpoint it resumed from), so that a second
kill before that checkpoint adds to them instead of forgetting them. The record is written before the logs are
trimmed and marked trimmed after: a kill between the two finds the logs already counted.

Starting again is refused where it would throw away what can still be resumed, or a run that ended: a complete
checkpoint in another place than the trainer's ``output_dir`` (the folder's configuration names where the run
checkpointed), a finished run's summary, or a ``resume_from_checkpoint`` the trainer could not resume from.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, read_json
from flopplan.runfile import (
    CONFIG,
    SUMMARY,
    TRL_ABANDONED,
    TRL_LEDGER,
    TRL_LOST_WORK,
    last_complete_checkpoint,
    read_ledger,
    trl_checkpoints,
)
from flopplan.train.runfolder import RunFolder


@dataclass(frozen=True)
class LostWork:
    """The record: ``flops`` lost since the checkpoint of optimizer step ``step`` (0: the run's start, no checkpoint),
    whose ledger holds ``rounds`` rounds (the logs' steps), and whether the logs were trimmed back to it after it was
    written. A checkpoint is named by its optimizer step: one saved within a round (``max_steps`` or an epoch's end
    off a round's boundary) holds the rounds before it, so rounds alone do not tell it from the run's start."""

    flops: int
    step: int
    rounds: int
    trimmed: bool
    commits: int | None = None  # the checkpoint's commit count (RunFolder.lost_after; None: a record without it)

    def to_data(self) -> dict[str, Any]:
        return {"lost_flops": self.flops, "step": self.step, "rounds": self.rounds, "trimmed": self.trimmed,
                **({"commits": self.commits} if self.commits is not None else {})}


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_lost_work(folder: RunFolder) -> LostWork | None:
    path = folder.path / TRL_LOST_WORK
    if not path.is_file():
        return None
    data = read_json(path, "flopplan lost-work record")
    if not (isinstance(data, dict) and all(_count(data.get(k)) for k in ("lost_flops", "step", "rounds"))
            and isinstance(data.get("trimmed"), bool) and (data.get("commits") is None or _count(data["commits"]))):
        raise UserError(f"{str(path)!r} is not a flopplan lost-work record (restore it, or start a new run)")
    return LostWork(data["lost_flops"], data["step"], data["rounds"], data["trimmed"], data.get("commits"))


def _cut(step: int, rounds: int) -> int:
    """The last log step a resume from the checkpoint of optimizer step ``step`` (holding ``rounds`` rounds) keeps:
    none at all when starting again (step 0: the baseline evaluation at log step 0 runs again with the run)."""
    return rounds if step else -1


def lost_since(folder: RunFolder, step: int, rounds: int, commits: int | None = None) -> int:
    """The FLOPs spent and lost since the checkpoint of optimizer step ``step`` (0: since the run's start), which
    holds ``rounds`` rounds and ``commits`` commits (rounds and evaluations: what the logs' lines are placed by,
    :meth:`~flopplan.train.runfolder.RunFolder.lost_after`; 0 from the start): what the logs record after it, plus
    what an earlier resume from a checkpoint no later kept in the record (a checkpoint saved after that resume holds
    it in its ledger). Every process reads the same files and so gets the same figure."""
    record = read_lost_work(folder)
    logged = folder.lost_after(_cut(step, rounds), commits)
    if record is None or record.step < step:
        return logged
    if not record.trimmed:  # killed between the record and the trim: the logs after its point are in it already
        return record.flops + logged - folder.lost_after(_cut(record.step, record.rounds), record.commits)
    return record.flops + logged


def keep_lost(folder: RunFolder, step: int, rounds: int, lost: int, commits: int | None = None) -> None:
    """Record ``lost`` (from :func:`lost_since`) and trim the logs back to the checkpoint of optimizer step ``step``
    (``commits`` as there; rank 0 alone, after every process has read them)."""
    path = folder.path / TRL_LOST_WORK
    atomic_write_json(path, LostWork(lost, step, rounds, False, commits).to_data())
    folder.trim(_cut(step, rounds), commits)
    atomic_write_json(path, LostWork(lost, step, rounds, True, commits).to_data())


def abandon_newer(output_dir: str | Path, step: int) -> list[str]:
    """A run resumed from the checkpoint of optimizer step ``step`` while newer complete ones remain (the user chose
    an older one) abandons their history: their ledgers are renamed (:data:`~flopplan.runfile.TRL_ABANDONED`), so
    that no later resume continues a history whose work since ``step`` was charged as lost, and forgets what this
    one spends (rank 0). Returns their names."""
    left = []
    for number, folder in trl_checkpoints(output_dir):
        if number > step and (folder / TRL_LEDGER).is_file():
            (folder / TRL_LEDGER).replace(folder / TRL_ABANDONED)
            left.append(folder.name)
    return left


def check_start_over(folder: RunFolder, output_dir: str | Path, resume_from: Any) -> None:
    """Refuse to start a resumed run again from step 0 where that would discard a run that can still be resumed or
    that ended (see the module docstring); ``resume_from``: what ``trainer.train`` was given."""
    where = str(folder.path)
    if resume_from not in (None, False):
        raise UserError(f"trainer.train(resume_from_checkpoint={resume_from!r}) started at step 0: that is not a "
                        "complete checkpoint of this run (TRL's trainer_state.json and flopplan's ledger); pass "
                        "the last complete one (flopplan.runfile.last_complete_checkpoint), or None to start the "
                        "run again")
    found = folder.trl_checkpoint()  # (one in the trainer's own output_dir is refused before: resume from it)
    if found is not None:
        raise UserError(f"the run in {where!r} has a complete checkpoint, {found}, outside this trainer's "
                        f"output_dir ({output_dir}): resume from it with output_dir {str(found.parent)!r}")
    if (folder.path / SUMMARY).exists() and read_ledger(folder.path, partial=False):
        raise UserError(f"the run in {where!r} finished (its summary.json) and left no complete checkpoint in "
                        f"{output_dir} to continue: nothing to resume; start a new run in another folder")


def resume_arguments(args: tuple[Any, ...], kwargs: dict[str, Any],
                     output_dir: str | Path) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``trainer.train``'s arguments with ``resume_from_checkpoint=True`` read as the last complete checkpoint
    (:func:`~flopplan.runfile.last_complete_checkpoint`), or None where the run has none yet. transformers reads
    True as the highest-numbered ``checkpoint-N`` folder, complete or not, and raises where there is none: after a
    kill during a save (``FileNotFoundError: .../trainer_state.json``) or before the first checkpoint ("No valid
    checkpoint found"), the resume the guide documents failed (a held-out user's kills). A path, None or False is
    passed on as given."""
    def last() -> str | None:
        found = last_complete_checkpoint(output_dir)
        return None if found is None else str(found)

    if kwargs.get("resume_from_checkpoint") is True:
        return args, {**kwargs, "resume_from_checkpoint": last()}
    if args and args[0] is True:
        return (last(), *args[1:]), kwargs
    return args, kwargs


def check_same_recipe(folder: Path, recipe: Any) -> None:
    """Refuse to resume the run in ``folder`` with a trainer whose recipe (:class:`~flopplan.recipe.Recipe`, read
    from its GRPOConfig, models and data) is not the one the run was metered with: its ledger would go on with
    other shapes while its configuration names the old ones (a held-out user resumed with another group size and
    completion length: rounds 6-8 charged ``[4, 31, 16, 45]``-shaped updates, config.json still said group size 4,
    nothing noted). The policy and a reward model are compared as far as they set FLOPs, as an explicit recipe's
    are (:func:`~flopplan.engines.trl_trainer.priced_spec`), not by the paths their configs were saved at. A folder
    without a recipe (written by an older flopplan) is not checked."""
    from flopplan.arch import load_config
    from flopplan.engines.trl_trainer import priced_spec

    data = _run_config(folder)
    saved = data.get("recipe") if data is not None else None
    if not isinstance(saved, dict):
        return
    now = recipe.to_data()

    def same(key: str) -> bool:
        old, new = saved.get(key), now.get(key)
        if key == "policy" or (key == "reward" and str(old).startswith("orm:")):
            was, is_now = _saved_model(folder, old), Path(str(new).removeprefix("orm:"))
            if was is not None and is_now.is_file():  # the same model as far as it sets FLOPs, wherever its config
                return priced_spec(load_config(was)) == priced_spec(load_config(is_now))  # was saved
        return bool(old == new)

    changed = [key for key in sorted({*saved, *now}) if not same(key)]
    if changed:
        shown = ", ".join(f"{key} {saved.get(key)!r} -> {now.get(key)!r}" for key in changed)
        raise UserError(f"the run in {str(folder)!r} was metered with another recipe than this trainer's ({shown}): "
                        "a resumed run keeps the recipe its ledger counts; resume with the GRPOConfig, models and "
                        "data it started with, or start a new run in another folder")


def charge_lost_work(meter: Any, folder: RunFolder, state: Any, output_dir: str | Path, wait: Any) -> None:
    """What a kill lost since the checkpoint a run resumes from (since its start, without one), added to the
    meter's ledger and noted; rank 0 then keeps it in the run folder's logs and sets aside the checkpoints newer
    than the one resumed. ``wait``: every process's barrier (each reads the logs before rank 0 trims them)."""
    count = meter.commits  # the checkpoint's (0 from the start)
    lost = lost_since(folder, state.global_step, meter.rounds, count)
    meter.ledger.lost += lost
    how = "charged" if meter.ledger.charge_lost else "recorded, not charged"
    if not state.global_step:
        meter.notes.append("no checkpoint yet: the run starts again")
    if lost:  # (the run's whole lost work with it: an earlier resume's note counted part of this one's again)
        since = f"after checkpoint-{state.global_step}, the one resumed from," if state.global_step else \
            "before the kill"
        meter.notes.append(f"{lost:,} FLOPs done {since} were lost and are {how} (the run's lost work: "
                           f"{meter.ledger.lost:,} FLOPs in all)")
    wait()  # every process has read the logs
    if state.is_world_process_zero:
        keep_lost(folder, state.global_step, meter.rounds, lost, count)
        left = abandon_newer(output_dir, state.global_step) if state.global_step else []
        if left:
            meter.notes.append(f"{', '.join(left)}: left behind (resumed from an older checkpoint)")
    wait()  # the logs trimmed before any process logs its share


def resumed_budget(folder: Path, given: int | None) -> int | None:
    """The budget a resumed run of a user's script goes on with: the one given, else the one its run folder
    recorded (a resume without ``budget=`` ran to ``max_steps`` unguarded, to 1.52x the budget its config.json
    kept: a held-out user)."""
    if given is not None:
        return given
    data = _run_config(folder)
    recorded = data.get("budget_flops") if data is not None else None
    return int(recorded) if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) else None


def record_budget(folder: Path, budget: int | None) -> None:
    """A budget given on resume, written into the run folder's configuration (what a later resume goes on with)."""
    data = _run_config(folder)
    if data is not None and data.get("budget_flops") != budget:
        atomic_write_json(folder / CONFIG, {**data, "budget_flops": budget})


def check_resume_point(step: int, per_round: int, output_dir: str | Path) -> None:
    """A resume must start at a round's boundary. TRL's generation counter starts again at a resume, so from a
    checkpoint inside a round (the final one of a run that ended in a round) TRL's rounds ran one step off the
    rounds the meter charges and the checkpoints it saves at: a later resume regenerated a round's rollouts and
    the ledger counted the first ones as used (a held-out user's run)."""
    if not step % per_round:
        return
    earlier = [path for n, path in trl_checkpoints(output_dir) if n < step and not n % per_round
               and (path / "trainer_state.json").is_file() and (path / TRL_LEDGER).is_file()]
    instead = f"resume from {earlier[-1].name}, the last at a round's end" if earlier else \
        "no checkpoint ends a round: start the run again"
    raise UserError(f"checkpoint-{step} was saved inside a round (a round takes {per_round} optimizer steps): TRL "
                    f"would start its rounds again there, off the rounds the meter charges; {instead}")


def check_budget_covers(ledger: Any, step: int) -> None:
    """A resumed run's budget must hold what its checkpoint's ledger charged already (a lower one was accepted and
    the run ended at once, its summary over the budget)."""
    budget, charged = ledger.budget_flops, ledger.charged
    if budget is not None and charged > budget:
        raise UserError(f"the budget of {budget:,.0f} FLOPs is below the {charged:,} FLOPs this run charged by "
                        f"checkpoint-{step}: resume with a larger budget, or with none to keep the run's own")


def _run_config(folder: Path) -> dict[str, Any] | None:
    """The run folder's configuration as written (None: none, or not an object)."""
    data = read_json(folder / CONFIG, "run configuration") if (folder / CONFIG).is_file() else None
    return data if isinstance(data, dict) else None


def _saved_model(folder: Path, value: Any) -> Path | None:
    """The config.json a run's recipe names for a model (``policy``, or an ``orm:`` reward): the path as written,
    which is relative to the directory the run started from when its folder was given so, else the same model's
    place in the run folder (``trl/models/NAME``), where the meter saved it; None where neither is there (a
    registry name)."""
    path = Path(str(value).removeprefix("orm:"))
    for candidate in (path, folder / "trl" / "models" / path.parent.name / "config.json"):
        if candidate.is_file():
            return candidate
    return None
