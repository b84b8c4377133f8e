"""RACE's pilots on disk: where each pilot's run folder is, whether it finished a rung, what all pilots spent, and
the analysis's input read from them (the runner's promotion and ``race analyze`` read the pilots the same way), and
the process each pilot runs in: dying with the runner, interrupted through it."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from flopplan.errors import Interrupted, UserError
from flopplan.fileio import lock_holder_pid, proc_stat, read_json, read_step_log
from flopplan.race.analysis import RaceInput
from flopplan.race.design import PILOTS, RaceDesign
from flopplan.race.persistence import names_reward_model
from flopplan.race.pilot_data import ArmPilots, EvalPoint, PilotData, SeedRun
from flopplan.race.results import ArmInfo
from flopplan.race.rung_ends import rung_end
from flopplan.race.script import SPEC_FILE
from flopplan.runfile import EVALUATIONS, LEDGER, SUMMARY, EvalRecord, RunSummary, load_evaluations, load_summary


def pilot_folder(folder: str | Path, arm: str, seed: int) -> Path:
    return Path(folder) / PILOTS / arm / f"seed{seed}"


def set_parent_death_signal() -> None:  # pragma: no cover - runs in the child
    """Children die with the runner (Linux), so a killed race leaves no pilot holding its folder's lock."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


_RUNNING: dict[subprocess.Popen[bytes], Path | None] = {}  # each running pilot's process and its run folder
_RUNNING_LOCK = threading.Lock()
_INTERRUPTED = threading.Event()


