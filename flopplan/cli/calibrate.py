"""``flopplan calibrate``: prove the counts (``--verify``), compare the counters, fit this hardware's speed."""

from __future__ import annotations

import sys

import click

from flopplan.cli import command_line, echo_json, fail, main
from flopplan.cli.options import names_option


@main.command()
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where to time (auto: a GPU when there is one).")
@click.option("--models", "models", multiple=True, metavar="A,B",
              help="Models to sweep (default: tiny,cal-small with --quick on CPU; qwen2.5-0.5b on CPU; "
                   "qwen2.5-0.5b,qwen2.5-1.5b on GPU). With --verify: models to verify (default: the registry).")
@click.option("--quick", is_flag=True, help="A small sweep (CPU: tiny configs, under 2 minutes).")
@click.option("--verify", is_flag=True,
              help="Only check a GRPO step of every registry size on the meta device against the closed form.")
@click.option("--repeats", type=int, help="Timed repeats per point (median; default 4 quick, 5 otherwise).")
@click.option("--no-counters", is_flag=True, help="Skip the counters-side-by-side section.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Folder for profile.json, report.md and the plot (default calibration/<device>).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def calibrate(device: str, models: tuple[str, ...], quick: bool, verify: bool, repeats: int | None,
              no_counters: bool, out_dir: str | None, as_json: bool) -> None:
    """Prove the closed form against real counters and fit how fast each GRPO phase runs here."""
    names = names_option(models, "--models")
    if verify:
        ignored = [flag for flag, given in (("--quick", quick), ("--repeats", repeats is not None),
                                            ("--out", out_dir is not None), ("--no-counters", no_counters)) if given]
        if ignored:
            fail(f"--verify counts on the meta device and writes nothing: it takes no {ignored[0]}")
    if repeats is not None and repeats <= 0:
        fail(f"--repeats must be a positive integer, not {repeats}")
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
