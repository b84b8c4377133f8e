"""flopplan.engines.trl_resume: what a metered TRL run resumed after a kill had spent and lost, on a run folder's own
files (the real runs are in tests/test_trl_hook.py and tests/test_trl.py)."""

from __future__ import annotations

import json

import pytest

from flopplan.engines.trl_resume import check_start_over, keep_lost, lost_since, read_lost_work
from flopplan.errors import UserError
from flopplan.runfile import TRL_LEDGER, TRL_LOST_WORK
from flopplan.train.runfolder import RunFolder


def _folder(tmp_path, output=None) -> RunFolder:
    folder = RunFolder(tmp_path / "run")
    folder.begin({"engine": "trl", "grpo_config": {"output_dir": str(output or tmp_path / "trl-output")}})
    return folder


def _round(folder: RunFolder, step: int, flops: int) -> None:
    charge = {"unit": "rollout", "executed": {"rollout.prefill": flops}, "useful": {"rollout.prefill": flops}}
    folder.append(step, [charge], {"step": step})


def test_a_second_kill_before_the_next_checkpoint_adds_to_the_work_the_first_lost(tmp_path):
    """Rounds 1-5 logged, the checkpoint of round 3 the last complete one: rounds 4 and 5 are lost (700 FLOPs) and
    trimmed from the logs. Killed again in round 4 before any checkpoint: resumed from round 3 once more, the first
    kill's 700 are still lost, with the second's 40; once round 4's checkpoint holds them (its ledger was saved with
    them), a resume from it counts only what came after."""
    folder = _folder(tmp_path)
    for step, flops in enumerate((10, 20, 30, 300, 400), start=1):
        _round(folder, step, flops)
    assert lost_since(folder, 3) == 700
    keep_lost(folder, 3, 700)
    assert [json.loads(line)["step"] for line in (folder.path / "ledger.jsonl").read_text().splitlines()] == [1, 2, 3]
    _round(folder, 4, 40)
    assert lost_since(folder, 3) == 740
    keep_lost(folder, 3, 740)
    _round(folder, 4, 41)
    _round(folder, 5, 50)
    assert lost_since(folder, 4) == 50  # the checkpoint of round 4 was saved after the record: its ledger holds it
    assert lost_since(folder, 0) == 740 + 10 + 20 + 30 + 41 + 50  # started again: all of it, the record included


def test_a_kill_between_the_record_and_the_trim_counts_the_logs_once(tmp_path):
    folder = _folder(tmp_path)
    for step, flops in enumerate((10, 20, 300), start=1):
        _round(folder, step, flops)
    lost = lost_since(folder, 2)
    (folder.path / TRL_LOST_WORK).parent.mkdir()
    (folder.path / TRL_LOST_WORK).write_text(json.dumps({"lost_flops": lost, "rounds": 2, "trimmed": False}))
    assert lost == 300 and lost_since(folder, 2) == 300  # the logs not trimmed yet: their round 3 is in the record
    assert lost_since(folder, 0) == 330  # (from an older point: what the record holds and the rounds before it)
    keep_lost(folder, 2, 300)
    assert read_lost_work(folder).trimmed and lost_since(folder, 2) == 300


def test_a_new_run_in_the_folder_forgets_an_earlier_runs_record(tmp_path):
    folder = _folder(tmp_path)
    _round(folder, 1, 10)
    keep_lost(folder, 0, 10)
    folder.begin({"engine": "trl"})
    assert read_lost_work(folder) is None and lost_since(folder, 0) == 0
    (folder.path / TRL_LOST_WORK).write_text('{"lost_flops": -1, "rounds": 0, "trimmed": true}')
    with pytest.raises(UserError, match="is not a flopplan lost-work record"):
        lost_since(folder, 0)


def test_starting_again_is_refused_where_a_run_can_be_resumed_or_finished(tmp_path):
    output = tmp_path / "trl-output"
    folder = _folder(tmp_path, output)
    _round(folder, 1, 10)
    check_start_over(folder, output, None)  # killed before its first checkpoint: it may start again
    with pytest.raises(UserError, match=r"resume_from_checkpoint='ckpt'\) started at step 0: that is not a "
                                        r"complete checkpoint"):
        check_start_over(folder, output, "ckpt")
    elsewhere = output / "checkpoint-2"  # the run's checkpoint, where its configuration says it checkpointed
    elsewhere.mkdir(parents=True)
    for name in ("trainer_state.json", TRL_LEDGER):
        (elsewhere / name).write_text("{}")
    with pytest.raises(UserError, match=r"has a complete checkpoint, .*checkpoint-2, outside this trainer's "
                                        r"output_dir .*: resume from it with output_dir"):
        check_start_over(folder, tmp_path / "another-output", None)
    (elsewhere / "trainer_state.json").unlink()
    (folder.path / "summary.json").write_text("{}")
    with pytest.raises(UserError, match=r"finished .* and left no complete checkpoint .* nothing to resume"):
        check_start_over(folder, output, None)
