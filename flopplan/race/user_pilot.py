"""The runner's side of pilots that are the user's own command (``flopplan race run DIR --pilot CMD``): the
command recorded with the race, each pilot's spec written into its run folder (:mod:`flopplan.race.script`), the
command started with ``$FLOPPLAN_PILOT`` pointing at it, and its result checked.

The command is recorded in ``pilot_command.json`` by the first ``race run`` that gives it; later runs (a rerun
after a kill, another shard, ``race validate``) use it, so every rung and the validating run start the same
script. A pilot that exits non-zero, exits without a run summary, or whose summary does not carry its budget
(the script did not meter itself with ``spec.meter``) or spent beyond it stops the race with one line (for a
failure, the last line of its stderr; a pilot the user stopped alone, by SIGINT or SIGTERM, is named as interrupted
instead: :func:`flopplan.race.pilots.interruption`); its stderr is kept in its folder (``pilot.log``), its stdout
in the race's ``logs/``. Nothing already written is removed: a rerun continues from the pilots' folders.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

from flopplan.errors import UserError
from flopplan.fileio import TEMPORARY, atomic_write_json, folder_lock, read_json
from flopplan.race.design import RaceDesign, training_only
from flopplan.race.pilots import (
    ignored_budget,
    log_size,
    pilot_done,
    run_child,
    summary_as_written,
    unfinished,
)
from flopplan.race.script import PILOT_ENV, SPEC_FILE, PilotSpec, load_spec
from flopplan.runfile import CONFIG, SUMMARY, load_summary

COMMAND_FILE = "pilot_command.json"
COMMAND_VERSION = 1
TAIL_FILE = "pilot.log"


def record_command(folder: Path, command: str | None) -> str | None:
    """The race's pilot command: ``command`` recorded on first use (or while no pilot has written its run
    folder); the recorded one when None; a different one once pilots ran, or a command for a race whose pilots
    ran on the built-in trainer, refused with one line."""
    path = folder / COMMAND_FILE
    recorded = recorded_command(folder)
    if command is None or command == recorded:
        return recorded
    started = any((folder / "pilots").glob("*/seed*/config.json"))  # a pilot wrote its run folder
    if recorded is not None and started:
        raise UserError(f"this race's pilots run {recorded!r} ({path}): give the same --pilot, or none")
    if not command.strip():
        raise UserError("--pilot needs a command (e.g. 'python train_grpo.py')")
    try:
        shlex.split(command)  # how it is run: without a shell
    except ValueError as exc:
        raise UserError(f"--pilot {command!r} cannot be split into a program and its arguments: {exc}") from None
    if started:
        raise UserError("this race's pilots run on flopplan's trainer already: a --pilot command needs a new race")
    design = RaceDesign.load(folder)
    if len(design.targets) != 1:
        raise UserError(f"a script pilot evaluates one target (its eval_dataset), the race has {len(design.targets)} "
                        f"({', '.join(design.targets)}): design it with --eval-targets T --fit-targets T")
    atomic_write_json(path, {"pilot_command_version": COMMAND_VERSION, "command": command, "cwd": os.getcwd()})
    return command


def recorded_command(folder: Path) -> str | None:
    path = folder / COMMAND_FILE
    if not path.is_file():
        return None
    data = read_json(path, "pilot command")
    if not isinstance(data, dict) or data.get("pilot_command_version") != COMMAND_VERSION or not isinstance(
            data.get("command"), str):
        raise UserError(f"{str(path)!r} is not a pilot command of version {COMMAND_VERSION}")
    return str(data["command"])


def _cwd(folder: Path) -> str:
    return str(read_json(folder / COMMAND_FILE, "pilot command").get("cwd") or os.getcwd())


def script_overrides(arm: Any) -> dict[str, Any]:
    """The GRPOConfig fields an arm's FLOP-neutral axes set in a script pilot: its knobs under their GRPOConfig
    names (:data:`flopplan.race.axes.KNOB_OF_GRPO`; ``lora_alpha`` in the peft settings) and its GRPOConfig-only
    fields. A knob of the built-in trainer with no GRPOConfig field is refused in one line."""
    from flopplan.engines.trl import LOSS_TYPES
    from flopplan.race.axes import KNOB_OF_GRPO

    field_of = {knob: name for name, knob in KNOB_OF_GRPO.items()}
    out: dict[str, Any] = {}
    for knob, value in arm.knobs.items():
        if knob in field_of:
            out[field_of[knob]] = (LOSS_TYPES[value] if field_of[knob] == "loss_type" else
                                   [float(w) for w in str(value).split("+")] if knob == "reward_weights" else value)
        elif knob != "lora_alpha":
            raise UserError(f"arm {arm.name} varies --{knob.replace('_', '-')}, a knob of flopplan's trainer that "
                            "a TRL script pilot has no GRPOConfig field for: vary a GRPOConfig field instead")
    return {**out, **arm.grpo}


def _reward_model(design: RaceDesign, folder: Path, recipe: Any) -> str | None:
    """The trained reward model an ``orm:`` arm scores with (``race design --reward-model-path``, absolute), None
    for a ``rule`` arm (the script's own rewards) or where the design names none (the script loads the arm's)."""
    if recipe.reward.kind != "orm" or not design.reward_model_path:
        return None
    return str((folder / design.reward_model_path).resolve())


def _model(arm: Any, recipe: Any) -> str:
    """The model a script pilot loads (``spec.model``): the arm's policy as its recipe names it (a local folder by
    its absolute path since race design records it so: the relative spelling of the arm's axes did not exist where
    the pilot ran, and transformers then looked for a Hub model of that name), else the registry's name."""
    return str(arm.recipe.policy) if "policy" in arm.axes else recipe.policy_spec.name


