"""Regenerate every command output the docs show, and the CLI reference, from the commands themselves.

    python scripts/docs_outputs.py            # the fast, torch-free outputs and docs/reference/cli.md
    python scripts/docs_outputs.py --slow     # also the slow ones (training runs, TRL, RACE, calibration)
    python scripts/docs_outputs.py --only NAME[,NAME...]
    python scripts/docs_outputs.py --check    # exit 1 when a fast output or the CLI reference is stale

`make docs-outputs` runs the first form (`make docs-outputs SLOW=1` the second). Each output is a session: its
commands run in order, in a fresh folder that holds links to the repository's examples/, calibration/ and
benchmarks/, with `flopplan`, `python` and `torchrun` on PATH being this interpreter's. The file
docs/_outputs/NAME.txt holds each command after a `$ ` and what it printed (stdout and stderr, as a terminal shows
them; rich tables at their 180-column pipe width, trailing spaces removed). A slow session also writes NAME.note.md,
the line the page shows beside it: when, on what hardware, how long. tests/test_docs.py reruns the fast sessions and
compares.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = ROOT / "docs" / "_outputs"
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"
LINKED = ("examples", "calibration", "benchmarks")
"""Repository folders a session's commands read (examples/recipe.toml, the committed profiles, the benchmarks)."""
ELIDED = "..."


@dataclass(frozen=True)
class Step:
    """One shown command. ``show``: ``all``; ``none`` (its output is elided); ``head:N``, ``tail:N`` (N lines);
    ``from:TEXT`` (from the first line that contains TEXT). ``mask``: regexes whose first group is replaced by
    ``...`` (a date or a path that differs between runs)."""

    command: str
    show: str = "all"
    mask: tuple[str, ...] = ()


@dataclass(frozen=True)
class Session:
    name: str
    steps: tuple[Step, ...]
    slow: bool = False
    env: dict[str, str] = field(default_factory=dict)


TINY_67 = ("flopplan plan --model tiny --full --prompts-per-step 16 --group-size 16 --prompt-len 10 --completion-len 2"
           " --micro-batch 64 --eval-every 10 --eval-prompts 200 --budget 6e11")
TINY_TRL = ("flopplan plan --model tiny --full --prompts-per-step 4 --group-size 4 --prompt-len 9 --completion-len 4"
            " --generation-batch 8 --micro-batch 8 --logprob-head fused --steps 6 --out plan.json")
RACE_TRL = ("flopplan race design --budget 1.2e10 --pilot-fraction 0.5 --models tiny-s,tiny --group-sizes 4 "
            "--prompts-per-step 4 --prompt-len 9 --completion-len 2 --full --logprob-head fused "
            "--attention-kernel sdpa --seeds 1 --rungs 2 "
            "--evals 2 --eval-prompts 16 --eval-loop trl --fit-targets heldout --room 1 --out race")
PROFILE = "calibration/cpu-amd-epyc-2-threads-runs/profile.json"
CREATED = r'"created": "([^"]+)"'

