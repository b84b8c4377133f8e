"""The one converter behind flopplan's versioned files (flopplan.serial), on real files: tests/data/files-v1 holds one
file of each kind as the writers made them before the converter took over; each must still read, and write back
the same data (the ledger state gains its version key)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from flopplan import serial
from flopplan.errors import UserError
from flopplan.hardware import PROFILE_LAYOUT, Profile, load_profile, profile_from_data
from flopplan.ledger import LEDGER_STATE, Ledger
from flopplan.planfile import PLAN_LAYOUT, PlanFile
from flopplan.race.results import RACE_VERSION, load_analysis
from flopplan.runfile import (
    CARD_LAYOUT,
    EVALUATIONS,
    SUMMARY_LAYOUT,
    LedgerRecord,
    RewardModelCard,
    RunSummary,
    load_evaluations,
    load_reward_model_card,
)

FILES = Path(__file__).parent / "data" / "files-v1"


def _json(name: str) -> Any:
    return json.loads((FILES / name).read_text())


READERS = {
    "plan.json": lambda path: PlanFile.load(path),
    "summary.json": lambda path: RunSummary.from_data(_json(path.name)),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_file_of_today_reads_and_writes_back_the_same_data(name):
    value = READERS[name](FILES / name)
    assert value.to_data() == _json(name)


def test_a_reward_model_card_of_version_1_reads_and_is_written_in_todays_layout():
    """Version 2 added the agreement without EOS (TRL's read); a version-1 card has none: null, the rest kept."""
    old = _json("reward_model.json")
    new = load_reward_model_card(FILES / "reward_model.json").to_data()
    assert (old["flopplan_reward_model_version"], new["flopplan_reward_model_version"]) == (1, 2)
    assert new.pop("agreement_without_eos") is None
    assert {k: v for k, v in new.items() if k != "flopplan_reward_model_version"} == \
        {k: v for k, v in old.items() if k != "flopplan_reward_model_version"}


def test_a_race_json_of_version_1_reads_and_is_written_in_todays_layout():
    """race.json changed layout (records nest the compute types); the numbers it recorded carry over
    (tests/test_race_analysis.py checks them value by value on its own version-1 fixture)."""
    old = _json("race.json")
    new = load_analysis(FILES / "race.json").to_data()
    assert (old["race_version"], new["race_version"]) == (1, RACE_VERSION)
    for was, now in zip(old["targets"], new["targets"], strict=True):  # every value recorded is kept
        assert {k: now["recommendation"][k] for k in was["recommendation"]} == was["recommendation"]


def test_a_profile_of_today_reads_and_writes_back_its_keys():
    """A calibrated profile holds the calibration's diagnostics beside the profile's keys (ignored when read, but
    for its stated error, which the reader takes from them where the file has none); the calibration writes no
    price, the profile writes it null."""
    data = _json("profile.json")
    profile = load_profile(FILES / "profile.json")
    written = profile.to_data()
    assert {k: v for k, v in written.items() if k in data} == {k: v for k, v in data.items() if k in written}
    assert set(data) - set(written) == {"dtype", "flopplan_version", "date", "models", "fit_from_runs"}
    assert set(written) - set(data) == {"price_per_hour", "stated_error"} and written["price_per_hour"] is None
    assert "held out" in written["stated_error"] or "in-sample" in written["stated_error"]
    assert profile_from_data(written, "profile", source="other") == profile


def test_the_unversioned_ledger_state_reads_as_version_0_and_is_written_with_its_version():
    old = _json("ledger_state.json")
    assert LEDGER_STATE.key not in old
    ledger = Ledger.from_state(old)
    state = ledger.to_state()
    assert next(iter(state)) == LEDGER_STATE.key and state[LEDGER_STATE.key] == 1
    # every value the old state held is written back; phases added since (zero in an old run) may join them
    for key, value in old.items():
        if isinstance(value, dict) and key in ("executed", "useful"):
            assert {p: state[key][p] for p in value} == value and not any(
                state[key][p] for p in set(state[key]) - set(value)), key
        else:
            assert state[key] == value, key
    assert Ledger.from_state(json.loads(json.dumps(state))) == ledger
    with pytest.raises(UserError, match="flopplan_ledger_version"):
        Ledger.from_state({**state, LEDGER_STATE.key: 2})


def test_ledger_lines_of_today_read_and_a_broken_line_is_none():
    lines = [json.loads(line) for line in (FILES / "ledger.jsonl").read_text().splitlines()]
    assert [LedgerRecord.from_data(d).to_data() for d in lines] == lines
    assert LedgerRecord.from_data({**lines[0], "step": "one"}) is None
    assert LedgerRecord.from_data({**lines[0], "surprise": 1}) is None


def test_evaluation_lines_of_today_read_and_a_broken_line_before_others_is_refused(tmp_path):
    text = (FILES / "evaluations.jsonl").read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    (tmp_path / EVALUATIONS).write_text(text)
    assert [r.to_data() for r in load_evaluations(tmp_path)] == lines
    broken_lines = (({**lines[0], "step": "one"}, "damaged at line 1"), ({**lines[0], "surprise": 1}, "surprise"))
    for broken, fragment in broken_lines:
        (tmp_path / EVALUATIONS).write_text(json.dumps(broken) + "\n" + text)
        with pytest.raises(UserError, match=fragment):
            load_evaluations(tmp_path)


@pytest.mark.parametrize(("layout", "cls", "name"), [
    (PLAN_LAYOUT, PlanFile, "plan.json"), (SUMMARY_LAYOUT, RunSummary, "summary.json"),
    (CARD_LAYOUT, RewardModelCard, "reward_model.json"), (PROFILE_LAYOUT, Profile, "profile.json"),
    (LEDGER_STATE, Ledger, "ledger_state.json")], ids=lambda v: v if isinstance(v, str) else "")
def test_every_file_writes_its_version_key_first(layout, cls, name):
    value = serial.read(layout, cls, _json(name), name)
    data = serial.write(layout, value)
    assert next(iter(data)) == layout.key and data[layout.key] == layout.version
    assert serial.read(layout, cls, json.loads(json.dumps(data)), name) == value


@pytest.mark.parametrize(("name", "key"), [("plan.json", "flopplan_plan_version"),
                                           ("summary.json", "flopplan_run_version"),
                                           ("reward_model.json", "flopplan_reward_model_version"),
                                           ("profile.json", "flopplan_profile_version")])
@pytest.mark.parametrize("version", [99, "1", None, 1.5])
def test_an_unknown_version_is_one_line_naming_the_key(tmp_path, name, key, version):
    data = _json(name)
    if version is None:
        del data[key]
    else:
        data[key] = version
    reader = {"plan.json": PlanFile.load, "summary.json": lambda p: RunSummary.from_data(json.loads(p.read_text())),
              "reward_model.json": load_reward_model_card, "profile.json": load_profile}[name]
    (tmp_path / name).write_text(json.dumps(data))
    with pytest.raises(UserError) as err:
        reader(tmp_path / name)
    assert key in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("edit", "path"), [
    (lambda d: d.update(chance="x"), "chance"),
    (lambda d: d.update(steps=-1), "steps"),
    (lambda d: d["plan"].update(steps=1.5), "plan.steps"),
    (lambda d: d.update(eval_accuracy=[[1, 0.5]]), "eval_accuracy[0]"),
    (lambda d: d.update(extra=1), "'extra'"),
])
def test_a_malformed_summary_names_the_path(edit, path):
    data = _json("summary.json")
    edit(data)
    with pytest.raises(UserError) as err:
        RunSummary.from_data(data, "summary.json")
    assert str(err.value).startswith("summary.json") and path in str(err.value)


