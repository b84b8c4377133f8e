"""The validating GRPO run: phases in order, every one charged to the ledger, the budget never exceeded.

One step: sample ``prompts_per_step`` prompts, generate ``group_size`` completions each (HF ``generate``),
score them (rule or reward model), compute group-normalised advantages, optionally recompute old-policy and
reference logprobs, then ``iterations`` passes of clipped-surrogate updates (AdamW, gradient clipping). Every
``eval_every`` steps (and once before the first), greedy accuracy on a held-out set.

Budget: before each step the worst case of that step (maximum completion lengths, the step's actual prompts,
its evaluation if due) is priced with the core formulas; the run stops cleanly when it does not fit what is left.
Charges of a step are committed to the ledger only when the step completes, so a checkpoint always holds a
consistent ledger. Ctrl-C stops after the current phase: before the step's first update the step is abandoned
(its FLOPs are counted as abandoned, against the budget; resume redoes it with the same randomness), from the
first update on the step is completed; either way a checkpoint is written.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from flopplan import __version__
from flopplan.arch import ArchSpec, load_config, resolve
from flopplan.cost import head_positions
from flopplan.errors import UserError, first_line
from flopplan.fileio import atomic_write_json, atomic_write_text, read_step_log, writable_folder
from flopplan.formulas import Conventions, LoRA, forward_flops, generate_flops, train_flops
from flopplan.measure.models import recommended_threads
from flopplan.train import phases as P
from flopplan.train.codecs import char_codec, local_codec
from flopplan.train.config import WEIGHTLESS_POLICIES, TrainConfig
from flopplan.train.ledger import Ledger, PhaseCharge
from flopplan.train.rewards import RewardModel, rule_rewards
from flopplan.train.tasks import Problem, load_jsonl, parse_task
from flopplan.train.tokenizer import CharTokenizer


class Interrupted(Exception):
    """Ctrl-C arrived: stop after the current phase."""


@dataclass
class StepResult:
    step: int
    metrics: dict[str, float]
    charges: list[PhaseCharge] = field(default_factory=list)


# -- set-up -----------------------------------------------------------------------------------------------------

def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: no CUDA device is available")
    return torch.device(name)


def default_lr(spec: ArchSpec, lora: LoRA | None) -> float:
    if spec.name in WEIGHTLESS_POLICIES:
        return 3e-3
    return 1e-5 if lora is not None else 1e-6


class Trainer:
    def __init__(self, config: TrainConfig, resume: bool = False, progress: bool = True) -> None:
        self.config = config
        self.recipe = config.recipe
        self.out = Path(config.out_dir)
        self.device = pick_device(config.device)
        self.dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        # Full fine-tuning on a GPU keeps float32 master weights and runs under bf16 autocast: AdamW steps of
        # lr ~1e-6 on bf16 weights (8 mantissa bits) round away. LoRA keeps a bf16 base (peft holds the adapters
        # in float32). FLOPs are the same either way.
        self.mixed_precision = self.device.type == "cuda" and self.recipe.lora is None
        self.policy_dtype = torch.float32 if self.mixed_precision else self.dtype
        self.attn = "sdpa" if self.device.type == "cuda" else "eager"
        self.conv = Conventions(self.recipe.attention, "sdpa" if self.attn == "sdpa" else "eager")
        self.progress = progress
        self.stop_requested = False
        self.stop_reason = ""
        self._seed_everything(config.seed)
        self._load_policy()
        if self.device.type == "cpu":
            # small models are dominated by per-op overhead, where extra threads only add synchronisation
            threads = config.threads or recommended_threads(self.spec.params)
            if threads:
                torch.set_num_threads(threads)
        self._load_data()
        self.reward_model = None
        if self.recipe.reward.kind != "rule":
            self.reward_model = RewardModel.load(self.recipe.reward, self.device, self.dtype, self.attn,
                                                 config.seed + 1, self.codec, self.policy_vocab,
                                                 config.reward_model_path, config.prm_aggregate,
                                                 config.prm_max_steps, batch=self.recipe.group_size)
        self.ledger = Ledger(config.budget_flops)
        self.step = 0
        self.data_position = 0
        self.last_eval: dict[str, float] = {}
        self._pending: list[PhaseCharge] = []
        if resume:
            self._restore()
        else:
            self._fresh_run_dir()

    # -- models and data --------------------------------------------------------------------------------------
    def _seed_everything(self, seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    def _load_policy(self) -> None:
        from flopplan.measure.models import add_lora, build_model, enable_checkpointing

        cfg, r = self.config, self.recipe
        if cfg.model_path:
            from transformers import AutoModelForCausalLM

            path = Path(cfg.model_path)
            if not (path / "config.json").exists():
                raise UserError(f"--model-path {str(path)!r} has no config.json")
            self.spec = load_config(path)
            self.codec, self.policy_vocab = local_codec(path, f"--model-path {str(path)!r}")
            try:
                loaded: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                                   dtype=self.policy_dtype,
                                                                   attn_implementation=self.attn)
            except (OSError, ValueError) as exc:  # no weights, unreadable files
                raise UserError(f"cannot load the model in {str(path)!r}: {first_line(exc)}") from None
            self.policy: Any = loaded.to(self.device)
            self.random_policy = False
        else:
            self.spec = resolve(r.policy)
            tokenizer_ = CharTokenizer()
            if tokenizer_.vocab_size > self.spec.vocab_size:
                raise UserError(f"{self.spec.name}'s vocabulary is smaller than the built-in tokenizer")
            self.codec = char_codec(tokenizer_)
            self.policy_vocab = tokenizer_.vocab_size
            self.policy = build_model(self.spec, device=self.device, dtype=self.policy_dtype,
                                      attn_implementation=self.attn, seed=cfg.seed)
            self.random_policy = True
        self.policy.config.pad_token_id = self.codec.pad_id
        self.policy.generation_config.pad_token_id = self.codec.pad_id
        self.policy.generation_config.eos_token_id = self.codec.eos_id
        self.lora = r.lora
        self.reference_model: nn.Module | None = None
        if r.uses_reference and self.lora is None:
            self.reference_model = copy.deepcopy(self.policy).eval()
            for p in self.reference_model.parameters():
                p.requires_grad_(False)
        if r.grad_ckpt:
            enable_checkpointing(self.policy, reentrant=False)
        if self.lora is not None:
            self.policy = add_lora(self.policy, self.lora, alpha=cfg.lora_alpha)
        self.training = r.training
        trainable = [p for p in self.policy.parameters() if p.requires_grad]
        self.lr = cfg.lr if cfg.lr is not None else default_lr(self.spec, self.lora)
        self.optimizer = torch.optim.AdamW(trainable, lr=self.lr, weight_decay=cfg.weight_decay)
        self.loss_cfg = P.LossConfig(cfg.clip_low, cfg.clip_high, r.beta, cfg.loss_aggregation, cfg.temperature)

    def _load_data(self) -> None:
        cfg, r = self.config, self.recipe
        if cfg.dataset:
            self.train_set = load_jsonl(cfg.dataset)
            self.eval_set = load_jsonl(cfg.eval_dataset) if cfg.eval_dataset else []
            self.chance = None
        else:
            task = parse_task(cfg.task)
            self.train_set, self.eval_set = task.split(cfg.train_size, r.eval_prompts, seed=cfg.seed)
            self.chance = task.chance
        if r.eval_prompts:
            if len(self.eval_set) < r.eval_prompts:
                hint = " (give --eval-dataset FILE, or --no-eval)" if cfg.dataset and not cfg.eval_dataset else ""
                raise UserError(f"eval_prompts {r.eval_prompts} but the eval set has {len(self.eval_set)} "
                                f"problems{hint}")
            self.eval_set = self.eval_set[:r.eval_prompts]
        self._orders: dict[int, list[int]] = {}
        self._check_tokens(self.train_set + self.eval_set)

    def _check_tokens(self, problems: list[Problem]) -> None:
        for problem in problems:
            try:
                ids = self.codec.encode(problem.prompt)
            except ValueError as exc:
                raise UserError(f"prompt {problem.prompt[:40]!r} cannot be tokenized: {exc}") from None
            if not ids:
                raise UserError(f"prompt {problem.prompt[:40]!r} encodes to no tokens: generation needs at least one")

    def _order(self, epoch: int) -> list[int]:
        """The training-set order of an epoch: a fixed permutation of (seed, epoch), independent of any state."""
        if epoch not in self._orders:
            order = list(range(len(self.train_set)))
            random.Random(self.config.seed * 1_000_003 + epoch).shuffle(order)
            self._orders = {epoch: order}
        return self._orders[epoch]

    def prompts_at(self, position: int) -> list[Problem]:
        """The prompts of the step that starts at ``position`` in the (epoch-shuffled) training stream."""
        n = len(self.train_set)
        return [self.train_set[self._order((position + i) // n)[(position + i) % n]]
                for i in range(self.recipe.prompts_per_step)]

    # -- run directory, checkpoints ---------------------------------------------------------------------------
    RUN_FILES = frozenset({"config.json", "metrics.jsonl", "ledger.jsonl", "summary.json", "report.png",
                           "checkpoints"})

    def _fresh_run_dir(self) -> None:
        """A new run folder; an existing one is reused only when it holds nothing but an earlier run's files
        that never reached a checkpoint (a run stopped during its first step)."""
        where = str(self.out)
        if self.out.is_dir():
            if (self.out / "checkpoints").is_dir() and any((self.out / "checkpoints").iterdir()):
                raise UserError(f"{where!r} already holds a run: use --resume or another --out")
            others = sorted(p.name for p in self.out.iterdir()
                            if p.name not in self.RUN_FILES and not p.name.startswith("."))
            if (self.out / "config.json").exists() and not self._is_run_config(self.out / "config.json"):
                others.append("config.json")  # e.g. a model folder
            if others:
                raise UserError(f"--out {where!r} holds files that are not a flopplan run "
                                f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): "
                                "use an empty or new folder")
        writable_folder(self.out, "run folder")
        for name in ("metrics.jsonl", "ledger.jsonl"):
            atomic_write_text(self.out / name, "")
        atomic_write_json(self.out / "config.json", {"flopplan_version": __version__, **self.config.to_data()})

    @staticmethod
    def _is_run_config(path: Path) -> bool:
        try:
            return "flopplan_version" in json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError):
            return False

    def _trainable_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone().cpu() for k, v in self.policy.named_parameters() if v.requires_grad}

    def _load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        params = dict(self.policy.named_parameters())
        with torch.no_grad():
            for key, value in state.items():
                params[key].copy_(value.to(params[key].device))

    def _rng_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(),
                                 "torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def _set_rng_state(self, state: dict[str, Any]) -> None:
        random.setstate(state["python"])
        np.random.set_state(state["numpy"])
        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

    def _state(self) -> dict[str, Any]:
        """Everything a resumed run needs (written in checkpoints)."""
        return {"step": self.step, "trainable": self._trainable_state(), "optimizer": self.optimizer.state_dict(),
                "rng": self._rng_state(), "data_position": self.data_position, "last_eval": dict(self.last_eval)}

    def save_checkpoint(self) -> Path:
        folder = self.out / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"step-{self.step:06d}.pt"
        state = {**self._state(), "ledger": self.ledger.to_state(), "config": self.config.to_data(),
                 "flopplan_version": __version__}
        tmp = path.with_suffix(".pt.tmp")
        torch.save(state, tmp)
        os.replace(tmp, path)
        atomic_write_text(folder / "latest", path.name + "\n")
        self._write_summary()
        return path

    def _restore(self) -> None:
        folder = self.out / "checkpoints"
        latest = folder / "latest"
        name = latest.read_text().strip() if latest.exists() else ""
        if not name or not (folder / name).is_file():
            raise UserError(f"nothing to resume in {str(self.out)!r}: no checkpoint")
        try:
            state = torch.load(folder / name, weights_only=False, map_location="cpu")
            self.step = int(state["step"])
            self._load_trainable_state(state["trainable"])
            self.optimizer.load_state_dict(state["optimizer"])
            self._set_rng_state(state["rng"])
            self.data_position = int(state["data_position"])
            self.last_eval = dict(state["last_eval"])
            self.ledger = Ledger.from_state(state["ledger"])
        except Exception as exc:  # any corruption of the file: one clear line, not a traceback
            raise UserError(f"checkpoint {str(folder / name)!r} cannot be read ({type(exc).__name__}: {exc})") \
                from None
        self.ledger.budget_flops = self.config.budget_flops
        if self.config.budget_flops is not None and self.ledger.spent_with_abandoned > self.config.budget_flops:
            raise UserError(f"the run has already spent {self.ledger.spent_with_abandoned:,} FLOPs, more than the "
                            f"budget of {self.config.budget_flops:,}")
        # drop log lines of steps the checkpoint does not contain (done after it, before a crash), and a line a
        # kill may have cut short
        for log in ("metrics.jsonl", "ledger.jsonl"):
            file = self.out / log
            kept = [line for line in read_step_log(file) if line["step"] <= self.step]
            atomic_write_text(file, "".join(json.dumps(line) + "\n" for line in kept))

    # -- worst case and the budget ----------------------------------------------------------------------------
    def worst_case(self, problems: list[Problem], with_eval: bool) -> int:
        """FLOPs of this step if every completion ran to the maximum length (an upper bound of the step)."""
        r, spec, conv = self.recipe, self.spec, self.conv
        k = self.config.max_new_tokens
        rows = [len(self.codec.encode(p.prompt)) for p in problems for _ in range(r.group_size)]
        rollouts, n = len(rows), r.generation_batch_size
        total = 0
        for start in range(0, rollouts, n):  # one generate call per generation batch, at its longest prompt
            total += int(generate_flops(spec, n, max(rows[start:start + n]), k, r.rollout_lora, conv).total)
        p_max = max(rows)
        positions = head_positions(p_max, k, r.logits == "completion")
        m = r.micro_batch_size if r.update_padding == "batch" else 1
        batches = rollouts // m
        if r.computes_old_logprobs:
            total += batches * int(forward_flops(spec, m, p_max + k, positions, self.lora, conv).total)
        if r.uses_reference:
            total += batches * int(forward_flops(spec, m, p_max + k, positions, None, conv).total)
        total += r.iterations * batches * int(train_flops(spec, m, p_max + k, positions, self.training,
                                                          conv).total)
        if self.reward_model is not None:
            rm_codec = self.reward_model.codec or self.codec  # a local reward model has its own tokenizer
            rm_prompt = max(len(rm_codec.encode(p.prompt)) for p in problems)
            t = self.reward_model.worst_case_tokens(rm_prompt, k)
            b = self.reward_model.batch
            calls = -(-rollouts // b)
            total += calls * int(forward_flops(self.reward_model.spec, b, t, t, None, conv).total)
        if with_eval:
            total += self.eval_worst_case()
        return total

    def eval_worst_case(self) -> int:
        prompts = [len(self.codec.encode(p.prompt)) for p in self.eval_set]
        b = self.eval_batch
        total = 0
        for start in range(0, len(prompts), b):
            chunk = prompts[start:start + b]
            total += int(generate_flops(self.spec, len(chunk), max(chunk), self.eval_max_new_tokens,
                                        self.recipe.rollout_lora, self.conv).total)
        return total

    def _eval_due(self, step: int) -> bool:
        every = self.recipe.eval_every
        return every is not None and step % every == 0

    # -- phases -----------------------------------------------------------------------------------------------
    @contextmanager
    def _phase(self, last_interruptible: bool = True) -> Iterator[None]:
        """A phase; on Ctrl-C the step is abandoned after it, until the first update (``last_interruptible``
        False from then on: the policy has moved, so the step is completed instead)."""
        with self._precision():
            yield
        if self.stop_requested and last_interruptible:
            raise Interrupted

    def _precision(self) -> Any:
        """bf16 autocast around the policy's work when it keeps float32 master weights on a GPU."""
        if self.mixed_precision:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @property
    def eval_batch(self) -> int:
        return self.config.eval_batch or max(1, len(self.eval_set))  # default: one call, as the plan assumes

    @property
    def eval_max_new_tokens(self) -> int:
        return self.recipe.evaluation_completion_len.max

    def evaluate(self) -> tuple[dict[str, float], list[PhaseCharge]]:
        prompts = [self.codec.encode(p.prompt) for p in self.eval_set]
        with self._precision():
            rollouts, charges = P.generate(self.policy, self.codec, prompts, self.eval_batch,
                                           self.eval_max_new_tokens, 1.0, True, self.spec, self.recipe.rollout_lora,
                                           self.conv, self.config.measure_flops, prefix="eval")
        ended = [bool(c) and c[-1] == self.codec.eos_id for c in rollouts.completion_ids]
        _, correct = rule_rewards(rollouts.completions, [p.answer for p in self.eval_set], ended)
        return {"eval_accuracy": float(np.mean(correct)) if correct else 0.0}, charges

    def run_step(self, problems: list[Problem]) -> StepResult:
        r, cfg = self.recipe, self.config
        result = StepResult(self.step + 1, {})
        charges = result.charges
        self._pending = charges  # what an interruption abandons
        prompt_ids = [self.codec.encode(p.prompt) for p in problems for _ in range(r.group_size)]
        answers = [p.answer for p in problems for _ in range(r.group_size)]
        with self._phase():
            rollouts, c = P.generate(self.policy, self.codec, prompt_ids, r.generation_batch_size,
                                     cfg.max_new_tokens, cfg.temperature, False, self.spec, r.rollout_lora,
                                     self.conv, cfg.measure_flops)
            charges += c
        ended = [bool(c) and c[-1] == self.codec.eos_id for c in rollouts.completion_ids]
        with self._phase():
            rewards, correct = rule_rewards(rollouts.completions, answers, ended, cfg.format_reward)
            if self.reward_model is not None:
                texts = [p.prompt for p in problems for _ in range(r.group_size)]
                rewards, charge = self.reward_model.score(self.codec, texts, rollouts.completions, self.conv,
                                                          cfg.measure_flops, cfg.max_new_tokens)
                charges.append(charge)
        reward_t = torch.tensor(rewards, dtype=torch.float32, device=self.device)
        advantages = P.group_advantages(reward_t, r.group_size, cfg.scale_rewards)
        batches = P.scoring_batches(rollouts, self.codec, r.micro_batch_size, self.device, r.update_padding)
        completion_only = r.logits == "completion"
        old = ref = None
        if r.computes_old_logprobs:
            with self._phase():
                old, charge = P.score("old_logprobs", self.policy, batches, rollouts, cfg.temperature,
                                      completion_only, self.spec, self.lora, self.conv, cfg.measure_flops)
                charges.append(charge)
        if r.uses_reference:
            with self._phase():
                model = self.reference_model if self.reference_model is not None else self.policy
                ref, charge = P.score("reference", model, batches, rollouts, cfg.temperature, completion_only,
                                      self.spec, None, self.conv, cfg.measure_flops,
                                      adapter_disabled=self.reference_model is None)
                charges.append(charge)
        stats: dict[str, float] = {}
        for _ in range(r.iterations):  # from the first update on, an interrupted step is completed
            with self._phase(last_interruptible=False):
                pass_stats, charge = P.update(self.policy, self.optimizer, batches, rollouts, advantages, old, ref,
                                              self.loss_cfg, completion_only, r.optimizer_batch_size,
                                              cfg.max_grad_norm, self.spec, self.training, self.conv,
                                              cfg.measure_flops)
                charges.append(charge)
            for key, value in pass_stats.items():  # means over the mu passes
                stats[key] = stats.get(key, 0.0) + value / r.iterations
        lengths = [len(c) for c in rollouts.completion_ids]
        result.metrics = {
            "reward": float(np.mean(rewards)), "reward_std": float(np.std(rewards)),
            "accuracy": float(np.mean(correct)), "completion_tokens": float(np.mean(lengths)),
            "ended_with_eos": float(np.mean(ended)), **stats,
        }
        if self._eval_due(result.step):
            with self._phase(last_interruptible=False):
                metrics, c = self.evaluate()
                charges += c
                result.metrics.update(metrics)
        return result

    # -- the loop ---------------------------------------------------------------------------------------------
    def _commit(self, step: int, charges: list[PhaseCharge], metrics: dict[str, float]) -> None:
        for charge in charges:
            self.ledger.charge(charge)
        if step > 0:
            self.ledger.steps_completed = step
        spent = self.ledger.summary()
        record = {"step": step, "charges": [c.to_data() for c in charges]}
        with open(self.out / "ledger.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")
        line = {"step": step, **metrics, "flops": spent["flops"], "useful_flops": spent["useful_flops"]["total"],
                "time": time.time()}
        with open(self.out / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps(line) + "\n")

    def _should_stop(self, problems: list[Problem]) -> bool:
        if self.config.max_steps is not None and self.step >= self.config.max_steps:
            self.stop_reason = f"reached {self.config.max_steps} steps"
            return True
        if self.stop_requested:
            self.stop_reason = "interrupted"
            return True
        if self.config.budget_flops is not None:
            worst = self.worst_case(problems, self._eval_due(self.step + 1))
            if not self.ledger.fits(worst):
                self.stop_reason = (f"budget: step {self.step + 1} could cost up to {worst:,} FLOPs, "
                                    f"{int(self.ledger.remaining):,} left")
                return True
        return False

    def run(self) -> dict[str, Any]:
        previous = signal.getsignal(signal.SIGINT)

        def on_interrupt(signum: int, frame: Any) -> None:
            if self.stop_requested:  # a second Ctrl-C: stop now
                signal.signal(signal.SIGINT, previous)
                raise KeyboardInterrupt
            self.stop_requested = True

        signal.signal(signal.SIGINT, on_interrupt)
        try:
            return self._run()
        finally:
            signal.signal(signal.SIGINT, previous)

    def _run(self) -> dict[str, Any]:
        r, cfg = self.recipe, self.config
        if self.step == 0 and r.eval_every is not None and r.eval_at_start and not self._baseline_done():
            worst = self.eval_worst_case()
            if self.ledger.fits(worst):
                metrics, charges = self.evaluate()
                self.last_eval = metrics
                self._commit(0, charges, metrics)
        with self._progress() as bar:
            while True:
                problems = self.prompts_at(self.data_position)
                if self._should_stop(problems):
                    break
                rng = self._rng_state()
                try:
                    result = self.run_step(problems)
                except Interrupted:
                    partial = self._abandon(rng)
                    self.stop_reason = f"interrupted during step {self.step + 1} ({partial:,} FLOPs abandoned)"
                    break
                self.step = result.step
                self.data_position += r.prompts_per_step
                if "eval_accuracy" in result.metrics:
                    self.last_eval = {"eval_accuracy": result.metrics["eval_accuracy"]}
                self._commit(self.step, result.charges, result.metrics)
                bar(result.metrics)
                if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                    self.save_checkpoint()
        self.save_checkpoint()
        return self._write_summary()

    def _baseline_done(self) -> bool:
        return any(line["step"] == 0 for line in read_step_log(self.out / "metrics.jsonl"))

    def _abandon(self, rng: dict[str, Any]) -> int:
        """Abandon a step interrupted before its first update: the model and optimizer are untouched, so putting
        back the RNG (the data position only moves when a step completes) makes a resumed run redo it exactly.
        The FLOPs its finished phases spent are recorded apart from the buckets and still count against the
        budget."""
        partial = sum(c.executed_total for c in self._pending)
        self._set_rng_state(rng)
        self.ledger.abandoned += partial
        self.ledger.interrupted = {"step": self.step + 1, "abandoned_flops": self.ledger.abandoned}
        return partial

    @contextmanager
    def _progress(self) -> Iterator[Any]:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        from flopplan.report.units import eng

        budget = self.config.budget_flops
        total = budget if budget is not None else float(self.config.max_steps or 1)
        progress = Progress(TextColumn("[bold]GRPO[/] step {task.fields[step]}"), BarColumn(),
                            TextColumn("{task.fields[flops]}"), TextColumn("reward {task.fields[reward]}"),
                            TextColumn("acc {task.fields[acc]}"), TextColumn("eval {task.fields[eval]}"),
                            TimeElapsedColumn(), TimeRemainingColumn(), disable=not self.progress, transient=False)
        task = progress.add_task("grpo", total=total, step=self.step, flops="", reward="-", acc="-", eval="-")

        def update(metrics: dict[str, float]) -> None:
            spent = self.ledger.spent
            flops = f"{eng(spent)} / {eng(budget)}" if budget is not None else eng(spent)
            progress.update(task, completed=spent if budget is not None else self.step, step=self.step,
                            flops=flops, reward=f"{metrics.get('reward', 0):.3f}",
                            acc=f"{metrics.get('accuracy', 0):.3f}",
                            eval=f"{self.last_eval.get('eval_accuracy', float('nan')):.3f}")

        with progress:
            yield update

    # -- summary ----------------------------------------------------------------------------------------------
    def _write_summary(self) -> dict[str, Any]:
        data = self.ledger.summary()
        lines = read_step_log(self.out / "metrics.jsonl")
        train_lines = [x for x in lines if x["step"] > 0]
        evals = [x for x in lines if "eval_accuracy" in x]
        data.update({
            "flopplan_version": __version__,
            "model": self.spec.name,
            "random_init_policy": self.random_policy,
            "reward": str(self.recipe.reward),
            "random_init_reward_model": bool(self.reward_model and self.reward_model.random_init),
            "stop_reason": self.stop_reason,
            "final": train_lines[-1] if train_lines else None,
            "eval_accuracy": [[x["step"], x["eval_accuracy"], x["flops"]["total"]] for x in evals],
            "chance": self.chance,
            "conventions": {"attention": self.conv.attention, "attention_kernel": self.conv.attention_kernel},
            "device": str(self.device),
            "dtype": ("float32 weights, bfloat16 autocast" if self.mixed_precision
                      else str(self.dtype).replace("torch.", "")),
        })
        if self.config.plan is not None:
            plan = self.config.plan
            data["plan"] = {"steps": plan.get("steps"), "flops": plan.get("flops"),
                            "budget_flops": plan.get("budget_flops"), "overridden": plan.get("overridden", [])}
        atomic_write_json(self.out / "summary.json", data)
        return data


