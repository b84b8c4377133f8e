"""What a reliability audit found, each pinned by a test: special files are never replaced, a run folder has one
writer, bad input and failing disks give one line (never a traceback), what cannot work is refused before any
work, and the defaults are what the help says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, cli, one_line_error

from flopplan.errors import UserError
from flopplan.fileio import atomic_write_text, folder_lock

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (device nodes, tmpfs mounts)")
TINY = ["plan", "--model", "tiny", "--budget", "1e15"]


@pytest.fixture
def tmpfs(tmp_path):
    """A 5 MB tmpfs, unmounted afterwards (root only)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mount)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)])


# -- 1. writes never replace what is not a regular file ---------------------------------------------------------

@ROOT_ONLY
def test_a_device_node_is_never_replaced(tmp_path):
    node = tmp_path / "null"
    os.mknod(node, 0o666 | 0o020000, os.makedev(1, 3))  # a character device, as /dev/null
    one_line_error(cli(*TINY, "--out", str(node)), "is a device")
    assert node.is_char_device()


def test_a_fifo_is_never_replaced(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in (["--out", str(fifo)], ["--save-recipe", str(fifo)]):
        one_line_error(cli(*TINY, *args), "is a FIFO")
        assert fifo.is_fifo()


def test_a_symlink_is_written_through(tmp_path):
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    assert cli(*TINY, "--out", str(link)).returncode == 0
    assert link.is_symlink() and json.loads(target.read_text())["flopplan_plan_version"] == 1
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "new.json")
    atomic_write_text(dangling, "x")
    assert (tmp_path / "new.json").read_text() == "x" and dangling.is_symlink()


def test_a_directory_is_refused():
    with pytest.raises(UserError, match="is a directory"):
        atomic_write_text(ROOT / "tables", "x")


def test_dash_means_standard_output():
    out = cli(*TINY, "--out", "-")
    assert out.returncode == 0 and json.loads(out.stdout)["plans"][0]["model"] == "tiny"
    assert not Path("-").exists()
    recipe = cli(*TINY, "--save-recipe", "-")
    assert recipe.returncode == 0 and 'policy = "tiny"' in recipe.stdout
    one_line_error(cli(*TINY, "--out", "-", "--save-recipe", "-"), "both print")


# -- 2. a run folder has one writer ------------------------------------------------------------------------------

def test_a_held_folder_lock_refuses_a_second_writer(tmp_path):
    with folder_lock(tmp_path / "run", "run folder"), pytest.raises(UserError, match="in use by process"), \
            folder_lock(tmp_path / "run", "run folder"):
        pass
    with folder_lock(tmp_path / "run", "run folder"):  # released on exit: taken again
        pass


def test_a_lock_left_by_a_dead_process_is_no_lock(tmp_path):
    folder = tmp_path / "run"
    code = (f"import os, sys; sys.path.insert(0, {str(ROOT)!r}); from flopplan.fileio import folder_lock; "
            f"lock = folder_lock({str(folder)!r}, 'run folder'); lock.__enter__(); os._exit(9)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 9  # killed while holding it
    assert "process" in (folder / ".lock").read_text()
    with folder_lock(folder, "run folder"):
        pass


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


# -- 5. no traceback, ever -----------------------------------------------------------------------------------

def _summary(**changes) -> dict:
    buckets = {"rollout": 1, "learning": 1, "feedback": 0, "evaluation": 0, "total": 2}
    return {"flopplan_run_version": 1, "model": "tiny", "reward": "rule", "steps": 1, "budget_flops": 10,
            "flops": buckets, "useful_flops": buckets, **changes}


@pytest.mark.parametrize(("change", "fragment"), [({"chance": "x"}, "chance"), ({"abandoned_flops": "x"}, "abandoned"),
                                                 ({"budget_flops": -5}, "budget_flops"),
                                                 ({"flopplan_run_version": "1"}, "version")])
def test_a_malformed_summary_is_one_line(tmp_path, change, fragment):
    (tmp_path / "summary.json").write_text(json.dumps(_summary(**change)))
    one_line_error(cli("report", str(tmp_path), "--no-plot"), fragment)


def test_report_json_writes_no_plot_and_a_plot_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(_summary()))
    out = cli("report", str(tmp_path), "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["plot"] is None and not (tmp_path / "report.png").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    one_line_error(cli("report", str(tmp_path), "--plot", str(blocker / "x.png")), "cannot write the plot")
    one_line_error(cli("report", str(tmp_path), "--no-plot", "--plot", "x.png"), "contradict")


@ROOT_ONLY
def test_report_on_a_read_only_folder_still_reports(tmpfs):
    (tmpfs / "summary.json").write_text(json.dumps(_summary()))
    assert subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)]).returncode == 0
    out = cli("report", str(tmpfs))
    assert out.returncode == 0 and "no plot: cannot write the plot" in out.stdout
    one_line_error(cli("report", str(tmpfs), "--plot", str(tmpfs / "x.png")), "cannot write the plot")


