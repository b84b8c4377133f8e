"""The trainer's run folder (flopplan/train/runfolder.py): one training per folder, a full disk while checkpointing,
and a run that cannot work refused before it starts. Each test skips on its own without torch (the refusals that need
no torch still run), which is why these are not behind test_train.py's file-level skip."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, ROOT_ONLY, cli, one_line_error


@pytest.mark.slow
def test_two_trainings_of_one_folder_refuse_the_second(tmp_path):
    pytest.importorskip("torch")
    run = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "flopplan", "train", "--out", str(run), "--steps", "400",
                              "--no-eval", "--no-progress"], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        import time

        start = time.time()
        while not (run / "ledger.jsonl").exists() or not (run / "ledger.jsonl").read_text():
            assert first.poll() is None and time.time() - start < 300, first.stderr.read() if first.stderr else ""
            time.sleep(0.05)
        for args in (["--steps", "1"], ["--resume"]):
            one_line_error(cli("train", "--out", str(run), *args, "--no-progress"), "in use by process")
    finally:
        first.kill()
        first.wait()


@ROOT_ONLY
@pytest.mark.slow
def test_a_full_disk_while_checkpointing_is_one_line_and_leaves_no_temporary(tmpfs):
    pytest.importorskip("torch")
    run = tmpfs / "run"
    one_line_error(cli("train", "--out", str(run), "--steps", "12", "--checkpoint-every", "2", "--no-eval",
                       "--no-progress", "--keep-checkpoints", "100"), "cannot write the checkpoint")
    assert not list((run / "checkpoints").glob("*.tmp"))


TRAIN_REFUSED = {
    "a prompt beyond the context": (["--dataset", "LONG", "--steps", "1", "--no-eval"], "context"),
    "a completion beyond the context": (["--completion-len", "600", "--steps", "1"], "context"),
    "a budget without a step": (["--budget", "1500"], "buys no step"),
    "a training cap without a step": (["--steps", "1", "--train-flops", "1500"], "--train-flops 1,500 buys no step"),
    "a group of one completion": (["--group-size", "1", "--steps", "1"], "group size of 1 cannot train"),
    "experts of a dense model": (["--steps", "1", "--experts", "eager"],
                                 "--experts applies to models with mixture-of-experts layers; tiny has none"),
}


@pytest.mark.parametrize("case", sorted(TRAIN_REFUSED))
def test_a_run_that_cannot_work_is_refused_before_it_starts_and_leaves_no_folder(tmp_path, case):
    """Refused before any work: the folder it would have made is not left behind (a budget without a step left one
    with the run's empty logs and configuration, and any refusal its lock file), and an empty folder given stays
    empty."""
    pytest.importorskip("torch")
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"prompt": "1" * 2000, "answer": "1"}) + "\n")
    args = [str(long) if a == "LONG" else a for a in TRAIN_REFUSED[case][0]]
    one_line_error(cli("train", "--out", str(tmp_path / "run"), *args, "--no-progress"), TRAIN_REFUSED[case][1])
    assert not (tmp_path / "run").exists()
    (tmp_path / "empty").mkdir()
    one_line_error(cli("train", "--out", str(tmp_path / "empty"), *args, "--no-progress"), TRAIN_REFUSED[case][1])
    assert not list((tmp_path / "empty").iterdir())


def test_experts_is_taken_where_the_policy_has_mixture_of_experts_layers(tmp_path):
    """--experts counts a mixture-of-experts policy (refused for a dense one above, as plan refuses it): the run goes
    on to its next check, here a budget that buys no step."""
    pytest.importorskip("torch")
    one_line_error(cli("train", "--out", str(tmp_path / "run"), "--model", "tiny-moe", "--experts", "eager",
                       "--budget", "1500", "--no-progress"), "buys no step")


def test_a_trl_runs_work_in_progress_is_recorded_under_the_steps_it_belongs_to(tmp_path):
    """The TRL meter records what ran since the last logged line: a committed round not yet logged (step 10) and the
    units of the next round (11). Both went under step 11, so a kill's record named a round that never ran as the
    one lost; each is its own step's record now, and the lost work counts both, not the logged step 9."""
    from flopplan.train.runfolder import RunFolder

    folder = RunFolder(tmp_path / "run")
    folder.begin({"engine": "trl"})
    charge = {"unit": "rollout", "executed": {"rollout.prefill": 100}, "useful": {"rollout.prefill": 100}}
    (tmp_path / "run" / "ledger.jsonl").write_text(json.dumps({"step": 9, "charges": [charge]}) + "\n")
    update = {"unit": "update", "executed": {"update": 30}, "useful": {"update": 30}}
    folder.set_progress([(10, [charge, update]), (11, [charge]), (12, [])])
    records = [json.loads(line) for line in (tmp_path / "run" / "progress.jsonl").read_text().splitlines()]
    assert [(r["step"], len(r["charges"]), r["partial"]) for r in records] == [(10, 2, True), (11, 1, True)]
    assert folder.lost_after(9) == 230 and folder.lost_after(8) == 330


def test_a_metered_trl_runs_folder_is_reused_unless_its_run_can_resume_or_finished(tmp_path):
    """A TRL script metered into a folder keeps its models' configs in ``trl/``: a script that failed in its first
    round, run again with the same ``out``, was refused as a folder holding "files that are not a flopplan run
    (trl)" (a review). It is reused where nothing can be resumed, as a built-in run before its first checkpoint; a
    folder whose run left a complete TRL checkpoint (in the script's output_dir, which its configuration names, or
    in ``trl/``, ``flopplan train --engine trl``'s), or that finished, is not."""
    from flopplan.errors import UserError
    from flopplan.runfile import TRL_LEDGER
    from flopplan.train.runfolder import RunFolder

    folder = RunFolder(tmp_path / "run")
    output = tmp_path / "script-output"
    folder.begin({"engine": "trl", "grpo_config": {"output_dir": str(output)}})
    (tmp_path / "run" / "trl" / "models" / "policy").mkdir(parents=True)
    charge = {"unit": "rollout", "executed": {"rollout.prefill": 100}, "useful": {"rollout.prefill": 100}}
    (tmp_path / "run" / "ledger.jsonl").write_text(json.dumps({"step": 1, "charges": [charge]}) + "\n")
    (output / "checkpoint-2").mkdir(parents=True)  # a save a kill cut short: nothing to resume
    (output / "checkpoint-2" / TRL_LEDGER).write_text("{}")
    folder.check_new()
    (output / "checkpoint-2" / "trainer_state.json").write_text("{}")
    with pytest.raises(UserError, match=r"already holds a metered TRL run with a checkpoint \(.*checkpoint-2\): "
                                        r"resume it"):
        folder.check_new()
    own = tmp_path / "run" / "trl" / "checkpoint-4"  # flopplan train --engine trl's own
    own.mkdir()
    for name in ("trainer_state.json", TRL_LEDGER):
        (own / name).write_text("{}")
    with pytest.raises(UserError, match=r"checkpoint-4\): resume it"):
        folder.check_new()
    # a finished run holds its final checkpoint too (a held-out user was told to resume it): its summary decides
    (tmp_path / "run" / "summary.json").write_text(json.dumps({"stop": {"reason": "steps"}}))
    with pytest.raises(UserError, match=r"already holds a finished metered TRL run: give another folder"):
        folder.check_new()
    (tmp_path / "run" / "summary.json").write_text(json.dumps({"stop": {"reason": "interrupted"}}))
    with pytest.raises(UserError, match=r"checkpoint-4\): resume it"):  # a Ctrl-C's stop goes on when resumed
        folder.check_new()
    for path in (own, output / "checkpoint-2"):
        for file in path.iterdir():
            file.unlink()
        path.rmdir()
    (tmp_path / "run" / "summary.json").write_text("{}")
    with pytest.raises(UserError, match=r"already holds a finished metered TRL run: give another folder"):
        folder.check_new()
    (tmp_path / "run" / "summary.json").unlink()
    (tmp_path / "run" / "stray.txt").write_text("")
    with pytest.raises(UserError, match=r"the run folder .* holds files that are not a flopplan run \(stray.txt\)"):
        folder.check_new()


@pytest.mark.slow
def test_report_of_a_run_past_its_checkpoint_says_it_goes_on_then_that_it_was_killed(tmp_path):
    """A checkpoint writes the summary of the steps so far (no stop): report said "stopped: finished" of a run still
    going, and of one killed after it."""
    pytest.importorskip("torch")
    import os
    import signal
    import time

    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "flopplan", "train", "--out", str(run), "--steps", "400",
                             "--checkpoint-every", "2", "--no-eval", "--no-progress"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        start = time.time()
        while not ((run / "summary.json").exists() and len((run / "ledger.jsonl").read_text().splitlines()) >= 3):
            assert proc.poll() is None and time.time() - start < 300, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGSTOP)  # still holding the folder, moving on no further
        steps = len((run / "ledger.jsonl").read_text().splitlines())
        going = cli("report", str(run), "--no-plot", check=True).stdout
        assert "stopped: finished" not in going
        assert f"not finished: still running (process {proc.pid}); its ledger holds {steps} committed steps" in going
        assert json.loads(cli("report", str(run), "--json", check=True).stdout)["unfinished"].startswith(
            "not finished: still running")
    finally:
        proc.kill()
        proc.wait()
    killed = cli("report", str(run), "--no-plot", check=True).stdout
    assert "stopped: finished" not in killed
    assert f"not finished: killed; its ledger holds {steps} committed steps" in killed and "--resume" in killed


