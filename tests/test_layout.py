"""The house rules, checked on the source (ast), not by convention: dependencies point one way (between layers, and
down the ordered core), no module imports another's private names, the core never imports torch, no module is over
800 lines (those over 500 are reported). Every import counts, those inside functions included."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "flopplan"
TESTS = Path(__file__).resolve().parent

# The core (flopplan/*.py) in order: a module may import only modules listed before it, so the core has no cycles.
# Floors as the design names them: errors/units -> fileio/budget -> arch/lengths -> formulas -> passes ->
# recipe/timing/ledger -> cost/hardware/grid -> planner -> solver/planfile -> runfile. "flopplan" is the package's
# __init__: the others import __version__ from it, and it names the API's modules only as strings (imported on
# first use) or for type checkers, so its own imports are not checked.
CORE_ORDER = (
    "flopplan",
    "errors", "units", "fileio",
    "serial",  # the converter for versioned files
    "budget",
    "projections",  # a decoder layer's projections: names, shapes, LoRA targets
    "moe", "catalog", "hub",  # MoE blocks, the registry's config.json excerpts, Hub ids from the local cache
    "attention",  # query-key pairs under the attention and window conventions, layer types
    "breakdown",  # FLOPs by term, the type every count returns
    "config_defaults",  # what transformers reads for the keys a config.json leaves out, and its windows
    "heads",  # a model's head by the class its config names
    "arch", "hf_config", "lengths", "formulas", "peers", "estimate", "passes",
    "recipe", "timing", "ledger", "cost", "hardware", "grid", "planner", "solver", "planfile", "runfile",
    "guard",  # the budget guard and run recorder every training loop calls
)
PENDING: set[str] = set()
"""Placed in the order while other branches add them: they may be missing. Once both exist this set can be emptied,
and every module listed must then exist."""
REPORT_LINES, MAX_LINES = 500, 800
"""A module over REPORT_LINES is reported (a warning in pytest's summary: does it still hold one topic?); over
MAX_LINES it fails."""


class LongModule(UserWarning):
    """A module over REPORT_LINES lines."""

# Each layer may import itself and the layers listed; the core is every top-level module.
ALLOWED = {
    "core": {"core"},
    "report": {"core", "report"},
    "measure": {"core", "measure"},
    "grpo": {"core", "measure", "grpo"},
    "train": {"core", "measure", "grpo", "report", "train"},
    "calibrate": {"core", "measure", "grpo", "report", "calibrate"},
    "engines": {"core", "measure", "grpo", "report", "train", "engines"},
    "race": {"core", "report", "train", "engines", "race"},
    "cli": {"core", "report", "measure", "grpo", "train", "calibrate", "engines", "race", "cli"},
}
FACADES = {"trl": "engines"}
"""Top-level modules that are a layer's public entry, not core: ``flopplan/trl.py`` (``from flopplan.trl import
meter``) is the engines layer's (it imports the implementation lazily, torch-free at import)."""
TORCH_FREE = {"core", "report", "cli"}
TORCH_FREE_MODULES = {"grpo/config.py", "grpo/tokenizer.py", "grpo/tasks.py", "grpo/data.py", "grpo/reward_funcs.py",
                      "train/config.py", "train/targets.py", "calibrate/fit.py", "calibrate/specs.py"}
TORCH_LIBRARIES = ("torch", "transformers", "peft", "fvcore", "trl", "accelerate")


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def layer_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    if len(parts) == 1:
        return "cli" if parts[0] == "__main__.py" else FACADES.get(path.stem, "core")
    return parts[0]


def layer_of_module(name: str) -> str:
    parts = name.split(".")
    assert parts[0] == "flopplan"
    if len(parts) == 1:
        return "core"
    if parts[1] in FACADES:
        return FACADES[parts[1]]
    candidate = PACKAGE / parts[1]
    return parts[1] if candidate.is_dir() else "core"


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, imported names, line) of every import in the file, lazy ones inside functions included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # every node, function bodies included
        if isinstance(node, ast.Import):
            out += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [alias.name for alias in node.names], node.lineno))
    return out


def core_name(path: Path) -> str:
    return "flopplan" if path.name == "__init__.py" else path.stem


def core_modules() -> list[Path]:
    return [p for p in modules() if layer_of(p) == "core"]


def core_imports(path: Path) -> list[tuple[str, int]]:
    """(core module, line) of each import of the core in the file: ``flopplan.x`` and ``from flopplan import x`` name
    module x, ``from flopplan import __version__`` the package; any other name imported from the package (the API,
    resolved on first use) is reported as ``flopplan.<name>`` so that the order check refuses it: import a name from
    the module that defines it."""
    out = []
    for module, names, line in imports(path):
        parts = module.split(".")
        if parts[0] != "flopplan":
            continue
        if len(parts) > 1:
            out.append((parts[1], line))
        elif not names:
            out.append(("flopplan", line))
        for name in names if len(parts) == 1 else []:
            known = name == "__version__" or (PACKAGE / f"{name}.py").exists() or name in CORE_ORDER
            out.append(("flopplan" if name == "__version__" else name if known else f"flopplan.{name}", line))
    return out


def untested(names: tuple[str, ...] | list[str], tests: Path = TESTS) -> list[str]:
    """The core modules among ``names`` with no test module of their own, tests/test_<name>.py ("flopplan" is the
    package's __init__: tests/test_flopplan.py)."""
    return [name for name in names if not (tests / f"test_{name}.py").is_file()]


