"""What a ``flopplan train`` run is asked to do: a recipe plus the training knobs a plan does not fix (torch-free).

:func:`train_config` is the one place that turns a request (a plan entry, a recipe file or the demo defaults, plus
changes) into a :class:`TrainConfig`; the CLI, RACE pilots and the engine launchers all go through it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from flopplan.arch import TINY_POLICIES
from flopplan.budget import Budget
from flopplan.errors import UserError, check_choice, check_int, check_number, is_int
from flopplan.fileio import exists, is_dir
from flopplan.grpo.config import AGGREGATIONS, SCALE_REWARDS, LossConfig
from flopplan.lengths import Length
from flopplan.planfile import PlanEntry, PlanFile
from flopplan.recipe import Recipe, option, refuse_group_of_one

WEIGHTLESS_POLICIES = TINY_POLICIES
"""Policies that are trained from random initialisation by design (no weights exist for them)."""
DEVICES = ("auto", "cpu", "cuda")
ENGINES = ("builtin", "trl")
"""Who runs the GRPO loop: flopplan's own trainer, or TRL's GRPOTrainer with flopplan's FLOP meter."""
PRM_AGGREGATES = ("min", "prod", "last")
REWARD_OUTPUTS = ("auto", "score", "probability", "verdict")  # flopplan.grpo.rewards.ORM_OUTPUTS
MAX_TRAIN_SIZE = 1_000_000  # problems of the built-in task held in memory

DEMO_RECIPE: dict[str, Any] = {"policy": "tiny", "lora_rank": None, "prompts_per_step": 16, "group_size": 16,
                               "completion_len": 2, "micro_batch": 64, "eval_every": 10, "eval_prompts": 200}
"""`flopplan train` with no recipe or plan: the tiny policy, fully fine-tuned from random initialisation on the
built-in digits task (a digit and EOS: two new tokens), 16 prompts x G=16 in micro-batches of 64, held-out
accuracy on 200 problems every 10 steps. LoRA on a random-initialised 300k-parameter model learns unreliably; any
other policy (--model, --model-path) gets the recipe default, LoRA r=64, unless --full or --lora-rank says
otherwise."""


def demo_recipe() -> Recipe:
    return Recipe(**{**DEMO_RECIPE, "completion_len": Length.fixed(DEMO_RECIPE["completion_len"])})


@dataclass(frozen=True)
class TrainLoss:
    """The clipped surrogate as a run chooses it (the KL coefficient ``beta`` is the recipe's: it prices a reference
    forward). ``clip_high`` None is ``clip_low``, as TRL's ``epsilon_high`` None is its ``epsilon``."""

    clip_low: float = field(default=0.2, metadata=option(
        "--clip-eps", "Lower clip of the ratio (TRL epsilon)", "float"))
    clip_high: float | None = field(default=None, metadata=option(
        "--clip-eps-high", "Upper clip (default: --clip-eps; DAPO uses 0.28)", "float"))
    scale_rewards: str = field(default="group", metadata=option(
        "--scale-rewards", "Divide advantages by the group std (group: GRPO) or not (none: Dr. GRPO)", "choice",
        SCALE_REWARDS))
    aggregation: str = field(default="token", metadata=option(
        "--loss-aggregation", "Average token losses over the optimizer batch (token: DAPO, TRL) or per sequence "
        "first", "choice", AGGREGATIONS))

    def __post_init__(self) -> None:
        check_number("clip_low", self.clip_low, 0.0)
        if self.clip_low >= 1:
            raise UserError(f"the lower clip must be below 1 (the ratio is clipped at 1 - eps), not {self.clip_low}")
        if self.clip_high is not None:
            check_number("clip_high", self.clip_high, 0.0)
        check_choice("scale_rewards", self.scale_rewards, SCALE_REWARDS)
        check_choice("loss_aggregation", self.aggregation, AGGREGATIONS)

    @property
    def upper_clip(self) -> float:
        return self.clip_low if self.clip_high is None else self.clip_high


