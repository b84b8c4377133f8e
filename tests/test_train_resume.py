"""The validating GRPO run killed and resumed: it ends at the same steps as the run never stopped, charges the work it
lost to the budget and never exceeds it; Ctrl-C stops after a phase with a checkpoint."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT
from test_train import CLOCKS, SMALL, _quiet_env, flopplan, metrics_of, summary_of  # noqa: F401  # autouse

pytest.importorskip("torch")
pytest.importorskip("peft")

RESUME = ["--steps", "6", *SMALL, "--completion-len", "3", "--checkpoint-every", "2", "--eval-every", "3",
          "--eval-prompts", "16", "--seed", "7"]
COMPARED = ("reward", "accuracy", "loss", "completion_tokens", "clip_fraction", "grad_norm")


def _final(run: Path) -> tuple[dict, dict]:
    s = summary_of(run)
    final = {k: s["final"][k] for k in COMPARED}
    return s, final


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    run = tmp_path_factory.mktemp("resume") / "straight"
    flopplan("train", "--out", str(run), *RESUME)
    return _final(run)


def _start(run: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flopplan", "train", "--out", str(run), *RESUME], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, process: subprocess.Popen, timeout: float = 300) -> None:
    start = time.time()
    while not path.exists():
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.time() - start < timeout
        time.sleep(0.05)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _kill_after(run: Path, process: subprocess.Popen, ledger_lines: int) -> None:
    """SIGKILL once the ledger holds ``ledger_lines`` committed steps (some after the last checkpoint)."""
    start = time.time()
    while _lines(run / "ledger.jsonl") < ledger_lines:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.time() - start < 300
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()


def _per_step(run: Path) -> dict[int, dict]:
    return {m["step"]: {k: v for k, v in m.items() if k not in CLOCKS} for m in metrics_of(run)}


@pytest.mark.slow
@pytest.mark.xdist_group("resume")
def test_killed_run_resumes_to_the_same_steps_and_charges_the_lost_work(tmp_path, uninterrupted):
    """Killed after step 5 (checkpoint at 4): the resumed run redoes step 5 bit for bit, its buckets equal the
    uninterrupted run's, and the step the kill lost is charged apart, as lost."""
    straight, final = uninterrupted
    run = tmp_path / "killed"
    process = _start(run)
    _kill_after(run, process, 6)  # the baseline evaluation (step 0) and steps 1-5
    lost_step = json.loads((run / "ledger.jsonl").read_text().splitlines()[5])
    assert lost_step["step"] == 5
    flopplan("train", "--out", str(run), "--resume", "--no-progress")
    resumed, resumed_final = _final(run)
    assert resumed["flops"] == straight["flops"] and resumed["useful_flops"] == straight["useful_flops"]
    assert resumed_final == final
    assert resumed["eval_accuracy"] == straight["eval_accuracy"]
    assert [m["step"] for m in metrics_of(run)] == list(range(0, 7))
    assert resumed["lost_flops"] >= sum(sum(c["executed"].values()) for c in lost_step["charges"]) > 0


