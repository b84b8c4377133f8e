"""A GRPO run as data: the policy, how it is tuned, what one step generates and updates, and the feedback.

A :class:`Recipe` is what the planner prices, what a plan file carries to the training run, and what RACE varies.
It loads from and saves to TOML or JSON (see ``examples/recipe.toml``). Engine traits follow the public code of
TRL's GRPOTrainer, verl and vLLM (../shared/reference/grpo-engines.md).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from flopplan.arch import ArchSpec, local_model_path, orm_head, prm_head, resolve, with_head
from flopplan.attention import ATTENTION_CONVENTIONS, ATTENTION_KERNELS, WINDOW_CONVENTIONS, sliding_layers
from flopplan.errors import UserError, check_choice, check_int, check_number
from flopplan.fileio import atomic_write_text, read_text
from flopplan.formulas import Conventions, LoRA, Training, train_flops
from flopplan.lengths import Length
from flopplan.moe import EXPERTS_IMPLEMENTATIONS
from flopplan.projections import LORA_TARGETS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENGINES = ("hf", "vllm")
UPDATE_PADDING = ("batch", "none")
LOGPROB_HEADS = ("completion", "all", "fused", "fused-compact")
"""How scoring and update passes turn hidden states into log-probs (see :data:`flopplan.passes.LOGPROB_HEAD_RULES`):
``completion``: an ordinary LM head on the completion + 1 positions (TRL <= 1.14 ``logits_to_keep = K + 1``);
``all``: on every position; ``fused``: TRL >= 1.16's chunked log-prob head without Triton
(CPU), on every position but the last, its logits recomputed in backward; ``fused-compact``: the same with Triton
(TRL >= 1.15 on CUDA), on the completion tokens only (padding excluded). The default follows current TRL on a
GPU."""
OLD_LOGPROBS = ("auto", "on", "off")
DEFAULT_PRM = "qwen2.5-math-prm-7b"
DEFAULT_REWARD_OVERHEAD_TOKENS = 32
"""Chat-template tokens a reward model sees besides prompt and response: Qwen2.5-Math-PRM's usage wraps them in a
system prompt ("Please reason step by step, and put your final answer within \\boxed{}.") and three role blocks,
about 32 tokens with the Qwen2.5 tokenizer."""
REWARD_TEMPLATE_TOKENS = {"tiny-rm": 0}
"""The template tokens of registry reward models whose usage is not :data:`DEFAULT_REWARD_OVERHEAD_TOKENS`'s:
``tiny-rm`` (``flopplan reward-model train``) reads prompt and completion alone, as the built-in trainer feeds it."""


def reward_template_tokens(reward: RewardSystem) -> int:
    """What a recipe charges each reward call for its template when ``--reward-overhead`` is not given: the
    reward model's own count (:data:`REWARD_TEMPLATE_TOKENS`), else :data:`DEFAULT_REWARD_OVERHEAD_TOKENS`."""
    return REWARD_TEMPLATE_TOKENS.get(reward.model or "", DEFAULT_REWARD_OVERHEAD_TOKENS)


GROUP_OF_ONE = ("GRPO's advantage (a completion's reward minus its group's mean) is 0 with one completion per prompt, "
                "so nothing is learnt (TRL refuses num_generations < 2)")


def refuse_group_of_one(group_size: int, what: str) -> None:
    """One line for what would run GRPO on groups of one completion (``what``: "race", "train", ...); the planner
    counts such a recipe and notes :data:`GROUP_OF_ONE` instead."""
    if group_size < 2:
        raise UserError(f"a group size of 1 cannot {what}: {GROUP_OF_ONE}")