STALE = (".progress.jsonl.k3x_9q0a.tmp", ".metrics.jsonl.abcdefgh.tmp", ".progress.rank1.jsonl.0a1b2c3d.tmp")
"""What a kill while rewriting a run's file leaves: flopplan.fileio's temporary of a file the run writes."""
KEPT = (".notes.jsonl.abcdefgh.tmp", ".progress.jsonl.mine.tmp", ".progress.jsonl.ABCDEFGH.tmp",
        ".progress.jsonl.abcdefgh.tmp.bak")
"""A user's files of like names (another file's, not 8 of mkstemp's characters, more after .tmp): never removed."""


@pytest.mark.slow
def test_a_resume_or_a_new_run_removes_the_temporaries_a_kill_left_and_nothing_else(tmp_path):
    """A SIGKILL while progress.jsonl was rewritten left ``.progress.jsonl.<random>.tmp``, which outlived a resume
    to the run's end (a checkpoint's temporary is removed). A resume, or a new run that replaces one killed before
    its first checkpoint, removes such temporaries of the run's files under the folder's lock; a user's files
    stay."""
    pytest.importorskip("torch")
    run = tmp_path / "run"
    args = ["--out", str(run), "--checkpoint-every", "2", "--no-eval", "--no-progress", "--prompts-per-step", "2",
            "--group-size", "2", "--completion-len", "3"]
    cli("train", *args, "--steps", "2", check=True)
    for name in STALE + KEPT:
        (run / name).write_text("{}\n")
    cli("train", "--out", str(run), "--no-progress", "--steps", "3", "--resume", check=True)
    assert not [name for name in STALE if (run / name).exists()]
    assert all((run / name).exists() for name in KEPT)
    for name in STALE:  # a run killed before its first checkpoint, replaced by a new one
        (run / name).write_text("{}\n")
    for path in (run / "checkpoints").iterdir():
        path.unlink()
    (run / "summary.json").unlink()
    cli("train", *args, "--steps", "1", check=True)
    assert not [name for name in STALE if (run / name).exists()]
    assert all((run / name).exists() for name in KEPT)


