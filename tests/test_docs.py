"""The docs show what the commands print: the fast, torch-free outputs are rerun and compared with the committed
files (`make docs-outputs` regenerates them), the slow ones must be the files the pages include, and the user docs
speak of hardware by name, not of "this machine"."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SNIPPET = re.compile(r'^--8<-- "([^":]+)(?::[^"]*)?"\s*$', re.MULTILINE)
REGENERATE = "stale: run `make docs-outputs` (python scripts/docs_outputs.py) and commit the result"


def load_generator():
    spec = importlib.util.spec_from_file_location("docs_outputs", ROOT / "scripts" / "docs_outputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


gen = load_generator()
FAST = [s for s in gen.SESSIONS if not s.slow]
SLOW = [s for s in gen.SESSIONS if s.slow]


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def included() -> set[str]:
    """Every snippet path the pages include."""
    return {m.group(1) for page in pages() for m in SNIPPET.finditer(page.read_text())}


@pytest.mark.parametrize("session", FAST, ids=[s.name for s in FAST])
def test_a_fast_output_equals_what_its_commands_print_now(session):
    text, _ = gen.run_session(session)
    assert (gen.OUTPUTS / f"{session.name}.txt").read_text() == text, f"docs/_outputs/{session.name}.txt {REGENERATE}"


def test_the_cli_reference_is_every_commands_help():
    page = gen.cli_page()
    assert gen.CLI_PAGE.read_text() == page, f"docs/reference/cli.md {REGENERATE}"
    for path in gen.command_paths():
        assert f"`{path}`" in page


def test_every_session_has_its_output_and_every_output_is_shown():
    names = {s.name for s in gen.SESSIONS}
    files = {p.name for p in gen.OUTPUTS.iterdir()}
    shown = included()
    for session in gen.SESSIONS:
        assert f"{session.name}.txt" in files, f"docs/_outputs/{session.name}.txt is missing: {REGENERATE}"
        assert f"{session.name}.txt" in shown, f"no page shows docs/_outputs/{session.name}.txt"
    for session in SLOW:  # a recorded output says when and where it was recorded, beside it on the page
        assert f"{session.name}.note.md" in files and f"{session.name}.note.md" in shown
    orphans = {f for f in files if f.split(".")[0] not in names}
    assert not orphans, f"outputs no session writes: {sorted(orphans)}"


def test_every_snippet_a_page_includes_exists():
    for path in included():
        assert (gen.OUTPUTS / path).is_file() or (ROOT / path).is_file(), path


def test_a_stale_output_is_detected(tmp_path, monkeypatch):
    session = FAST[0]
    monkeypatch.setattr(gen, "OUTPUTS", tmp_path)
    monkeypatch.setattr(gen, "CLI_PAGE", tmp_path / "cli.md")
    (tmp_path / f"{session.name}.txt").write_text("an old output\n")
    gen.CLI_PAGE.write_text(gen.cli_page())
    assert gen.stale([session], write=False) == [str(tmp_path / f"{session.name}.txt")]
    assert (tmp_path / f"{session.name}.txt").read_text() == "an old output\n"  # --check writes nothing


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("phrase", ["this machine", "load average", "on this vm", "here on"])
def test_user_docs_name_the_hardware_instead_of_this_machine(phrase):
    for path in [ROOT / "README.md", *pages()]:  # the CLI reference (every command's help) included
        assert phrase not in path.read_text().lower(), f"{path.relative_to(ROOT)}: {phrase!r}"


def race_design_commands() -> list[tuple[str, str]]:
    """Every complete `flopplan race design` command the README and the guides show (continued lines joined,
    comments and the console prompt dropped; a line ending in `...` is a sketch, not a command). Commands that read
    a reward model trained on the line before (`--reward-model-path`) are the demo's, which `race demo` runs."""
    out = []
    for page in [ROOT / "README.md", *sorted((DOCS / "guide").glob("*.md"))]:
        text = re.sub(r"\\\n\s*", "", page.read_text())
        for line in text.splitlines():
            cmd = line.strip().removeprefix("$ ").split("  #")[0].split(" # ")[0].strip()
            if cmd.startswith("flopplan race design ") and not cmd.endswith("...") and "--reward-model-path" not in cmd:
                out.append((page.name, cmd))
    return out


@pytest.mark.parametrize(("page", "command"), race_design_commands())
def test_every_race_design_the_docs_show_designs(page, command, tmp_path):
    import shlex
    import subprocess

    args = shlex.split(command)[1:]
    if "--out" in args:
        args[args.index("--out") + 1] = str(tmp_path / "race")
    done = subprocess.run([sys.executable, "-m", "flopplan", *args], capture_output=True, text=True, cwd=tmp_path,
                          check=False)
    assert done.returncode == 0, f"{page}: {command}\n{done.stderr}"
    assert (tmp_path / "race" / "manifest.json").is_file()


def test_the_horizons_the_race_guide_quotes_are_what_race_design_states(tmp_path):
    """docs/guide/race.md quotes F over the largest pilot for the default grid at F = 1e14 and each lever; four of
    them had gone stale (59.1x where the design states 58.9x)."""
    from helpers import cli

    text = re.sub(r"\s+", " ", (DOCS / "guide" / "race.md").read_text())
    start = text.index("grid at F = 1e14")
    paragraph = text[start:start + 700]
    quoted = {"": re.match(r"grid at F = 1e14 \(([\d.]+)x\)", paragraph).group(1),
              **dict(re.findall(r"`(--[a-z-]+ [\d.]+)` (?:gives )?([\d.]+)x", paragraph))}
    assert len(quoted) == 7, quoted
    for lever, horizon in quoted.items():
        out = cli("race", "design", "--budget", "1e14", "--out", str(tmp_path / (lever.replace(" ", "") or "grid")),
                  *lever.split(), "--json")
        assert out.returncode == 0, out.stderr
        assert f"F is {horizon}x the largest pilot" in out.stdout, (lever, horizon)