@pytest.mark.slow
@pytest.mark.xdist_group("resume")
def test_a_restarted_run_killed_again_before_its_first_checkpoint_keeps_its_baselines_charge(tmp_path, uninterrupted):
    """Killed before its first checkpoint, the run starts again and checkpoints at step 0 to keep the lost work,
    before its baseline evaluation; killed again before its next checkpoint, it resumes from that one, keeps the
    baseline it logged (not run again) and must charge it: its buckets equal the uninterrupted run's. The first
    kill also leaves what a kill while writing a checkpoint leaves, its temporary file (once, in a RACE pilot of
    tests/test_race_protocol.py's killed race, --resume then refused the folder as one that "already holds a run")."""
    straight, _ = uninterrupted
    run = tmp_path / "killed"
    _kill_after(run, _start(run), 2)  # the baseline and step 1: no checkpoint yet (the first is at step 2)
    assert not (run / "checkpoints" / "latest").exists()
    (run / "checkpoints").mkdir(exist_ok=True)
    cut = run / "checkpoints" / "step-000001.pt.tmp"  # a name this run never writes again (it checkpoints every 2)
    cut.write_bytes(b"PK\x03\x04 cut short")
    again = subprocess.Popen([sys.executable, "-m", "flopplan", "train", "--out", str(run), "--resume",
                              "--no-progress"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(run / "checkpoints" / "latest", again)  # the restart's step-0 checkpoint, written on emptied logs
    assert not cut.exists()  # the new run removed it
    _kill_after(run, again, 2)
    assert (run / "checkpoints" / "latest").read_text().strip()[5:11] == "000000"
    flopplan("train", "--out", str(run), "--resume", "--no-progress")
    resumed = summary_of(run)
    assert resumed["flops"] == straight["flops"] and resumed["eval_accuracy"] == straight["eval_accuracy"]
    assert [m["step"] for m in metrics_of(run)] == list(range(0, 7)) and resumed["lost_flops"] > 0


def _work_since_checkpoint(run: Path) -> int:
    """What a kill just lost, recomputed from the files: committed steps after the last checkpoint, and the units
    of the step in progress."""
    checkpoint = int((run / "checkpoints" / "latest").read_text().strip()[5:11])
    lines = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines() if line.strip()]
    done = {line["step"] for line in lines if line["step"] > checkpoint}
    progress = run / "progress.jsonl"
    partial = [json.loads(line) for line in progress.read_text().splitlines()] if progress.exists() else []
    return sum(sum(c["executed"].values()) for line in lines + [p for p in partial if p["step"] not in done]
               if line["step"] > checkpoint for c in line["charges"])


@pytest.mark.slow
def test_killed_k_times_charges_the_lost_work_and_never_exceeds_the_budget(tmp_path):
    """Three kills at different points of a budgeted run: every resume charges what the kill lost, the budget
    holds counting it, and every step both runs made is identical to the uninterrupted run's. (With
    --lost-outside-budget the lost work is recorded only and the steps are the uninterrupted run's: RACE's killed
    pilots, tests/test_race_protocol.py.)"""
    limit = 20_000_000_000
    budget = ["--budget", str(limit), *SMALL, "--completion-len", "3", "--checkpoint-every", "3", "--no-eval",
              "--seed", "3"]
    straight = tmp_path / "straight"
    flopplan("train", "--out", str(straight), *budget)
    steps = summary_of(straight)["steps"]
    assert steps >= 16
    run = tmp_path / "killed"
    expected_lost = 0
    for lines in (steps // 4 + 1, steps // 2, 3 * steps // 4):  # mid-interval between checkpoints, or not
        args = ["--resume", "--no-progress"] if run.exists() else budget
        process = subprocess.Popen([sys.executable, "-m", "flopplan", "train", "--out", str(run), *args], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _kill_after(run, process, lines)
        expected_lost += _work_since_checkpoint(run)
    flopplan("train", "--out", str(run), "--resume", "--no-progress")
    s, full = summary_of(run), summary_of(straight)
    assert s["lost_flops"] == expected_lost > 0 and s["within_budget"] and s["lost_charged"] is True
    assert s["flops"]["total"] + s["lost_flops"] <= limit and s["stop_reason"].startswith("budget")
    assert s["steps"] <= full["steps"]  # it may stop earlier, by the lost work
    ours, theirs = _per_step(run), _per_step(straight)
    assert all(ours[step] == theirs[step] for step in ours if step in theirs)


@pytest.mark.slow
@pytest.mark.xdist_group("resume")
def test_ctrl_c_stops_after_the_phase_with_a_checkpoint_and_resumes(tmp_path, uninterrupted):
    straight, final = uninterrupted
    run = tmp_path / "interrupted"
    process = _start(run)
    _wait_for(run / "checkpoints" / "step-000002.pt", process)
    process.send_signal(signal.SIGINT)
    time.sleep(0.05)  # the same Ctrl-C again, as a race runner passes on a terminal's: still one graceful stop
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 130 and "--resume" in err, err  # interrupted, and it says how to go on
    stopped = summary_of(run)
    assert stopped["stop_reason"].startswith("interrupted") and stopped["steps"] < 6
    flopplan("train", "--out", str(run), "--resume", "--no-progress")
    resumed, resumed_final = _final(run)
    assert resumed["flops"] == straight["flops"]
    assert resumed_final == final


@pytest.mark.slow
@pytest.mark.parametrize("how", [["--resume"], RESUME], ids=["resume", "a new run"])
def test_a_run_killed_before_its_first_checkpoint_is_charged_alike_when_resumed_or_run_again(tmp_path, how):
    """A new run may take the folder of a run killed before its first checkpoint (nothing to resume): it started
    over with no lost work and no note, while --resume charged what the logs hold."""
    run = tmp_path / "killed"
    _kill_after(run, _start(run), 2)  # the baseline and step 1: no checkpoint yet (the first is at step 2)
    assert not (run / "checkpoints" / "latest").exists()
    logged = sum(sum(c["executed"].values()) for line in (run / "ledger.jsonl").read_text().splitlines()
                 if line.strip() for c in json.loads(line)["charges"])
    out = flopplan("train", "--out", str(run), *how, "--no-progress").stdout
    assert "FLOPs done before the kill were lost and are charged" in out
    assert ("no checkpoint yet: the run starts again" if how == ["--resume"] else
            "the folder held a run killed before its first checkpoint: this run replaces it") in out
    assert summary_of(run)["lost_flops"] >= logged > 0