def test_a_run_started_with_relative_paths_resumes_from_another_folder(tmp_path, monkeypatch, capsys):
    """A run records the folder it started in (work_dir): a resume from elsewhere reads the relative paths it does
    not find there (a dataset, a reward function's file) from that folder, and says so (it read them from where it
    resumed, and refused a dataset it could not find); a copied project resumed in its copy reads the copy's own
    files; where the start folder is gone, the refusal says so."""
    import shutil

    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    (start / "train.jsonl").write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n"
                                               for a in range(5) for b in range(5)))
    (start / "rewards.py").write_text("def has_answer(completions, answer, **kw):\n"
                                      "    return [float(a in c) for c, a in zip(completions, answer)]\n")
    monkeypatch.chdir(start)
    small = ("--prompts-per-step", "4", "--group-size", "4", "--micro-batch", "8", "--completion-len", "2")
    cli("train", "--out", "run", "--dataset", "train.jsonl", "--reward-func", "rewards.py:has_answer", "--steps", "1",
        *small, "--no-eval", "--no-progress", check=True)
    assert json.loads((start / "run" / "config.json").read_text())["work_dir"] == str(start)
    monkeypatch.chdir(elsewhere)
    resumed = cli("train", "--out", "../start/run", "--resume", "--steps", "2", "--no-progress", check=True)
    assert json.loads((start / "run" / "summary.json").read_text())["steps"] == 2
    assert f"note: read from {start}, where the run started (not found here): train.jsonl, rewards.py" in \
        resumed.stderr and Path.cwd() == elsewhere  # (this process stays where it was)

    shutil.copytree(start, tmp_path / "copy")  # a copied project, its reward function changed: the copy's is read
    (tmp_path / "copy" / "rewards.py").write_text("def has_answer(completions, **kw):\n    raise KeyError('copy')\n")
    monkeypatch.chdir(tmp_path / "copy")
    one_line_error(cli("train", "--out", "run", "--resume", "--steps", "3", "--no-progress"),
                   "reward function 'rewards.py:has_answer' raised KeyError: 'copy'")

    monkeypatch.chdir(tmp_path)
    start.rename(tmp_path / "moved")
    one_line_error(cli("train", "--out", "moved/run", "--resume", "--steps", "3", "--no-progress"),
                   f"cannot read dataset 'train.jsonl': no such file or folder (the run started in {str(start)!r}, "
                   "which is gone")


