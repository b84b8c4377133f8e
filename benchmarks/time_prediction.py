"""Held-out check of a time model learned from runs: does a profile fitted on some runs predict the time of others?

    python benchmarks/time_prediction.py                  # about 8-12 minutes on 2 busy CPU cores
    python benchmarks/time_prediction.py --work DIR --keep  # keep the run folders and the profile in DIR

1. Trains the fit runs (tiny policy, random init, `python -m flopplan train ... --no-progress`, never with
   --measure-flops) and fits a profile on them: `flopplan calibrate --from-runs FIT... --out WORK/profile
   --probe-shutdown` (the probe times a run-like process's exit, which no run folder dates). The fit puts every
   fit run at their typical share of a core (each run's lines record its CPU seconds), so that the load other
   sessions put on the machine while a run ran is not learned as a property of its recipe.
2. Trains the held-out runs, which differ from the fit runs in budget, batch shapes (prompts x G, micro-batch,
   optimizer batch), lengths (prompt, completion), tuning (LoRA ranks, full), mu, beta and reward (the ORM), and
   repeats one of them to measure how much the same run's time varies on this machine.
3. For every held-out run, prices its recipe for the steps it ran with the profile
   (`flopplan.planner.price_steps`, what `flopplan plan --profile P --steps N` prints) and compares with what it
   measured: phase time (the ledger's seconds) and wall time (the `flopplan train` process, start to exit); and
   asks the planner how many steps the measured wall time buys (`plan --profile P --gpu-hours H`). Beside the
   error, the error the run would have had at the share of a core the profile assumes (its wall x its own share /
   that share): what the model gets wrong once the machine's load is taken out.

Targets on this 2-core machine: median absolute error of the whole-run wall time within 15 %, no run worse than
30 %. The figures are printed as measured, misses included.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from flopplan.calibrate.runs import read_runs
from flopplan.hardware import load_profile
from flopplan.planner import Budget, plan, price_steps
from flopplan.recipe import Recipe
from flopplan.runfile import load_summary, read_ledger

ROOT = Path(__file__).resolve().parent.parent
TARGET_MEDIAN, TARGET_MAX = 0.15, 0.30


@dataclass(frozen=True)
class Run:
    name: str
    recipe: tuple[str, ...]  # `flopplan plan` recipe options (the tiny policy)
    digits: int  # the task: digit strings of this length (prompt: 'd d ... d >' and BOS, 2 n + 2 tokens)
    steps: int  # the plan's budget buys these steps and half of the next
    fixed: bool = False  # --fixed-completion-len: every completion runs to --completion-len

    @property
    def plan_args(self) -> list[str]:
        evaluation = [] if "--eval-every" in self.recipe else ["--eval-every", "10", "--eval-prompts", "200"]
        return ["--model", "tiny", *self.recipe, *evaluation, "--prompt-len", str(2 * self.digits + 2),
                "--eval-completion-len", "2"]


def flopplan(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "flopplan", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode:
        raise SystemExit(f"flopplan {' '.join(args[:3])} ... failed:\n{done.stderr[-2000:]}")
    return done


def train(run: Run, out: Path) -> tuple[float, float]:
    """Plan ``run`` (a budget of its steps and half of the next) and train the plan into ``out``, as a user would:
    `flopplan plan ... --budget B --out plan.json`, then `flopplan train --plan plan.json`. The wall seconds of the
    training process, start to exit, and the share of them it had a core (its CPU seconds over its wall seconds:
    the trainer runs one thread on a policy this small, so less than 1 means other processes held the core)."""
    priced = json.loads(flopplan("plan", *run.plan_args, "--steps", str(run.steps), "--format", "json").stdout)
    entry = priced["plans"][0]
    budget = int(entry["flops"]["total"] + entry["step_flops"] // 2)
    (out.parent / "plans").mkdir(parents=True, exist_ok=True)
    plan_file = out.parent / "plans" / f"{out.name}.json"
    flopplan("plan", *run.plan_args, "--budget", str(budget), "--out", str(plan_file), "--format", "json")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    STARTED[run.name] = time.time()
    start = time.perf_counter()
    flopplan("train", "--plan", str(plan_file), "--task", f"digits:first:{run.digits}", "--out", str(out),
             "--no-progress", *(["--fixed-completion-len"] if run.fixed else []))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / wall


FIT = (
    Run("fit-full-16x16", ("--full", "--prompts-per-step", "16", "--group-size", "16", "--completion-len", "2",
                           "--micro-batch", "64"), 4, 30),
    Run("fit-lora8-mu2", ("--lora-rank", "8", "--prompts-per-step", "8", "--group-size", "8", "--completion-len", "4",
                          "--micro-batch", "32", "--mu", "2"), 6, 25, fixed=True),
    Run("fit-full-orm-beta", ("--full", "--prompts-per-step", "8", "--group-size", "16", "--completion-len", "3",
                              "--micro-batch", "64", "--optimizer-batch", "64", "--reward", "orm:tiny",
                              "--reward-overhead", "1", "--beta", "0.04"), 4, 20, fixed=True),
    Run("fit-lora16-wide", ("--lora-rank", "16", "--prompts-per-step", "32", "--group-size", "8", "--completion-len",
                            "2", "--micro-batch", "128", "--eval-every", "5", "--eval-prompts", "100"), 8, 15),
    Run("fit-full-small", ("--full", "--prompts-per-step", "4", "--group-size", "8", "--completion-len", "6",
                           "--micro-batch", "16"), 3, 50, fixed=True),
    Run("fit-full-orm-small", ("--full", "--prompts-per-step", "4", "--group-size", "8", "--completion-len", "2",
                               "--micro-batch", "32", "--reward", "orm:tiny", "--reward-overhead", "1"), 6, 40),
    Run("fit-lora4-k8", ("--lora-rank", "4", "--prompts-per-step", "8", "--group-size", "4", "--completion-len", "8",
                         "--micro-batch", "16"), 5, 20, fixed=True),
    Run("fit-full-mu3", ("--full", "--prompts-per-step", "4", "--group-size", "16", "--completion-len", "2",
                         "--micro-batch", "16", "--mu", "3", "--optimizer-batch", "32"), 4, 25),
)
HELD_OUT = (
    Run("readme-67-steps", ("--full", "--prompts-per-step", "16", "--group-size", "16", "--completion-len", "2",
                            "--micro-batch", "64", "--eval-every", "10", "--eval-prompts", "200"), 4, 67),
    Run("lora4-long", ("--lora-rank", "4", "--prompts-per-step", "16", "--group-size", "8", "--completion-len", "5",
                       "--micro-batch", "64"), 5, 30, fixed=True),
    Run("full-orm", ("--full", "--prompts-per-step", "12", "--group-size", "8", "--completion-len", "2",
                     "--micro-batch", "48", "--reward", "orm:tiny", "--reward-overhead", "1"), 5, 40),
    Run("full-256x32-micro", ("--full", "--prompts-per-step", "8", "--group-size", "32", "--completion-len", "3",
                              "--micro-batch", "32", "--eval-every", "5", "--eval-prompts", "100"), 4, 25, fixed=True),
    Run("lora32-mu2-optbatch", ("--lora-rank", "32", "--prompts-per-step", "24", "--group-size", "4",
                                "--completion-len", "3", "--micro-batch", "48", "--mu", "2", "--optimizer-batch",
                                "48"), 7, 20, fixed=True),
    Run("full-tiny-rounds", ("--full", "--prompts-per-step", "4", "--group-size", "4", "--completion-len", "2",
                             "--micro-batch", "16"), 4, 80),
)
REPEATS = 2  # extra runs of the first held-out run, for the machine's repeat noise
STARTED: dict[str, float] = {}  # run -> when its training process was started (epoch seconds)


def measured(folder: Path) -> tuple[Recipe, int, float]:
    """A run's recipe, its steps and its phase seconds (every committed unit of the ledger)."""
    config = json.loads((folder / "config.json").read_text())
    phase = sum(c["seconds"] for record in read_ledger(folder, partial=False) for c in record.charges)
    return Recipe.from_data(config["recipe"]), load_summary(folder).steps, phase