FLAT_LOSS_KEYS = {"clip_low": "clip_low", "clip_high": "clip_high", "scale_rewards": "scale_rewards",
                  "loss_aggregation": "aggregation"}
"""Run configs written before the loss knobs were nested held them at the top level under these keys."""


@dataclass(frozen=True)
class TrainConfig:
    """A run: its recipe (or plan entry) and the knobs a plan does not fix. Every leaf field but ``recipe``, ``plan``
    and ``work_dir`` (recorded: the folder the run started in) carries its ``flopplan train`` option
    (:func:`flopplan.recipe.option`; flopplan.cli.options builds the option, its help and default from it, and lists
    the kinds) and is saved under its own name, a nested group (metadata ``nested``: ``loss``) as a table: a new
    knob is one field."""

    recipe: Recipe
    out_dir: str = field(metadata=option(
        "--out", "Run folder: new or empty (with --resume: the run to continue)", "folder"))
    budget_flops: int | None = field(default=None, metadata=option("--budget", "FLOP budget (default: the plan's)",
                                                                   "budget"))
    max_steps: int | None = field(default=None, metadata=option(
        "--steps", "Stop after N steps (also without a budget)", "steps"))
    train_flops: int | None = field(default=None, metadata=option(
        "--train-flops", "Stop before a step whose worst case could take the training FLOPs (evaluations excluded) "
        "past N (a RACE pilot's rung; with --resume: raised)", "budget"))
    plan: PlanEntry | None = None  # the plan entry this run validates (--plan FILE --plan-model NAME)
    model_path: str | None = field(default=None, metadata=option(
        "--model-path", "A local model folder (weights + tokenizer)", "folder"))
    random_init: bool = field(default=False, metadata=option(
        "--random-init", "Registry architecture without weights (FLOP/time-faithful)", "flag"))
    task: str | None = field(default="digits", metadata=option(  # None with a dataset (see below)
        "--task", "Built-in task (not with --dataset): digits[:first|last|max|sum[:N]]", "text"))
    dataset: str | None = field(default=None, metadata=option(
        "--dataset", "JSONL, parquet or a saved datasets folder: prompt (text or chat messages) and answer (or "
        "solution; GSM8K '#### x' and \\boxed{x} ok); other columns go to the reward functions", "path"))
    eval_dataset: str | None = field(default=None, metadata=option(
        "--eval-dataset", "Held-out set, as --dataset", "path"))
    chat_template: str | None = field(default=None, metadata=option(
        "--chat-template", "A Jinja chat template file for chat-message prompts (default: the tokenizer's own)",
        "file"))
    system_prompt: str | None = field(default=None, metadata=option(
        "--system-prompt", "A system message opening every prompt (a plain prompt becomes the user message)",
        "text"))
    train_size: int = field(default=20000, metadata=option(
        "--train-size", "Built-in task problems; not with --dataset"))
    engine: str = field(default="builtin", metadata=option(
        "--engine", "Who runs the GRPO loop: flopplan's trainer, or TRL's GRPOTrainer with flopplan's FLOP meter",
        "choice", ENGINES))
    lr: float | None = field(default=None, metadata=option(
        "--lr", "AdamW learning rate (default 3e-3 tiny/tiny-s, 1e-3 tiny-l, 1e-5 LoRA, 1e-6 full)", "float"))
    lora_alpha: int | None = field(default=None, metadata=option("--lora-alpha", "LoRA alpha (default 2 x rank)"))
    temperature: float = field(default=1.0, metadata=option("--temperature", "Sampling temperature", "float"))
    loss: TrainLoss = field(default_factory=TrainLoss, metadata={"nested": True})
    max_grad_norm: float = field(default=1.0, metadata=option("--max-grad-norm", "Gradient clipping norm", "float"))
    weight_decay: float = field(default=0.0, metadata=option("--weight-decay", "AdamW weight decay", "float"))
    seed: int = field(default=0, metadata=option("--seed", "Seed of the data order, sampling and init"))
    checkpoint_every: int | None = field(default=10, metadata=option(
        "--checkpoint-every", "Steps between checkpoints"))
    keep_checkpoints: int | None = field(default=3, metadata=option(  # None (in a file): every one
        "--keep-checkpoints", "How many of the newest checkpoints to keep (older ones are deleted)"))
    measure_flops: bool = field(default=False, metadata=option(
        "--measure-flops", "Also count every phase with torch FlopCounterMode (plus its named blind spots)",
        "flag"))
    device: str = field(default="auto", metadata=option(
        "--device", "Where the run executes (auto: a GPU when there is one)", "choice", DEVICES))
    report_to: str = field(default="none", metadata=option(
        "--report-to", "--engine trl: where TRL logs, its flops/* metrics included (tensorboard, wandb, ...; none)",
        "text"))
    threads: int | None = field(default=None, metadata=option(
        "--threads", "CPU threads for torch (default: 1 for policies under 50M parameters, else torch's)"))
    format_reward: float = field(default=0.0, metadata=option(
        "--format-reward", "Reward for a well-formed answer", "float"))
    reward_funcs: tuple[str, ...] = field(default=("exact",), metadata=option(  # flopplan.grpo.reward_funcs
        "--reward-func", "A rule reward, repeatable: exact (exact match), math (math-verify: the math extra), or "
        "MODULE:FUNCTION / FILE.py:FUNCTION with TRL's signature f(prompts, completions, completion_ids, **columns)",
        "repeat"))
    reward_weights: tuple[float, ...] | None = field(default=None, metadata=option(
        "--reward-weights", "Weights of the reward functions, comma-separated, in --reward-func order (default: 1 "
        "each)", "weights"))
    reward_model_path: str | None = field(default=None, metadata=option(
        "--reward-model-path", "A local reward model folder", "folder"))
    prm_aggregate: str = field(default="min", metadata=option(
        "--prm-aggregate", "How a PRM's step scores become one reward", "choice", PRM_AGGREGATES))
    reward_output: str = field(default="auto", metadata=option(
        "--reward-output", "An ORM's reward: its score, its probability (sigmoid), or its verdict (1 if P >= 1/2, "
        "else 0); auto: the probability for a binary classifier (flopplan reward-model train), else the score",
        "choice", REWARD_OUTPUTS))
    eval_targets: tuple[str, ...] = field(default=("heldout",), metadata=option(  # flopplan.train.targets
        "--eval-targets", "Evaluation targets, comma-separated: heldout (the task's held-out strings), long (the "
        "same rule on strings twice as long); fixed prompt sets, one line per target and evaluation in "
        "evaluations.jsonl", "targets"))
    eval_at_flops: tuple[int, ...] = field(default=(), metadata=option(
        "--eval-at-flops", "Also evaluate after the first step whose training FLOPs (evaluations excluded) reach "
        "each of F1,F2,... (e.g. 1e9,3e9,1e10)", "thresholds"))
    eval_at_end: bool = field(default=False, metadata=option(
        "--eval-at-end", "Also evaluate after the last step: every step keeps an evaluation's worst case in "
        "reserve, and the step after which the next would not fit (or the last of --steps) evaluates", "flag"))
    charge_lost: bool = field(default=True, metadata=option(
        "--lost-outside-budget", "Work a kill or a Ctrl-C loses is recorded but not charged against the budget, "
        "so a resumed run does the steps of an uninterrupted one (RACE's pilots)", "negated"))
    fixed_completion: bool = field(default=False, metadata=option(
        "--fixed-completion-len", "Every completion runs to --completion-len tokens (EOS held back): fixed shapes, "
        "as exactness checks use", "flag"))
    work_dir: str | None = None  # the folder the run was started from (absolute): a resume reads each relative path
    # (dataset, reward files, a chat template, a policy's config) from the current folder where it is there, else
    # from this one (flopplan.train.paths); None: a run recorded before this field, read from where it resumes

    def __post_init__(self) -> None:
        r = self.recipe
        if self.dataset is not None:  # its prompts are the dataset's: no built-in task ran (a config.json of an
            object.__setattr__(self, "task", None)  # older flopplan says "digits" with a dataset: read alike)
        elif self.task is None:
            raise UserError("task: null is a dataset run's: give --task digits[:RULE[:N]] or --dataset FILE")
        if self.budget_flops is None and self.max_steps is None:
            raise UserError("give a budget (--budget FLOPS or --plan FILE) or a number of steps (--steps N)")
        for name in ("budget_flops", "max_steps", "train_flops", "train_size", "checkpoint_every", "keep_checkpoints",
                     "threads"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        if self.train_size > MAX_TRAIN_SIZE:
            raise UserError(f"train_size is at most {MAX_TRAIN_SIZE:,} problems, not {self.train_size:,}")
        for name in ("temperature", "max_grad_norm"):
            check_number(name, getattr(self, name), 0.0, strict=True)
        for name in ("weight_decay", "format_reward"):
            check_number(name, getattr(self, name), 0.0)
        if self.lr is not None:
            check_number("lr", self.lr, 0.0, strict=True)
        if not is_int(self.seed) or not 0 <= self.seed < 2**32:
            raise UserError(f"seed must be an integer from 0 to 2**32 - 1, not {self.seed!r}")
        if self.lora_alpha is not None:
            check_int("lora_alpha", self.lora_alpha, 1)
        if self.budget_flops is not None:
            Budget(flops=self.budget_flops)  # the planner's limits
        if self.work_dir is not None and not (isinstance(self.work_dir, str) and Path(self.work_dir).is_absolute()):
            raise UserError(f"work_dir must be an absolute folder (where the run started), not {self.work_dir!r}")
        if self.reward_model_path is not None and r.reward.kind == "rule":
            raise UserError("--reward-model-path needs a model reward (--reward orm:MODEL), not a rule")
        if self.reward_output != "auto" and r.reward.kind != "orm":
            raise UserError("--reward-output applies to an outcome reward model (--reward orm:MODEL)")
        if not isinstance(self.loss, TrainLoss):
            raise UserError(f"loss must be a table of {', '.join(f.name for f in fields(TrainLoss))}")
        for name, allowed in (("device", DEVICES), ("prm_aggregate", PRM_AGGREGATES), ("engine", ENGINES),
                              ("reward_output", REWARD_OUTPUTS)):
            check_choice(name, getattr(self, name), allowed)
        refuse_group_of_one(r.group_size, "train")
        if r.engine != "hf":
            raise UserError("flopplan train generates with transformers (engine hf); the vllm engine is for planning")
        if self.engine == "trl" and (self.eval_at_flops or self.eval_at_end or self.eval_targets != ("heldout",)):
            raise UserError("--engine trl evaluates with TRL's loop every --eval-every rounds, on the held-out set: "
                            "--eval-at-flops, --eval-at-end and --eval-targets are the built-in trainer's")
        if r.update_padding == "batch" and r.generation_batch_size % r.micro_batch_size:
            raise UserError(f"micro_batch {r.micro_batch_size} must divide the generation batch "
                            f"{r.generation_batch_size}")
        if self.dataset is None:
            from flopplan.grpo.tasks import parse_task

            parse_task(self.builtin_task)
        for name in ("dataset", "eval_dataset", "model_path", "reward_model_path"):
            value = getattr(self, name)
            if value is not None and not exists(value, f"{name.replace('_', ' ')} "):
                raise UserError(f"cannot read {name.replace('_', ' ')} {value!r}: no such file or folder")
        if self.model_path is None:
            name = r.policy_spec.name  # an LM head is required of a policy
            if not self.random_init and name not in WEIGHTLESS_POLICIES:
                raise UserError(f"no weights for {name} on disk: pass --model-path DIR (a downloaded model) or "
                                "--random-init (the architecture without weights)")
        self._check_evaluation()
        self._check_rewards()
        if self.reward_model_path is not None:
            self._check_reward_model()
        if self.model_path is not None and self.random_init:
            raise UserError("--model-path loads weights; --random-init builds the registry architecture without "
                            "them: give one")

    @property
    def builtin_task(self) -> str:
        """The built-in task of a run without a dataset (a dataset run has none: ``task`` is None)."""
        if self.task is None:
            raise ValueError("a dataset run has no built-in task")
        return self.task

    def _check_evaluation(self) -> None:
        from flopplan.train.targets import parse_targets

        r = self.recipe
        if not isinstance(self.eval_targets, tuple) or not isinstance(self.eval_at_flops, tuple):
            raise UserError("eval_targets and eval_at_flops must be lists")
        if parse_targets(self.eval_targets) != self.eval_targets:
            raise UserError(f"eval_targets must be distinct names, not {self.eval_targets!r}")
        if r.eval_every is None and (self.eval_targets != ("heldout",) or self.eval_at_flops or self.eval_at_end):
            raise UserError("--eval-targets, --eval-at-flops and --eval-at-end need an evaluation set (--eval-every K "
                            "and --eval-prompts N; a K beyond the run's steps evaluates at the FLOPs given only)")
        for value in self.eval_at_flops:
            if not is_int(value) or value <= 0:
                raise UserError(f"eval_at_flops must be positive FLOP counts, not {value!r}")
        if list(self.eval_at_flops) != sorted(set(self.eval_at_flops)):
            raise UserError("eval_at_flops must be increasing, each once")
        if self.dataset is not None and self.eval_targets != ("heldout",):
            raise UserError("--eval-targets: a dataset run is evaluated on heldout (its --eval-dataset) only")
        if self.dataset is None and "long" in self.eval_targets:
            from flopplan.grpo.tasks import parse_task
            from flopplan.train.targets import long_task

            long_task(parse_task(self.builtin_task))

    def _check_rewards(self) -> None:
        """The reward functions import and take TRL's call (before torch is imported); the data options need a
        dataset."""
        from flopplan.grpo.reward_funcs import RewardFuncs

        if not isinstance(self.reward_funcs, tuple) or not all(isinstance(s, str) for s in self.reward_funcs):
            raise UserError("reward_funcs must be a list of names")
        if self.reward_weights is not None and (not isinstance(self.reward_weights, tuple) or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) for w in self.reward_weights)):
            raise UserError("reward_weights must be a list of numbers")
        if self.recipe.reward.kind != "rule" and (self.reward_funcs != ("exact",) or self.reward_weights):
            raise UserError(f"--reward-func and --reward-weights score with rules; the recipe's reward is "
                            f"{self.recipe.reward} (a reward model): give one or the other")
        RewardFuncs.load(self.reward_funcs, self.reward_weights)
        for name in ("chat_template", "system_prompt"):
            if getattr(self, name) is not None and self.dataset is None:
                raise UserError(f"--{name.replace('_', '-')} applies to a dataset's prompts (--dataset)")

    def _check_reward_model(self) -> None:
        """A local reward model must be an outcome reward model (a sequence classifier: flopplan runs no local
        PRM, token classifier or language model as a reward), given as one (``orm:``), with the architecture the
        recipe prices (``orm:tiny-rm`` with a tiny-rm folder): the budget guard and the plan price the recipe's,
        the ledger charges the one that runs."""
        from flopplan.arch import load_config
        from flopplan.hf_config import require_local_orm
        from flopplan.runfile import REWARD_MODEL_CARD, load_reward_model_card

        path = Path(str(self.reward_model_path))
        if not is_dir(path, "--reward-model-path "):
            raise UserError(f"--reward-model-path {str(path)!r} is not a folder")
        if not (path / "config.json").exists():
            raise UserError(f"--reward-model-path {str(path)!r} has no config.json")
        if (path / REWARD_MODEL_CARD).exists():  # trained by flopplan: its card must be readable
            load_reward_model_card(path)
        architecture = require_local_orm(path, f"--reward-model-path {str(path)!r}")
        loaded, priced = load_config(path), self.recipe.reward_spec
        own = f"orm:{path / 'config.json'}"  # what prices the folder's own architecture
        if self.recipe.reward.kind == "prm":
            raise UserError(f"--reward {self.recipe.reward} is a process reward model, but --reward-model-path "
                            f"{str(path)!r} holds an outcome reward model ({architecture or 'sequence classification'}"
                            f"): give --reward {own} to score with it, or --reward prm:NAME without "
                            "--reward-model-path (a registry PRM architecture, random-initialised)")
        if priced is not None and _shapes(loaded) != _shapes(priced):
            labels = loaded.head.layers[0].out_features
            raise UserError(f"the reward model in {str(path)!r} is not a {priced.name} (hidden {loaded.hidden_size}, "
                            f"{loaded.num_layers} layers, {labels} label{'s' if labels != 1 else ''}): give --reward "
                            f"orm:ARCH of its architecture ({own} reads it from the folder), so that the budget guard "
                            "prices the model that runs")

    @property
    def max_new_tokens(self) -> int:
        return self.recipe.completion_len.max

    @property
    def loss_config(self) -> LossConfig:
        """What the loss function takes: the run's surrogate, the recipe's KL coefficient, the sampling
        temperature the logprobs are taken at."""
        loss = self.loss
        return LossConfig(loss.clip_low, loss.upper_clip, self.recipe.beta, loss.aggregation, self.temperature)

    def to_data(self) -> dict[str, Any]:
        """Every field under its own name; the loss group as a table."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("recipe", "plan", "loss")}
        data["loss"] = asdict(self.loss)
        data["recipe"] = self.recipe.to_data()
        data["plan"] = None if self.plan is None else self.plan.to_data()
        return data

    @staticmethod
    def from_data(data: dict[str, Any], where: str = "run config") -> TrainConfig:
        """The inverse of :meth:`to_data`; also reads the flat layout of earlier versions (the loss knobs at the
        top level, :data:`FLAT_LOSS_KEYS`)."""
        data = dict(data)
        flat = {FLAT_LOSS_KEYS[key]: data.pop(key) for key in list(data) if key in FLAT_LOSS_KEYS}
        if flat and "loss" in data:
            raise UserError(f"{where} has the loss knobs twice: in loss and as {', '.join(sorted(FLAT_LOSS_KEYS))}")
        known = {f.name for f in fields(TrainConfig)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"{where} has unknown keys: {', '.join(unknown)}")
        recipe = Recipe.from_data(data.pop("recipe", None), where)
        plan = data.pop("plan", None)
        loss = data.pop("loss", flat)
        loss_keys = {f.name for f in fields(TrainLoss)}
        if not isinstance(loss, dict) or not set(loss) <= loss_keys:
            raise UserError(f"{where}: loss must be a table of {', '.join(sorted(loss_keys))}, not {loss!r}")
        for key in ("eval_targets", "eval_at_flops", "reward_funcs", "reward_weights"):
            if isinstance(data.get(key), list):
                data[key] = tuple(data[key])
        return TrainConfig(recipe=recipe, plan=None if plan is None else PlanEntry.from_data(plan, f"{where}: plan"),
                           loss=TrainLoss(**loss), **data)


def _shapes(spec: Any) -> tuple[Any, ...]:
    """What decides a model's FLOPs (not its name, source or context length)."""
    return (spec.family, spec.hidden_size, spec.intermediate_size, spec.num_layers, spec.num_heads,
            spec.num_kv_heads, spec.head_dim, spec.vocab_size, spec.qkv_bias, spec.o_bias, spec.mlp_bias,
            spec.qk_norm, spec.head_layers, spec.sliding_window, spec.layer_types)