def test_a_summary_may_leave_out_what_has_a_default_and_derived_keys_are_recomputed():
    data = _json("summary.json")
    minimal = {k: data[k] for k in ("flopplan_run_version", "model", "reward", "steps", "budget_flops", "flops",
                                    "useful_flops")}
    summary = RunSummary.from_data({**minimal, "leftover_flops": -1, "within_budget": False})
    assert summary.leftover_flops == data["leftover_flops"] and summary.within_budget is True
    assert summary.phases == {} and summary.plan is None and "plan" not in summary.to_data()


# -- the converter on its own ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Inner:
    a: int
    b: float | None = None


@dataclass(frozen=True)
class Outer:
    DERIVED: ClassVar = ("twice",)

    name: str = field(metadata=serial.spec(key="label", check=serial.Check(bool, "a name")))
    inner: Inner
    pairs: tuple[tuple[int, str], ...] = ()
    extra: dict[str, Any] | None = field(default=None, metadata=serial.spec(omit=True))
    scaled: float = field(default=1.0, metadata=serial.spec(write=lambda v: round(v, 2), check=serial.POSITIVE))

    @property
    def twice(self) -> int:
        return 2 * self.inner.a


def test_the_converter_round_trips_with_keys_omissions_and_derived_values():
    value = Outer("x", Inner(3), ((1, "a"),), scaled=0.123)
    data = serial.to_data(value)
    assert data == {"label": "x", "inner": {"a": 3, "b": None}, "pairs": [[1, "a"]], "scaled": 0.12, "twice": 6}
    assert serial.from_data(Outer, data, "o") == Outer("x", Inner(3), ((1, "a"),), scaled=0.12)
    assert serial.from_data(Outer, {"label": "x", "inner": {"a": 3}}, "o") == Outer("x", Inner(3))