@dataclass(frozen=True)
class RewardSystem:
    """``rule`` (a Python function: no model FLOPs), ``orm:MODEL`` or ``prm:MODEL``.

    ORM: one forward per completion over the templated prompt + completion; an LM architecture gets the
    ``AutoModelForSequenceClassification`` head (one bias-free hidden -> 1 layer on every position).
    PRM: one forward per completion over prompt + response + one separator token per step (Qwen2.5-Math-PRM
    style); an LM architecture gets that model's score head (hidden -> hidden -> 2). A model that already has a
    score head (``qwen2.5-math-prm-7b``, a sequence-classification config) is used as it is.
    """

    kind: str
    model: str | None = None

    @staticmethod
    def parse(text: str) -> RewardSystem:
        text = text.strip()
        kind, _, model = text.partition(":")
        kind = kind.lower()
        if kind == "rule":
            if model:
                raise UserError(f"reward 'rule' takes no model (got {text!r})")
            return RewardSystem("rule")
        if kind == "prm":
            return RewardSystem("prm", model or DEFAULT_PRM)
        if kind == "orm":
            if not model:
                raise UserError("reward 'orm' needs a model: orm:MODEL (a registry name or a config.json)")
            return RewardSystem("orm", model)
        raise UserError(f"unknown reward system {text!r}: use rule, orm:MODEL or prm:MODEL")

    def __str__(self) -> str:
        return self.kind if self.model is None else f"{self.kind}:{self.model}"

    def spec(self) -> ArchSpec | None:
        """The reward model's architecture (with the head the reward system uses), or None for rules."""
        if self.model is None:
            return None
        base = resolve(self.model, reward=True)  # as AutoModelForSequenceClassification loads it
        if base.head.kind == "score":
            labels = base.head.layers[-1].out_features
            if self.kind == "prm" and labels != 2:
                raise UserError(f"reward {self}: a PRM needs a two-label (step incorrect, step correct) score head "
                                f"and {base.name}'s has {labels} label{'s' if labels != 1 else ''}: use "
                                f"orm:{base.name}, {DEFAULT_PRM}, or a language model such as prm:tiny "
                                "(which gets the PRM head)")
            return base
        if self.kind == "orm":
            return with_head(base, orm_head(base), f"{base.name}-orm")
        return with_head(base, prm_head(base.hidden_size), f"{base.name}-prm")


def option(flag: str, help: str, kind: str = "int", choices: tuple[str, ...] = (), short: str | None = None,
           alias: str | None = None) -> dict[str, Any]:
    """Field metadata: the command-line option of a recipe field (flopplan.cli.options builds every option, its
    help and its default from these, so a new field is one edit). ``kind``: int, float, length, choice, bool
    (an on/off pair), flag (on only), reward, targets (a comma-separated list); the full list is
    flopplan.cli.options'."""
    return {"option": flag, "help": help, "kind": kind, "choices": choices, "short": short, "alias": alias}


