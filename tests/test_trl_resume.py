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
    assert lost_since(folder, 6, 3) == 700  # (rounds of 2 optimizer steps: round 3's checkpoint is checkpoint-6)
    keep_lost(folder, 6, 3, 700)
    assert [json.loads(line)["step"] for line in (folder.path / "ledger.jsonl").read_text().splitlines()] == [1, 2, 3]
    _round(folder, 4, 40)
    assert lost_since(folder, 6, 3) == 740
    keep_lost(folder, 6, 3, 740)
    _round(folder, 4, 41)
    _round(folder, 5, 50)
    assert lost_since(folder, 8, 4) == 50  # round 4's checkpoint was saved after the record: its ledger holds it
    assert lost_since(folder, 0, 0) == 740 + 10 + 20 + 30 + 41 + 50  # started again: all of it, the record too


def test_a_kill_between_the_record_and_the_trim_counts_the_logs_once(tmp_path):
    folder = _folder(tmp_path)
    for step, flops in enumerate((10, 20, 300), start=1):
        _round(folder, step, flops)
    lost = lost_since(folder, 4, 2)

    def killed(*cut):
        raise KeyboardInterrupt

    trim, folder.trim = folder.trim, killed
    with pytest.raises(KeyboardInterrupt):
        keep_lost(folder, 4, 2, lost)  # killed after the record, before the logs were trimmed
    folder.trim = trim
    assert not read_lost_work(folder).trimmed
    assert lost == 300 and lost_since(folder, 4, 2) == 300  # the logs not trimmed yet: their round 3 is in the record
    assert lost_since(folder, 0, 0) == 330  # (from an older point: what the record holds and the rounds before it)
    keep_lost(folder, 4, 2, 300)
    assert read_lost_work(folder).trimmed and lost_since(folder, 4, 2) == 300


def test_a_new_run_in_the_folder_forgets_an_earlier_runs_record(tmp_path):
    folder = _folder(tmp_path)
    _round(folder, 1, 10)
    keep_lost(folder, 0, 0, 10)
    folder.begin({"engine": "trl"})
    assert read_lost_work(folder) is None and lost_since(folder, 0, 0) == 0
    (folder.path / TRL_LOST_WORK).write_text('{"lost_flops": -1, "step": 0, "rounds": 0, "trimmed": true}')
    with pytest.raises(UserError, match="is not a flopplan lost-work record"):
        lost_since(folder, 0, 0)


def test_a_checkpoint_within_the_first_round_is_not_the_runs_start(tmp_path):
    """Started again (the baseline evaluation at log step 0 and round 1 lost: 15), then a checkpoint saved within
    round 1 (checkpoint-1, max_steps off a round's boundary: it holds 0 rounds and the new baseline): a resume from it
    counts only what came after, not the record again nor the baseline its ledger holds (a review found both counted
    when the record was keyed by rounds)."""
    folder = _folder(tmp_path)
    _round(folder, 0, 5)
    _round(folder, 1, 10)
    assert lost_since(folder, 0, 0) == 15  # the baseline run again with the run: lost too
    keep_lost(folder, 0, 0, 15)
    _round(folder, 0, 5)
    _round(folder, 1, 12)  # after checkpoint-1
    assert lost_since(folder, 1, 0) == 12


def test_a_step_logged_twice_is_lost_twice(tmp_path):
    """Two lines of one step (a baseline evaluation run again by a resumed run) were both spent."""
    folder = _folder(tmp_path)
    for step, flops in ((0, 5), (1, 10), (2, 20), (2, 7)):
        _round(folder, step, flops)
    assert folder.lost_after(1) == 27 and folder.lost_after(-1) == 42


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
    folder.trim(-1)  # a run started again whose lost work left no round: it ended on its budget, its logs empty
    check_start_over(folder, output, None)


