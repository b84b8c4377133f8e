"""Run files read without torch: the reward model card's reader (the card's round trip and corruptions are tested
in test_reward_model.py, on a trained model) and the evaluation log's (what a kill leaves, what is damage)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import ROOT

from flopplan.errors import UserError
from flopplan.fileio import read_step_log
from flopplan.runfile import EVALUATIONS, TRL_LEDGER, last_complete_checkpoint, load_evaluations, load_reward_model_card


def test_a_missing_card_is_one_user_error(tmp_path):
    with pytest.raises(UserError, match="is not a flopplan reward model"):
        load_reward_model_card(tmp_path)
    with pytest.raises(UserError, match="no such file or folder"):
        load_reward_model_card(tmp_path / "absent")


def test_the_card_reader_is_torch_free():
    code = ("import sys, flopplan.runfile; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('torch', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         check=True)
    assert out.stdout.strip() == "[]"


def _evaluation(step: int, scores: list[object] | None = None, **changes: object) -> str:
    line = {"step": step, "target": "heldout", "train_flops": 1000 * step, "flops": 1000 * step + 10,
            "accuracy": 0.5, **({"scores": scores, "prompts": len(scores)} if scores is not None else {}), **changes}
    return json.dumps(line) + "\n"


def test_a_line_a_kill_cut_short_is_dropped_but_damage_before_other_lines_is_refused(tmp_path):
    log = tmp_path / EVALUATIONS
    good = _evaluation(0, [0, 1]) + _evaluation(2, [1, 1])
    log.write_text(good + '{"step": 4, "targ')  # the last line, cut by a kill
    assert [r.step for r in load_evaluations(tmp_path)] == [0, 2]
    log.write_text(_evaluation(0, [0, 1]) + '{"step": 2, "targ\n' + _evaluation(4, [1, 1]))
    with pytest.raises(UserError, match="damaged at line 2"):
        load_evaluations(tmp_path)
    assert read_step_log(tmp_path / "absent.jsonl") == []


@pytest.mark.parametrize(("bad", "fragment"), [
    ({"scores": [2, 0]}, "list of 0 and 1"),
    ({"scores": [0.5, 0]}, "must be an integer"),
    ({"train_flops": "many"}, "train_flops must be an integer"),
    ({"prompts": 3}, "prompts 3 disagrees with its 2 scores"),
])
def test_a_complete_line_that_is_not_an_evaluation_is_refused_with_its_step(tmp_path, bad, fragment):
    """A whole line no kill could leave: dropping it would remove a point from every analysis of the run."""
    changes = {"scores": [0, 1], "prompts": 2, **bad}
    (tmp_path / EVALUATIONS).write_text(_evaluation(0, [0, 1]) + _evaluation(2, **changes))
    with pytest.raises(UserError, match=fragment) as caught:
        load_evaluations(tmp_path)
    assert "step 2" in str(caught.value) and "\n" not in str(caught.value)


def test_a_resume_takes_the_newest_checkpoint_written_to_the_end(tmp_path):
    """A kill during a save leaves a newer checkpoint folder without TRL's state or the meter's ledger: a resume
    (``flopplan train --engine trl --resume``, a RACE script pilot) takes the newest complete one instead."""
    assert last_complete_checkpoint(tmp_path) is None
    for step, files in ((4, ("trainer_state.json", TRL_LEDGER)), (8, ("trainer_state.json", TRL_LEDGER)),
                        (12, ("model.safetensors",)), (16, (TRL_LEDGER,)), (20, ("trainer_state.json",))):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        for name in files:
            (folder / name).write_text("{}")
    (tmp_path / "checkpoint-tmp").mkdir()  # not a step
    assert last_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-8"


GOOD_SUMMARY = ROOT / "tests" / "data" / "files-v1" / "summary.json"


@pytest.mark.parametrize(("change", "fragment"), [
    (lambda d: d["flops"].update(total=10**40), "flops.total must be the sum"),
    (lambda d: d["useful_flops"].update(total=d["useful_flops"]["total"] + 1), "useful_flops.total"),
    (lambda d: d["seconds"].update(update=-5), "seconds must be >= 0"),
    (lambda d: d["phases"].update(update={"executed": -1, "useful": 0}), "phases"),
    (lambda d: d["final"].update(accuracy="abc"), "final.accuracy"),
    (lambda d: d["final"].update(accuracy=1.5), "final.accuracy"),
    (lambda d: d["final"].update(reward=float("nan")), "final.reward"),
    (lambda d: d["final"].update(step=-1), "final.step"),
    (lambda d: d.update(eval_accuracy=[[0, 7.0, 0]]), "eval_accuracy"),
    (lambda d: d.update(eval_accuracy=[[0, -0.5, 0]]), "eval_accuracy"),
    (lambda d: d.update(within_budget="maybe"), "within_budget"),
    (lambda d: d.update(leftover_flops="abc"), "leftover_flops"),
])
def test_a_summary_no_run_would_write_is_refused_with_its_field(tmp_path, change, fragment):
    from flopplan.runfile import load_summary

    data = json.loads(GOOD_SUMMARY.read_text())
    load_summary(GOOD_SUMMARY.parent)
    data["final"]["loss"] = float("nan")
    (tmp_path / "summary.json").write_text(json.dumps(data))
    load_summary(tmp_path)  # (a diverged loss logged as NaN still reads)
    change(data)
    (tmp_path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=fragment) as exc:
        load_summary(tmp_path)
    assert "summary.json" in str(exc.value) and "\n" not in str(exc.value)
