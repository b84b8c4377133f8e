"""Shared fixtures, and the exactness summary printed after the tests: every case, closed form vs counter."""

from __future__ import annotations

import os
import subprocess

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One thread per worker (xdist starts one per core): OpenBLAS and OpenMP otherwise start a thread per core in
    # each worker, and their threads spin while they wait, so two workers on two cores burn CPU against each other
    # (measured here with a second CPU-bound process running: RACE's curve simulations took 36.7 s and 43 s of CPU
    # with the default, 24.6 s and 23.7 s with one thread). Set before numpy or torch is first imported; a value
    # already in the environment is kept, and runs that set their own threads (the trainer, RACE's pilots) still do.
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")

EXACT_CASES: list[tuple[str, int, int]] = []
FAST_TIER_SECONDS = 3.0
"""A test not marked slow should take less than this on a 2-core CPU; the summary names the ones that did not (a
report for whoever keeps `make test-fast` quick, not a failure: a busy machine slows every test)."""
SLOW_IN_FAST_TIER: list[tuple[str, float]] = []


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


def pytest_configure(config):
    """Under ``--dist loadgroup`` pytest-xdist keeps a group on one worker by writing ``@group`` into each grouped
    test's ``_nodeid``; pytest 9.2 reads node ids from elsewhere, so the groups silently spread over the workers and
    each builds the group's shared fixtures again. Refuse to start then (the test extra pins pytest below 9.2)."""
    if getattr(config.option, "dist", "no") != "loadgroup" or hasattr(config, "workerinput"):
        return
    import inspect

    from _pytest.nodes import Node

    try:
        source = inspect.getsource(Node.nodeid.fget)
    except (OSError, TypeError):  # no source to read (a zipped or compiled pytest): nothing to check
        return
    if "_nodeid" not in source:
        raise pytest.UsageError(f"pytest {pytest.__version__} breaks pytest-xdist's --dist loadgroup (its groups "
                                "would run on several workers); install the pytest that pyproject.toml's test extra "
                                "allows")


def pytest_collection_modifyitems(config, items):
    """The modules that hold slow tests first, each module's tests together and in their order. pytest-xdist hands
    the tests out one at a time in collection order (groups first), so a long test collected late (test_trl*,
    test_train*: half a minute each) kept one worker busy after the other had run dry; the quick modules now fill
    the end. (Sorting the slow tests alone first would split their modules and set each module's fixtures up
    again.)"""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items[:] = sorted(items, key=lambda item: item.path not in slow)


def pytest_runtest_logreport(report):
    if report.when == "call":
        EXACT_CASES.extend(value for key, value in report.user_properties if key == "exact")
        if report.duration > FAST_TIER_SECONDS and "slow" not in report.keywords:
            SLOW_IN_FAST_TIER.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if SLOW_IN_FAST_TIER:
        terminalreporter.section(f"tests not marked slow that took over {FAST_TIER_SECONDS:g} s here")
        for nodeid, seconds in sorted(SLOW_IN_FAST_TIER, key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}")
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


@pytest.fixture
def tmpfs(tmp_path):
    """A 5 MB tmpfs, unmounted afterwards (root only: tests that take it are marked ROOT_ONLY)."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mount)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)])


@pytest.fixture(scope="session")
def planned_run(tmp_path_factory):
    """One trained tiny run, shared by the tests that read a run folder: a plan (tiny policy, full fine-tuning,
    8 prompts x G=8, 2-token completions, 2e11 FLOPs) and the metered run that validates it, with evaluation and
    FlopCounterMode. Tests must not change it."""
    pytest.importorskip("torch")
    from helpers import cli

    folder = tmp_path_factory.mktemp("planned")
    plan = folder / "plan.json"
    cli("plan", "--model", "tiny", "--full", "--prompts-per-step", "8", "--group-size", "8", "--prompt-len", "10",
        "--completion-len", "2", "--micro-batch", "64", "--eval-every", "5", "--eval-prompts", "40", "--budget",
        "2e11", "--out", str(plan), "--format", "json", check=True)
    run = folder / "run"
    cli("train", "--plan", str(plan), "--out", str(run), "--measure-flops", "--no-progress", check=True)
    return plan, run


@pytest.fixture(scope="module")
def ray_address():
    """A local Ray cluster of 2 CPUs for the requesting module (this process holds it; drivers join it by address;
    two modules on two xdist workers hold two clusters, each on its own ports)."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