def test_a_resume_from_an_older_checkpoint_leaves_the_newer_ones_behind(tmp_path):
    """Checkpoints 3 and 6 complete, killed after round 7; the user resumes from checkpoint-3 (rounds of one
    optimizer step here): rounds 4-7 are lost, and checkpoint-6, a history now abandoned, loses its ledger so that
    no later resume picks it. Killed again after rounds 4 and 5 of the new history: the newest complete checkpoint
    is 3 again, and everything since it is lost, the first history's rounds included (a review found checkpoint-6
    picked and 7,090 FLOPs forgotten)."""
    from flopplan.engines.trl_resume import abandon_newer
    from flopplan.runfile import TRL_ABANDONED, last_complete_checkpoint

    output = tmp_path / "trl-output"
    folder = _folder(tmp_path, output)
    for step, flops in enumerate((1, 2, 3, 1000, 2000, 3000, 4000), start=1):
        _round(folder, step, flops)
    for step in (3, 6):
        (output / f"checkpoint-{step}").mkdir(parents=True)
        for name in ("trainer_state.json", TRL_LEDGER):
            (output / f"checkpoint-{step}" / name).write_text("{}")
    assert lost_since(folder, 3, 3) == 10_000
    keep_lost(folder, 3, 3, 10_000)
    assert abandon_newer(output, 3) == ["checkpoint-6"] and abandon_newer(output, 3) == []
    assert (output / "checkpoint-6" / TRL_ABANDONED).is_file() and last_complete_checkpoint(output).name == \
        "checkpoint-3"
    _round(folder, 4, 40)
    _round(folder, 5, 50)
    assert lost_since(folder, 3, 3) == 10_090
    pytest.importorskip("torch")
    from flopplan.engines.trl_meter import TRLMeter

    with pytest.raises(UserError, match=r"checkpoint-6' was left behind when this run resumed from an older "
                                        r"checkpoint: resume from checkpoint-3$"):  # (it named a function)
        TRLMeter.load(object.__new__(TRLMeter), output / "checkpoint-6")  # (what resume_from_checkpoint=True picks)


def test_every_processs_share_of_the_round_in_progress_is_lost_work(tmp_path):
    """Under torchrun each process knows only its own share of the round in progress (the processes sum it when
    the round commits). Rank 0's share alone was on disk, so a kill mid-round on 2 processes charged half of what
    was lost. Each process now keeps its share (rank r: progress.rank{r}.jsonl); a share of a round the ledger
    holds counts no more, and a trim, or a new run in the folder, drops every share."""
    folder = _folder(tmp_path)
    _round(folder, 1, 10)
    charge = {"unit": "rollout", "executed": {"rollout.prefill": 7}, "useful": {"rollout.prefill": 7}}
    folder.set_progress([(2, [charge])])
    folder.set_progress([(2, [charge, charge])], rank=1)
    folder.set_progress([(1, [charge])], rank=3)  # round 1's share, written before the round committed
    assert (folder.path / "progress.rank1.jsonl").is_file()
    assert folder.lost_after(1) == 7 + 14 and lost_since(folder, 0, 0) == 10 + 7 + 14
    keep_lost(folder, 0, 0, 31)
    assert not list(folder.path.glob("progress.rank*")) and lost_since(folder, 0, 0) == 31
    folder.set_progress([(1, [charge])], rank=2)
    folder.begin({"engine": "trl"})
    assert not list(folder.path.glob("progress.rank*")) and folder.lost_after(-1) == 0
    folder.set_progress([(1, [charge])], rank=2)
    folder.set_progress([(1, [charge])])
    folder.check_new()  # no checkpoint, nothing but a run's files: a new run may take the folder


def _share(flops: int) -> list[dict]:
    return [{"unit": "rollout", "executed": {"rollout.prefill": flops}, "useful": {"rollout.prefill": flops}}]


def test_a_kill_at_a_commit_counts_each_share_once_whichever_process_wrote_first(tmp_path):
    """At a commit the processes sum their shares, then rank 0 writes the sum as its pending line and each other
    process goes on; nothing orders their writes (a review): rank 1's share written before the commit counted
    beside rank 0's summed line (170 for a round of 100), or was emptied before rank 0 had written it (30). Lines
    now carry the commit count (rounds and evaluations), as the meter writes them: a share holds the charges of
    the next commit, rank 0's pending line (done) those of its own count, and a logged line its count."""
    folder = _folder(tmp_path)
    folder.append(1, _share(100), {"step": 1}, commits=1)  # round 1 logged (1 commit)
    folder.set_progress([(2, _share(30), 1)])
    folder.set_progress([(2, _share(70), 1)], rank=1)
    assert folder.lost_after(1, 1) == 100  # mid-round 2: both shares
    folder.set_progress([(2, _share(100), 2, True), (3, [], 2)])  # round 2 committed (2): rank 0 wrote first
    assert folder.lost_after(1, 1) == 100
    folder.set_progress([(2, _share(30), 1)])  # or rank 1 ran a unit of the evaluation before rank 0 wrote
    folder.set_progress([(2, _share(70), 1), (2, _share(4), 2)], rank=1)
    assert folder.lost_after(1, 1) == 30 + 70 + 4
    folder.set_progress([(2, _share(100), 2, True), (3, _share(6), 2)])  # rank 0 wrote, ran its evaluation unit
    assert folder.lost_after(1, 1) == 110
    folder.set_progress([(2, _share(110), 3, True), (3, [], 3)])  # the evaluation committed (3), in step 2's line
    assert folder.lost_after(1, 1) == 110
    folder.append(2, _share(110), {"step": 2}, commits=3)  # step 2's line logged: rank 0's progress cleared
    assert folder.lost_after(1, 1) == 110 and folder.lost_after(2, 3) == 0