SESSIONS = (
    Session("plan-default", (Step("flopplan plan"),)),
    Session("compare-feedback", (Step("flopplan compare --models qwen2.5-1.5b,qwen2.5-7b "
                                      "--rewards rule,prm:qwen2.5-math-prm-7b,prm:qwen2.5-1.5b",
                                      show="from:Feedback systems"),)),
    Session("plan-gpu-hours", (Step("flopplan plan --model qwen2.5-7b --gpu-hours 500 --device h100"),)),
    Session("plan-solve", (Step("flopplan plan --model qwen2.5-1.5b --solve group_size --steps 2000"),
                           Step("flopplan plan --largest-model --steps 300"))),
    Session("plan-file", (Step("flopplan plan --model qwen2.5-1.5b --out plan.json", show="none"),
                          Step("cat plan.json", show="head:64", mask=(CREATED,)))),
    Session("plan-recipe", (Step("flopplan plan --recipe examples/recipe.toml --budget 3e19 --device h100"),)),
    Session("models", (Step("flopplan models"),)),
    Session("estimate-train", (Step("flopplan estimate --model qwen2.5-7b --phase train --batch 8 --seq 1280 "
                                    "--logits 1025 --lora-rank 64 --grad-ckpt"),)),
    Session("formula-decode", (Step("flopplan formula --phase decode"),)),
    Session("python-api", (Step("python examples/python_api.py"),)),
    Session("peer-formulas", (Step("python benchmarks/peer_formulas.py", show="from:largest absolute error",
                                   mask=(r"computed 49 rows in (\S+ ms)",)),)),
    Session("time-plan", (Step(f"{TINY_67} --profile {PROFILE} --out plan.json", show="from:Estimated time"),)),
    Session("trl-export", (Step(TINY_TRL, show="from:- recipe"),
                           Step("flopplan export trl plan.json --world-size 2 --out trl-run"),
                           Step("cat trl-run/grpo_config.yaml"),
                           Step("cat trl-run/flopplan.yaml"),
                           Step("flopplan plan --from-trl trl-run/grpo_config.yaml --from-trl trl-run/flopplan.yaml "
                                "--prompt-len 9 --world-size 2 --device cpu", show="from:- "))),
    Session("verl", (Step("flopplan plan --model qwen2.5-7b --prompts-per-step 64 --group-size 8 --completion-len 1024"
                          " --budget 1e19 --out plan7b.json", show="from:- recipe"),
                     Step("flopplan export verl plan7b.json --gpus-per-node 8 --reward-function reward.py "
                          "--out verl-run"),
                     Step("flopplan plan --from-verl verl-run/overrides.txt"))),
    # Slow: real runs, recorded with their date and hardware; the test checks only that the pages' files exist.
    Session("train-metered", (Step(f"{TINY_67} --out plan.json", show="none"),
                              Step("flopplan train --plan plan.json --out run --measure-flops --no-progress")),
            slow=True),
    Session("time-report", (Step(f"{TINY_67} --profile {PROFILE} --out plan.json", show="none"),
                            Step("flopplan train --plan plan.json --out run --no-progress", show="none"),
                            Step("flopplan report run")), slow=True),
    Session("trl-train", (Step(TINY_TRL, show="none"),
                          Step("torchrun --nproc-per-node 2 -m flopplan train --engine trl --plan plan.json "
                               "--out run --fixed-completion-len --no-progress --measure-flops")),
            slow=True, env={"OMP_NUM_THREADS": "1"}),
    Session("race-demo", (Step("flopplan race demo"),), slow=True),
    Session("race-trl", (Step(RACE_TRL, show="none"),
                         Step("flopplan race run race --pilot 'python examples/race_trl/train_grpo.py'"),
                         Step("flopplan race analyze race --no-plots"),
                         Step("flopplan race validate race")), slow=True, env={"OMP_NUM_THREADS": "1"}),
    Session("race-trl-ray", (Step(RACE_TRL, show="none"),
                             Step("flopplan race run race --backend ray --pilot-cpus 1 "
                                  "--pilot 'python examples/race_trl/train_grpo.py'")),
            slow=True, env={"OMP_NUM_THREADS": "1"}),
    Session("race-trl-shards", (Step(RACE_TRL, show="none"),  # a Slurm array's tasks, one after the other here
                                *(Step(f"flopplan race run race --shard {i}/2 "
                                       "--pilot 'python examples/race_trl/train_grpo.py'") for i in (0, 1, 0))),
            slow=True, env={"OMP_NUM_THREADS": "1"}),
    Session("calibrate-verify", (Step("flopplan calibrate --verify", show="tail:4"),), slow=True),
    Session("bench-plan-throughput", (Step("python benchmarks/plan_throughput.py"),), slow=True),
    Session("bench-time-prediction", (Step("python benchmarks/time_prediction.py", show="from:held-out run "),),
            slow=True),
)


def hardware() -> str:
    """The machine, in words, for a recorded output's note (DOCS_HARDWARE overrides it)."""
    named = os.environ.get("DOCS_HARDWARE")
    if named:
        return named
    from flopplan.hardware import cpu_model

    words = f"{os.cpu_count()}-core {cpu_model()}"
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        words += f", {round(pages * size / 2**30)} GiB"
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import torch  # optional: names the GPU a slow output ran on

        if torch.cuda.is_available():
            words += ", " + torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return words


def shown(text: str, step: Step) -> str:
    """What the page shows of a command's output."""
    for pattern in step.mask:
        text = re.sub(pattern, lambda m: m.group(0).replace(m.group(1), ELIDED), text)
    lines = [line.rstrip() for line in text.rstrip("\n").splitlines()]
    kind, _, arg = step.show.partition(":")
    if kind == "none":
        return ELIDED
    if kind == "head" and len(lines) > int(arg):
        lines = [*lines[: int(arg)], ELIDED]
    elif kind == "tail" and len(lines) > int(arg):
        lines = [ELIDED, *lines[-int(arg):]]
    elif kind == "from":
        at = next((i for i, line in enumerate(lines) if arg in line), None)
        if at is None:
            raise SystemExit(f"docs_outputs: {step.command!r} printed no line with {arg!r}")
        lines = ([ELIDED] if at else []) + lines[at:]
    return "\n".join(lines)