@ROOT_ONLY
@pytest.mark.slow
def test_a_full_disk_while_checkpointing_is_one_line_and_leaves_no_temporary(tmpfs):
    pytest.importorskip("torch")
    run = tmpfs / "run"
    one_line_error(cli("train", "--out", str(run), "--steps", "12", "--checkpoint-every", "2", "--no-eval",
                       "--no-progress", "--keep-checkpoints", "100"), "cannot write the checkpoint")
    assert not list((run / "checkpoints").glob("*.tmp"))


def test_a_name_the_terminal_cannot_show_is_escaped(tmp_path):
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    out = subprocess.run([sys.executable, "-m", "flopplan", *TINY, "--out", str(tmp_path / "ü.json")],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0 and "\\xfc.json" in out.stdout and (tmp_path / "ü.json").exists()


# -- 6. refuse what cannot work, before working ------------------------------------------------------------------

REFUSED = {
    "old logprobs off with mu 2 (plan)": (["plan", "--old-logprobs", "off", "--mu", "2"], "clip never acts"),
    "a share the free value cannot move": (["plan", "--target-learning-share", "0.5", "--solve", "group_size"],
                                           "does not depend on group_size"),
    "prm steps with a rule reward": (["plan", "--prm-steps", "4"], "--prm-steps"),
    "reward overhead with a rule": (["plan", "--reward-overhead", "4"], "--reward-overhead"),
    "eval length without evaluation": (["plan", "--eval-completion-len", "4"], "--eval-completion-len"),
    "eval batch without evaluation": (["plan", "--eval-batch", "4"], "eval_batch"),
    "a LoRA rank beyond the width": (["plan", "--model", "qwen2.5-0.5b", "--lora-rank", "100000"], "width"),
    "verify with quick": (["calibrate", "--verify", "--quick"], "--quick"),
    "verify with out": (["calibrate", "--verify", "--out", "x"], "--out"),
    "save one recipe of several": (["plan", "--save-recipe", "r.toml"], "one --model"),
    "prompt length of a run": (["train", "--out", "RUN", "--prompt-len", "9", "--steps", "1"], "task or dataset"),
    "tables outside the repository": (["tables", "--check", "--out", "NOWHERE"], "none of flopplan's tables"),
    "a version as text": (["train", "--out", "RUN", "--plan", "TEXT_VERSION"], "the integer 1"),
    "a plan file without plans": (["train", "--out", "RUN", "--plan", "NO_PLANS"], "holds no plans"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_cannot_work_is_refused(tmp_path, case):
    args, fragment = REFUSED[case]
    (tmp_path / "text.json").write_text(json.dumps({"flopplan_plan_version": "1", "plans": []}))
    (tmp_path / "none.json").write_text(json.dumps({"flopplan_plan_version": 1, "plans": []}))
    swap = {"RUN": str(tmp_path / "run"), "NOWHERE": str(tmp_path / "nowhere"), "r.toml": str(tmp_path / "r.toml"),
            "TEXT_VERSION": str(tmp_path / "text.json"), "NO_PLANS": str(tmp_path / "none.json")}
    one_line_error(cli(*[swap.get(a, a) for a in args]), fragment)


TRAIN_REFUSED = {
    "a prompt beyond the context": (["--dataset", "LONG", "--steps", "1", "--no-eval"], "context"),
    "a completion beyond the context": (["--completion-len", "600", "--steps", "1"], "context"),
    "a budget without a step": (["--budget", "1500"], "buys no step"),
}


@pytest.mark.parametrize("case", sorted(TRAIN_REFUSED))
def test_a_run_that_cannot_work_is_refused_before_it_starts(tmp_path, case):
    pytest.importorskip("torch")
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"prompt": "1" * 2000, "answer": "1"}) + "\n")
    args = [str(long) if a == "LONG" else a for a in TRAIN_REFUSED[case][0]]
    one_line_error(cli("train", "--out", str(tmp_path / "run"), *args, "--no-progress"), TRAIN_REFUSED[case][1])
    assert not (tmp_path / "run" / "checkpoints").exists()


