"""Hardware profiles: the datasheet model (compute and memory bandwidth), the profile file's non-phase block and
what is refused in it, the committed CPU profiles."""

from __future__ import annotations

import json

import pytest
from helpers import ROOT, cli, profile_with, tiny_recipe

from flopplan.errors import UserError
from flopplan.hardware import load_profile
from flopplan.planner import price_steps


def test_a_faster_memory_buys_more_decode():
    h100, h200 = (json.loads(cli("plan", "--model", "qwen2.5-1.5b", "--gpu-hours", "100", "--device", device,
                                 "--json").stdout)["plans"][0] for device in ("h100", "h200"))
    assert h200["steps"] > h100["steps"]  # same compute peak, 4.8 vs 3.35 TB/s
    per_step = {d["model"] + str(i): d["seconds"]["rollout.decode"] / d["steps"] for i, d in enumerate((h100, h200))}
    assert per_step["qwen2.5-1.5b0"] / per_step["qwen2.5-1.5b1"] == pytest.approx(4.8 / 3.35, rel=0.2)
    update = [d["seconds"]["update"] / d["steps"] for d in (h100, h200)]
    assert update[1] == pytest.approx(update[0], rel=1e-5)  # seconds are written to 6 significant digits


@pytest.mark.parametrize("block, fragment", [
    ({"non_phase": {"lunch": {}}}, "not a term"),
    ({"non_phase": {"round": {"seconds_per_joke": 1.0}}}, "not a coefficient"),
    ({"non_phase": {"round": {"seconds": -1.0}}}, "from 0 to"),
    ({"non_phase": {"round": {"seconds": float("nan")}}}, "from 0 to"),
    ({"non_phase": []}, "must be an object"),
    ({"fitted_shapes": {"train": {"tokens": [1]}}}, "fitted_shapes"),
    ({"fitted_runs": "run"}, "fitted_runs"),
    ({"core_share": 1.5}, "core_share"),
])
def test_a_malformed_non_phase_block_is_refused(block, fragment):
    with pytest.raises(UserError, match=fragment):
        profile_with(**block)


def test_profiles_without_a_non_phase_block_read_and_plan_as_before():
    committed = ROOT / "calibration" / "cpu-amd-epyc-2-threads-quick" / "profile.json"
    profile = load_profile(committed)
    assert profile.non_phase is None and profile.fitted_shapes is None
    priced = price_steps(tiny_recipe(), 10, profile)
    assert set(priced.seconds) == set(priced.phases)


def test_the_committed_cpu_profile_from_runs_reads_and_prices_the_time_outside_the_phases():
    profile = load_profile(ROOT / "calibration" / "cpu-amd-epyc-2-threads-runs" / "profile.json")
    assert len(profile.fitted_runs) == 8 and profile.fitted_shapes and profile.core_share
    terms = {"round", "optimizer_step", "evaluation", "checkpoint", "startup", "shutdown"}
    assert terms <= set(profile.non_phase or {})
    priced = price_steps(tiny_recipe(), 10, profile)
    assert set(priced.seconds) - set(priced.phases) == set(profile.non_phase or {})


def test_the_cpu_model_is_named_in_words():
    """What profiles and recorded outputs name their CPU by: a non-empty name, not a path or a placeholder."""
    from flopplan.hardware import cpu_model

    name = cpu_model()
    assert name and name.strip() == name and "\n" not in name and name not in ("model name", "unknown")


QUICK = ROOT / "calibration" / "cpu-amd-epyc-2-threads-quick" / "profile.json"


@pytest.mark.parametrize(("change", "fragment"), [
    (lambda d: d.update(bytes_per_element=1e40), "bytes_per_element"),  # (priced a run at 6e37 CPU-hours)
    (lambda d: d.update(peak_flops=1e40), "peak_flops"),
    (lambda d: d.update(device_type=["x"]), "device_type"),
    (lambda d: d.update(dtype=7), "dtype"),
    (lambda d: d.update(attn_implementation=True), "attn_implementation"),
    (lambda d: d.update(sweep=[1]), "sweep"),
    (lambda d: d.update(models=[1]), "models"),
    (lambda d: d.update(models="tiny"), "models"),
    (lambda d: d.update(fit=[1]), "fit"),
    (lambda d: d["fit"]["train"].update(form="roofline"), "fit.train"),
    (lambda d: d["fit"]["train"].update(tokens_half="abc"), "fit.train"),
    (lambda d: d["time_model"]["train"].update(tokens_half=1e40), "tokens_half"),
    (lambda d: d["time_model"]["decode"].update(bandwidth=1e40), "bandwidth"),
    (lambda d: d["model_params"].update(tiny=10**40), "model_params"),
])
def test_a_calibrated_profile_no_calibration_would_write_is_refused(tmp_path, change, fragment):
    data = json.loads(QUICK.read_text())
    change(data)
    (path := tmp_path / "profile.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=fragment):
        load_profile(path)
    load_profile(QUICK)


def test_a_fitted_rate_past_any_device_is_read_back(tmp_path):
    """A quick CPU calibration fitted an attention throughput of 7.7e18 (a term its runs do not identify), and the
    reader then refused the profile calibrate had just written: a time model's rates are read up to 1e30."""
    data = json.loads(QUICK.read_text())
    for block in (data["time_model"]["prefill"], data["fit"]["prefill"]):  # (the fit records what it fitted)
        block["attention_throughput"] = 7.7175145510129e18
    (path := tmp_path / "profile.json").write_text(json.dumps(data))
    assert load_profile(path).time_model["prefill"]["attention_throughput"] == 7.7175145510129e18
