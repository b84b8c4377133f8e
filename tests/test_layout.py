"""The house rules, checked on the source (ast), not by convention: dependencies point one way, no module imports
another's private names, the core never imports torch, no module is over 500 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "flopplan"

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
TORCH_FREE = {"core", "report", "cli"}
TORCH_FREE_MODULES = {"grpo/config.py", "grpo/tokenizer.py", "grpo/tasks.py", "train/config.py", "train/targets.py",
                      "calibrate/fit.py", "calibrate/specs.py"}
TORCH_LIBRARIES = ("torch", "transformers", "peft", "fvcore", "trl", "accelerate")


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def layer_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    if len(parts) == 1:
        return "cli" if parts[0] == "__main__.py" else "core"
    return parts[0]


def layer_of_module(name: str) -> str:
    parts = name.split(".")
    assert parts[0] == "flopplan"
    if len(parts) == 1:
        return "core"
    candidate = PACKAGE / parts[1]
    return parts[1] if candidate.is_dir() else "core"


def imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, imported names, line) of every import in the file, lazy ones inside functions included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(alias.name, [], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [alias.name for alias in node.names], node.lineno))
    return out


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


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 500, f"{lines} lines"


def test_the_layer_test_can_fail(tmp_path):
    """The checker sees a core module importing the report package (a rule this suite enforces)."""
    bad = tmp_path / "bad.py"
    bad.write_text("from flopplan.report.tables import Table\n")
    module, _, _ = imports(bad)[0]
    assert layer_of_module(module) == "report" and "report" not in ALLOWED["core"]
