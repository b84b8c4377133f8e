"""Bad input (flopplan.errors): the type checks JSON values must pass (no bool as a number, nothing non-finite),
and the one-line UserError each check raises, naming what was wrong."""

from __future__ import annotations

import math

import pytest

from flopplan.errors import UserError, check_choice, check_int, check_number, first_line, is_int, is_number


def one_line(exc: pytest.ExceptionInfo[UserError]) -> str:
    text = str(exc.value)
    assert len(text.splitlines()) == 1, text
    return text


def test_user_error_is_a_value_error():
    """Callers that catch ValueError for bad values also catch bad input."""
    assert issubclass(UserError, ValueError)


def test_first_line_of_a_long_message_or_the_type_name():
    assert first_line(RuntimeError("  boom\nTraceback ...\n  more")) == "boom"
    assert first_line(KeyError()) == "KeyError" and first_line(ValueError("  ")) == "ValueError"


@pytest.mark.parametrize(("value", "integer", "number"), [
    (3, True, True), (-2, True, True), (0, True, True), (10**30, True, True), (2.5, False, True), (3.0, False, True),
    (True, False, False), (False, False, False), ("3", False, False), (None, False, False),
    (math.inf, False, False), (-math.inf, False, False), (math.nan, False, False), ([1], False, False)])
def test_is_int_and_is_number_refuse_bools_strings_and_non_finite_values(value, integer, number):
    assert is_int(value) is integer and is_number(value) is number


def test_check_int_returns_the_value_within_its_bounds():
    assert check_int("steps", 1) == 1 and check_int("steps", 0, minimum=0) == 0
    assert check_int("rank", 64, maximum=64) == 64


@pytest.mark.parametrize(("value", "minimum", "maximum"), [
    (0, 1, None), (-3, 0, None), (65, 1, 64), (True, 0, None), (2.0, 1, None), ("4", 1, None), (None, 1, None),
    ("1\n2", 1, None)])
def test_check_int_refuses_with_one_line_naming_the_option(value, minimum, maximum):
    with pytest.raises(UserError) as exc:
        check_int("--group-size", value, minimum, maximum)
    assert "--group-size" in one_line(exc)


def test_check_number_bounds_and_strictness():
    assert check_number("beta", 0) == 0.0 and isinstance(check_number("beta", 1), float)
    assert check_number("lr", 1e-6, strict=True) == 1e-6
    for value, strict in ((0.0, True), (-0.5, False), (math.nan, False), (math.inf, False), (True, False),
                          ("0.1", False)):
        with pytest.raises(UserError) as exc:
            check_number("beta", value, strict=strict)
        assert "beta" in one_line(exc)


def test_check_choice():
    assert check_choice("reward", "prm", ("rule", "prm")) == "prm"
    with pytest.raises(UserError) as exc:
        check_choice("reward", "vibes", iter(["rule", "prm"]))  # any iterable, read once
    assert "rule" in one_line(exc) and "prm" in one_line(exc)