def folder_name(run: Run) -> str:
    return run.name.replace("#", "-repeat")


def pct(value: float) -> str:
    return f"{100 * value:+.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", help="folder for the runs and the profile (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--reuse", action="store_true",
                        help="with --work: keep the runs already there whose times were saved, train the others")
    options = parser.parse_args()
    work = Path(options.work or tempfile.mkdtemp(prefix="flopplan-time-"))
    work.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    first = HELD_OUT[0]
    repeats = [Run(f"{first.name}#{i + 2}", first.recipe, first.digits, first.steps, first.fixed)
               for i in range(REPEATS)]
    held = [*HELD_OUT, *repeats]
    # fit and held-out runs alternate (the repeats spread among them), so that the machine's load, which other
    # sessions change by the minute, falls on both alike; the fit uses the fit runs only
    order = [run for pair in itertools.zip_longest(FIT, HELD_OUT) for run in pair if run is not None]
    order.insert(len(order) // 2, repeats[0])
    order += repeats[1:]
    walls: dict[str, float] = {}
    share: dict[str, float] = {}
    saved = work / "walls.json"
    if options.reuse and saved.exists():
        walls, share, started = json.loads(saved.read_text())
        STARTED.update(started)
    for run in order:
        if run.name in walls:
            continue
        walls[run.name], share[run.name] = train(run, work / folder_name(run))
        kind = "fit" if run in FIT else "held-out"
        print(f"{kind} run {run.name}: {walls[run.name]:.1f} s, core share {share[run.name]:.2f}", flush=True)
        saved.write_text(json.dumps([walls, share, STARTED]))
    fitting = flopplan("calibrate", "--from-runs", *(str(work / r.name) for r in FIT), "--out", str(work / "profile"),
                       "--probe-shutdown", "--json")
    print(f"profile: {work / 'profile' / 'profile.json'} (fitted on the {len(FIT)} fit runs)", flush=True)
    for note in json.loads(fitting.stdout)["notes"]:
        print(f"  note: {note}")
    profile = load_profile(work / "profile" / "profile.json")
    # the share of a core the fit put every fit run at (the runs' median, from their own CPU seconds): the
    # profile prices runs at that load, so a held-out run's time at it is its wall x its share / that share
    fitted = json.loads((work / "profile" / "profile.json").read_text())["fit_from_runs"]
    fit_share = (fitted.get("core_share") or {}).get("typical") or statistics.mean(share[r.name] for r in FIT)
    wall_errors, phase_errors, loaded_errors, tails = [], [], [], []
    print()
    header = (f"{'held-out run':<24} {'core':>4} {'steps':>5} {'plan@H':>6} {'phase s':>8} {'pred':>8} {'err':>7} "
              f"{'outside s':>9} {'pred':>7} {'wall s':>7} {'pred':>7} {'err':>7} {'at fit load':>11}")
    print(header)
    print("-" * len(header))
    for run in held:
        folder = work / folder_name(run)
        recipe, steps, phase = measured(folder)
        priced = price_steps(recipe, steps, profile)
        seconds = priced.seconds or {}
        phase_pred = sum(v for k, v in seconds.items() if k in priced.phases)
        wall_pred = sum(seconds.values())
        wall = walls[run.name]
        bought = plan(recipe, Budget(gpu_hours=wall / 3600), profile).steps  # plan --gpu-hours (measured wall)
        e_phase, e_wall = phase_pred / phase - 1, wall_pred / wall - 1
        (timing,), _ = read_runs([str(folder)])
        e_loaded = wall_pred / (wall * (timing.core_share or share[run.name]) / fit_share) - 1
        print(f"{run.name:<24} {share[run.name]:>4.2f} {steps:>5} {bought:>6} {phase:>8.2f} {phase_pred:>8.2f} "
              f"{pct(e_phase):>7} {wall - phase:>9.2f} {wall_pred - phase_pred:>7.2f} {wall:>7.2f} {wall_pred:>7.2f} "
              f"{pct(e_wall):>7} {pct(e_loaded):>11}")
        if run.name in STARTED:  # the process's exit after its last file: what no run folder dates
            tails.append(STARTED[run.name] + wall - (folder / "summary.json").stat().st_mtime)
        if "#" not in run.name:
            wall_errors.append(abs(e_wall))
            phase_errors.append(abs(e_phase))
            loaded_errors.append(abs(e_loaded))
    repeat = [walls[r.name] for r in held if r.name.split("#")[0] == HELD_OUT[0].name]
    spread = (max(repeat) - min(repeat)) / statistics.mean(repeat)
    noise = statistics.stdev(repeat) / statistics.mean(repeat)
    print()
    print(f"held-out runs: {len(wall_errors)} (repeats of {HELD_OUT[0].name} shown, not counted); fit runs' mean core "
          f"share {statistics.mean(share[r.name] for r in FIT):.2f}")
    print(f"wall time, abs. error: median {100 * statistics.median(wall_errors):.1f} % (target "
          f"{100 * TARGET_MEDIAN:.0f} %), max {100 * max(wall_errors):.1f} % (target {100 * TARGET_MAX:.0f} %)")
    print(f"phase time, abs. error: median {100 * statistics.median(phase_errors):.1f} %, max "
          f"{100 * max(phase_errors):.1f} %")
    print(f"wall time at the fit runs' typical load (measured x the run's share of its core / the share the fit "
          f"assumes, {fit_share:.2f}), abs. error: median "
          f"{100 * statistics.median(loaded_errors):.1f} %, max {100 * max(loaded_errors):.1f} %")
    print(f"repeat noise ({len(repeat)} runs of {HELD_OUT[0].name}): wall {', '.join(f'{w:.1f}' for w in repeat)} s, "
          f"spread (max - min) / mean {100 * spread:.1f} %, sd / mean {100 * noise:.1f} %; core shares "
          f"{', '.join(f'{share[r.name]:.2f}' for r in held if r.name.split('#')[0] == HELD_OUT[0].name)}")
    if tails:
        print(f"the process's exit after its last file (tables, interpreter shut-down; probed by calibrate, not "
              f"dated by runs): measured {statistics.median(tails):.2f} s per run (median), modelled "
              f"{(profile.non_phase or {}).get('shutdown', {}).get('seconds', 0.0):.2f} s")
    met = statistics.median(wall_errors) <= TARGET_MEDIAN and max(wall_errors) <= TARGET_MAX
    print(f"targets {'met' if met else 'MISSED'}. core: the share of its wall time the run had a core (CPU s / wall "
          "s; other sessions' processes take the rest); plan@H: the steps `plan --profile P --gpu-hours H` buys with H "
          "the run's measured wall time (its own steps when the model is right)")
    print(f"benchmark took {time.perf_counter() - began:.0f} s; runs in {work}")
    if not options.keep and not options.work:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