# -- 8. defaults are what they say ------------------------------------------------------------------------------

def test_an_empty_recipe_file_plans_the_default_sizes(tmp_path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    models = [p["model"] for p in json.loads(cli("plan", "--recipe", str(empty), "--json").stdout)["plans"]]
    assert models == ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b"]
    named = tmp_path / "named.toml"
    named.write_text('policy = "qwen2.5-3b"\n')
    assert [p["model"] for p in json.loads(cli("plan", "--recipe", str(named), "--json").stdout)["plans"]] == \
        ["qwen2.5-3b"]


def test_a_byte_order_mark_is_no_error(tmp_path):
    recipe = tmp_path / "bom.toml"
    recipe.write_bytes(b"\xef\xbb\xbfgroup_size = 4\n")
    assert json.loads(cli("plan", "--recipe", str(recipe), "--model", "tiny", "--json").stdout)["plans"][0][
        "recipe"]["group_size"] == 4


def test_a_repeated_model_is_planned_once():
    plans = json.loads(cli("plan", "--model", "tiny", "--model", "tiny,tiny", "--json").stdout)["plans"]
    assert [p["model"] for p in plans] == ["tiny"]


def test_train_help_states_the_training_defaults():
    text = " ".join(cli("train", "--help").stdout.split())
    for fragment in ("Completions per prompt, G (default: 16)", "Prompts per GRPO step (default: 16)",
                     "(default: 2)", "(default: 64)", "--keep-checkpoints"):
        assert fragment in text, fragment
    assert "(default: 8)" not in text.split("--group-size")[1].split("--")[0]


def test_a_budget_in_hours_is_not_called_a_same_flop_comparison():
    out = cli("plan", "--model", "qwen2.5-1.5b", "--gpu-hours", "10", "--device", "h100").stdout
    assert "same-budget comparison" in out and "same-FLOP" not in out


# -- 9. the datasheet model knows bandwidth -----------------------------------------------------------------------

def test_a_faster_memory_buys_more_decode():
    h100, h200 = (json.loads(cli("plan", "--model", "qwen2.5-1.5b", "--gpu-hours", "100", "--device", device,
                                 "--json").stdout)["plans"][0] for device in ("h100", "h200"))
    assert h200["steps"] > h100["steps"]  # same compute peak, 4.8 vs 3.35 TB/s
    per_step = {d["model"] + str(i): d["seconds"]["rollout.decode"] / d["steps"] for i, d in enumerate((h100, h200))}
    assert per_step["qwen2.5-1.5b0"] / per_step["qwen2.5-1.5b1"] == pytest.approx(4.8 / 3.35, rel=0.2)
    update = [d["seconds"]["update"] / d["steps"] for d in (h100, h200)]
    assert update[1] == pytest.approx(update[0], rel=1e-5)  # seconds are written to 6 significant digits


# -- 10. messages -----------------------------------------------------------------------------------------------

def test_one_step_is_not_one_steps():
    out = cli("plan", "--largest-model", "--steps", "1", "--budget", "1e12")
    assert "1 steps" not in out.stderr and "1 step" in out.stderr


def test_budget_messages_speak_of_units_not_field_names():
    out = cli("plan", "--gpu-hours", "-3", "--device", "h100")
    assert "gpu_hours" not in out.stderr
