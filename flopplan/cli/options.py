"""Options shared by commands, derived from the data they fill: every field with ``option`` metadata
(:func:`flopplan.recipe.option`) of a :class:`~flopplan.recipe.Recipe` or a
:class:`~flopplan.train.config.TrainConfig` becomes one click option (flag, type, help with its default), its value
goes back to that field, so a new field is one edit. Budgets, profiles and model lists are parsed here too.

Option kinds: int, float, text, choice; file and folder (a path), path (either); length, reward (parsed by their
classes); targets (a comma-separated list); repeat (a repeatable option); weights (comma-separated numbers); bool
(an on/off pair); flag (on only; negated: a flag that turns its field off); budget (a whole FLOP count), steps (a
positive count), thresholds (comma-separated FLOP counts)."""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Sequence
from dataclasses import MISSING, Field, fields
from decimal import Decimal, InvalidOperation
from typing import Any

import click

from flopplan.budget import BUDGET_LIMITS, DEFAULT_BUDGET_FLOPS, Budget, budget_cap
from flopplan.errors import UserError
from flopplan.hardware import PEAK_BF16_FLOPS, Profile
from flopplan.lengths import Length
from flopplan.projections import LORA_TARGETS
from flopplan.recipe import Recipe, RewardSystem

Decorator = Callable[[Any], Any]


def _default_text(value: Any, name: str) -> str | None:
    if value is None or name == "reward_overhead_tokens":
        return None  # the help text says what None means (the overhead: the reward model's own, which it names)
    if name == "lora_rank":
        return str(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Length):
        return value.describe()
    if isinstance(value, RewardSystem):
        return str(value)
    if isinstance(value, tuple):
        return "all seven" if value == LORA_TARGETS else ",".join(map(str, value)) or "none"
    return str(value)


def help_with_default(f: Field[Any], default: Any, text: str | None = None) -> str:
    """An option's help, then its default (a negated flag: off, its field on), which replaces the default the
    field's help states for None (``--micro-batch``'s G); ``text``: the command's words for its default instead."""
    if f.metadata["kind"] == "negated":
        default = not default
    text = text or _default_text(default, f.name)
    if text is None:
        return f.metadata["help"] + "."
    return re.sub(r" \(default: [^)]*\)$", "", f.metadata["help"]) + f" (default: {text})."


CLICK_TYPES: dict[str, Any] = {"int": int, "float": float, "steps": int, "file": click.Path(dir_okay=False),
                               "folder": click.Path(file_okay=False), "path": click.Path()}


def field_option(f: Field[Any], dest: str, help_text: str, required: bool = False, hidden: bool = False) -> Decorator:
    """The click option of a field with ``option`` metadata; its value lands in ``dest`` (None when not given)."""
    meta = f.metadata
    names = [meta["option"]] + ([meta["short"]] if meta["short"] else []) + ([meta["alias"]] if meta["alias"] else [])
    kind = meta["kind"]
    if kind == "bool":
        flag = meta["option"][2:]
        return click.option(f"--{flag}/--no-{flag}", dest, default=None, help=help_text)
    if kind in ("flag", "negated"):
        return click.option(*names, dest, is_flag=True, default=None, help=help_text)
    if kind == "repeat":  # click gives () when it is not given: read as not given (dataclass_values)
        return click.option(*names, dest, multiple=True, help=help_text)
    kind_type = click.Choice(meta["choices"]) if kind == "choice" else CLICK_TYPES.get(kind, str)
    return click.option(*names, dest, type=kind_type, default=None, required=required, help=help_text, hidden=hidden)


def recipe_option_fields() -> list[Any]:
    return [f for f in fields(Recipe) if "option" in f.metadata]