def write_spec(design: RaceDesign, folder: Path, arm_name: str, seed: int, rung: int, budget: int,
               run: Path) -> PilotSpec:
    """The spec of a pilot at ``rung`` in run folder ``run`` (the validating run: rung -1, its evaluation points
    those :func:`continue_script_pilot` wrote)."""
    arm = design.arm(arm_name)
    recipe = training_only(arm.recipe)
    from flopplan.engines.trl import EXTRA_KEYS, grpo_config_kwargs, implied_world_size

    kwargs = grpo_config_kwargs(recipe, world_size=implied_world_size(recipe))  # spec.apply: the script's world
    points = design.eval_points
    if rung < 0 and (run / SPEC_FILE).is_file():
        points = load_spec(run / SPEC_FILE).eval_points
    run = run.resolve()
    spec = PilotSpec(str(folder.resolve()), arm.name, dict(arm.axes), seed, rung, int(budget), str(run),
                     str(run / "checkpoints"), (run / CONFIG).is_file(), design.fit_targets[0], tuple(points),
                     _model(arm, recipe), {k: v for k, v in kwargs.items()
                                                                            if k not in EXTRA_KEYS},
                     _peft(kwargs.get("peft"), arm.knobs), str(recipe.reward), recipe, script_overrides(arm),
                     arm.recipe.eval_prompts, design.eval_generations or None, _reward_model(design, folder, recipe),
                     design.rung_flops[rung] if rung >= 0 else None)
    run.mkdir(parents=True, exist_ok=True)
    spec.save()
    return spec


def _peft(peft: Any, knobs: dict[str, Any]) -> Any:
    """The arm's peft settings, with its ``lora_alpha`` knob when it varies one."""
    if peft is None or "lora_alpha" not in knobs:
        return peft
    return {**peft, "lora_alpha": knobs["lora_alpha"]}


