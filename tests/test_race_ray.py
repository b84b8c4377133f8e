"""``race run --backend ray`` on a real local Ray cluster (2 CPUs, started once for the module): the quick race's
manifest, run with pilots as Ray tasks, its driver killed mid-rung and rerun, ends with the race.json the local
pool's race ends with (the session's quick demo, :mod:`test_race_protocol`), repeating no finished pilot; a race
of TRL script pilots on Ray is :mod:`test_race_ray_trl`; Ray missing and an unreachable address are one line
each."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import cli, one_line_error
from test_race_protocol import SMALL, _finish, races  # noqa: F401  (races: the session's pool race, a fixture)

from flopplan.fileio import lock_holder
from flopplan.race.design import MANIFEST, RaceDesign
from flopplan.race.pilots import pilot_done, pilot_folder


def _done_pilots(design: RaceDesign, folder: Path, rung: int) -> dict[Path, int]:
    """The pilots finished at ``rung``, with the size of that rung's log (a rerun of one would append to it)."""
    out = {}
    for name, seed in design.pilots():
        path = pilot_folder(folder, name, seed)
        if pilot_done(path, design.arm(name).pilot_budget(design, rung)):
            out[path] = (folder / "logs" / f"{name}.seed{seed}.rung{rung}.log").stat().st_size
    return out


@pytest.mark.slow
@pytest.mark.xdist_group("race")
def test_a_ray_race_killed_mid_rung_ends_with_the_pool_race_json(races, ray_address, tmp_path):  # noqa: F811
    straight, _, _ = races
    race = tmp_path / "race"
    race.mkdir()
    shutil.copy(straight / MANIFEST, race / MANIFEST)
    shutil.copytree(straight / "reward-model", race / "reward-model")
    design = RaceDesign.load(race)
    command = [sys.executable, "-m", "flopplan", "race", "run", "race", "--backend", "ray", "--address", ray_address,
               "--pilot-cpus", "1"]
    driver = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True)
    deadline = time.monotonic() + 600
    while not (0 < len(_done_pilots(design, race, 0)) < len(design.pilots())):  # mid-rung 1
        assert driver.poll() is None, driver.stderr.read().decode()[-2000:] if driver.stderr else "ended"
        assert time.monotonic() < deadline, "no pilot finished"
        time.sleep(0.1)
    os.kill(driver.pid, signal.SIGKILL)  # the driver only: its Ray tasks are the cluster's to end
    driver.wait()
    finished = _done_pilots(design, race, 0)
    _finish("race", "run", "race", "--backend", "ray", "--address", ray_address, "--pilot-cpus", "1", cwd=tmp_path)
    _finish("race", "analyze", "race", cwd=tmp_path)
    assert (race / "race.json").read_bytes() == (straight / "race.json").read_bytes()
    for path, size in finished.items():  # no finished pilot was run again
        assert (race / "logs" / f"{path.parent.name}.{path.name}.rung0.log").stat().st_size == size
    for path in straight.glob("pilots/*/seed*/evaluations.jsonl"):
        assert (race / path.relative_to(straight)).read_text() == path.read_text()


def test_ray_missing_is_one_line(tmp_path):
    cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path), *SMALL, check=True)
    hide = "import sys; sys.modules['ray'] = None; from flopplan.cli import main; main()"
    out = subprocess.run([sys.executable, "-c", hide, "race", "run", str(tmp_path), "--backend", "ray"],
                         capture_output=True, text=True, timeout=120)
    one_line_error(out, "needs Ray")
    assert not (tmp_path / "pilots").exists()


def test_an_unreachable_address_and_pool_options_are_one_line(tmp_path):
    pytest.importorskip("ray")
    cli("race", "design", "--budget", "6e10", "--pilot-fraction", "0.5", "--out", str(tmp_path), *SMALL, check=True)
    with socket.socket() as s:  # a port on this machine where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    one_line_error(cli("race", "run", str(tmp_path), "--backend", "ray", "--address", f"127.0.0.1:{port}"),
                   "no Ray cluster answers")
    one_line_error(cli("race", "run", str(tmp_path), "--backend", "ray", "--address", "nowhere"), "HOST:PORT")
    one_line_error(cli("race", "run", str(tmp_path), "--backend", "ray", "--jobs", "2"), "--jobs")
    one_line_error(cli("race", "run", str(tmp_path), "--pilot-gpus", "1"), "--backend ray")
    assert not (tmp_path / "pilots").exists()


def test_a_pilot_waits_for_its_folder_lock_then_refuses_in_one_line(tmp_path):
    from flopplan.errors import UserError
    from flopplan.fileio import folder_lock
    from flopplan.race.runner import wait_unlocked

    assert lock_holder(tmp_path) is None
    with folder_lock(tmp_path, "pilot run folder"):
        assert lock_holder(tmp_path) == f"process {os.getpid()}"
        with pytest.raises(UserError, match="still in use by process"):
            wait_unlocked(tmp_path, seconds=0.2)
    wait_unlocked(tmp_path, seconds=0.2)  # released: no wait
