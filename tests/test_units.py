"""Units for humans (flopplan.units): engineering prefixes that round to the right one, counts exact while small,
readable durations, plurals, and the one rule turning an expected count into an integer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flopplan.units import as_int, count, duration, eng, percent, plural

SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}


@pytest.mark.parametrize(("value", "text"), [
    (3.16e18, "3.16 EFLOP"), (10**19, "10 EFLOP"), (1543714304, "1.54 GFLOP"), (12, "12 FLOP"), (0, "0 FLOP"),
    (-2e12, "-2 TFLOP"), (999.4e3, "999 kFLOP"), (999.7e3, "1 MFLOP"), (3e27, "3.00e+03 YFLOP")])
def test_eng_picks_the_prefix_after_rounding(value, text):
    """999.7 k has three significant digits only as 1 M: the prefix is chosen after rounding."""
    assert eng(value) == text


@given(st.floats(min_value=1.0, max_value=9.99e26))
def test_eng_reads_back_within_its_three_significant_digits(value):
    number, unit = eng(value).split()
    assert unit.endswith("FLOP") and 1 <= float(number) < 1000
    assert float(number) * SCALE[unit[:-len("FLOP")]] == pytest.approx(value, rel=5e-3)


def test_eng_takes_other_units_and_digits():
    assert eng(2.5e9, "FLOP/s") == "2.5 GFLOP/s"
    assert eng(1234567, digits=5) == "1.2346 MFLOP"


@pytest.mark.parametrize(("value", "text"), [
    (1543714304, "1.54 B"), (9999, "9,999"), (12345, "12.3 k"), (2.5, "2.5"), (3e12, "3 T"), (0, "0")])
def test_count_is_exact_while_small(value, text):
    assert count(value) == text


def test_percent_of_nothing_is_a_dash():
    assert percent(1, 3) == "33.3 %" and percent(1, 8, digits=3) == "12.500 %"
    assert percent(5, 0) == "-"


@pytest.mark.parametrize(("seconds", "text"), [
    (42.0, "42 s"), (119, "119 s"), (600, "10 min"), (5400, "90 min"), (9000, "2.5 h"), (172800, "2 d")])
def test_duration_keeps_the_number_readable(seconds, text):
    """Seconds below 2 min, minutes below 2 h, hours below 2 days (so 5400 s reads 90 min)."""
    assert duration(seconds) == text


def test_plural():
    assert [plural(n, "step") for n in (0, 1, 2, 1200)] == ["0 steps", "1 step", "2 steps", "1,200 steps"]


def test_as_int_keeps_integers_exact_and_rounds_expected_values():
    """An int passes unchanged (even beyond a float's 53 bits); a float, an expected count, is rounded."""
    big = 10**30 + 1
    assert as_int(big) == big and as_int(2.6) == 3 and as_int(2.4) == 2 and as_int(-1.6) == -2
    assert isinstance(as_int(7.0), int)


@given(st.floats(min_value=-1e15, max_value=1e15))
def test_as_int_is_the_nearest_integer(value):
    assert abs(as_int(value) - value) <= 0.5


@pytest.mark.parametrize(("value", "text"), [(999_885_952, "1 B"), (999_400_000, "999 M"), (9_999.6e6, "10 B")])
def test_count_picks_its_suffix_after_rounding(value, text):
    """A count that rounds up to the next suffix prints with it (Gemma 3 1B's 999,885,952 parameters: 1 B)."""
    assert count(value) == text