def run_script_pilot(design: RaceDesign, folder: Path, task: Any, threads: int, log_path: Path) -> Any:
    """Start the recorded command for ``task`` (a :class:`flopplan.race.runner.PilotTask`) and check its run."""
    command = recorded_command(folder)
    assert command is not None
    spec = write_spec(design, folder, task.arm, task.seed, task.rung, task.budget, task.folder)
    env = {**os.environ, PILOT_ENV: str(Path(spec.folder) / SPEC_FILE), "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    argv, cwd = shlex.split(command), _cwd(folder)
    if not Path(cwd).is_dir():
        raise UserError(f"the pilot command runs in {cwd!r}, where `race run --pilot` was first given, and that folder "
                        "is not here: run the race from a machine that has it")
    what = f"pilot {task.arm} seed {task.seed}" + (f" (rung {task.rung + 1})" if task.rung >= 0 else " (validation)")
    since = log_size(task.folder / TAIL_FILE)  # (this attempt's stderr: the file keeps earlier attempts')
    before = summary_as_written(task.folder)
    with open(log_path, "ab") as log, open(task.folder / TAIL_FILE, "ab") as errors:
        try:
            returncode = run_child(argv, task.folder, watch=_Unmetered(task.folder, spec, what),
                                   stdout=log, stderr=errors, env=env, cwd=cwd)
        except OSError as exc:  # the program is not there, or cannot be run: no process started
            setting = "=" in argv[0] and argv[0].split("=", 1)[0].isidentifier()
            hint = (f": {argv[0]!r} is an environment setting, and the pilot command runs without a shell (set it "
                    f"before `flopplan race run`, or write 'env {argv[0]} ...')" if setting else
                    f": {exc.strerror or exc}")
            raise UserError(f"the pilot command {command!r} cannot start {argv[0]!r}{hint}") from None
    errors = task.folder / TAIL_FILE
    if returncode != 0 and not pilot_done(task.folder, task.budget):  # (a pilot killed in its teardown is done)
        raise unfinished(what, returncode, task.folder, before, folder, task.rung, errors, since, "stderr")
    if not (task.folder / SUMMARY).is_file():
        raise UserError(f"{what} exited without a run folder ({task.folder / SUMMARY} missing): the script must "
                        "meter its trainer with spec.meter(trainer)")
    summary = load_summary(task.folder)
    if summary.budget_flops != task.budget or summary.charged > task.budget:
        raise ignored_budget(what, task.folder, summary, task.budget)
    if not pilot_done(task.folder, task.budget):  # exit 0 short of its budget (a script that caught the meter's
        raise unfinished(what, returncode, task.folder, before, folder, task.rung, errors, since, "stderr")  # Ctrl-C)
    return task


class _Unmetered:
    """Asked while a script pilot runs (:func:`flopplan.race.pilots.run_child`'s ``watch``): why it must be stopped,
    or None. It trains without the meter, so nothing ends it at its budget and ``max_steps`` 10^7 would run on for
    days, when a TRL checkpoint appears while its run folder has no configuration (which the meter writes when it
    is attached), or, in a pilot resumed or continued, when a checkpoint written since it started still has no
    ledger (the meter saves its ledger into every checkpoint, before TRL's state) when asked again."""

    def __init__(self, run: Path, spec: PilotSpec, what: str) -> None:
        from flopplan.runfile import TRL_LEDGER as LEDGER_FILE

        self.run, self.checkpoints, self.what, self.ledger = run, Path(spec.output_dir), what, LEDGER_FILE
        self.started = time.time()
        self.suspects: set[Path] = set()

    def __call__(self) -> str | None:
        if not (self.run / CONFIG).is_file():
            found = any(self.checkpoints.glob("checkpoint-*"))
            return self._say(f"a TRL checkpoint in {self.checkpoints} and no run folder") if found else None
        new = {c for c in self.checkpoints.glob("checkpoint-*") if (c / "trainer_state.json").is_file()
               and not (c / self.ledger).is_file() and (c / "trainer_state.json").stat().st_mtime >= self.started}
        seen, self.suspects = new & self.suspects, new
        return self._say(f"{sorted(seen)[0].name} has TRL's state and no ledger") if seen else None

    def _say(self, why: str) -> str:
        return f"{self.what} trains without the meter ({why}): stopped; call spec.meter(trainer) before trainer.train()"


def continue_script_pilot(pilot: Path, run: Path, points: tuple[int, ...]) -> None:
    """``run`` as a copy of the finished script ``pilot`` (unless it is there), its spec's evaluation points
    ``points``: copied aside under the pilot's lock and renamed into place, so a kill leaves the whole copy or
    none. The TRL checkpoints travel with it (``checkpoints/``), so the script resumes the pilot's last one."""
    if (run / CONFIG).is_file():
        return
    aside = run.with_name(f".{run.name}.copy")
    shutil.rmtree(aside, ignore_errors=True)
    with folder_lock(pilot, "pilot run folder"):
        shutil.copytree(pilot, aside, ignore=shutil.ignore_patterns(".lock", TAIL_FILE, TEMPORARY))
    spec = load_spec(aside / SPEC_FILE)
    data = {**spec.to_data(), "eval_points": list(points)}
    atomic_write_json(aside / SPEC_FILE, data)
    shutil.rmtree(run, ignore_errors=True)
    os.replace(aside, run)
