"""Shared fixtures, and the exactness summary printed after the tests: every case, closed form vs counter."""

from __future__ import annotations

import pytest

EXACT_CASES: list[tuple[str, int, int]] = []


@pytest.fixture
def record_exact(request):
    """Compare flopplan's count with a measured count, record the case for the summary, assert equality.

    Cases travel as user properties of the test report, so the summary also works under pytest-xdist.
    """

    def check(case: str, flopplan_flops: int, measured_flops: int) -> None:
        request.node.user_properties.append(("exact", (case, int(flopplan_flops), int(measured_flops))))
        assert int(flopplan_flops) == int(measured_flops), (
            f"{case}: flopplan {flopplan_flops:,} != FlopCounterMode {measured_flops:,} "
            f"(diff {int(flopplan_flops) - int(measured_flops):+,})")

    return check


def pytest_runtest_logreport(report):
    if report.when == "call":
        EXACT_CASES.extend(value for key, value in report.user_properties if key == "exact")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not EXACT_CASES:
        return
    write = terminalreporter.write_line
    terminalreporter.section("exactness: flopplan closed form vs torch FlopCounterMode (integers)")
    width = max(len(case) for case, _, _ in EXACT_CASES)
    for case, ours, measured in EXACT_CASES:
        verdict = "exact" if ours == measured else f"DIFF {ours - measured:+,}"
        write(f"{case:<{width}}  {ours:>26,}  {measured:>26,}  {verdict}")
    exact = sum(ours == measured for _, ours, measured in EXACT_CASES)
    write(f"{exact} of {len(EXACT_CASES)} cases exact")