@pytest.mark.parametrize(("data", "message"), [
    ({"label": "", "inner": {"a": 1}}, "o.label must be a name"),
    ({"label": "x", "inner": {"a": True}}, "o.inner.a must be an integer"),
    ({"label": "x"}, "missing key 'inner'"),
    ({"label": "x", "inner": {"a": 1}, "name": "x"}, "unknown key 'name'"),
    ({"label": "x", "inner": {"a": 1}, "pairs": [[1]]}, "o.pairs[0] must be a list of 2"),
    ({"label": "x", "inner": {"a": 1}, "scaled": 0}, "o.scaled must be a number > 0"),
    ({"label": "x", "inner": {"a": 1, "b": float("nan")}}, "o.inner.b must be a finite number"),
])
def test_the_converter_refuses_with_one_line_and_the_path(data, message):
    with pytest.raises(UserError) as err:
        serial.from_data(Outer, data, "o")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_non_finite_number_is_not_written():
    with pytest.raises(UserError, match="non-finite"):
        serial.to_data(Inner(1, float("inf")))


def test_older_versions_read_through_their_upgrades_in_order():
    def one_to_two(d: dict[str, Any]) -> dict[str, Any]:
        return {**d, "b": d.pop("half") * 2}

    def two_to_three(d: dict[str, Any]) -> dict[str, Any]:
        return {"a": d["a"], "b": d["b"] + 1}

    layout = serial.Layout("thing", "thing_version", 3, upgrades={1: one_to_two, 2: two_to_three}, unversioned=1)
    assert serial.read(layout, Inner, {"thing_version": 1, "a": 1, "half": 2.0}, "t") == Inner(1, 5.0)
    assert serial.read(layout, Inner, {"a": 1, "half": 2.0}, "t") == Inner(1, 5.0)  # unversioned: version 1
    assert serial.read(layout, Inner, {"thing_version": 2, "a": 1, "b": 1.0}, "t") == Inner(1, 2.0)
    assert serial.read(layout, Inner, serial.write(layout, Inner(1, 2.0)), "t") == Inner(1, 2.0)
    for version in (0, 4, "3"):
        with pytest.raises(UserError, match="thing_version must be an integer from 1 to 3"):
            serial.read(layout, Inner, {"thing_version": version, "a": 1}, "t")
