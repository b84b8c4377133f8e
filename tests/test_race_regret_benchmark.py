"""benchmarks/race_regret.py: the validating run the user gets, against the exhaustive answer."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from flopplan.race.tables import realized_table

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark():
    spec = importlib.util.spec_from_file_location("race_regret", ROOT / "benchmarks" / "race_regret.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_validating_run_is_compared_with_the_exhaustive_best_mean():
    values = {"heldout": {"a": [0.70, 0.13], "b": [0.93, 1.00], "c": [0.15, 0.15]},
              "long": {"a": [0.16, 0.09], "b": [0.34, 0.29], "c": [0.10, 0.10]}}
    validations = [{"repetition": 0, "arm": "a", "checks": [{"target": "heldout", "observed": 1.00},
                                                           {"target": "long", "observed": 0.31}]}]
    heldout, long = load_benchmark().realized_rows(validations, values)
    assert heldout["best"] == "b" and heldout["best_mean"] == pytest.approx(0.965)
    assert heldout["regret"] == pytest.approx(-0.035)  # the run reached more than the best arm's mean
    assert heldout["arm_mean"] == pytest.approx(0.415) and heldout["seed_sd"] == pytest.approx(np.std([0.7, 0.13],
                                                                                                      ddof=1))
    assert long["best"] == "b" and long["regret"] == pytest.approx(0.315 - 0.31)
    table = realized_table([heldout, long])
    assert [row[3] for row in table.rows] == ["1.000", "0.310"] and table.rows[1][-1] == "0.005"


def test_one_exhaustive_seed_has_no_spread_to_report():
    values = {"t": {"a": [0.4], "b": [0.6]}}
    (row,) = load_benchmark().realized_rows([{"repetition": 1, "arm": "a", "checks": [{"target": "t",
                                                                                     "observed": 0.5}]}], values)
    assert row["seed_sd"] is None and row["regret"] == pytest.approx(0.1)
    assert realized_table([row]).rows[0][5] == "-"
