"""Atomic writes: a reader sees the old file or the new one, never a half-written one; modes as a plain open;
special files are never replaced, symbolic links are written through. A folder lock gives a run folder one writer."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, ROOT_ONLY, TINY, cli, one_line_error

from flopplan.errors import UserError
from flopplan.fileio import (
    atomic_savefig,
    atomic_write_json,
    atomic_write_text,
    folder_lock,
    lock_holder_pid,
    path_kind,
    proc_stat,
    read_json,
    temporary_of,
    writable_targets,
)


def test_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = atomic_write_text(tmp_path / "plan.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's 0600: other users can read a plan
    assert path.read_text() == "{}\n"


def test_replaced_file_keeps_its_mode(tmp_path):
    path = tmp_path / "table.md"
    path.write_text("old")
    path.chmod(0o640)
    atomic_write_text(path, "new")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and path.read_text() == "new"


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text('{"old": 1}')
    with pytest.raises(TypeError):
        atomic_write_json(path, {"bad": object()})  # not serialisable: fails before anything is written
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(path, "half \ud800 written")  # fails while writing the temporary file
    assert path.read_text() == '{"old": 1}'
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]


def test_the_temporary_a_write_makes_is_read_back_as_its_files(tmp_path, monkeypatch):
    """temporary_of knows the name atomic_write_text gives its temporary (a run folder removes such files left by a
    kill, and nothing else: flopplan/train/runfolder.py)."""
    seen = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda tmp, path: (seen.append(os.path.basename(tmp)), real(tmp, path)))
    for _ in range(20):
        atomic_write_text(tmp_path / "progress.jsonl", "")
    assert len(seen) == 20 and all(temporary_of(name) == "progress.jsonl" for name in seen)
    for name in (".progress.jsonl.tmp", ".progress.jsonl.ABCDEFGH.tmp", ".progress.jsonl.abcdefgh.tmp.bak",
                 "progress.jsonl.abcdefgh.tmp", ".progress.jsonl.abcdefg.tmp"):
        assert temporary_of(name) is None


def test_unwritable_folder_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="cannot write"):
        atomic_write_text(blocker / "sub" / "plan.json", "{}")


def test_an_out_ending_in_a_slash_is_refused_not_written_as_a_file(tmp_path):
    """``plan --out plans/`` wrote a file named ``plans`` (a re-check of the fuzz's mends)."""
    one_line_error(cli(*TINY, "--out", f"{tmp_path / 'plans'}/"), "it names a folder")
    assert not (tmp_path / "plans").exists()


# -- writes never replace what is not a regular file ------------------------------------------------------------

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


def test_a_link_into_a_missing_folder_is_refused_and_makes_no_folder(tmp_path):
    """A dangling link whose target's folder is not there: one line, and the folder is not made (a race design
    through such a link once created the folder at the link's far end and wrote the manifest there)."""
    link, far = tmp_path / "manifest.json", tmp_path / "gone" / "deeper" / "manifest.json"
    link.symlink_to(far)
    with pytest.raises(UserError, match="whose folder does not exist"):
        atomic_write_text(link, "x")
    assert not (tmp_path / "gone").exists() and link.is_symlink()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    plot = tmp_path / "curves.png"
    plot.symlink_to(tmp_path / "gone" / "curves.png")
    with pytest.raises(UserError, match="whose folder does not exist"):
        atomic_savefig(Figure(), plot)  # race analyze saves its plots this way
    assert not (tmp_path / "gone").exists()


def test_a_directory_is_refused():
    with pytest.raises(UserError, match="is a directory"):
        atomic_write_text(ROOT / "tables", "x")


# -- a run folder has one writer --------------------------------------------------------------------------------

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


def test_json_nested_deeper_than_python_recurses_is_one_line(tmp_path):
    """100,000 nested arrays made json.loads raise RecursionError (a traceback from every reader of a user's file)."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UserError, match="nests its JSON too deeply") as err:
        read_json(path, "profile")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("text", "message"), [
    ('{\n  "arms": ["tiny-s.G4', "Unterminated string starting at line 2, column 12"),  # a truncated race.json
    ('{"a": "x\ty"}', "Invalid control character at line 1, column 9"),
    ('{"a": 1 "b": 2}', "Expecting ',' delimiter at line 1, column 9"),
    ('{"a": }', "Expecting value at line 1, column 7"),
])
def test_a_json_error_says_where_in_one_readable_phrase(tmp_path, text, message):
    """Some of json's messages end in "at" ("Unterminated string starting at"): the place follows them directly,
    not as "starting at at line"."""
    path = tmp_path / "race.json"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        read_json(path, "race analysis")
    assert str(err.value) == f"race analysis {str(path)!r} is not valid JSON: {message}"


def test_the_lock_holders_process_id_is_read_back_and_none_once_released(tmp_path):
    assert lock_holder_pid(tmp_path) is None
    with folder_lock(tmp_path, "run folder"):
        assert lock_holder_pid(tmp_path) == os.getpid()
    assert lock_holder_pid(tmp_path) is None


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux's /proc")
def test_a_process_status_is_read_past_a_command_name_with_spaces_and_parentheses(tmp_path):
    assert proc_stat(os.getpid())[1] == str(os.getppid()) and proc_stat()[1] == str(os.getppid())
    odd = tmp_path / "a (b) c"  # the command name /proc shows is the program's file name
    odd.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd), "-c", "import time; time.sleep(30)"])
    try:
        assert proc_stat(child.pid)[1] == str(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert proc_stat(2**22 + 12345) is None  # above Linux's largest process id: no such process


def test_a_name_too_long_to_look_at_is_one_line_not_a_crash(tmp_path):
    long = tmp_path / ("a" * 300)  # Path.exists() raises ENAMETOOLONG on Python 3.11
    assert path_kind(tmp_path / "missing") is None and path_kind(tmp_path) == "folder"
    with pytest.raises(UserError, match="cannot read 'x"):
        path_kind("x" * 300)
    for write in (lambda: atomic_write_text(long, "{}"), lambda: read_json(long, "plan")):
        with pytest.raises(UserError, match="too long"):
            write()


def test_a_fifo_is_refused_before_it_is_opened(tmp_path):
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)  # opening it would wait for a writer forever
    assert path_kind(fifo) == "other"
    with pytest.raises(UserError, match="it is a FIFO, not a regular file"):
        read_json(fifo, "recipe")


L = "a" * 300
LONG_NAMES = {
    "plan --model": ["plan", "--model", L], "compare --models": ["compare", "--models", L], "report": ["report", L],
    "race analyze": ["race", "analyze", L], "race run": ["race", "run", L], "race validate": ["race", "validate", L],
    "tables --race": ["tables", "--race", L], "plan --out": ["plan", "--out", L + ".json"],
    "race design --out": ["race", "design", "--budget", "1e12", "--out", L],
    "calibrate --from-runs": ["calibrate", "--from-runs", L],
    "train --model-path": ["train", "--model-path", L, "--steps", "1", "--out", "RUN"],
    "plan --recipe": ["plan", "--recipe", L],
}


@pytest.mark.parametrize("case", sorted(LONG_NAMES))
def test_a_path_too_long_is_one_line_in_every_command(tmp_path, case):
    one_line_error(cli(*[str(tmp_path / "run") if a == "RUN" else a for a in LONG_NAMES[case]]), "cannot ")


def test_a_fifo_given_as_an_input_is_one_line(tmp_path):
    os.mkfifo(tmp_path / "f.json")
    for args in (["plan", "--recipe"], ["plan", "--model"], ["export", "trl"]):
        one_line_error(cli(*args, str(tmp_path / "f.json")), "FIFO")


def test_a_command_that_writes_several_files_checks_them_all_before_writing_any(tmp_path):
    """A held-out user's export whose launcher's name was a folder left the two configs written beside no launcher;
    --out and --save-recipe naming one file kept only the plan. Both are refused before anything is written."""
    plan = tmp_path / "plan.json"
    cli(*TINY, "--out", str(plan), check=True)
    (tmp_path / "trl" / "train_trl.sh").mkdir(parents=True)
    one_line_error(cli("export", "trl", str(plan), "--out", str(tmp_path / "trl")), "train_trl.sh': it is a directory")
    assert [p.name for p in (tmp_path / "trl").iterdir()] == ["train_trl.sh"]  # nothing beside it
    same = tmp_path / "same" / "plan.json"
    one_line_error(cli(*TINY, "--out", str(same), "--save-recipe", str(tmp_path / "same" / "." / "plan.json")),
                   "they are the same file")
    assert not same.parent.exists()
    link = tmp_path / "link.json"
    link.symlink_to(plan)
    with pytest.raises(UserError, match="same file"):
        writable_targets(plan, link)  # through a link too
    writable_targets(tmp_path / "a", tmp_path / "b", "-", "-")  # standard output twice is the caller's to refuse


def test_no_file_of_several_is_written_where_one_cannot_be_and_no_output_replaces_an_input(tmp_path):
    """A review: `tables` wrote five files before refusing the sixth; `plan --from-trl X --out X` replaced the TRL
    config with the plan."""
    (tmp_path / "t" / "phase_breakdown.md").mkdir(parents=True)
    one_line_error(cli("tables", "--out", str(tmp_path / "t")), "phase_breakdown.md': it is a directory")
    assert [p.name for p in (tmp_path / "t").iterdir()] == ["phase_breakdown.md"]
    config = tmp_path / "grpo.json"
    config.write_text(json.dumps({"num_generations": 4, "per_device_train_batch_size": 4}))
    before = config.read_text()
    one_line_error(cli("plan", "--from-trl", str(config), "--model", "tiny", "--prompt-len", "9", "--out",
                       str(config)), "the command reads it")
    assert config.read_text() == before


def test_a_scratch_folder_removes_what_killed_processes_left_and_keeps_a_live_ones(tmp_path, monkeypatch):
    """The TRL meter's scratch folders (the models' configs) were left in the temp folder by every killed process
    (57 in one session's tests). A new one removes those: unlocked and older than the grace; a live process's
    (locked), a new one's (within the grace: its lock may not be taken yet) and one without a lock file (an earlier
    flopplan's, whose process may still run) stay, as does what is not a folder."""
    import tempfile

    from flopplan.fileio import SCRATCH_GRACE, scratch_folder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old = time.time() - 2 * SCRATCH_GRACE
    left = tmp_path / "flopplan-trl-left"
    left.mkdir()
    (left / "policy").mkdir()
    (left / ".lock").write_text("process 1")  # its process gone: its lock is free
    earlier = tmp_path / "flopplan-trl-earlier"
    earlier.mkdir()
    young = tmp_path / "flopplan-trl-young"
    young.mkdir()
    (tmp_path / "flopplan-trl-file").write_text("a user's")
    live = scratch_folder("flopplan-trl-")
    for path in (left, earlier, tmp_path / "flopplan-trl-file", Path(live.name)):
        os.utime(path, (old, old))
    fresh = scratch_folder("flopplan-trl-")
    assert not left.exists() and young.is_dir() and Path(live.name).is_dir() and Path(fresh.name).is_dir()
    assert earlier.is_dir()
    assert (tmp_path / "flopplan-trl-file").read_text() == "a user's"
    live.cleanup()
    fresh.cleanup()
