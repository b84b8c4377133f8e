"""The FLOP meter for TRL's GRPOTrainer: every executed phase of every round charged through the core's formulas
into flopplan's ledger, step log and run summary, the budget guard before each round, TRL's logs extended with
the figures (so they reach whatever ``report_to`` names: the FLOP metric trl#3967 asks for).

:class:`MeteredGRPOTrainer` is a thin ``GRPOTrainer`` subclass: callbacks see no batch, so the executed shapes
are read where TRL builds them (``_generate_and_score_completions``: one generation round, padded on each process;
``_prepare_inputs``: one update micro-step) and where the reward model runs (a forward pre-hook).
:class:`FlopBudgetCallback` holds the trainer, as TRL's ``_EpochStopCallback`` does: at the end of the optimizer
step that closes a round it commits the round (each process charges its own shard; the totals are summed over
processes, so every process holds the same ledger and takes the same decision), prices the next round with
:func:`flopplan.cost.worst_case_round` (the dataset's longest prompt, every completion at
``max_completion_length``) and, when that does not fit what is left, stops and asks for the final save.

Measuring (``measure=True``) counts each unit with :class:`flopplan.measure.meter.FlopMeter`: FlopCounterMode's
count, plus the in-place GEMMs it misses (TRL's chunked head accumulates its gradients with ``addmm_`` on the
CPU), so measured equals the closed form when both are right.
"""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from flopplan.cost import worst_case_round
from flopplan.engines.trl import TRLRun, mfu
from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, read_json
from flopplan.guard import Guard
from flopplan.ledger import Ledger, PhaseCharge, charge, ran, unit_of
from flopplan.measure.meter import FlopMeter
from flopplan.passes import BUCKETS, STEP_PHASES, RoundLengths, RoundShape, step_passes
from flopplan.recipe import Recipe
from flopplan.runfile import RunSummary

UNITS = tuple(dict.fromkeys(unit_of(phase) for phase in STEP_PHASES))
"""The units of a round, each charging its phases (:func:`flopplan.ledger.unit_of`)."""
PHASES_OF = {unit: tuple(phase for phase in STEP_PHASES if unit_of(phase) == unit) for unit in UNITS}
LEDGER_FILE = "flopplan_ledger.json"
"""The ledger saved in each TRL checkpoint folder, so that a resumed run continues it."""
LEDGER_VERSION = 1
"""The layout of :data:`LEDGER_FILE` (its ``flopplan_trl_ledger_version`` key)."""