def failure(returncode: int, log: Path, since: int = 0) -> tuple[str, str]:
    """How a child process ended, for a one-line refusal: its exit code (a signal by name), and flopplan's last
    refusal in what it wrote to its log (from byte ``since``, the log's size when it started: a log kept across
    attempts holds earlier attempts' refusals, which would be named instead) (a pilot's ``spec.apply`` or
    ``spec.meter`` refused the trainer: under torchrun every rank prints it, ``[rank0]:``-prefixed, before the
    launcher's own report), else the last line that says something: not a progress bar's (tqdm redraws its bar with
    carriage returns: "Writing model shards: 100%|..."), a warning's (:data:`WARNING`) nor a rule of ``=`` or
    ``-`` (of a process a signal killed with no error in its log, :data:`ERROR`, labelled as its last log line: a
    log's info line is no reason); failing that, the last warning's message, or the last line (a progress bar's)."""
    how = f"exit {returncode}"
    if returncode < 0:
        with contextlib.suppress(ValueError):
            how = f"killed by {signal.Signals(-returncode).name}"
    text = ""
    if log.is_file():
        with open(log, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
    lines = [x.strip() for line in text.splitlines() for x in line.split("\r") if x.strip()]
    refusals = [x.split(REFUSAL, 1)[1].strip() for x in lines if REFUSAL in x]
    if refusals:
        return how, refusals[-1]
    words = [x for x in lines if not (PROGRESS_BAR.search(x) or WARNING.search(x)) and x.strip("=-")]
    if words and returncode < 0 and not ERROR.search(text):  # killed: its last line is no reason (a log's info)
        return how, f"no error message; its last log line: {words[-1]}"
    if words:
        return how, words[-1]
    warned = [x for x in lines if WARNING.search(x) and not x.startswith("warnings.warn(")]
    if warned:
        return how, f"no error message; its last warning: {warned[-1]}"
    return how, lines[-1] if lines else "(no output)"


def log_size(log: Path) -> int:
    """Where a child's output will start in ``log`` (appended to): :func:`failure` reads from there."""
    return log.stat().st_size if log.is_file() else 0


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that ask a program to stop (Ctrl-C, ``kill``): a pilot ended by one was stopped by whoever sent it."""


def summary_as_written(folder: Path) -> bytes | None:
    """A run folder's summary as it stands (None: none yet): taken before a pilot's process starts, it tells
    :func:`interruption` whether that process wrote the summary it left."""
    path = folder / SUMMARY
    return path.read_bytes() if path.is_file() else None


def interruption(returncode: int, folder: Path, before: bytes | None) -> str | None:
    """How a pilot's process that ended short of its budget was stopped by the user, or None where it failed: its
    run summary, written by this process (it differs from ``before``, :func:`summary_as_written`), says that a
    SIGINT stopped it after its current phase, with a checkpoint (a script under a launcher may then exit 1, as
    ``torchrun`` does for a worker that ended on SIGINT); or the process ended by a signal of
    :data:`STOP_SIGNALS`, as its negative number or as 128 + it (``flopplan train`` exits 130 after a Ctrl-C; a
    shell reports a signal so), and the next run resumes it from its last checkpoint. A SIGINT or SIGTERM sent to
    one pilot alone, not to the runner, is the user's stop, not a failure of its arm."""
    after = summary_as_written(folder)
    if after is not None and after != before and load_summary(folder).stopped_for == "interrupted":
        return "SIGINT (it stopped after its current phase, with a checkpoint)"
    for stop in STOP_SIGNALS:
        if returncode in (-stop, 128 + stop):
            return f"{stop.name} (it resumes from its last checkpoint; work after that is recorded as lost)"
    return None


def stopped_pilot(what: str, how: str, race: Path, rung: int, log: Path) -> Interrupted:
    """The one line for a pilot the user stopped (``how``: :func:`interruption`'s), with the command that resumes
    it: ``race run`` for a rung's pilot, ``race validate`` for the validating run (``rung`` -1)."""
    command = "validate" if rung < 0 else "run"
    return Interrupted(f"{what} was interrupted by {how}, not a failure: `flopplan race {command} "
                       f"{shlex.quote(str(race))}` resumes it (log: {log})")


def short_of_budget(what: str, folder: Path, log: Path) -> UserError:
    """The refusal of a pilot whose process exited 0 with its run short of its budget, not interrupted: a script
    that ended its training by a rule of its own (an early-stopping callback, its epochs run out), or one that
    wrote no run. Read as done it would not be; read as unfinished, the runner said it waited for other shards."""
    summary = load_summary(folder) if (folder / SUMMARY).is_file() else None
    why = ("it wrote no run summary" if summary is None else
           f"its run ended at {summary.charged:,} of {summary.budget_flops or 0:,} FLOPs, "
           + (f"stopped for {summary.stop_reason!r}" if summary.stop_reason else "not stopped by its meter"))
    return UserError(f"{what} exited 0 short of its budget ({why}): a pilot trains until its meter stops it at the "
                     "budget; remove what else ends its training and run `flopplan race run` again, which resumes it "
                     f"(log: {log})")


def unfinished(what: str, returncode: int, folder: Path, before: bytes | None, race: Path, rung: int, log: Path,
               since: int, log_name: str = "log") -> Exception:
    """Why the pilot ``what`` (run folder ``folder``, of the race in ``race``) whose process ended with
    ``returncode`` did not finish its rung: the user stopped it (:func:`interruption`, the one line of
    :func:`stopped_pilot`), it exited 0 short of its budget (:func:`short_of_budget`), or it failed (its exit and
    the last thing its ``log`` says after byte ``since``: :func:`failure`)."""
    stopped = interruption(returncode, folder, before)
    if stopped is not None:
        return stopped_pilot(what, stopped, race, rung, log)
    if returncode == 0:
        return short_of_budget(what, folder, log)
    how, last = failure(returncode, log, since)
    return UserError(f"{what} failed ({how}): {last} ({log_name}: {log})")


REFUSAL = "flopplan.errors.UserError:"
"""How a traceback names flopplan's one-line refusal of bad input."""
WARNING = re.compile(r"^warnings\.warn\(|^\S+\.py:\d+: \w*Warning: ")
"""A Python warning's two lines on stderr: ``path.py:12: FutureWarning: ...`` and its source line (often
``warnings.warn(``); a pilot killed after one would be reported by it."""


ERROR = re.compile(r"^Traceback \(most recent call last\)|^(\[rank\d+\]: *)?[\w.]*(Error|Exception)\b", re.M)
"""What says a process failed with an error of its own: a traceback, or an exception's line."""
PROGRESS_BAR = re.compile(r"\d+%\|")
"""A tqdm progress bar's percentage and left edge."""

WATCH_SECONDS = 5.0
"""How often :func:`run_child` asks its ``watch`` whether the pilot must be stopped."""


def run_child(command: list[str], folder: Path | None = None, watch: Callable[[], str | None] | None = None,
              **kwargs: Any) -> int:
    """Run a pilot's process (``subprocess.Popen``'s ``kwargs``) to its end, dying with the runner
    (:func:`set_parent_death_signal`), and return its exit code; 130, without starting it, once the runner was
    interrupted (:func:`interrupt_children`: a pilot whose thread had taken its task before the interrupt would
    otherwise start after it and run its whole rung). A Ctrl-C of the runner while it waits here (in the main
    thread) is passed on as by :func:`interrupt_children`; ``folder``: the pilot's run folder, whose writer is
    the process the SIGINT goes to (:func:`_interrupted_process`); ``watch``: asked every :data:`WATCH_SECONDS`
    while the pilot runs, a message from it ends the pilot (SIGTERM, then SIGKILL after 30 s) and is raised as
    a UserError."""
    with _RUNNING_LOCK:  # started under the lock: an interrupt either finds it running or keeps it from starting
        if _INTERRUPTED.is_set():
            return 130
        proc = subprocess.Popen(command, preexec_fn=set_parent_death_signal, **kwargs)
        _RUNNING[proc] = folder
    try:
        try:
            while watch is not None:
                try:
                    return proc.wait(timeout=WATCH_SECONDS)
                except subprocess.TimeoutExpired:
                    message = watch()
                    if message is not None:
                        proc.terminate()
                        try:
                            proc.wait(timeout=30)
                        except subprocess.TimeoutExpired:
                            proc.kill()
                            proc.wait()
                        raise UserError(message) from None
            return proc.wait()
        except KeyboardInterrupt:
            interrupt_children()
            proc.wait()
            raise
    finally:
        with _RUNNING_LOCK:
            _RUNNING.pop(proc, None)


def _parent_pid(pid: int) -> int | None:
    fields = proc_stat(pid)
    return int(fields[1]) if fields is not None and len(fields) > 1 and fields[1].isdigit() else None


def _interrupted_process(proc: subprocess.Popen[bytes], folder: Path | None) -> int:
    """Where a pilot's SIGINT goes: the process writing its run folder (the holder of its lock, the metered script)
    when a launcher started it (``accelerate launch`` ends its script on SIGINT with SIGTERM, and ``torchrun``
    kills its workers 30 s later, before a round can finish and be checkpointed; the script's meter stops after
    the round, on every rank), else the pilot's own process (no launcher, or no writer yet, or not on Linux)."""
    pid = lock_holder_pid(folder) if folder is not None else None
    below = pid
    while below is not None and below > 1 and below != proc.pid:  # only a process the pilot started
        below = _parent_pid(below)
    return pid if pid is not None and below == proc.pid else proc.pid


def interrupt_children() -> None:
    """Pass a SIGINT the runner received on to the pilot processes :func:`run_child` is waiting for, once, and
    start no other: a built-in pilot stops after its current phase with a checkpoint, which the next ``race run``
    resumes; a script pilot metered by :func:`flopplan.trl.meter` finishes its round, checkpoints it and ends (its
    meter's Ctrl-C handling), which the next ``race run`` resumes with nothing lost; the SIGINT goes to the script
    itself, past a launcher that would end it (:func:`_interrupted_process`). A Ctrl-C at a terminal reaches
    the pilots too (they share the
    runner's process group): the trainer takes a second SIGINT within a second as the same one
    (:data:`flopplan.train.interrupt.SAME_CTRL_C`)."""
    with _RUNNING_LOCK:
        _INTERRUPTED.set()
        running = [(p, folder) for p, folder in _RUNNING.items() if p.poll() is None]
    for proc, folder in running:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(_interrupted_process(proc, folder), signal.SIGINT)


def take_ctrl_c() -> None:
    """Let a SIGINT interrupt this runner (a KeyboardInterrupt, then :func:`interrupt_children`) where it started
    with SIGINT ignored: a non-interactive shell starts its background jobs so (``flopplan race run DIR &`` in a
    script), and Python then never installs its handler, so ``kill -INT`` of the runner did nothing and its pilots
    ran on to the end of their rungs and the race to its next rung. Only from the main thread."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def children_stopped() -> bool:
    """Whether :func:`interrupt_children` has stopped the pilots (a Ctrl-C, or another pilot's failure)."""
    return _INTERRUPTED.is_set()


def allow_children() -> None:
    """Let :func:`run_child` start pilots again (a new ``race run`` or ``race validate`` in this process)."""
    _INTERRUPTED.clear()


def pilot_done(folder: Path, budget: int) -> bool:
    """The pilot in ``folder`` finished a run to ``budget`` FLOPs, or has since been continued to a larger one (a
    pilot goes on only after its rung is done; killed while continuing, it is done with the rung before). A run
    stopped by Ctrl-C is not done, whenever the signal came: the next ``race run`` resumes it."""
    if not (folder / SUMMARY).is_file():
        return False
    summary = load_summary(folder)
    reached = summary.budget_flops or 0
    _check_script_budget(folder, summary)
    return reached > budget or (ended(summary) and reached >= budget)


def _check_script_budget(folder: Path, summary: RunSummary) -> None:
    """A script pilot (its ``pilot.json``) that ran to more than the budget it was given, or charged more, is refused
    whenever it is read, not only when its process ends: read as done, it would count for every rung its larger
    run reaches and its arm would race on more FLOPs than the others. A run killed while continuing to a larger
    budget (the spec's; its summary still the smaller one's) is not finished, and not refused."""
    if not (folder / SPEC_FILE).is_file():
        return
    data = read_json(folder / SPEC_FILE, "pilot spec")  # its budget only: read on every check
    given = data.get("budget") if isinstance(data, dict) else None
    if isinstance(given, int) and ((summary.budget_flops or 0) > given or summary.charged > given):
        raise ignored_budget("the pilot", folder, summary, given)


def ignored_budget(what: str, folder: Path, summary: RunSummary, given: int) -> UserError:
    """The refusal of a script pilot whose run does not carry the budget it was given (:func:`_check_script_budget`,
    and :func:`flopplan.race.user_pilot.run_script_pilot` when its process ends)."""
    ran = "with no budget" if summary.budget_flops is None else f"to {summary.budget_flops:,}"
    return UserError(f"{what} ignored its budget: it ran {ran} and charged {summary.charged:,} "
                     f"FLOPs against the {given:,} it was given (meter it with spec.meter): delete {str(folder)!r} "
                     "and run the race again")


def arm_done(design: RaceDesign, folder: Path, arm: str, rung: int) -> bool:
    """Every seed's pilot of ``arm`` in the race in ``folder`` finished rung ``rung`` (:func:`pilot_done`)."""
    budget = design.arm(arm).pilot_budget(design, rung)
    return all(pilot_done(pilot_folder(folder, arm, s), budget) for s in design.seeds)


def ended(summary: RunSummary) -> bool:
    """Whether the run stopped for good: for its budget or a step limit, not interrupted
    (:attr:`flopplan.runfile.RunSummary.stopped_for`). The summary's ``interrupted`` record is not read: it stays
    after the run is resumed and finished, as the record of the work the interruption abandoned."""
    return summary.stopped_for in ("budget", "steps")


def pilot_spending(design: RaceDesign, folder: Path) -> dict[str, int]:
    """FLOPs all pilots spent by their ledgers: in total, on training (evaluations excluded), on evaluations, and
    lost to interruptions (a kill's lost work and the steps a Ctrl-C abandoned: recorded beside the pilots'
    ledgers, outside the total and the pilots' budgets)."""
    out = {"total": 0, "training": 0, "evaluation": 0, "lost": 0}
    for name, seed in design.pilots():
        path = pilot_folder(folder, name, seed)
        if not (path / SUMMARY).is_file():
            continue
        s = load_summary(path)
        out["total"] += s.flops["total"]
        out["evaluation"] += s.flops.get("evaluation", 0)
        out["lost"] += s.lost_flops + s.abandoned_flops
    out["training"] = out["total"] - out["evaluation"]
    return out


def within_rung(records: list[EvalRecord], design: RaceDesign, arm: str, rung: int,
                pilot: Path | None = None) -> list[EvalRecord]:
    """A pilot's evaluations made within ``rung``. Where the runner recorded where the pilot's run of the rung
    ended (in its folder ``pilot``: :func:`flopplan.race.rung_ends.rung_end`, its step and training FLOPs then),
    those up to that end, within its budget: a pilot running its next rung does not change the rung, and a rung
    whose last round trained past its cap keeps that round's evaluation (a TRL script pilot whose reward model
    reads another tokenizer can: the meter's bound learns that model's extra tokens as rounds run). Without a
    record (a race run before it, or no ``pilot`` given), the rule of the race's manifest version: within its budget
    (:meth:`~flopplan.race.design.Arm.pilot_budget`: its training and evaluations, which the rung's run never
    passes) and, in a race designed as manifest version 5 (whose pilots are capped at each rung's training FLOPs),
    at training FLOPs within the rung's. Before the cap, rounds or evaluations that cost less than priced
    (completions that end early, a script's shorter prompts) let a rung train past its planned training FLOPs; cut
    there, its last evaluation was dropped and the pilot read as stopped short, so an older race reads by the
    budget alone, and where the first rounds of a pilot's next rung fit within the rung's budget (evaluations that
    cost less than their reserve), those too; the version stands in for the cap (races of version 4 run since the
    cap came are capped too, and read the older way). In a capped race without a record a pilot's first
    evaluation of its next rung is not read as the rung's unless the rung stopped on its budget before its cap,
    and a last round past the cap is read as the next rung's."""
    budget = design.arm(arm).pilot_budget(design, rung)
    if pilot is not None and (end := rung_end(pilot, rung, budget)) is not None:
        return [r for r in records if r.flops <= budget and end.holds(r)]
    capped = design.manifest_version >= 5
    return [r for r in records if r.flops <= budget and (not capped or r.train_flops <= design.rung_flops[rung])]


def pilot_input(design: RaceDesign, folder: Path, reached: dict[str, int], command: str,
                running: frozenset[str] = frozenset()) -> RaceInput:
    """The analysis's input from the pilots of the arms in ``reached`` (arm -> the rung all its seeds finished),
    each pilot's evaluations read up to that rung's end as the runner recorded it, or its budget in a race run
    before the record (:func:`within_rung`), so a pilot already running its next rung does not change it.
    ``pilot_spend`` holds each arm's pilots' ledgers in seed order (the first is the one a validating run
    continues), ``trained_rewards`` the reward a pilot's ledger recorded where it disagrees with the design's (each
    pilot's summary read once for both); ``running``: :attr:`RaceInput.running`."""
    targets: dict[str, list[ArmPilots]] = {t: [] for t in design.targets}
    infos, spend, trained = [], {}, {}
    for arm in design.arms:
        if arm.name not in reached:
            continue
        limit = arm.pilot_budget(design, reached[arm.name])
        runs: dict[str, list[SeedRun]] = {t: [] for t in design.targets}
        folders = [pilot_folder(folder, arm.name, s) for s in design.seeds]
        summaries = [load_summary(p) if (p / SUMMARY).is_file() else None for p in folders]  # None: not written yet
        for seed, path, summary in zip(design.seeds, folders, summaries, strict=True):
            records = load_evaluations(path)
            if summary is not None and ended(summary) and summary.budget_flops == arm.pilot_budget(
                    design, reached[arm.name]):
                _check_whole(path, records, summary.steps)
            for target in design.targets:
                points = tuple(EvalPoint(float(r.train_flops), np.asarray(r.scores, dtype=float))
                               for r in within_rung(records, design, arm.name, reached[arm.name], path)
                               if r.target == target)
                if not points:
                    within = f" within its rung's budget of {limit:.3g} FLOPs" if any(r.target == target
                                                                                       for r in records) else ""
                    raise UserError(f"pilot {arm.name} seed {seed} has no evaluation on {target!r}{within}")
                runs[target].append(SeedRun(seed, points))
        for target in design.targets:
            targets[target].append(ArmPilots(arm.name, tuple(runs[target])))
        infos.append(ArmInfo(name=arm.name, axes=dict(arm.axes), params=arm.recipe.policy_spec.params,
                             split=_split(arm.split(reached[arm.name])), upfront_flops=arm.upfront_flops))
        spend[arm.name] = tuple(0 if s is None else s.flops["total"] for s in summaries)  # lost work apart
        recorded = _trained_reward(str(arm.axes.get("reward", "rule")), [s.reward for s in summaries if s])
        if recorded is not None:
            trained[arm.name] = recorded
    return RaceInput(arms=tuple(infos), targets={t: PilotData(tuple(arms)) for t, arms in targets.items()},
                     fitted_targets=design.fit_targets, budget_flops=float(design.budget_flops),
                     rung_budgets=tuple(float(b) for b in design.rung_flops), reached=dict(reached),
                     pilot_flops=pilot_spending(design, folder)["total"], command=command or design.command,
                     pilot_spend=spend, trained_rewards=trained, one_seed_sd=design.one_seed_sd, running=running)


def _check_whole(path: Path, records: list[EvalRecord], steps: int) -> None:
    """A finished pilot's evaluations must hold every evaluation its ledger charged up to its summary's ``steps``,
    on each target it evaluates: a file cut short at a line's end reads as a pilot that evaluated less, and would
    change the analysis without a word (a line cut in the middle is a kill's, and
    :func:`flopplan.fileio.read_step_log` deals with it). Steps after the summary's are not read: a pilot being
    continued to its next rung writes them, and a kill between a step's ledger line and its evaluations leaves
    one that the resumed run trims."""
    charged = {line["step"] for line in read_step_log(path / LEDGER)
               if line["step"] <= steps
               and any(str(phase).startswith("eval.") for charge in line.get("charges") or ()
                      if isinstance(charge, dict) for phase in charge.get("executed") or {})}
    for target in dict.fromkeys(r.target for r in records):
        missing = sorted(charged - {r.step for r in records if r.target == target})
        if missing:
            shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
            raise UserError(f"pilot {str(path)!r}: {EVALUATIONS} lacks the {target!r} evaluation of step"
                            f"{'s' if len(missing) > 1 else ''} {shown}, which its ledger charged (the file was cut "
                            "short or edited): restore it, or delete the pilot's folder and `flopplan race run` again")


def _trained_reward(designed: str, recorded: list[str]) -> str | None:
    """The reward system a pilot's ledger ``recorded`` where it names a reward model and the design's does not, or
    the reverse: a user's script meters the reward functions its trainer holds (a reward model in
    ``reward_funcs`` is one, whatever the design says), and the analysis's learned-reward caveat reads it. Spelling
    (``RULE``, ``prm`` for its default model, a script's own copy of the design's model) is no difference."""
    return next((r for r in recorded if names_reward_model(r) != names_reward_model(designed)), None)


def _split(shares: dict[str, Any]) -> dict[str, float]:
    parts = {b: float(shares.get(b, 0.0)) for b in ("rollout", "learning", "feedback")}
    total = sum(parts.values()) or 1.0
    return {b: v / total for b, v in parts.items()}