def order_violations(path: Path, name: str) -> list[str]:
    """The imports of core module ``name`` (source at ``path``) that are not of a module earlier in CORE_ORDER."""
    if name == "flopplan":
        return []
    earlier = CORE_ORDER[:CORE_ORDER.index(name)]
    return [f"line {line}: {target}" for target, line in core_imports(path)
            if target != name and target not in earlier]


def dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("flopplan", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports. A package's ``__init__`` importing its own submodules (a command
    group registering its commands) is left out: Python runs those after the package's own names exist."""
    known = {dotted(p): p for p in modules()}
    graph = {}
    for name, path in known.items():
        targets = set()
        for module, names, _ in imports(path):
            subs = [f"{module}.{n}" for n in names if f"{module}.{n}" in known]
            targets |= set(subs) if subs else {module} if module in known else set()
        graph[name] = {t for t in targets if t != name and not t.startswith(name + ".")}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (directly or through others), each sorted."""
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reaches = {name: reach(name) for name in graph}
    groups = {tuple(sorted(m for m in reaches[name] if name in reaches[m])) for name in graph if name in reaches[name]}
    return sorted(list(g) for g in groups)


def test_the_package_has_the_expected_layers():
    assert {layer_of(p) for p in modules()} <= set(ALLOWED)
    assert len(modules()) > 40


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_dependencies_point_one_way(path):
    layer = layer_of(path)
    wrong = []
    for module, names, line in imports(path):
        if not module.startswith("flopplan"):
            continue
        target = layer_of_module(module)
        if module == "flopplan" and names:  # `from flopplan import x`: a top-level module or a package
            targets = {layer_of_module(f"flopplan.{n}") for n in names if n != "__version__"}
        else:
            targets = {target}
        wrong += [f"line {line}: {module} ({t})" for t in targets if t not in ALLOWED[layer]]
    assert not wrong, f"{layer} module imports {', '.join(wrong)}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_names_cross_modules(path):
    own = "flopplan." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
    private = [f"line {line}: {module}.{n}" for module, names, line in imports(path)
               if module.startswith("flopplan") and module != own for n in names if n.startswith("_")
               and n != "__version__"]
    assert not private, f"imports private names: {', '.join(private)}"


@pytest.mark.parametrize("path", [p for p in modules() if layer_of(p) in TORCH_FREE
                                  or str(p.relative_to(PACKAGE)) in TORCH_FREE_MODULES],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_torch_free_modules_never_import_torch(path):
    """Not even lazily: planning must install and run without the torch extra (the CLI imports the torch side
    only from command bodies, through the train/calibrate/measure packages)."""
    heavy = [f"line {line}: {module}" for module, _, line in imports(path)
             if module.split(".")[0] in TORCH_LIBRARIES]
    assert not heavy, f"imports {', '.join(heavy)}"


def test_the_core_order_lists_every_core_module():
    """A new core module needs a place in the order; a listed module that is gone (and not pending) is a stale name."""
    existing = {core_name(p) for p in core_modules()}
    assert len(CORE_ORDER) == len(set(CORE_ORDER))
    assert not existing - set(CORE_ORDER), f"not in CORE_ORDER: {sorted(existing - set(CORE_ORDER))}"
    assert set(CORE_ORDER) - existing <= PENDING, f"listed but missing: {sorted(set(CORE_ORDER) - existing - PENDING)}"


def test_every_core_module_has_its_test_module():
    """One test module per core module, named after it: a module's tests are found where its name says."""
    missing = untested([name for name in CORE_ORDER if name not in PENDING])
    assert not missing, f"no tests/test_<name>.py for: {', '.join(missing)}"


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_core_imports_only_earlier_modules(path):
    wrong = order_violations(path, core_name(path))
    assert not wrong, f"imports what CORE_ORDER puts after it (or outside the core): {', '.join(wrong)}"


def test_no_module_imports_itself_back():
    """No import cycles anywhere in the package (the core's order rules them out there; this covers the layers)."""
    assert not cycles(import_graph())


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{lines} lines"
    if lines > REPORT_LINES:
        warnings.warn(f"{path.relative_to(PACKAGE)}: {lines} lines (over {REPORT_LINES}): one topic still?", LongModule,
                      stacklevel=1)


def test_the_layer_test_can_fail(tmp_path):
    """The checkers see what the rules forbid: a core module importing the report package, at the top or inside a
    function; a core module importing a later one, a module outside the core or an API name through the package; a
    core module without its test module."""
    bad = tmp_path / "bad.py"
    bad.write_text("from flopplan.report.tables import Table\n")
    module, _, _ = imports(bad)[0]
    assert layer_of_module(module) == "report" and "report" not in ALLOWED["core"]
    lazy = tmp_path / "lazy.py"
    lazy.write_text("def f():\n    if True:\n        from flopplan.planfile import PlanEntry\n")
    assert order_violations(lazy, "planner") == ["line 3: planfile"]
    assert order_violations(lazy, "runfile") == []
    facade = tmp_path / "facade.py"
    facade.write_text("import flopplan.extra\nfrom flopplan import __version__, units, Recipe\n")
    assert order_violations(facade, "budget") == ["line 1: extra", "line 2: flopplan.Recipe"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert untested(["errors", "no_such_module", "units"]) == ["no_such_module"]
    (tmp_path / "test_errors.py").write_text("")
    assert untested(["errors", "units"], tmp_path) == ["units"]