class TRLMeter:
    """The charges of the round in progress on this process, and their reduction into the run's ledger."""

    def __init__(self, recipe: Recipe, run: TRLRun, budget_flops: int | None, folder: Any = None, *,
                 measure: bool = False, peak_flops: float | None = None) -> None:
        self.recipe, self.run, self.folder = recipe, run, folder
        self.spec = recipe.policy_spec
        # which phases a round runs, with which adapters, training and head: each unit is charged as its pass
        self.passes = {p.phase: p for p in step_passes(RoundShape.of(recipe), RoundLengths.of(recipe))}
        self.measure, self.peak_flops = measure, peak_flops
        self.ledger = Ledger(budget_flops)
        self.guard = Guard(self.ledger, noun="round")  # the budget guard and recorder (flopplan.guard)
        self.last_flops: dict[str, Any] = {}  # the FLOP fields of the last committed round's metrics line
        self.round: dict[str, Any] = self._empty_round()
        self.rounds = 0
        self.tokens = 0  # unpadded prompt + completion tokens over all processes (TRL's num_tokens)
        self.trl_tokens: int | None = None
        self.prompt_max = self.reward_prompt_max = 0
        self.reward_extra = 0  # tokens a reward model read beyond prompt + completion (re-tokenisation), seen
        self.notes: list[str] = []
        self.last_round_flops = 0
        self._started = time.perf_counter()
        self._round_seconds = 0.0
        self._scoring_calls = 0

    def _empty_round(self) -> dict[str, Any]:
        return {"charges": {}, "update": [], "measured": dict.fromkeys(UNITS, 0),
                "inplace": dict.fromkeys(UNITS, 0), "seconds": dict.fromkeys(UNITS, 0.0), "reward": []}

    # -- what a round ran (this process) ------------------------------------------------------------------------
    def record_round(self, out: dict[str, Any]) -> None:
        """A generation round's shapes: the rollouts, and which scoring passes ran (their outputs are there)."""
        passes = self.passes
        prompts = out["prompt_mask"].sum(1).tolist()
        completions = out["completion_mask"].sum(1).tolist()
        rows, p, k = len(prompts), out["prompt_ids"].shape[1], out["completion_ids"].shape[1]
        lengths = list(zip(prompts, completions, strict=True))
        self.round["lengths"] = lengths
        self.round["width"] = (p, k)
        charges = self.round["charges"]
        charges["rollout"] = charge(*(ran(passes[phase], lengths, (p, k)) for phase in PHASES_OF["rollout"]))
        bs = self.run.bs  # TRL scores the padded round in micro-batches of bs rows
        for unit in self.scoring_order:
            charges[unit] = charge(*(ran(passes[unit], lengths[start:start + bs], (p, k))
                                     for start in range(0, rows, bs)))
        self.round["tokens"] = sum(prompts) + sum(completions)
        self.prompt_max = max(self.prompt_max, max(prompts))

    def record_micro_step(self, inputs: dict[str, Any]) -> None:
        """One update micro-step: ``bs`` rows at the round's padded widths."""
        mask = inputs["completion_mask"]
        k = mask.shape[1]
        p = inputs["prompt_ids"].shape[1]
        lengths = list(zip(inputs["prompt_mask"].sum(1).tolist(), mask.sum(1).tolist(), strict=True))
        self.round["update"].append(ran(self.passes["update"], lengths, (p, k)))

    def record_reward(self, rows: int, width: int, own: list[int], prompt_tokens: list[int] | None = None) -> None:
        self.round["reward"].append((rows, width, own))
        if prompt_tokens:
            self.reward_prompt_max = max(self.reward_prompt_max, max(prompt_tokens))

    @contextlib.contextmanager
    def measuring(self, unit: str) -> Any:
        """Time the block into ``unit`` (synchronising a GPU) and, when measuring, count it with FlopMeter."""
        sync = torch.cuda.is_available() and torch.cuda.is_initialized()
        if sync:
            torch.cuda.synchronize()
        start = time.perf_counter()
        meter = FlopMeter() if self.measure else contextlib.nullcontext()
        with meter:
            yield
        if sync:
            torch.cuda.synchronize()
        self.round["seconds"][unit] += time.perf_counter() - start
        if isinstance(meter, FlopMeter):
            self.round["measured"][unit] += meter.total
            self.round["inplace"][unit] += meter.inplace

    def bound_prompts(self, trainer: Any) -> None:
        """The longest prompt of the training data, tokenized as TRL tokenizes it (``_tokenize_prompts``), and
        as each reward model's tokenizer reads it: the guard's bound before any round has run."""
        prompts = list(trainer.train_dataset["prompt"])
        for start in range(0, len(prompts), 512):
            ids, _, _ = trainer._tokenize_prompts(prompts[start:start + 512])
            self.prompt_max = max([self.prompt_max, *(len(row) for row in ids)])
        if isinstance(prompts[0], str):
            for module, tokenizer in zip(trainer.reward_funcs, trainer.reward_processing_classes, strict=True):
                if isinstance(module, torch.nn.Module) and tokenizer is not None:
                    for start in range(0, len(prompts), 512):
                        ids = tokenizer(text=prompts[start:start + 512], add_special_tokens=False)["input_ids"]
                        self.reward_prompt_max = max([self.reward_prompt_max, *(len(row) for row in ids)])

    @property
    def scoring_order(self) -> list[str]:
        """The no-grad scoring passes of a round, in the order they run (old log-probs, then the reference)."""
        return [phase for phase in ("old_logprobs", "reference") if phase in self.passes]

    def scoring_unit(self) -> str:
        """The unit of a no-grad scoring call: each scoring pass once, in :attr:`scoring_order`."""
        order = self.scoring_order
        unit = order[min(self._scoring_calls, len(order) - 1)] if order else "old_logprobs"
        self._scoring_calls += 1
        return unit

    # -- the round's commit ---------------------------------------------------------------------------------------
    def local_charges(self) -> dict[str, PhaseCharge]:
        charges = dict(self.round["charges"])
        if self.round["update"]:
            charges["update"] = charge(*self.round["update"])
        if self.round["reward"]:
            own = [t for _, _, lengths in self.round["reward"] for t in lengths]
            charges["reward"] = charge(*(ran(self.passes["reward"], [(t, 0) for t in lengths], (width, 0))
                                         for _, width, lengths in self.round["reward"]))
            lengths = self.round.get("lengths") or []
            excess = [t - (p + k) for t, (p, k) in zip(own, lengths, strict=False)]
            self.reward_extra = max([self.reward_extra, *excess])
        return charges

    def commit(self, reduce: Any) -> list[PhaseCharge]:
        """Sum this round's charges over processes (``reduce``: a tensor -> its sum over ranks) into the ledger."""
        local = self.local_charges()
        values = []
        for unit in UNITS:
            charge = local.get(unit)
            for phase in PHASES_OF[unit]:
                values += [charge.executed.get(phase, 0) if charge else 0, charge.useful.get(phase, 0) if charge else 0]
            values += [self.round["measured"][unit], self.round["inplace"][unit]]
        values += [self.round.get("tokens", 0)]
        total = reduce(torch.tensor(values, dtype=torch.int64)).tolist()
        committed, i = [], 0
        for unit in UNITS:
            executed, useful = {}, {}
            for phase in PHASES_OF[unit]:
                executed[phase], useful[phase] = int(total[i]), int(total[i + 1])
                i += 2
            measured, inplace = int(total[i]), int(total[i + 1])
            i += 2
            if sum(executed.values()) == 0:
                continue
            local_shapes = local[unit].shapes if unit in local else {}
            charge = PhaseCharge(unit, executed, useful, measured + inplace if self.measure else None,
                                 seconds=self.round["seconds"][unit],  # this process's time in the unit
                                 shapes={**local_shapes, **({"flop_counter_mode": measured, "inplace_gemms": inplace}
                                                            if self.measure else {})})
            committed.append(charge)
        self.tokens += int(total[i])
        now = time.perf_counter()
        self._round_seconds, self._started = now - self._started, now
        self.rounds += 1
        self.last_flops = self.guard.commit(self.rounds, committed)
        self.last_round_flops = sum(c.executed_total for c in committed)
        self.round = self._empty_round()
        self._scoring_calls = 0
        return committed

    # -- the guard ------------------------------------------------------------------------------------------------
    def next_round_bound(self) -> int:
        """The guard's bound of the next round: the longest prompt seen in the data for every row, every
        completion at the maximum length, the reward model at its longest prompt plus what it read beyond."""
        r = self.recipe
        rows = r.rollouts_per_step
        prompt = max(self.prompt_max, 1)
        reward_prompts = [max(self.reward_prompt_max, prompt)] * rows if r.reward_spec is not None else None
        return worst_case_round(r, [prompt] * rows, r.completion_len.max, reward_prompt_tokens=reward_prompts,
                                reward_extra=self.reward_extra if r.reward_spec is not None else None)

    def fits_next_round(self) -> bool:
        return not self.guard.decide(self.next_round_bound()).stop

    # -- logs and files -------------------------------------------------------------------------------------------
    def log_figures(self) -> dict[str, float]:
        """What joins TRL's logs (and so wandb or TensorBoard): FLOPs by bucket so far and the last round's, the
        budget spent and left, and the MFU of the last round when the device's peak is known."""
        totals = self.ledger.totals()
        figures = {f"flops/{b}": float(totals["flops"][b]) for b in (*BUCKETS, "total")}
        figures["flops/last_round"] = float(self.last_round_flops)
        if self.ledger.budget_flops:
            figures["flops/budget_spent"] = self.ledger.spent_in_total / self.ledger.budget_flops
            figures["flops/budget_left"] = float(self.ledger.remaining)
        utilisation = mfu(self.last_round_flops, self._round_seconds,
                          self.peak_flops * self.run.world if self.peak_flops else None)
        if utilisation is not None:
            figures["mfu"] = utilisation
        return figures

    def check_tokens(self, logged: Any) -> None:
        """TRL's ``num_tokens`` (unpadded prompt + completion tokens so far, over all processes) must equal what
        the meter saw; a difference means a round was not charged."""
        self.trl_tokens = int(logged)
        if self.trl_tokens != self.tokens:
            self.notes.append(f"TRL logged {self.trl_tokens:,} tokens, the meter saw {self.tokens:,}")

    def save(self, folder: str | Path) -> None:
        """The meter's state into a TRL checkpoint folder, versioned and written atomically."""
        state = {"flopplan_trl_ledger_version": LEDGER_VERSION, "ledger": self.ledger.to_state(),
                 "rounds": self.rounds, "tokens": self.tokens, "prompt_max": self.prompt_max,
                 "reward_prompt_max": self.reward_prompt_max, "reward_extra": self.reward_extra}
        Path(folder).mkdir(parents=True, exist_ok=True)
        atomic_write_json(Path(folder) / LEDGER_FILE, state)

    def load(self, folder: str | Path) -> None:
        path = Path(folder) / LEDGER_FILE
        if not path.exists():
            raise UserError(f"{str(folder)!r} holds no flopplan ledger: it is not a checkpoint of a metered run")
        state = read_json(path, "flopplan ledger")
        version = state.get("flopplan_trl_ledger_version") if isinstance(state, dict) else None
        if version != LEDGER_VERSION:
            raise UserError(f"{str(path)!r} is not a flopplan TRL ledger of version {LEDGER_VERSION} "
                            f"(flopplan_trl_ledger_version {version!r})")
        budget = self.ledger.budget_flops
        self.ledger = self.guard.ledger = Ledger.from_state(state["ledger"])
        self.ledger.budget_flops = budget
        self.rounds, self.tokens = state["rounds"], state["tokens"]
        self.prompt_max, self.reward_prompt_max = state["prompt_max"], state["reward_prompt_max"]
        self.reward_extra = state["reward_extra"]

    def summary(self, **fields: Any) -> RunSummary:
        checks = {"num_tokens": {"trl": self.trl_tokens, "flopplan": self.tokens,
                                 "equal": self.trl_tokens == self.tokens}} if self.trl_tokens is not None else {}
        return self.guard.summary(model=self.spec.name, reward=str(self.recipe.reward), engine="trl",
                                  engine_checks=checks, **fields)


class MeteredGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that shows its meter the shapes it runs (and adds the meter's figures to its logs)."""

    def __init__(self, *args: Any, flopplan_meter: TRLMeter, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flopplan_meter = meter = flopplan_meter
        self.flopplan_callback = FlopBudgetCallback(self, meter)  # the meter's callback, for the run's observers
        self.add_callback(self.flopplan_callback)
        for module in self.reward_funcs:
            if isinstance(module, torch.nn.Module):
                module.register_forward_pre_hook(self._reward_inputs, with_kwargs=True)
                module.forward = self._measured(module.forward, "reward")
        self._generate_single_turn = self._measured(self._generate_single_turn, "rollout")  # type: ignore[has-type]
        self._get_per_token_logps_and_entropies = self._scoring(self._get_per_token_logps_and_entropies)  # type: ignore[has-type]
        self.accelerator.backward = self._measured(self.accelerator.backward, "update")

    def _measured(self, fn: Any, unit: str) -> Any:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self.flopplan_meter.measuring(unit):
                return fn(*args, **kwargs)
        return run

    def _scoring(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            unit = "update" if torch.is_grad_enabled() else self.flopplan_meter.scoring_unit()
            with self.flopplan_meter.measuring(unit):
                return fn(*args, **kwargs)
        return run

    def _reward_inputs(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids: Any = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        own = mask.sum(1).tolist() if mask is not None else [ids.shape[1]] * ids.shape[0]
        self.flopplan_meter.record_reward(ids.shape[0], ids.shape[1], own)

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        out = super()._generate_and_score_completions(inputs)
        self.flopplan_meter.record_round(out)
        return out

    def _prepare_inputs(self, generation_batch: Any) -> Any:
        inputs = super()._prepare_inputs(generation_batch)
        if self.model is not None and self.model.training:
            self.flopplan_meter.record_micro_step(inputs)
        return inputs

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # TRL's num_tokens metric is state.num_input_tokens_seen (gathered over processes at each generation)
        self.flopplan_meter.check_tokens(self.state.num_input_tokens_seen)
        logs.update(self.flopplan_meter.log_figures())
        super().log(logs, start_time)


class FlopBudgetCallback(TrainerCallback):
    """Commits each round when its last optimizer step ends and stops before a round that could overrun the
    budget (``should_training_stop`` is never set back; ``should_save`` asks for the final checkpoint)."""

    def __init__(self, trainer: MeteredGRPOTrainer, meter: TRLMeter) -> None:
        self.trainer, self.meter = trainer, meter
        self.on_commit: list[Any] = []

    def _reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        accelerator = self.trainer.accelerator
        return accelerator.reduce(tensor.to(accelerator.device), reduction="sum").cpu() \
            if accelerator.num_processes > 1 else tensor

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        per_round = self.meter.run.optimizer_steps_per_round
        if args.save_strategy == "steps" and args.save_steps % per_round:
            raise UserError(f"save_steps ({args.save_steps}) must be a multiple of the {per_round} optimizer steps a "
                            "round takes: a checkpoint inside a round cannot be resumed without losing its rollouts")
        self.meter.bound_prompts(self.trainer)
        if state.global_step:  # resumed: continue the ledger saved with the checkpoint
            self.meter.load(Path(args.output_dir) / f"checkpoint-{state.global_step}")
            folder = self.meter.folder
            if folder is not None:  # rounds committed after that checkpoint were spent and lost with the process
                lost = folder.lost_after(self.meter.rounds)
                self.meter.ledger.lost += lost
                if lost:
                    self.meter.notes.append(f"{lost:,} FLOPs done after the last checkpoint were lost and are charged")
                self.trainer.accelerator.wait_for_everyone()
                if state.is_world_process_zero:
                    folder.trim(self.meter.rounds)
        if not self.meter.fits_next_round() and self.meter.rounds == 0:
            raise UserError(f"the budget ({self.meter.ledger.budget_flops:,} FLOPs) buys no round: "
                            f"{self.meter.guard.decision.message}")
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.meter.run.optimizer_steps_per_round:
            return control  # the round goes on
        committed = self.meter.commit(self._reduce)
        for observer in self.on_commit:
            observer(committed, state)
        stop = torch.tensor([0 if self.meter.fits_next_round() else 1])
        if int(self._reduce(stop)[0]):  # the same decision on every process
            control.should_training_stop = True
            control.should_save = True
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if not self.meter.guard.decision.stop:
            self.meter.guard.stop("steps", f"reached {state.global_step} optimizer steps ({self.meter.rounds} rounds)")
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.is_world_process_zero:
            self.meter.save(Path(args.output_dir) / f"checkpoint-{state.global_step}")
        return control