def test_a_resume_on_data_that_changed_since_its_checkpoint_is_refused(tmp_path):
    """The checkpoint's data position counts prompts of the data it was trained on: a resume after the dataset was
    edited went on silently with other prompts. It is refused in one line naming the part; restored, it resumes."""
    data = tmp_path / "train.jsonl"
    rows = "".join(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n" for a in range(5) for b in range(5))
    data.write_text(rows)
    run = tmp_path / "run"
    small = ("--prompts-per-step", "4", "--group-size", "4", "--micro-batch", "8", "--completion-len", "2")
    cli("train", "--out", str(run), "--dataset", str(data), "--steps", "1", *small, "--no-eval", "--no-progress",
        check=True)
    data.write_text(rows.replace('"answer": "4"', '"answer": "5"', 1))
    one_line_error(cli("train", "--out", str(run), "--resume", "--steps", "2", "--no-progress"),
                   "the run's data changed since step-000001.pt (train:")
    data.write_text(rows)
    cli("train", "--out", str(run), "--resume", "--steps", "2", "--no-progress", check=True)
    assert json.loads((run / "summary.json").read_text())["steps"] == 2

    # the rows, not their rendering: a chat template may print the date (Llama 3's), which would refuse every
    # resume on another day; here the template file itself changes, and the resume goes on
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": f"{a} {b} >"}], "answer": str(a + b)})
                            + "\n" for a in range(5) for b in range(5)))
    template = tmp_path / "template.jinja"
    template.write_text("{{ messages[-1]['content'] }}=")
    cli("train", "--out", str(tmp_path / "chat-run"), "--dataset", str(chat), "--chat-template", str(template),
        "--steps", "1", *small, "--no-eval", "--no-progress", check=True)
    template.write_text("1{{ messages[-1]['content'] }}=")
    cli("train", "--out", str(tmp_path / "chat-run"), "--resume", "--steps", "2", "--no-progress", check=True)


