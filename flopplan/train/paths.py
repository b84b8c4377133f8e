"""How a resume reads a run's recorded paths (:func:`anchored`): the run's relative paths from the current folder
where they are there, else from the folder the run started in (``TrainConfig.work_dir``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from flopplan.arch import is_local_model
from flopplan.fileio import exists

PATH_FIELDS = ("dataset", "eval_dataset", "model_path", "reward_model_path", "chat_template")
"""The run options that name a file or folder (besides ``reward_funcs``' files and the recipe's local models)."""


def anchored(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A recorded run config (:meth:`TrainConfig.to_data`) with its relative paths read as a resume reads them: from
    the current folder where they are there (a copied project resumed with its own files), else from the folder the
    run started in (``work_dir``) where they are there; and the paths so read from the start folder. A module's
    reward function (``module:function``) is imported from the current folder, as ``python -m`` does."""
    start = data.get("work_dir")
    moved: list[str] = []
    if not isinstance(start, str) or not Path(start).is_dir() or Path(start).resolve() == Path.cwd().resolve():
        return data, moved

    def from_start(value: Any, local: bool = True) -> Any:
        if not isinstance(value, str) or not value or Path(value).is_absolute() or not local or exists(value) or \
                not exists(Path(start) / value):
            return value
        moved.append(value)
        return str(Path(start) / value)

    data = {**data, **{name: from_start(data.get(name)) for name in PATH_FIELDS if name in data}}
    if isinstance(data.get("reward_funcs"), list):
        data["reward_funcs"] = [_reward_file(spec, from_start) for spec in data["reward_funcs"]]
    recipe = data.get("recipe")
    if isinstance(recipe, dict):
        recipe = dict(recipe)
        recipe["policy"] = from_start(recipe.get("policy"), is_local_model(recipe.get("policy")))
        kind, sep, model = str(recipe.get("reward", "")).partition(":")
        if sep and (new := from_start(model, is_local_model(model))) != model:
            recipe["reward"] = f"{kind}:{new}"
        data["recipe"] = recipe
    return data, moved


def _reward_file(spec: Any, from_start: Callable[[Any], Any]) -> Any:
    """A ``FILE.py:FUNCTION`` reward function's file read from the start folder (where :func:`anchored` says)."""
    if not isinstance(spec, str):
        return spec
    module, sep, name = spec.rpartition(":")
    if not sep or not (module.endswith(".py") or "/" in module):
        return spec
    return f"{from_start(module)}:{name}"


__all__ = ["PATH_FIELDS", "anchored"]