def session_env(bin_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "CLICOLOR_FORCE")}
    path = os.pathsep.join((str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")))
    env.update(PATH=path, COLUMNS="120", NO_COLOR="1",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p))
    env.update(extra)
    return env


def make_bin(folder: Path) -> Path:
    """``flopplan`` as this interpreter's, whether or not flopplan is installed in it (``python`` is found in the
    interpreter's own folder, next on PATH)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "flopplan"
    launcher.write_text(f"#!{sys.executable}\nfrom flopplan.cli import main\nmain()\n")
    launcher.chmod(0o755)
    return bin_dir


def run_session(session: Session) -> tuple[str, float]:
    """The session's text (``$ command`` and output, per step) and its wall seconds."""
    with tempfile.TemporaryDirectory(prefix="flopplan-docs-") as tmp:
        folder = Path(tmp)
        env = session_env(make_bin(folder), session.env)
        work = folder / "work"
        work.mkdir()
        for name in LINKED:
            (work / name).symlink_to(ROOT / name)
        parts, start = [], time.perf_counter()
        for step in session.steps:
            done = subprocess.run(["bash", "-c", step.command], cwd=work, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"docs_outputs: {session.name}: {step.command!r} exited {done.returncode}:\n"
                                 f"{done.stdout[-3000:]}")
            shown_env = "".join(f"{k}={v} " for k, v in session.env.items())
            parts.append(f"$ {shown_env}{step.command}\n{shown(done.stdout, step)}")
        return "\n".join(parts) + "\n", time.perf_counter() - start


def note(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    took = f"{minutes} min {secs} s" if minutes else f"{secs} s"
    return (f"Recorded on {datetime.date.today().isoformat()} on {hardware()} by `make docs-outputs SLOW=1` "
            f"(the commands took {took}).\n")


def command_paths() -> list[str]:
    """Every command and subcommand of the CLI, depth first: ``flopplan``, ``flopplan calibrate``, ..."""
    import click

    from flopplan.cli import main

    out: list[str] = []

    def walk(path: str, command: click.Command) -> None:
        out.append(path)
        if isinstance(command, click.Group):
            for name in sorted(command.commands):
                walk(f"{path} {name}", command.commands[name])

    walk("flopplan", main)
    return out


def cli_page() -> str:
    """docs/reference/cli.md: every command's ``--help``, as click prints it."""
    lines = ["# Command line", "",
             "Every command's `--help`, generated by `make docs-outputs` from the CLI itself (a test fails when "
             "this page is stale). Bad input is one line on stderr and exit code 2.", ""]
    for path in command_paths():
        depth = min(path.count(" "), 2)  # flopplan: ##, a command: ###, a subcommand: ####
        lines += [f"{'#' * (depth + 2)} `{path}`", "", "```text", help_of(path).rstrip(), "```", ""]
    return "\n".join(lines)


def help_of(path: str) -> str:
    from click.testing import CliRunner

    from flopplan.cli import main

    args = [*path.split()[1:], "--help"]
    result = CliRunner().invoke(main, args, prog_name="flopplan", env={"COLUMNS": "120"}, terminal_width=120)
    if result.exit_code != 0:
        raise SystemExit(f"docs_outputs: {path} --help exited {result.exit_code}: {result.output}")
    return result.output


def stale(selected: list[Session], write: bool) -> list[str]:
    """Regenerate ``selected`` and the CLI page; write each as it is done, or name the files that differ."""
    differ = []

    def compare(path: Path, text: str) -> None:
        if not path.exists() or path.read_text() != text:
            differ.append(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path))
            if write:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)

    compare(CLI_PAGE, cli_page())
    for session in selected:
        text, seconds = run_session(session)
        compare(OUTPUTS / f"{session.name}.txt", text)
        if session.slow and write:
            (OUTPUTS / f"{session.name}.note.md").write_text(note(seconds))
        print(f"{session.name}: {seconds:.1f} s", file=sys.stderr)
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow", action="store_true", help="also the slow sessions (minutes to an hour)")
    parser.add_argument("--only", default="", help="comma-separated session names")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when an output is stale")
    args = parser.parse_args(argv)
    names = {s.name for s in SESSIONS}
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - names)
    if unknown:
        parser.error(f"no session named {', '.join(unknown)} (sessions: {', '.join(sorted(names))})")
    selected = [s for s in SESSIONS if (s.name in only if only else args.slow or not s.slow)]
    differ = stale(selected, write=not args.check)
    for path in differ:
        print(f"{'stale' if args.check else 'wrote'}: {path}", file=sys.stderr)
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