def test_a_reward_function_that_raises_abandons_its_step_with_a_checkpoint_and_one_line(tmp_path, monkeypatch):
    """A user's reward function that raised (or returned what TRL would not read) mid-step printed a traceback and
    left a folder that `report` called still going or killed. The step is abandoned as a Ctrl-C abandons it (its
    rewards come before the first update: its FLOPs counted, redone on resume), with a checkpoint and one line;
    fixed, the run resumes and does the steps an uninterrupted one does."""
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n"
                                                  for a in range(5) for b in range(5)))
    rewards = tmp_path / "rewards.py"
    rewards.write_text("def score(completions, answer, **kw):\n    raise KeyError('label')\n")
    monkeypatch.chdir(tmp_path)
    small = ("--prompts-per-step", "4", "--group-size", "4", "--micro-batch", "8", "--completion-len", "2")
    result = cli("train", "--out", "run", "--dataset", "train.jsonl", "--reward-func", "rewards.py:score",
                 "--steps", "2", *small, "--no-eval", "--no-progress")
    one_line_error(result, "reward function 'rewards.py:score' raised KeyError: 'label': step 1 was abandoned (")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 0 and summary["stop"]["reason"] == "failed"  # resumable, and not the user's Ctrl-C:
    from flopplan.race.pilots import interruption  # a race reports such a pilot as failed, with its line

    assert interruption(2, tmp_path / "run", None) is None
    abandoned = summary["abandoned_flops"]
    assert abandoned > 0 and f"({abandoned:,} FLOPs, counted against the budget)" in result.stderr
    assert "KeyError: 'label'" in summary["stop_reason"]  # what failed, as report and a race show it
    report = cli("report", "run", "--no-plot")
    assert report.returncode == 0 and "failed in step 1 before its first update" in report.stdout
    assert "interrupted" not in report.stdout, report.stdout
    rewards.write_text("def score(completions, answer, **kw):\n    return [float(a in c) for c, a in "
                       "zip(completions, answer)]\n")
    cli("train", "--out", "run", "--resume", "--no-progress", check=True)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 2

    # a held-out researcher's: an exit() in the function left a folder report called killed (exit code 3, nothing
    # said), and rewards finite in float32 whose group sum is not (3e38 each) filled the policy with NaN and the
    # next step's sampling crashed with a traceback
    for body, fragment, flag in (
            ("raise SystemExit(3)", "raised SystemExit: 3: step 1 was abandoned", "--lost-outside-budget"),
            ("return [3e38 for _ in completions]", "give group advantages that are not finite in float32: scale the "
                                                   "rewards or their weights down", "--no-progress")):
        rewards.write_text(f"def score(completions, answer, **kw):\n    {body}\n")
        out = tmp_path / f"run-{len(fragment)}"
        failed = cli("train", "--out", str(out), "--dataset", "train.jsonl", "--reward-func", "rewards.py:score",
                     "--steps", "2", *small, "--no-eval", "--no-progress", flag)
        one_line_error(failed, fragment)  # (pilots record abandoned work outside the budget: the line says so)
        assert ("recorded, not charged" in failed.stderr) == (flag == "--lost-outside-budget"), failed.stderr
        assert json.loads((out / "summary.json").read_text())["stop"]["reason"] == "failed"


def test_an_eval_set_smaller_than_the_evaluation_names_the_option_that_fits(tmp_path):
    """A held-out researcher's 10-row --eval-dataset against the default 200 evaluation prompts was refused with no
    word of what to give; the line names --eval-prompts."""
    rows = "".join(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n" for a in range(3) for b in range(3))
    (tmp_path / "train.jsonl").write_text(rows)
    (tmp_path / "eval.jsonl").write_text(rows)
    one_line_error(cli("train", "--out", str(tmp_path / "run"), "--dataset", str(tmp_path / "train.jsonl"),
                       "--eval-dataset", str(tmp_path / "eval.jsonl"), "--steps", "1", "--no-progress"),
                   "eval_prompts 200 but the eval set has 9 problems (give --eval-prompts 9 or fewer)")
    assert not (tmp_path / "run").exists()


def test_a_resume_refuses_an_evaluation_line_that_is_not_one(tmp_path):
    """A complete evaluations.jsonl line with a score of 2 (no kill writes one) was carried on by a resume, where
    every analysis of the run refuses it; the resume refuses it in one line naming the file and step."""
    run = tmp_path / "run"
    cli("train", "--out", str(run), "--steps", "1", "--prompts-per-step", "4", "--group-size", "4", "--micro-batch",
        "8", "--completion-len", "2", "--eval-every", "1", "--eval-prompts", "4", "--no-progress", check=True)
    lines = (run / "evaluations.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["scores"] = [2, *first["scores"][1:]]
    (run / "evaluations.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    one_line_error(cli("train", "--out", str(run), "--resume", "--steps", "2", "--no-progress"),
                   "evaluations.jsonl', step 0: ")
