"""What a RACE arm may vary (``race design --axis NAME=V1,V2``): any recipe field, priced by the planner so every
arm trains at equal FLOPs, or a training knob that does not change what a step computes.

A name is resolved, in this order, to one of three kinds:

* ``recipe``: a :class:`~flopplan.recipe.Recipe` field (``policy``, ``group_size``, ``iterations``, ``beta``,
  ``completion_len``, ``lora_rank``, ``reward`` (``rule``, ``orm:MODEL``), ``prompts_per_step``, ...), or a
  GRPOConfig field that sets one (:data:`RECIPE_OF_GRPO`, the mapping :func:`flopplan.engines.trl.recipe_from_trl`
  reads them by; a test holds the two together). Priced: each arm's plan entries come from its own recipe.
* ``knob``: a ``flopplan train`` option that is FLOP-neutral (:data:`NEUTRAL_KNOBS`: the optimizer, the loss's
  clip and normalisation, the sampling temperature, the rule reward functions and their weights), or the
  GRPOConfig field that sets it (:data:`KNOB_OF_GRPO`). The pilots run it; every arm is still priced by its
  recipe alone, and a test trains each knob against the default and compares the ledgers FLOP for FLOP.
* ``grpo``: any other GRPOConfig field TRL's loop reads without changing a round's arithmetic
  (:data:`flopplan.engines.trl.NO_FLOPS`, less the run's own: seed, output, logging, precision). Recorded per
  arm for pilots that run TRL; the built-in trainer has no such knob and refuses to run it.

Anything else (a field that changes the FLOPs flopplan cannot price from the recipe: the task, the dataset, a
system prompt, the batch split of a GRPOConfig; or one the race sets itself: seeds, budgets, evaluations) is
refused with one line. Values are written as on the command line; a list value (``reward_funcs``,
``reward_weights``, ``lora_targets``) joins its items with ``+``; ``lora_rank=full`` is full fine-tuning.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, Field, dataclass, fields
from typing import Any

from flopplan.engines.trl import GRPO_DEFAULTS, LOSS_TYPES, NO_FLOPS
from flopplan.errors import UserError
from flopplan.lengths import Length
from flopplan.recipe import Recipe, RewardSystem
from flopplan.train.config import TrainConfig, TrainLoss

CLASSIC = ("policy", "group_size", "iterations", "reward")
"""The axes every arm records (a fixed one takes the base recipe's value), in the order of its name."""
KINDS = ("recipe", "knob", "grpo")
RECIPE_OF_GRPO = {"model_name_or_path": "policy", "num_generations": "group_size", "num_iterations": "iterations",
                  "beta": "beta", "max_completion_length": "completion_len", "gradient_checkpointing": "grad_ckpt"}
"""GRPOConfig fields that set one recipe field each, as recipe_from_trl reads them."""
NEUTRAL_KNOBS = ("lr", "lora_alpha", "temperature", "loss_clip_low", "loss_clip_high", "loss_scale_rewards",
                 "loss_aggregation", "max_grad_norm", "weight_decay", "format_reward", "reward_funcs",
                 "reward_weights", "prm_aggregate", "reward_output", "train_size")
"""``flopplan train`` options (the loss group's as ``loss_FIELD``) that change what is learned, not what a step
computes: an arm varying one costs what its recipe costs."""
KNOB_OF_GRPO = {"learning_rate": "lr", "temperature": "temperature", "epsilon": "loss_clip_low",
                "epsilon_high": "loss_clip_high", "scale_rewards": "loss_scale_rewards",
                "loss_type": "loss_aggregation", "max_grad_norm": "max_grad_norm", "weight_decay": "weight_decay",
                "reward_weights": "reward_weights"}
"""GRPOConfig fields the built-in trainer has as a knob (as engines/trl_run.py sets GRPOConfig from them)."""
RUN_OWN = frozenset({"output_dir", "seed", "run_name", "logging_steps", "logging_strategy", "save_steps",
                     "save_strategy", "save_total_limit", "report_to", "push_to_hub", "hub_model_id", "bf16", "fp16",
                     "use_cpu", "log_completions", "num_completions_to_print", "dataloader_num_workers"})
EVALUATION = ("eval_every", "eval_prompts", "eval_batch", "eval_at_start", "eval_prompt_len", "eval_completion_len")
REFUSED = {
    **{name: "the race sets every arm's evaluation (--eval-targets, --eval-prompts, --evals)" for name in
       (*EVALUATION, "eval_targets", "eval_at_flops", "eval_at_end", "eval_dataset", "eval_strategy")},
    **{name: "the race sets it (--seeds, --budget, the ladder)" for name in
       ("seed", "budget_flops", "max_steps", "out_dir", "checkpoint_every", "keep_checkpoints", "charge_lost")},
    **{name: "it changes the prompts a step reads, which the recipe does not price: a race compares allocations "
             "on one task" for name in ("task", "dataset", "chat_template", "system_prompt")},
    **{name: "it sets the batch split with num_generations (TRL counts completions): vary prompts_per_step, "
             "micro_batch or optimizer_batch (recipe fields)" for name in
       ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
        "generation_batch_size")},
    **{name: "the pilots generate with transformers (flopplan train)" for name in
       ("engine", "use_vllm", "vllm_mode", "prefix_sharing")},
    "fixed_completion": "it changes the completions' lengths, which the recipe prices: vary completion_len",
    "model_path": "a race varies the policy by name or config (policy), loaded as --random-init or from the "
                  "registry's weights",
    "reward_model_path": "give the reward model with race design --reward-model-path and vary reward",
}
"""Names that look like axes and are not, with the reason."""