def test_an_evaluation_after_its_rounds_line_is_lost_work_until_a_checkpoint_holds_it(tmp_path):
    """An evaluation can run after its round's line was logged and checkpointed (an epoch's end after a stop's
    checkpoint mid-epoch; a review): it goes into a second line for the same step. By step it was in no
    checkpoint, yet neither counted (the step is at the checkpoint) nor trimmed; by commit count it is after the
    checkpoint's, so a kill charges it, and the trim drops it with its metrics line."""
    folder = _folder(tmp_path)
    folder.append(1, _share(100), {"step": 1}, commits=1)
    folder.append(2, _share(110), {"step": 2}, commits=3)  # checkpoint-4 saved here: 2 rounds, 3 commits
    folder.set_progress([(3, _share(9), 3)])  # the epoch's evaluation running, on both processes
    folder.set_progress([(2, _share(8), 3)], rank=1)
    assert folder.lost_after(2, 3) == 17
    folder.set_progress([(2, _share(17), 4, True), (3, [], 4)])
    assert folder.lost_after(2, 3) == 17
    folder.append(2, _share(17), {"step": 2, "eval_accuracy": 0.5}, commits=4)
    assert folder.lost_after(2, 3) == 17 and folder.lost_after(2) == 0  # (by step alone, as before: not counted)
    assert lost_since(folder, 4, 2, 3) == 17
    keep_lost(folder, 4, 2, 17, 3)
    lines = [json.loads(x) for x in (folder.path / "ledger.jsonl").read_text().splitlines()]
    metrics = [json.loads(x) for x in (folder.path / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2] and metrics == [{"step": 1}, {"step": 2}]
    assert read_lost_work(folder).commits == 3 and lost_since(folder, 4, 2, 3) == 17


def test_a_folder_an_older_flopplan_wrote_is_trimmed_by_step_where_its_lines_have_no_count(tmp_path):
    """Lines 1-3 written before lines carried counts, resumed by this flopplan from round 3's checkpoint (count 3),
    which logs round 4 (count 4); then resumed from round 1's checkpoint (count 1): the lines without a count after
    round 1 go by step (a review: they were kept, and a later kill charged their 50 FLOPs twice)."""
    folder = _folder(tmp_path)
    for step, flops in ((1, 10), (2, 20), (3, 30)):
        _round(folder, step, flops)
    keep_lost(folder, 6, 3, lost_since(folder, 6, 3, 3), 3)
    folder.append(4, _share(40), {"step": 4}, commits=4)
    lost = lost_since(folder, 2, 1, 1)
    assert lost == 20 + 30 + 40
    keep_lost(folder, 2, 1, lost, 1)
    assert [json.loads(x)["step"] for x in (folder.path / "ledger.jsonl").read_text().splitlines()] == [1]
    folder.append(2, _share(21), {"step": 2}, commits=2)
    assert lost_since(folder, 2, 1, 1) == 90 + 21


def test_a_line_written_mid_round_leaves_the_rounds_units_so_far_in_progress(tmp_path):
    """An evaluation at an epoch's end that is not a round's end commits mid-round, into a line for the round
    before; the step log writes that line when the next optimizer step begins. Writing it cleared rank 0's record
    of the round under way, and rank 1 kept its share of that round under the commit count from before the
    evaluation, which read as summed in the evaluation's commit: a kill before each process's next unit ended left
    the round's units so far out of the lost work (34 counted of 84 here, two processes; 59 with rank 0's kept).
    Both now keep them in progress, rank 1 under the new count."""
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from flopplan.engines.trl_steplog import RankProgress, StepLog

    def charge(flops):
        return SimpleNamespace(to_data=lambda: _share(flops)[0])

    folder = _folder(tmp_path)
    folder.append(1, _share(200), {"step": 1}, commits=1)
    folder.append(2, _share(200), {"step": 2}, commits=2)  # the checkpoint of round 2 (2 commits)
    ran = [{"round": {}, "eval": {}} for _ in range(2)]  # each process's units since its last commit
    meters = [SimpleNamespace(folder=folder, rounds=2, commits=2, last_flops={}, accuracy_metric="accuracy",
                              local_charges=lambda evaluation, r=r: r["eval"] if evaluation else r["round"])
              for r in ran]
    log, share = StepLog(meters[0]), RankProgress(meters[1], 1)
    for r, written in zip(ran, (log.progress, share.progress), strict=True):
        r["round"] = {"rollout": charge(25)}  # round 3's first units, 25 FLOPs on each process
        written()
        r["eval"] = {"eval": charge(17)}  # the epoch's evaluation, 17 on each
        written()
    assert folder.lost_after(2, 2) == 50 + 34
    for m, r in zip(meters, ran, strict=True):  # the evaluation commits (3) on both processes
        m.commits, r["eval"] = 3, {}
    share.evaluation_committed([])
    log.evaluation([charge(34)])  # into step 2's line, which rank 0 holds until the next step begins
    assert folder.lost_after(2, 2) == 34 + 50
    log.on_step_begin(None, None, "control")  # the next optimizer step of round 3 begins: the line is written
    assert [json.loads(line)["commits"] for line in (folder.path / "ledger.jsonl").read_text().splitlines()] \
        == [1, 2, 3]
    assert folder.lost_after(2, 2) == 34 + 50
    ran[1]["round"] = {"rollout": charge(40)}  # rank 1's next unit of round 3 ends
    share.progress()
    assert folder.lost_after(2, 2) == 34 + 25 + 40


def test_a_resume_reads_the_recipes_models_where_the_run_saved_them_whatever_the_directory(tmp_path,
                                                                                          monkeypatch):
    """A run started with a relative ``out`` names its policy's config by a path relative to where it started; a
    resume from another directory compared that path's text with its own and refused an unchanged recipe (a
    held-out user). The policy is read from the run folder (``trl/models/policy``); another architecture there is
    still refused, and so is another value of any other recipe field."""
    from flopplan.arch import REGISTRY
    from flopplan.engines.trl_resume import check_same_recipe
    from flopplan.hf_config import to_hf_config

    class Read:  # the recipe read from the resumed trainer (its to_data: what the check compares)
        def __init__(self, **data):
            self.data = data

        def to_data(self):
            return self.data

    (tmp_path / "start").mkdir()
    monkeypatch.chdir(tmp_path / "start")  # the run started here, with out="run"
    folder = RunFolder("run")
    saved = tmp_path / "start" / "run" / "trl" / "models" / "policy" / "config.json"
    saved.parent.mkdir(parents=True)
    saved.write_text(json.dumps(to_hf_config(REGISTRY["tiny"])))
    folder.begin({"engine": "trl", "recipe": {"policy": "run/trl/models/policy/config.json", "group_size": 4}})
    scratch = tmp_path / "scratch" / "policy" / "config.json"  # where the resumed meter read its trainer's policy
    scratch.parent.mkdir(parents=True)
    scratch.write_text(json.dumps(to_hf_config(REGISTRY["tiny"])))
    monkeypatch.chdir(tmp_path)  # resumed from elsewhere
    check_same_recipe(tmp_path / "start" / "run", Read(policy=str(scratch), group_size=4))
    with pytest.raises(UserError, match=r"another recipe than this trainer's \(group_size 4 -> 2\)"):
        check_same_recipe(tmp_path / "start" / "run", Read(policy=str(scratch), group_size=2))
    scratch.write_text(json.dumps(to_hf_config(REGISTRY["tiny-s"])))
    with pytest.raises(UserError, match=r"another recipe than this trainer's \(policy "):
        check_same_recipe(tmp_path / "start" / "run", Read(policy=str(scratch), group_size=4))


def test_a_resume_inside_a_round_is_refused_naming_the_last_checkpoint_at_a_rounds_end(tmp_path):
    """TRL starts its generation counter again at a resume: from checkpoint-9 of 2-step rounds its rounds ran
    (10, 11), (12, 13), ... while the meter committed at even steps (a held-out user's run)."""
    from flopplan.engines.trl_resume import check_resume_point
    from flopplan.runfile import TRL_LEDGER

    for step, complete in ((4, True), (6, True), (8, False), (9, True)):  # checkpoint-8: a kill during its save
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        if complete:
            (folder / "trainer_state.json").write_text("{}")
            (folder / TRL_LEDGER).write_text("{}")
    check_resume_point(6, 2, tmp_path)  # at a round's end: nothing to say
    with pytest.raises(UserError, match=r"^checkpoint-9 was saved inside a round \(a round takes 2 optimizer steps\)"
                                        r".*; resume from checkpoint-6, the last at a round's end$"):
        check_resume_point(9, 2, tmp_path)
    with pytest.raises(UserError, match=r"no checkpoint ends a round: start the run again$"):
        check_resume_point(3, 2, tmp_path)


def test_a_resumed_budget_is_the_one_given_else_the_run_folders():
    from flopplan.engines.trl_resume import check_budget_covers
    from flopplan.ledger import Ledger

    check_budget_covers(Ledger(budget_flops=100, executed={**Ledger().executed, "rollout": 100}), 4)
    with pytest.raises(UserError, match=r"^the budget of 99 FLOPs is below the 100 FLOPs this run charged by "
                                        r"checkpoint-4: resume with a larger budget"):
        check_budget_covers(Ledger(budget_flops=99, executed={**Ledger().executed, "rollout": 100}), 4)
    check_budget_covers(Ledger(budget_flops=None, executed={**Ledger().executed, "rollout": 100}), 4)
