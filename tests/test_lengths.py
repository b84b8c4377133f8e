"""Length distributions: fixed, MEAN:MAX, empirical, from files; the maximum of a batch; what is refused."""

from __future__ import annotations

import pytest

from flopplan.errors import UserError
from flopplan.lengths import Length, distinct_prompts


@pytest.mark.parametrize(("mean", "top"), [(100.0, 20480), (5.0, 1024), (1.01, 1024), (1020.0, 1024),
                                           (1023.9, 1024), (60000.0, 131072), (512.5, 1024)])
def test_mean_max_reaches_the_requested_mean_anywhere_in_its_range(mean, top):
    d = Length.mean_max(mean, top)
    assert d.mean == pytest.approx(mean, rel=1e-9) and d.max == top and abs(sum(d.probs) - 1) < 1e-12


def test_length_distributions():
    d = Length.mean_max(600.0, 1024)
    assert d.mean == pytest.approx(600, rel=1e-9) and d.max == 1024 and d.min == 1
    assert Length.mean_max(512.5, 1024).variance() == pytest.approx((1024**2 - 1) / 12, rel=1e-6)  # uniform
    assert Length.parse("7").is_fixed and Length.parse({"mean": 3, "max": 9}).max == 9
    m = Length.empirical([1, 2, 3, 4]).max_of(2)
    assert m.probs == pytest.approx((1 / 16, 3 / 16, 5 / 16, 7 / 16))
    for bad in ("x", "0", "5:3", {"mean": 3}, -1, "@/no/such/file", "500:100000000000", "nan:100",
                {"counts": {"5": 0}}, {"counts": {"0": 3}}):
        with pytest.raises(UserError):
            Length.parse(bad)


def test_a_fixed_length_has_the_cap_a_distribution_and_a_file_have():
    assert Length.parse(str(1 << 20)).max == 1 << 20
    for bad in (str((1 << 20) + 1), {"counts": {str((1 << 20) + 1): 1}}, f"5:{(1 << 20) + 1}"):
        with pytest.raises(UserError, match="1,048,576"):
            Length.parse(bad)


def test_lengths_from_files(tmp_path):
    lines = tmp_path / "lengths.txt"
    lines.write_text("10\n20\n20\n")
    as_json = tmp_path / "lengths.json"
    as_json.write_text("[10, 20, 20]")
    jsonl = tmp_path / "lengths.jsonl"
    jsonl.write_text('{"length": 10}\n{"length": 20}\n{"length": 20}\n')
    for path in (lines, as_json, jsonl):
        d = Length.from_file(path)
        assert d.support == (10, 20) and d.probs == pytest.approx((1 / 3, 2 / 3))
    bad = tmp_path / "bad.txt"
    for text in ("ten\n", "5 6 abc 1000\n"):  # a line that is not one integer is refused, not read in part
        bad.write_text(text)
        with pytest.raises(UserError, match="malformed"):
            Length.from_file(bad)


def test_distinct_prompts_in_a_batch():
    assert [distinct_prompts(rows, 4) for rows in (1, 4, 5, 8, 9)] == [1, 1, 2, 2, 3]