def recipe_options(defaults: Recipe, exclude: tuple[str, ...] = (), hidden: tuple[str, ...] = (),
                   default_texts: dict[str, str] | None = None) -> Decorator:
    """``--recipe FILE``, ``--full`` and one option per recipe field (but ``exclude``; ``hidden``: parsed, to be
    refused by the command in its own words, not listed), their help stating ``defaults``' values (or the words of
    ``default_texts``, by field, for a default that is not one value)."""
    options: list[Decorator] = [
        click.option("--recipe", "recipe_file", type=click.Path(dir_okay=False),
                     help="A recipe file (TOML or JSON) to start from; the options below override it."),
    ]
    for f in recipe_option_fields():
        if f.name in exclude:
            continue
        options.append(field_option(f, f.name, help_with_default(f, getattr(defaults, f.name),
                                                                 (default_texts or {}).get(f.name)),
                                    hidden=f.name in hidden))
        if f.name == "lora_rank":
            options.append(click.option("--full", "full_ft", is_flag=True, default=None,
                                        help="Full fine-tuning instead of LoRA."))

    return _all_of(options)


def _all_of(options: list[Decorator]) -> Decorator:
    def apply(func: Any) -> Any:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


def recipe_changes(opts: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The recipe fields the options set (as field values), and whether LoRA or full fine-tuning was chosen.
    Consumes the recipe options from ``opts``."""
    changes: dict[str, Any] = {}
    full = opts.pop("full_ft", None)
    for f in recipe_option_fields():
        value = opts.pop(f.name, None)
        if value is not None:
            changes[f.name] = parse_option(f, value)
    if full:
        if "lora_rank" in changes:
            raise UserError("--full and --lora-rank contradict each other")
        changes["lora_rank"] = None
    return changes, bool(full) or "lora_rank" in changes


def apply_changes(base: Recipe, changes: dict[str, Any]) -> Recipe:
    """``base`` with the options' changes (validated again)."""
    _check_lora_targets(base, changes)
    return base.with_(**changes) if changes else base


def _check_lora_targets(base: Recipe, changes: dict[str, Any], arm: dict[str, Any] | None = None) -> None:
    """``--lora-targets`` needs LoRA: a rank from the options, else the arm's (a grid's), else the base's."""
    rank = changes.get("lora_rank", (arm or {}).get("lora_rank", base.lora_rank))
    if "lora_targets" in changes and rank is None:
        raise UserError("--lora-targets needs LoRA (not --full)")


EVAL_OPTIONS = ("eval_prompt_len", "eval_completion_len", "eval_batch", "eval_at_start")


def check_applicable(changes: dict[str, Any], recipe: Recipe, evaluates: bool = False,
                     reward_flag: str = "--reward") -> None:
    """Options that do not apply to the recipe they would change are refused, not silently ignored; ``evaluates``:
    the command evaluates whatever the recipe says (a race's pilots do, at its FLOP points); ``reward_flag``: the
    command's option that names the reward (a race design's ``--rewards``)."""
    def flag(name: str) -> str:
        return next(f.metadata["option"] for f in recipe_option_fields() if f.name == name)

    if "prm_steps" in changes and recipe.reward.kind != "prm":
        raise UserError(f"--prm-steps applies to a process reward model ({reward_flag} prm:MODEL), not {recipe.reward}")
    if "reward_overhead_tokens" in changes and recipe.reward.kind == "rule":
        raise UserError(f"--reward-overhead applies to a reward model ({reward_flag} orm:MODEL or prm:MODEL), "
                        "not a rule")
    given = [name for name in EVAL_OPTIONS if name in changes]
    if given and recipe.eval_every is None and not evaluates:
        raise UserError(f"{flag(given[0])} applies with an evaluation (--eval-every K --eval-prompts N)")


CONVENTION_OPTIONS = {"experts": ("--experts", "mixture-of-experts layers"),
                      "window": ("--window", "sliding-window attention layers")}
"""Counting conventions that apply to some architectures only: the option, and what a model needs for it to apply."""


def check_conventions_apply(given: Sequence[str], specs: Sequence[Any]) -> None:
    """``--experts`` and ``--window`` (``given``: the names of those given) apply to a mixture-of-experts model and
    to a model with sliding-window layers: one given where no model of ``specs`` (the command's policies and reward
    models) has them would be ignored, and is refused."""
    from flopplan.recipe import conventions_that_apply

    applies = conventions_that_apply(specs)
    for name in (n for n in CONVENTION_OPTIONS if n in given):
        if name not in applies:
            option, needs = CONVENTION_OPTIONS[name]
            names = list(dict.fromkeys(spec.name for spec in specs))
            which = f"{names[0]} has none" if len(names) == 1 else f"none of {', '.join(names)} has any"
            raise UserError(f"{option} applies to models with {needs}; {which}: it would change no count")


def build_recipe(recipe_file: str | None, opts: dict[str, Any], base: Recipe | None = None,
                 evaluates: bool = False, arms: Sequence[dict[str, Any]] = ()) -> Recipe:
    """A Recipe from ``base`` (default: the planner's defaults), then the file, then the options given;
    ``evaluates``: see :func:`check_applicable`.

    ``arms``: the recipe fields a grid sets over that recipe, one dict per arm (a race design's axes). The recipe is
    then the base of arms, never run as it is, and is checked as the arms: each arm is built with the options and its
    own fields, and the base returned is the first arm that builds (so ``--group-sizes 3,6 --generation-batch 6``
    is taken although 6 does not divide the 16 x 8 rollouts of a default group size no arm has; an arm that does
    not build is refused later, by name, when the grid builds it); an option is refused only when it applies to no
    arm (``--prm-steps`` beside ``--rewards rule,prm:MODEL``), and an option for a field the grid varies is refused
    (the grid's value would replace it)."""
    changes, _ = recipe_changes(opts)
    start = Recipe.load(recipe_file) if recipe_file else (base or Recipe())
    if not arms:
        recipe = apply_changes(start, changes)
        check_applicable(changes, recipe, evaluates)
        return recipe
    varied = sorted(set(changes) & set(arms[0]))
    if varied:
        name = varied[0]
        field = next(f for f in recipe_option_fields() if f.name == name)
        flag = ("--full" if name == "lora_rank" and changes[name] is None else
                f"--no-{field.metadata['option'][2:]}" if field.metadata["kind"] == "bool" and not changes[name]
                else field.metadata["option"])
        raise UserError(f"{flag} sets {name}, which an axis of the grid varies: give its values on the axis only")
    built: list[Recipe] = []
    refusals: list[UserError] = []
    for arm in arms:
        try:
            _check_lora_targets(start, changes, arm)  # the option's rule, with the arm's rank
            built.append(start.with_(**changes, **arm))
        except UserError as exc:
            refusals.append(exc)
    if not built:
        first = ", ".join(f"{k} {v}" for k, v in arms[0].items())
        raise UserError(f"no arm of the grid builds (the first: {first}): {refusals[0]}")
    applies: list[UserError] = []
    for recipe in built:
        try:
            check_applicable(changes, recipe, evaluates, reward_flag="--rewards")
            return built[0]
        except UserError as exc:
            applies.append(exc)
    rewards = sorted({str(r.reward) for r in built})
    raise UserError(f"{applies[0]} (the grid's rewards: {', '.join(rewards)})" if len(rewards) > 1 else str(applies[0]))


def parse_option(f: Field[Any], value: Any) -> Any:
    """The field value of an option given on the command line (as click typed it), by the option's kind."""
    kind = f.metadata["kind"]
    if kind in ("flag", "negated"):
        return kind == "flag"
    flag = f.metadata["option"]
    parsers: dict[str, Callable[[Any], Any]] = {
        "length": lambda text: Length.parse(text, flag), "reward": RewardSystem.parse, "targets": comma_list,
        "budget": lambda text: flop_budget(text, flag), "steps": steps_option,
        "thresholds": lambda text: flop_thresholds(text, flag), "repeat": tuple,
        "weights": lambda text: numbers_option(text, flag)}
    return parsers[kind](value) if kind in parsers else value


def comma_list(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def numbers_option(text: str, flag: str) -> tuple[float, ...]:
    """``1,0.5``: comma-separated finite numbers."""
    out = []
    for part in comma_list(text):
        try:
            value = float(part)
        except ValueError:
            raise UserError(f"{flag} takes comma-separated numbers, not {part!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise UserError(f"{flag} takes finite numbers, not {part!r}")
        out.append(value)
    if not out:
        raise UserError(f"{flag} was given without a number")
    return tuple(out)


# -- the options of a dataclass's fields (flopplan train) -----------------------------------------------------

def option_leaves(cls: type, prefix: str = "") -> list[tuple[str, Field[Any], Any]]:
    """``(dest, field, default)`` of every field of ``cls`` with option metadata, its nested groups (metadata
    ``nested``) walked: a group's fields take its name and ``_`` before theirs (``loss_clip_low``). ``default``:
    the field's, MISSING for a field without one (its option is required)."""
    hints = typing.get_type_hints(cls)
    leaves: list[tuple[str, Field[Any], Any]] = []
    for f in fields(cls):
        if f.metadata.get("nested"):
            leaves += option_leaves(hints[f.name], f"{prefix}{f.name}_")
        elif "option" in f.metadata:
            default = f.default if f.default_factory is MISSING else f.default_factory()
            leaves.append((prefix + f.name, f, default))
    return leaves


def dataclass_options(cls: type) -> Decorator:
    """One click option per field of ``cls`` with option metadata (nested groups included), its help stating the
    field's default."""
    return _all_of([field_option(f, dest, help_with_default(f, None if default is MISSING else default),
                                 required=default is MISSING)
                    for dest, f, default in option_leaves(cls)])


def dataclass_values(cls: type, opts: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The keyword arguments of ``cls`` its options give: each option field's value (its default when not
    given), a nested group as an instance of its class. Consumes the options from ``opts``."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        if f.metadata.get("nested"):
            group = hints[f.name]
            values[f.name] = group(**dataclass_values(group, opts, f"{prefix}{f.name}_"))
        elif "option" in f.metadata:
            value = opts.pop(prefix + f.name, None)
            if value is not None and value != ():  # a flag not given is None, a repeatable option ()
                values[f.name] = parse_option(f, value)
            elif f.default is not MISSING or f.default_factory is not MISSING:
                values[f.name] = f.default if f.default_factory is MISSING else f.default_factory()
    return values


# -- numbers, budgets, profiles, models ------------------------------------------------------------------------

_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?([eE][+-]?\d+)?")


def parse_number(text: str, what: str) -> int | float:
    """``1e19``, ``10000``, ``10,000``, ``2.5e3`` -> an int when integral (FLOP budgets stay exact), else a float.
    A comma separates thousands only (``6,5e12``, a decimal comma, is refused rather than read as 65e12)."""
    if "," in text and not _THOUSANDS.fullmatch(text.strip().replace("_", "")):
        raise UserError(f"{what} must be a number, not {text!r} (a comma only separates thousands: 6.5e12, 6,500)")
    try:
        value = Decimal(text.replace("_", "").replace(",", ""))
    except InvalidOperation:
        raise UserError(f"{what} must be a number, not {text!r}") from None
    if not value.is_finite() or value <= 0:
        raise UserError(f"{what} must be a positive number, not {text!r}")
    if value > Decimal(repr(BUDGET_LIMITS["flops"])):  # before int(): 1e999999999 would take hours to expand
        raise UserError(f"{what} {text.strip()!r} is beyond what flopplan plans (at most {budget_cap('flops')} FLOPs)")
    if float(value) == 0:  # 1e-99999999 is 0.0 as a float: refused quoting what was typed, not "0.0"
        raise UserError(f"{what} must be a positive number, not {text!r} (too small to be a number of FLOPs)")
    return int(value) if value == value.to_integral_value() else float(value)


def flop_budget(budget: str | None, flag: str = "--budget") -> int | None:
    """``--budget`` of a training run (or its ``--train-flops``, ``flag``): a whole number of FLOPs up to the
    planner's cap."""
    if budget is None:
        return None
    value = parse_number(budget, flag)
    if not isinstance(value, int) or value > BUDGET_LIMITS["flops"]:
        raise UserError(f"{flag} must be a whole number of FLOPs, at most {budget_cap('flops')}")
    return value


def steps_option(steps: int | None) -> int | None:
    if steps is not None and steps <= 0:
        raise UserError(f"--steps must be a positive integer, not {steps}")
    return steps


def flop_thresholds(text: str | None, what: str = "--eval-at-flops") -> tuple[int, ...]:
    """``--eval-at-flops 1e9,3e9``: whole FLOP counts, increasing, each once (given in any order)."""
    if not text:
        return ()
    values = set()
    for part in text.split(","):
        value = parse_number(part.strip(), what)
        if not isinstance(value, int):
            raise UserError(f"{what} takes whole FLOP counts, not {part.strip()!r}")
        values.add(value)
    return tuple(sorted(values))


def budget_options(func: Any) -> Any:
    options = [
        click.option("--budget", help=f"FLOP budget, e.g. 1e19 (default {DEFAULT_BUDGET_FLOPS:.0e})."),
        click.option("--gpu-hours", type=float, help="Budget in GPU-hours (needs --device or --profile)."),
        click.option("--dollars", type=float,
                     help="Budget in dollars (needs --device or --profile, and --price-per-gpu-hour)."),
        click.option("--device", help=f"Datasheet profile: {', '.join(PEAK_BF16_FLOPS)}."),
        click.option("--profile", "profile_file", type=click.Path(dir_okay=False),
                     help="A calibrated profile JSON (flopplan calibrate)."),
        click.option("--price-per-gpu-hour", type=float, help="Dollars per GPU-hour, for dollar budgets."),
        click.option("--format", "fmt", default="table", show_default=True,
                     type=click.Choice(["table", "json", "csv", "markdown", "latex"])),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def budget_given(budget: str | None, gpu_hours: float | None, dollars: float | None) -> bool:
    return any(v is not None for v in (budget, gpu_hours, dollars))


def budget_from(budget: str | None, gpu_hours: float | None, dollars: float | None) -> Budget:
    given = sum(v is not None for v in (budget, gpu_hours, dollars))
    if given > 1:
        raise UserError("give one budget: --budget FLOPS, --gpu-hours H or --dollars D")
    if gpu_hours is not None:
        return Budget(gpu_hours=gpu_hours)
    if dollars is not None:
        return Budget(dollars=dollars)
    return Budget(flops=parse_number(budget, "--budget") if budget is not None else DEFAULT_BUDGET_FLOPS)


def profile_from(device: str | None, profile: str | None, price: float | None, engine: str) -> Profile | None:
    from flopplan.hardware import load_profile, resolve_profile

    if device and profile:
        raise UserError("give --device or --profile, not both")
    if price is not None and price <= 0:
        raise UserError(f"--price-per-gpu-hour must be positive, not {price}")
    if profile:
        return load_profile(profile, price)
    if device:
        return resolve_profile(device, engine, price)
    if price is not None:
        raise UserError("--price-per-gpu-hour needs --device or --profile")
    return None


def names_option(values: tuple[str, ...], what: str) -> list[str]:
    """Names from a repeatable, comma-separated option, without repeats (first occurrence kept)."""
    names = [m.strip() for value in values for m in value.split(",") if m.strip()]
    if values and not names:
        raise UserError(f"{what} was given without a name")
    return list(dict.fromkeys(names))
