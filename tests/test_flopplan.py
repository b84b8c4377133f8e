"""The package (flopplan/__init__.py): its public API names, each the function or class of the module it names,
loaded on first use so ``import flopplan`` loads no module of the package."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import flopplan


@pytest.mark.parametrize("name", flopplan.__all__)
def test_every_api_name_is_its_modules_own_object(name):
    """Named in ``flopplan.__all__``, defined (not only imported) in a core module, the same object either way."""
    value = getattr(flopplan, name)
    module = importlib.import_module(value.__module__)
    assert getattr(module, name) is value
    assert module.__name__.count(".") == 1, "the API comes from the core (flopplan/*.py)"


def test_dir_lists_the_api_and_the_version():
    assert dir(flopplan) == sorted([*flopplan.__all__, "__version__"])
    assert flopplan.__version__.count(".") == 2 and all(part.isdigit() for part in flopplan.__version__.split("."))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        flopplan.no_such_name  # noqa: B018


def test_importing_the_package_loads_none_of_its_modules():
    code = ("import sys, flopplan\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('flopplan.'))\n"
            "assert not loaded, loaded\n"
            "flopplan.Recipe\n"
            "assert 'flopplan.recipe' in sys.modules and 'flopplan.planner' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
