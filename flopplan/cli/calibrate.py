"""``flopplan calibrate``: prove the counts (``--verify``), compare the counters, fit this hardware's speed."""

from __future__ import annotations

import sys

import click

from flopplan.cli import command_line, echo_json, fail, main
from flopplan.cli.options import names_option


@main.command()
@click.argument("runs", nargs=-1, type=click.Path(), metavar="[DIR...]")
@click.option("--from-runs", is_flag=True,
              help="Fit the profile on the phase calls and steps of these run folders (DIR...; runs measured with "
                   "--measure-flops are skipped), with the time outside the phases.")
@click.option("--probe-shutdown", is_flag=True,
              help="With --from-runs: also time how long a run-like process takes to exit after its last file "
                   "(the median of 3 child processes, or of --repeats; no run folder dates it; seconds on a CPU).")
@click.option("--for-plan", "for_plan", type=click.Path(dir_okay=False), metavar="PLAN.json",
              help="Sweep, briefly, the shapes this plan will execute (its batches and padded lengths).")
@click.option("--plan-model", help="With --for-plan: which model's plan when the file holds several.")
@click.option("--profile", "base_profile", type=click.Path(dir_okay=False), metavar="BASE.json",
              help="With --from-runs or --for-plan: a profile to start from; it keeps what the new timings do "
                   "not determine (e.g. the time outside the phases for --for-plan).")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where to time (auto: a GPU when there is one).")
@click.option("--models", "models", multiple=True, metavar="A,B",
              help="Models to sweep (default: tiny,cal-small with --quick on CPU; qwen2.5-0.5b on CPU; "
                   "qwen2.5-0.5b,qwen2.5-1.5b on GPU). With --verify: models to verify (default: the registry).")
@click.option("--quick", is_flag=True, help="A small sweep (CPU: tiny configs, under 2 minutes).")
@click.option("--verify", is_flag=True,
              help="Only check a GRPO step of every registry size on the meta device against the closed form.")
@click.option("--repeats", type=int, help="Timed repeats per point (median; default 4 quick, 5 otherwise); with "
                                          "--from-runs --probe-shutdown: the child processes it times.")
@click.option("--no-counters", is_flag=True, help="Skip the counters-side-by-side section.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Folder for profile.json, report.md and the plot (default calibration/<device>).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def calibrate(runs: tuple[str, ...], from_runs: bool, probe_shutdown: bool, for_plan: str | None,
              plan_model: str | None,
              base_profile: str | None, device: str, models: tuple[str, ...], quick: bool, verify: bool,
              repeats: int | None, no_counters: bool, out_dir: str | None, as_json: bool) -> None:
    """Prove the closed form against real counters and fit how fast each GRPO phase runs on the local CPU or GPU
    (a sweep, the shapes of a plan, or real runs)."""
    names = names_option(models, "--models")
    if repeats is not None and repeats <= 0:
        fail(f"--repeats must be a positive integer, not {repeats}")
    if runs and not from_runs:
        fail(f"{runs[0]!r}: run folders are read with --from-runs DIR [DIR...]")
    if from_runs and for_plan:
        fail("--from-runs and --for-plan are two ways to calibrate: give one")
    if probe_shutdown and not from_runs:
        fail("--probe-shutdown goes with --from-runs")
    if plan_model and not for_plan:
        fail("--plan-model goes with --for-plan PLAN.json")
    if base_profile and not (from_runs or for_plan):
        fail("--profile BASE.json goes with --from-runs or --for-plan")
    if from_runs or for_plan:
        given = [flag for flag, on in (("--verify", verify), ("--quick", quick), ("--models", bool(names)),
                                       ("--no-counters", no_counters)) if on]
        if given:
            fail(f"{'--from-runs' if from_runs else '--for-plan'} takes no {given[0]}")
    if from_runs:
        _from_runs(list(runs), base_profile, out_dir, as_json, device, repeats, probe_shutdown)
        return
    if for_plan:
        _for_plan(for_plan, plan_model, base_profile, device, repeats, out_dir, as_json)
        return
    if verify:
        ignored = [flag for flag, given in (("--quick", quick), ("--repeats", repeats is not None),
                                            ("--out", out_dir is not None), ("--no-counters", no_counters)) if given]
        if ignored:
            fail(f"--verify counts on the meta device and writes nothing: it takes no {ignored[0]}")
    try:
        from flopplan.calibrate.specs import spec_named, sweepable
        from flopplan.measure import quiet_transformers
        from flopplan.measure.device import DevicePolicy
    except ImportError as exc:
        fail(f"flopplan calibrate needs the torch extra (pip install 'flopplan[torch]'): {exc}")
    quiet_transformers()
    for name in names:  # unknown or unusable names fail here, before any work
        spec_named(name) if verify else sweepable(name)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flopplan.report.console import console, print_tables

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console(), disable=as_json or not sys.stdout.isatty(), transient=True)
    if verify:
        from flopplan.arch import REGISTRY
        from flopplan.calibrate.verify import verify as run_verify

        targets = names or list(REGISTRY)
        with progress:
            task = progress.add_task("verify", total=len(targets))
            rows = []
            for name in targets:
                progress.update(task, description=f"verify {name}")
                done = run_verify([name])
                rows += done
                progress.advance(task)
                if progress.disable and not as_json:  # no progress bar (not a terminal): a line per model
                    click.echo(f"verify {name}: {sum(r['exact'] for r in done)} of {len(done)} phases exact",
                               err=True)
        if as_json:
            echo_json({"exact": all(r["exact"] for r in rows), "rows": rows})
        else:
            from flopplan.report.calibration_report import verify_table

            print_tables([verify_table(rows)], [f"{sum(r['exact'] for r in rows)} of {len(rows)} phases exact"])
        if not all(r["exact"] for r in rows):
            sys.exit(1)
        return

    from flopplan.calibrate.run import default_models, run_calibration
    from flopplan.report.calibration_report import counters_table, fit_table

    policy = DevicePolicy.of(device)
    names = names or default_models(policy, quick)
    with progress:
        task = progress.add_task("calibrate", total=None)

        def report(label: str, done: int, total: int | None) -> None:
            progress.update(task, description=label, completed=done, total=total)

        result = run_calibration(policy, names, quick=quick, repeats=repeats or (4 if quick else 5),
                                 counters=not no_counters, out_dir=out_dir, command=command_line(), progress=report)
    if as_json:
        echo_json({"profile": str(result.profile_path), "report": str(result.report_path), "fit": result.fits,
                   "counters": result.counters})
        return
    tables = ([counters_table(result.counters)] if result.counters else []) + [fit_table(result.fits)]
    print_tables(tables, [f"profile: {result.profile_path}", f"report: {result.report_path}",
                          f"use it: flopplan plan --profile {result.profile_path} --budget 1e17"])


