"""Atomic writes: a reader sees the old file or the new one, never a half-written one; modes as a plain open."""

import os
import stat

import pytest

from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, atomic_write_text


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


def test_unwritable_folder_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="cannot write"):
        atomic_write_text(blocker / "sub" / "plan.json", "{}")