@dataclass(frozen=True)
class Recipe:
    """One GRPO run. Defaults: TRL's GRPOTrainer conventions where it has them, the planner's default otherwise.

    In all of flopplan a *step* is one generation round: ``prompts_per_step`` prompts, ``group_size`` completions
    each, scored, then ``iterations`` update passes over them. TRL counts optimizer steps instead (its
    ``global_step``); a round has :attr:`optimizer_steps_per_round` of them.
    """

    policy: str = field(default="qwen2.5-1.5b", metadata={"help": "registry name or a config.json"})
    lora_rank: int | None = field(default=64, metadata=option(
        "--lora-rank", "LoRA rank (--full: full fine-tuning)"))  # None: full fine-tuning
    lora_targets: tuple[str, ...] = field(default=LORA_TARGETS, metadata=option(
        "--lora-targets", "LoRA target projections, comma-separated", "targets"))
    prompts_per_step: int = field(default=64, metadata=option("--prompts-per-step", "Prompts per GRPO step"))
    group_size: int = field(default=8, metadata=option("--group-size", "Completions per prompt, G", short="-G"))
    prompt_len: Length = field(default_factory=lambda: Length.fixed(256), metadata=option(
        "--prompt-len", "Prompt tokens: N, MEAN:MAX, or @FILE of lengths", "length"))
    completion_len: Length = field(default_factory=lambda: Length.fixed(1024), metadata=option(
        "--completion-len", "Completion tokens: N, MEAN:MAX, or @FILE of lengths", "length"))
    iterations: int = field(default=1, metadata=option(
        "--iterations", "Policy update passes per generation round, mu", alias="--mu"))
    beta: float = field(default=0.0, metadata=option(
        "--beta", "KL coefficient; > 0 adds a reference forward per completion", "float"))
    old_logprobs: str = field(default="auto", metadata=option(
        "--old-logprobs", "Recompute old-policy logprobs: auto = when a round feeds several optimizer steps "
        "(mu > 1 or a smaller --optimizer-batch) or with vllm (TRL)", "choice", OLD_LOGPROBS))
    grad_ckpt: bool = field(default=True, metadata=option("--grad-ckpt", "Gradient checkpointing (TRL's default)",
                                                          "bool"))
    logprob_head: str = field(default="fused-compact", metadata=option(
        "--logprob-head", "How scoring/update passes compute log-probs: completion (logits on completion + 1 "
        "positions: TRL <= 1.14), all, fused (TRL >= 1.16's chunked head, CPU: every position but "
        "the last, recomputed in backward), fused-compact (the same on the completion tokens: TRL >= 1.15 with "
        "Triton, GPU)", "choice", LOGPROB_HEADS, alias="--logits"))
    engine: str = field(default="hf", metadata=option("--engine", "Rollout engine traits", "choice", ENGINES))
    prefix_sharing: bool = field(default=False, metadata=option(
        "--prefix-sharing", "vllm: the prompt prefill once per group", "flag"))
    generation_batch: int | None = field(default=None, metadata=option(
        "--generation-batch", "hf: sequences per generate call (default: all rollouts of a step)"))
    micro_batch: int | None = field(default=None, metadata=option(
        "--micro-batch", "Sequences per forward of the scoring passes (old log-probs, reference) and per "
        "forward-backward of the update, within one --generation-batch (packed, --update-padding none: one each); "
        "an optimizer step accumulates the gradients of --optimizer-batch / micro-batch of them (TRL's "
        "per_device_train_batch_size) (default: G)"))
    update_padding: str = field(default="batch", metadata=option(
        "--update-padding", "Pad scoring/update micro-batches to the generation batch's longest (TRL) or not "
        "(packed, verl)", "choice", UPDATE_PADDING))
    optimizer_batch: int | None = field(default=None, metadata=option(
        "--optimizer-batch", "Sequences per optimizer step (default: all rollouts of a step)"))
    reward: RewardSystem = field(default_factory=lambda: RewardSystem("rule"), metadata=option(
        "--reward", f"rule | orm:MODEL | prm:MODEL (prm alone: {DEFAULT_PRM})", "reward"))
    reward_overhead_tokens: int = field(default=None, metadata=option(  # type: ignore[assignment]  # None: resolved
        "--reward-overhead", "Chat-template tokens a reward model reads besides prompt and completion (default: the "
        f"reward model's own, {DEFAULT_REWARD_OVERHEAD_TOKENS} unless the registry says otherwise; tiny-rm: 0)"))
    prm_steps: int = field(default=8, metadata=option(
        "--prm-steps", "Steps per response for PRM feedback: one separator token each (the run's maximum)"))
    eval_every: int | None = field(default=None, metadata=option(
        "--eval-every", "Greedy evaluation every K steps (its own bucket)"))
    eval_prompts: int = field(default=0, metadata=option("--eval-prompts", "Prompts per evaluation"))
    eval_batch: int | None = field(default=None, metadata=option(
        "--eval-batch", "Prompts per evaluation generate call (default: all, one call)"))
    eval_at_start: bool = field(default=True, metadata=option(
        "--eval-at-start", "With evaluation: a baseline evaluation before the first step", "bool"))
    eval_prompt_len: Length | None = field(default=None, metadata=option(
        "--eval-prompt-len", "Eval prompt tokens (default: --prompt-len)", "length"))
    eval_completion_len: Length | None = field(default=None, metadata=option(
        "--eval-completion-len", "Eval completion tokens (default: --completion-len)", "length"))
    attention: str = field(default="dense", metadata=option(
        "--attention", "Attention convention: dense (as executed) or causal (the computed triangle)", "choice",
        ATTENTION_CONVENTIONS))
    attention_kernel: str = field(default="eager", metadata=option(
        "--attention-kernel", "Attention backward: eager matmuls (2x forward) or fused SDPA as counted on GPU "
        "(2.5x)", "choice", ATTENTION_KERNELS))
    experts: str = field(default="grouped_mm", metadata=option(
        "--experts", "MoE models (the policy, the reward model): transformers' experts implementation, counted as it "
        "runs: grouped_mm (transformers' default), batched_mm (one gathered weight per token-expert pair) or eager (a "
        "loop over the experts hit; no LoRA on the routed experts)", "choice", EXPERTS_IMPLEMENTATIONS))
    window: str = field(default="masked", metadata=option(
        "--window", "Sliding-window layers, in a prefill: masked (eager computes the full score matrix and masks "
        "it) or windowed (a windowed SDPA/flash kernel: only the pairs within the window)", "choice",
        WINDOW_CONVENTIONS))

    def __post_init__(self) -> None:
        if not isinstance(self.policy, str) or not self.policy.strip():
            raise UserError(f"policy must be a model name or a config path, not {self.policy!r}")
        for name in ("grad_ckpt", "prefix_sharing", "eval_at_start"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"{name} must be true or false, not {getattr(self, name)!r}")
        if not isinstance(self.lora_targets, tuple) or not all(isinstance(t, str) for t in self.lora_targets):
            raise UserError(f"lora targets must be a list of projection names, not {self.lora_targets!r}")
        for name in ("prompt_len", "completion_len"):
            if not isinstance(getattr(self, name), Length):
                raise UserError(f"{name} must be a length, not {getattr(self, name)!r}")
        if not isinstance(self.reward, RewardSystem):
            raise UserError(f"reward must be a reward system, not {self.reward!r}")
        for name in ("prompts_per_step", "group_size", "iterations", "prm_steps"):
            check_int(name, getattr(self, name), 1)
        if self.reward_overhead_tokens is None:  # the reward model's own template (a frozen dataclass: set once)
            object.__setattr__(self, "reward_overhead_tokens", reward_template_tokens(self.reward))
        check_int("reward_overhead_tokens", self.reward_overhead_tokens, 0)
        check_int("eval_prompts", self.eval_prompts, 0)
        for name in ("lora_rank", "generation_batch", "micro_batch", "optimizer_batch", "eval_every", "eval_batch"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        check_number("beta", self.beta, 0.0)
        for name, allowed in (("engine", ENGINES), ("update_padding", UPDATE_PADDING), ("logprob_head", LOGPROB_HEADS),
                              ("old_logprobs", OLD_LOGPROBS), ("experts", EXPERTS_IMPLEMENTATIONS),
                              ("window", WINDOW_CONVENTIONS)):
            check_choice(name, getattr(self, name), allowed)
        if self.prefix_sharing and self.engine != "vllm":
            raise UserError("prefix_sharing is a vllm engine trait (HF generate recomputes every prompt)")
        if self.eval_every is not None and self.eval_prompts == 0:
            raise UserError("eval_every needs eval_prompts > 0")
        if self.eval_prompts and self.eval_every is None:
            raise UserError("eval_prompts needs eval_every")
        if self.eval_batch is not None and self.eval_every is None:
            raise UserError("eval_batch applies to an evaluation (eval_every, eval_prompts)")
        if self.eval_batch is not None and self.eval_prompts % self.eval_batch:
            raise UserError(f"eval_batch {self.eval_batch} must divide eval_prompts ({self.eval_prompts})")
        try:
            Conventions(self.attention, self.attention_kernel, self.experts, self.window)
            if self.lora_rank is not None:
                LoRA(self.lora_rank, self.lora_targets)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        rollouts = self.rollouts_per_step
        for name, value in (("generation_batch", self.generation_batch_size), ("micro_batch", self.micro_batch_size),
                            ("optimizer_batch", self.optimizer_batch_size)):
            if rollouts % value:
                raise UserError(f"{name} {value} must divide the rollouts per step "
                                f"({self.prompts_per_step} prompts x {self.group_size} = {rollouts})")
        if self.old_logprobs == "off" and self.engine == "hf" and self.optimizer_steps_per_round > 1:
            raise UserError("old_logprobs off with several optimizer steps per round (mu > 1 or an optimizer batch "
                            "below the round) leaves the ratio at 1 under HF generate, so the clip never acts: "
                            "use --old-logprobs auto or on (vllm: the sampler's logprobs can stand in, as verl's "
                            "bypass mode)")
        if self.optimizer_batch_size % self.micro_batch_size:
            raise UserError(f"optimizer_batch {self.optimizer_batch_size} must be a multiple of micro_batch "
                            f"{self.micro_batch_size}")
        if self.generation_batch is not None and self.engine != "hf":
            raise UserError("generation_batch is an hf engine trait (vLLM schedules sequences itself)")

    # -- derived ------------------------------------------------------------------------------------------------
    @property
    def rollouts_per_step(self) -> int:
        return self.prompts_per_step * self.group_size

    @property
    def generation_batch_size(self) -> int:
        return self.generation_batch or self.rollouts_per_step

    @property
    def micro_batch_size(self) -> int:
        return self.micro_batch or min(self.group_size, self.rollouts_per_step)

    @property
    def optimizer_batch_size(self) -> int:
        return self.optimizer_batch or self.rollouts_per_step

    @property
    def optimizer_steps_per_round(self) -> int:
        """Optimizer steps in one round (one flopplan step): mu passes over the rollouts, an optimizer step per
        ``optimizer_batch`` sequences. This is what TRL's ``global_step`` counts."""
        return self.iterations * self.rollouts_per_step // self.optimizer_batch_size

    @property
    def evaluation_batch_size(self) -> int:
        """Prompts per evaluation generate call (all of them in one call by default)."""
        return self.eval_batch or max(1, self.eval_prompts)

    def evaluations(self, steps: int) -> int:
        """Evaluation runs in a run of ``steps`` steps: after every ``eval_every``-th step, plus the baseline."""
        if self.eval_every is None:
            return 0
        return steps // self.eval_every + (1 if self.eval_at_start else 0)

    @property
    def lora(self) -> LoRA | None:
        return None if self.lora_rank is None else LoRA(self.lora_rank, self.lora_targets)

    @property
    def conventions(self) -> Conventions:
        return Conventions(self.attention, self.attention_kernel, self.experts, self.window)

    @cached_property
    def policy_spec(self) -> ArchSpec:
        spec = resolve(self.policy)
        if spec.head.kind != "lm":
            raise UserError(f"policy {self.policy!r} has a score head: a policy needs an LM head")
        if self.lora_rank is not None:
            spec.check_lora_rank(self.lora_rank)
        try:  # the LoRA targets the model allows (Phi-3's and MoE experts' fused names, none under the eager loop)
            train_flops(spec, 1, 1, 1, Training(self.lora), self.conventions)
        except ValueError as exc:
            raise UserError(f"{spec.name}: {exc}") from None
        return spec

    @property
    def longest_sequence(self) -> int:
        """Prompt plus completion at their maxima, over training and evaluation rollouts."""
        return max(self.prompt_len.max + self.completion_len.max,
                   self.evaluation_prompt_len.max + self.evaluation_completion_len.max if self.eval_every else 0)

    @cached_property
    def reward_spec(self) -> ArchSpec | None:
        return self.reward.spec()

    @property
    def evaluation_prompt_len(self) -> Length:
        return self.eval_prompt_len or self.prompt_len

    @property
    def evaluation_completion_len(self) -> Length:
        return self.eval_completion_len or self.completion_len

    def with_(self, **changes: Any) -> Recipe:
        """A copy with some fields changed (validated again); another reward model brings its own template tokens
        where this recipe charged its reward model's and ``changes`` name none."""
        if "reward" in changes and "reward_overhead_tokens" not in changes and \
                self.reward_overhead_tokens == reward_template_tokens(self.reward):
            changes["reward_overhead_tokens"] = None
        return replace(self, **changes)

    def with_local_paths_absolute(self) -> Recipe:
        """This recipe with its policy and reward model named by absolute path where they are local files or
        folders (:func:`flopplan.arch.local_model_path`), so that it reads the same models from any folder."""
        policy = local_model_path(self.policy) or self.policy
        model = self.reward.model and (local_model_path(self.reward.model) or self.reward.model)
        return replace(self, policy=policy, reward=RewardSystem(self.reward.kind, model))

    def describe(self) -> str:
        tuning = "full" if self.lora_rank is None else f"LoRA r={self.lora_rank}"
        return (f"{self.policy}, {tuning}, {self.prompts_per_step} prompts x G={self.group_size}, "
                f"prompt {self.prompt_len.describe()}, completion {self.completion_len.describe()}, "
                f"mu={self.iterations}, beta={self.beta:g}, {self.engine}, reward {self.reward}")

    # -- files --------------------------------------------------------------------------------------------------
    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("lora_rank", "lora_targets"):
                continue
            if isinstance(value, Length):
                value = value.to_data()
            elif isinstance(value, RewardSystem):
                value = str(value)
            if value is None or (f.name in ("experts", "window") and value == f.default):
                continue  # experts, window: written when chosen, so files from before the options read and write back
            data[f.name] = value
        data["lora"] = "full" if self.lora_rank is None else {"rank": self.lora_rank,
                                                            "targets": list(self.lora_targets)}
        return data

    @staticmethod
    def from_data(data: Any, where: str = "recipe", base_dir: Path | None = None) -> Recipe:
        if not isinstance(data, dict):
            raise UserError(f"{where}: a recipe must be a table/object")
        data = dict(data)
        if "logits" in data:  # the name the log-prob head had before the fused heads (completion | all)
            if "logprob_head" in data:
                raise UserError(f"{where}: logits is the old name of logprob_head: give one of them")
            data["logprob_head"] = data.pop("logits")
        known = {f.name for f in fields(Recipe)} - {"lora_rank", "lora_targets"} | {"lora"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"{where}: unknown recipe key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key == "lora":
                if value in (None, False, "none", "full"):
                    kwargs["lora_rank"] = None
                elif isinstance(value, dict) and set(value) <= {"rank", "targets"} and "rank" in value:
                    kwargs["lora_rank"] = value["rank"]
                    if "targets" in value:
                        targets = value["targets"]
                        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
                            raise UserError(f"{where}: lora.targets must be a list of projection names")
                        kwargs["lora_targets"] = tuple(targets)
                else:
                    raise UserError(f"{where}: lora must be {{rank, targets}} or 'full', not {value!r}")
            elif key in ("prompt_len", "completion_len", "eval_prompt_len", "eval_completion_len"):
                kwargs[key] = Length.parse(_relative_file(value, base_dir), f"{where}: {key}")
            elif key == "reward":
                if not isinstance(value, str):
                    raise UserError(f"{where}: reward must be a string like 'rule' or 'prm:MODEL'")
                kwargs[key] = RewardSystem.parse(value)
            else:
                kwargs[key] = value
        return Recipe(**kwargs)

    @staticmethod
    def load_data(path: str | Path) -> Any:
        """What a recipe file says, before defaults (TOML, or JSON for a .json name)."""
        path = Path(path)
        text = read_text(path, "recipe")
        try:
            return json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UserError(f"recipe {str(path)!r} is malformed: {exc}") from None
        except RecursionError:  # nested deeper than Python's recursion limit
            raise UserError(f"recipe {str(path)!r} nests too deeply to read") from None

    @staticmethod
    def load(path: str | Path) -> Recipe:
        path = Path(path)
        return Recipe.from_data(Recipe.load_data(path), f"recipe {str(path)!r}", path.parent)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        data = self.to_data()
        text = json.dumps(data, indent=2) + "\n" if path.suffix == ".json" else to_toml(data)
        return atomic_write_text(path, text)


def _relative_file(value: Any, base_dir: Path | None) -> Any:
    if base_dir is not None and isinstance(value, dict) and set(value) == {"file"}:
        file = Path(value["file"])
        return {"file": str(file if file.is_absolute() else base_dir / file)}
    return value


# -- a small TOML writer for recipes (tomllib only reads) --------------------------------------------------------

def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def to_toml(data: dict[str, Any]) -> str:
    lines = ["# flopplan recipe (a GRPO run); see `flopplan plan --help` and the README"]
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data.items() if v is not None]
    return "\n".join(lines) + "\n"


def conventions_that_apply(specs: Sequence[ArchSpec]) -> set[str]:
    """The architecture-bound counting conventions of a recipe that change a count of ``specs`` (its policies and
    reward models): ``experts`` (the experts implementation) for a mixture-of-experts model, ``window`` (the window
    convention) for one with sliding-window layers."""
    applies = {"experts": lambda spec: spec.moe is not None, "window": lambda spec: sliding_layers(spec)[0] > 0}
    return {name for name, test in applies.items() if any(test(spec) for spec in specs)}