@dataclass(frozen=True)
class Axis:
    """One axis: its name in every arm's ``axes`` (a recipe field, a knob, or a GRPOConfig field), its kind, its
    values as the field takes them, and the name it was given by (``num_generations`` for ``group_size``)."""

    name: str
    kind: str
    values: tuple[Any, ...]
    given: str = ""

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "given": self.given or self.name,
                "values": [label(v) for v in self.values]}

    @staticmethod
    def from_data(data: Any, where: str) -> Axis:
        if not isinstance(data, dict) or data.get("kind") not in KINDS or not isinstance(data.get("values"), list):
            raise UserError(f"{where} is malformed")
        name = str(data.get("name"))
        return Axis(name, data["kind"], tuple(parse_value(name, data["kind"], str(v)) for v in data["values"]),
                    str(data.get("given") or name))


def _recipe_fields() -> dict[str, Field[Any]]:
    return {f.name: f for f in fields(Recipe)}


def _knob_field(name: str) -> Field[Any]:
    group, cls = ("loss_", TrainLoss) if name.startswith("loss_") else ("", TrainConfig)
    return next(f for f in fields(cls) if f.name == name[len(group):])


def resolve(name: str) -> tuple[str, str]:
    """``(kind, field)`` of an axis name (module docstring); an axis flopplan cannot price or run is one line."""
    name = name.strip()
    if name in REFUSED:
        raise UserError(f"--axis {name}: not an axis: {REFUSED[name]}")
    if name in RECIPE_OF_GRPO:
        return "recipe", RECIPE_OF_GRPO[name]
    if name in _recipe_fields():
        return "recipe", name
    if name in KNOB_OF_GRPO:
        return "knob", KNOB_OF_GRPO[name]
    if name in NEUTRAL_KNOBS:
        return "knob", name
    if name in NO_FLOPS and name not in RUN_OWN:
        return "grpo", name
    if name in GRPO_DEFAULTS or name in RUN_OWN:
        raise UserError(f"--axis {name}: flopplan cannot price a race that varies GRPOConfig {name}")
    raise UserError(f"--axis {name}: not a recipe field, a FLOP-neutral training option ({', '.join(NEUTRAL_KNOBS)}) "
                    "or a GRPOConfig field flopplan can price")