def _from_runs(runs: list[str], base_profile: str | None, out_dir: str | None, as_json: bool, device: str,
               repeats: int | None, probe_shutdown: bool) -> None:
    """``--from-runs``: torch-free; the runs were timed when they ran."""
    if not runs:
        fail("--from-runs needs at least one run folder: flopplan calibrate --from-runs DIR [DIR...]")
    if device != "auto":
        fail("--from-runs times nothing: it takes no --device")
    if repeats is not None and not probe_shutdown:
        fail("--from-runs times nothing: it takes no --repeats (but with --probe-shutdown, the children it times)")
    from flopplan.calibrate.from_runs import run_from_runs
    from flopplan.report.calibration_report import breakdown_table, non_phase_table
    from flopplan.report.console import print_tables

    result = run_from_runs(runs, out_dir=out_dir, base_path=base_profile, command=command_line(),
                           probe_shutdown=probe_shutdown, shutdown_repeats=repeats)
    fit = result.profile["fit_from_runs"]
    if as_json:
        echo_json({"profile": str(result.profile_path), "report": str(result.report_path),
                   "time_model": result.profile["time_model"], "non_phase": result.profile["non_phase"],
                   "fitted_coefficients": fit["fitted_coefficients"], "breakdown": fit["breakdown"],
                   "notes": result.notes})
        return
    print_tables([non_phase_table(result.profile["non_phase"], fit["fitted_coefficients"]),
                  breakdown_table(fit["breakdown"])],
                 [*result.notes, f"profile: {result.profile_path}", f"report: {result.report_path}",
                  f"use it: flopplan plan --profile {result.profile_path} --gpu-hours 1"])


def _for_plan(plan_path: str, plan_model: str | None, base_profile: str | None, device: str, repeats: int | None,
              out_dir: str | None, as_json: bool) -> None:
    """``--for-plan``: the plan's own shapes through the phase units (torch)."""
    from flopplan.planfile import PlanFile

    PlanFile.load(plan_path).select(plan_model)  # a bad plan file fails here, before torch is imported
    try:
        from flopplan.calibrate.for_plan import run_for_plan
        from flopplan.measure import quiet_transformers
    except ImportError as exc:
        fail(f"flopplan calibrate --for-plan needs the torch extra (pip install 'flopplan[torch]'): {exc}")
    quiet_transformers()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flopplan.report.calibration_report import run_phase_table
    from flopplan.report.console import console, print_tables

    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console(), disable=as_json or not sys.stdout.isatty(), transient=True)
    with progress:
        task = progress.add_task("calibrate for the plan", total=None)

        def report(label: str, done: int, total: int) -> None:
            progress.update(task, description=label, completed=done, total=total)

        result = run_for_plan(plan_path, plan_model, device, repeats=repeats or 3, out_dir=out_dir,
                              base_path=base_profile, command=command_line(), progress=report)
    fit = result.profile["for_plan"]
    if as_json:
        echo_json({"profile": str(result.profile_path), "report": str(result.report_path),
                   "time_model": result.profile["time_model"], "non_phase": result.profile["non_phase"],
                   "points": fit["points"], "unit_errors": fit["unit_errors"], "notes": result.notes})
        return
    print_tables([run_phase_table(result.profile["time_model"], list(result.profile["fitted_shapes"]),
                                  fit["unit_errors"], "the plan's shapes, timed")],
                 [*result.notes, f"profile: {result.profile_path}", f"report: {result.report_path}",
                  f"use it: flopplan plan --profile {result.profile_path} --gpu-hours 1"])
