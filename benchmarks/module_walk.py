"""The walk of a flopplan command through the code: which flopplan modules it visits, in order, and how often control
moves from one module to another.

A reader who follows one command through the source makes these moves; fewer modules and fewer re-entries mean a
shorter read. The command runs in this process under ``sys.setprofile``; every Python call whose code lives in the
flopplan package is recorded (calls into other packages are not), so imports count only when they run module code.

    python benchmarks/module_walk.py plan
    python benchmarks/module_walk.py race analyze RACE_DIR

Prints the modules in order of first visit, how many calls each received from another module, and the totals.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections import Counter
from pathlib import Path

import flopplan

ROOT = str(Path(flopplan.__file__).resolve().parent)


def module_of(filename: str) -> str | None:
    if not filename.startswith(ROOT):
        return None
    rel = Path(filename).relative_to(ROOT).with_suffix("")
    return ".".join(("flopplan", *rel.parts)).removesuffix(".__init__")


def walk(argv: list[str]) -> tuple[list[str], Counter[str], int]:
    """Run ``flopplan ARGV`` and return (modules by first visit, calls entering each from another module, moves)."""
    from flopplan.cli import main

    order: list[str] = []
    entered: Counter[str] = Counter()
    stack: list[str | None] = []
    moves = 0

    def profile(frame, event, _arg):  # type: ignore[no-untyped-def]
        nonlocal moves
        if event == "call":
            mod = module_of(frame.f_code.co_filename)
            caller = next((m for m in reversed(stack) if m is not None), None)
            stack.append(mod)
            if mod is None:
                return
            if mod not in order:
                order.append(mod)
            if caller != mod and not frame.f_code.co_name.startswith("<"):
                entered[mod] += 1
                moves += 1
        elif event == "return" and stack:
            stack.pop()

    out = io.StringIO()
    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            main.main(args=argv, prog_name="flopplan", standalone_mode=True)
    finally:
        sys.setprofile(None)
    return order, entered, moves


def main() -> None:
    argv = sys.argv[1:] or ["plan"]
    order, entered, moves = walk(argv)
    cli = [m for m in order if m.startswith("flopplan.cli")]
    print(f"flopplan {' '.join(argv)}")
    print(f"modules visited: {len(order)} ({len(order) - len(cli)} outside cli/); moves between modules: {moves}")
    for mod in order:
        print(f"  {mod:40s} entered {entered[mod]:6d} times")


if __name__ == "__main__":
    main()