def label(value: Any) -> str | int | float:
    """An axis value as arms and manifests record it: a number stays a number, the rest as written."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (int, float)):
        return value
    if value is None:
        return "full"  # lora_rank None
    if isinstance(value, Length):  # as --axis writes it, so that a manifest reads it back (Length.parse)
        return value.spec()
    if isinstance(value, tuple):
        return "+".join(str(label(v)) for v in value)
    return str(value)


def parse_value(name: str, kind: str, text: str) -> Any:
    """The field value an axis value's text stands for (module docstring), checked by the field's kind."""
    text = text.strip()
    if not text:
        raise UserError(f"--axis {name} has an empty value")
    if kind == "grpo":  # TRL's own type: a JSON scalar, or the text
        if text == "null":  # an arm records a value for every axis; None reads back as lora_rank's "full"
            raise UserError(f"--axis {name}=null: an axis value sets the field in every arm; null is none")
        try:
            scalar = json.loads(text)
        except ValueError:
            return text
        return scalar if isinstance(scalar, (str, int, float, bool)) else text
    if name == "loss_aggregation" and text in LOSS_TYPES.values():  # GRPOConfig loss_type's names
        text = next(k for k, v in LOSS_TYPES.items() if v == text)
    f = _recipe_fields()[name] if kind == "recipe" else _knob_field(name)
    option = f.metadata.get("kind", "text")
    where = f"--axis {name}={text}"
    try:
        if name == "policy" or option in ("text", "path", "file", "folder"):
            value: Any = text
        elif name == "lora_rank" and text == "full":
            value = None
        elif option in ("int", "steps"):
            value = int(text)
        elif option == "float":
            value = float(text)
        elif option == "length":
            value = Length.parse(text, where)
        elif option == "reward":
            value = RewardSystem.parse(text)
        elif option in ("targets", "repeat"):
            value = tuple(t for t in text.split("+") if t)
        elif option == "weights":
            value = tuple(float(t) for t in text.split("+"))
        elif option in ("bool", "flag"):
            if text not in ("on", "off", "true", "false"):
                raise ValueError
            value = text in ("on", "true")
        elif option == "choice" and text in f.metadata["choices"]:
            value = text
        else:
            raise ValueError
    except ValueError:
        choices = f": one of {', '.join(f.metadata['choices'])}" if option == "choice" else f" ({option})"
        raise UserError(f"{where}: not a value of {name}{choices}") from None
    return value


def parse_axis(text: str) -> Axis:
    """``NAME=V1,V2,...`` (module docstring)."""
    name, sep, values = text.partition("=")
    if not sep or not name.strip() or not values.strip():
        raise UserError(f"--axis takes NAME=V1,V2,... (a recipe field, a training option or a GRPOConfig field), "
                        f"not {text!r}")
    kind, field = resolve(name)
    if name.strip() == "loss_type" and not set(values.split(",")) <= set(LOSS_TYPES.values()):
        kind, field = "grpo", "loss_type"  # a loss flopplan's trainer does not have (bnpo, dr_grpo, ...)
    parsed = tuple(parse_value(field, kind, v) for v in values.split(","))
    if len({json.dumps(label(v)) for v in parsed}) != len(parsed):
        raise UserError(f"--axis {name} names a value twice")
    if kind == "grpo":
        from flopplan.race.grpo_check import check_grpo_values

        check_grpo_values(field, parsed)
    return Axis(field, kind, parsed, name.strip())


def knob_options(knobs: dict[str, Any]) -> list[str]:
    """The ``flopplan train`` options that set ``knobs`` (name -> value, as :func:`label` records them)."""
    out: list[str] = []
    for name, value in sorted(knobs.items()):
        f = _knob_field(name)
        flag = f.metadata["option"]
        if f.metadata["kind"] == "repeat":
            out += [x for item in str(value).split("+") for x in (flag, item)]
        elif f.metadata["kind"] == "weights":
            out += [flag, str(value).replace("+", ",")]
        else:
            out += [flag, str(value)]
    return out


def knob_values(knobs: dict[str, Any]) -> dict[str, Any]:
    """``knobs`` as TrainConfig keyword arguments (the loss group as a TrainLoss), to check them."""
    values = {name: parse_value(name, "knob", str(value)) for name, value in knobs.items()}
    loss = {k[len("loss_"):]: v for k, v in values.items() if k.startswith("loss_")}
    out = {k: v for k, v in values.items() if not k.startswith("loss_")}
    if loss:
        defaults = {f.name: f.default for f in fields(TrainLoss) if f.default is not MISSING}
        out["loss"] = TrainLoss(**{**defaults, **loss})
    return out


def arm_name(axes: dict[str, Any], extra: tuple[Axis, ...]) -> str:
    """A file-safe name from the arm's values: ``POLICY.G<g>.mu<mu>.REWARD`` and ``.<name><value>`` per other
    axis, a ``-`` between them unless the value starts with a digit (``tiny-s.G8.mu1.rule.lr0.001``,
    ``....loss_type-bnpo``)."""
    def safe(value: Any) -> str:
        return "".join(c if c.isalnum() or c in "-_.+" else "-" for c in str(value))

    def part(axis: Axis) -> str:
        value = safe(axes[axis.name])
        return f".{axis.name}{'' if value[:1].isdigit() else '-'}{value}"

    policy = safe(axes['policy']).lstrip("-.") or "policy"  # (an absolute path: no name a command line reads as a flag)
    name = f"{policy}.G{axes['group_size']}.mu{axes['iterations']}.{safe(axes['reward'])}"
    return name + "".join(part(axis) for axis in extra)


def check_knobs(recipe: Recipe, knobs: dict[str, Any], *, builtin: bool) -> None:
    """An arm's knobs as ``flopplan train`` takes them (one line when it does not). ``builtin``: the pilots run on
    flopplan's trainer; else they may be a script's, whose reward weights count its own reward functions (the
    weights are still read as numbers)."""
    given = knob_values(knobs)
    if not builtin and "reward_funcs" not in given:
        given.pop("reward_weights", None)
    TrainConfig(recipe=recipe, out_dir="arm", max_steps=1, random_init=True, **given)