def _loaded_policy(recipe: Recipe, model_path: str, chosen: bool) -> Recipe:
    """The recipe whose policy is the model ``--model-path`` loads, so that the budget guard and the record price
    the model that runs: its own config.json where the request named no policy (the demo's ``tiny`` is a default,
    not a choice); a policy the request named (``--model``, a plan's or a recipe's) must have its shapes."""
    from flopplan.arch import load_config

    own = Path(model_path) / "config.json"
    if not own.is_file():  # refused with the other paths by TrainConfig, or when loading
        return recipe
    if not chosen:
        return recipe.with_(policy=str(own))
    loaded = load_config(own)
    if _shapes(loaded) != _shapes(recipe.policy_spec):
        raise UserError(f"--model-path {model_path!r} holds {loaded.name} (hidden {loaded.hidden_size}, "
                        f"{loaded.num_layers} layers, {loaded.params:,} parameters), not the recipe's policy "
                        f"{recipe.policy}: give --model {own} (or a plan of it), so that the budget guard prices the "
                        "model that runs")
    return recipe


def replace_config(config: TrainConfig, **changes: Any) -> TrainConfig:
    return replace(config, **changes)


def train_config(out_dir: str, *, plan_file: str | None = None, plan_model: str | None = None,
                 recipe_file: str | None = None, changes: dict[str, Any] | None = None, tuning_given: bool = False,
                 no_eval: bool = False, model: str | None = None, budget_flops: int | None = None,
                 engine_recipe: Callable[[Recipe, dict[str, Any], bool], Recipe] | None = None,
                 **knobs: Any) -> TrainConfig:
    """The configuration of a run: the recipe of a plan entry, a recipe file or the demo defaults, with
    ``changes`` (recipe fields) applied; the plan's FLOP budget unless ``budget_flops`` is given.

    ``tuning_given``: the request chose LoRA or full fine-tuning itself; otherwise a real policy (a model path, or
    a registry model other than the tiny one) gets the recipe default, LoRA, since the demo fine-tunes fully.
    ``engine_recipe(recipe, changes, from_file)``: what the engine running it changes (its log-prob head).
    """
    changes = dict(changes or {})
    data_lengths = [name for name in ("prompt_len", "eval_prompt_len") if name in changes]
    if data_lengths:
        raise UserError(f"--{data_lengths[0].replace('_', '-')}: a run's prompts come from its task or dataset, "
                        "at the lengths they have (the plan's prompt length is an estimate of them)")
    entry = None
    if plan_file:
        if recipe_file:
            raise UserError("--plan carries its recipe: give --plan or --recipe, not both")
        entry = PlanFile.load(plan_file).select(plan_model)
        base = entry.recipe
    elif plan_model:
        raise UserError("--plan-model chooses a plan of --plan; there is no --plan")
    elif recipe_file:
        base = Recipe.load(recipe_file)
    else:
        base = demo_recipe()
        if "prompts_per_step" in changes or "group_size" in changes:
            base = base.with_(micro_batch=None)  # the demo's 64 fits only its round of 16 x 16
    recipe = base.with_(**changes) if changes else base
    if no_eval:
        recipe = recipe.with_(eval_every=None, eval_prompts=0, eval_batch=None)
    if model:
        recipe = recipe.with_(policy=model)
    if knobs.get("model_path"):
        recipe = _loaded_policy(recipe, str(knobs["model_path"]), chosen=bool(model or plan_file or recipe_file))
    if not (plan_file or recipe_file) and not tuning_given and (knobs.get("model_path") or recipe.policy
                                                                not in WEIGHTLESS_POLICIES):
        recipe = recipe.with_(lora_rank=Recipe().lora_rank)  # a real policy: LoRA unless --full says otherwise
    if entry is not None and recipe != base:  # the run validates a changed recipe: the report says so
        entry = entry.with_overrides(recipe)
    if engine_recipe is not None:  # e.g. TRL: the head its version runs on this device, no demo evaluation
        recipe = engine_recipe(recipe, changes, bool(plan_file or recipe_file))
    if knobs.get("eval_dataset") and not knobs.get("dataset"):
        raise UserError("--eval-dataset goes with --dataset (the built-in task makes its own held-out set)")
    if budget_flops is None and entry is not None:
        if entry.budget_flops is None:
            raise UserError("this plan has no FLOP budget (GPU-hours or dollars): give --budget FLOPS")
        budget_flops = entry.budget_flops
    return TrainConfig(recipe=recipe, out_dir=out_dir, budget_flops=budget_flops, plan=entry,
                       work_dir=os.getcwd(), **knobs)


__all__ = ["DEMO_RECIPE", "FLAT_LOSS_KEYS", "TrainConfig", "TrainLoss", "demo_recipe", "replace_config",
           "train_config"]
