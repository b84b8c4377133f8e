"""The validating GRPO run: phases in order, every one charged to the ledger, the budget never exceeded.

One step (one generation round): sample ``prompts_per_step`` prompts, generate ``group_size`` completions each
(HF ``generate``), score them (rule or reward model), compute group-normalised advantages, optionally recompute
old-policy and reference logprobs, then ``iterations`` passes of clipped-surrogate updates (AdamW, gradient
clipping). Before the first step, every ``eval_every`` steps and after the first step reaching each of
``eval_at_flops`` training FLOPs, greedy accuracy on each evaluation target (:mod:`flopplan.train.evaluation`),
one line per target in ``evaluations.jsonl``.

Budget: before each step the core's guard (:func:`flopplan.cost.worst_case_round`: the step's actual prompts,
every completion at the maximum length, and the evaluation's worst case whenever one may be due after it) prices
the step; the run stops cleanly when it does not fit what is left, or (``--train-flops``, a RACE pilot's rung) when
the step's round could take the training FLOPs, evaluations excluded, past that cap. Charges of a step are
committed to the ledger only when the step completes, so a checkpoint always holds a consistent ledger. Ctrl-C stops
after the current phase: before the step's first update the step is abandoned (its FLOPs are counted as abandoned,
against the budget unless ``--lost-outside-budget``; resume redoes it with the same randomness), from the first
update on the step is completed; either way a checkpoint is written. A second Ctrl-C, more than
:data:`flopplan.train.interrupt.SAME_CTRL_C` after the first, stops at once. A run killed before its first
checkpoint starts again on ``--resume``.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from flopplan.cost import worst_case_round
from flopplan.errors import UserError
from flopplan.grpo import phases as P
from flopplan.grpo.batching import scoring_batches
from flopplan.grpo.loss import finite_advantages
from flopplan.grpo.reward_funcs import RewardFailed, RewardFuncs, format_bonus
from flopplan.grpo.tasks import Problem
from flopplan.guard import Guard, check_cap_buys_one, check_cap_extends, metrics_line, passes_cap
from flopplan.ledger import Ledger, PhaseCharge
from flopplan.measure.device import hardware_name
from flopplan.measure.models import recommended_threads
from flopplan.measure.timer import ProcessClock
from flopplan.passes import RoundLengths, RoundShape, step_passes
from flopplan.runfile import PlanReference, RunSummary
from flopplan.train import checkpoint as ckpt
from flopplan.train.config import TrainConfig
from flopplan.train.evaluation import (
    EvalSchedule,
    TargetScores,
    charges_training_flops,
    evaluate_targets,
    evaluation_metrics,
    worst_case_evaluation,
)
from flopplan.train.interrupt import CtrlC
from flopplan.train.progress import progress_bar
from flopplan.train.runfolder import RunFolder
from flopplan.train.setup import Precision, load_data, load_policy, load_reward_model


class Interrupted(Exception):
    """Ctrl-C arrived: stop after the current phase."""


@dataclass
class StepResult:
    step: int
    metrics: dict[str, float]
    charges: list[PhaseCharge] = field(default_factory=list)
    evaluation: list[TargetScores] = field(default_factory=list)  # the evaluation after the step, if one ran


class Trainer:
    """One run in one folder. ``on_step``: called after every committed step with its result and the ledger
    (the progress bar is one such observer)."""

    def __init__(self, config: TrainConfig, resume: bool = False, progress: bool = True) -> None:
        self.config = config
        self.recipe = config.recipe
        self.folder = RunFolder(config.out_dir)
        if resume and not self.folder.path.is_dir():
            raise UserError(f"nothing to resume in {str(self.folder.path)!r}: no such folder")
        if not resume:
            self.folder.check_new()  # before the lock file goes into a folder that is not a run's
        made = not self.folder.path.exists()
        self.folder.lock()  # one writer per run folder, from before anything is read or written
        try:
            self._set_up(config, resume, progress)
        except BaseException:
            self.folder.unlock()
            if not resume:  # refused before it wrote anything: no lock file left, nor the folder it made for it
                self.folder.clear_lock(made)
            raise

    def _set_up(self, config: TrainConfig, resume: bool, progress: bool) -> None:
        self.precision = Precision.of(config)
        self.device = self.precision.device
        self.conv = self.precision.conventions(self.recipe.attention, self.recipe.experts)
        self.progress = progress
        self.ctrl_c = CtrlC()  # a SIGINT while the run goes on
        ckpt.seed_everything(config.seed)
        self.policy = load_policy(config, self.precision)
        self.spec, self.codec = self.policy.spec, self.policy.codec
        if self.device.type == "cpu":
            # small models are dominated by per-op overhead, where extra threads only add synchronisation
            threads = config.threads or recommended_threads(self.spec.params)
            if threads:
                torch.set_num_threads(threads)
        self.data = load_data(config, self.codec)
        self.data_digests = self.data.digests()  # kept with each checkpoint; a resume compares them
        self.rewards = RewardFuncs.load(config.reward_funcs, config.reward_weights)
        if self.data.train:
            self.rewards.check_columns(self.rewards.columns(self.data.train[0]))
        self.reward_model = load_reward_model(config, self.precision, self.policy)
        # the round as this process runs it (the loaded models, the device's attention kernel): its passes say
        # which phases run, with which adapters, training and head; each unit is charged as its pass
        shape = replace(RoundShape.of(self.recipe), policy=self.spec, conv=self.conv,
                        reward=self.reward_model.spec if self.reward_model is not None else None)
        self.passes = {p.phase: p for p in step_passes(shape, RoundLengths.of(self.recipe))}
        self.ctx = P.PhaseContext(self.spec, self.conv, config.measure_flops)
        self.schedule = EvalSchedule(self.recipe.eval_every, config.eval_at_flops)
        self.eval_worst = worst_case_evaluation(self.recipe, self.codec, self.data.targets) \
            if self.recipe.eval_every is not None else 0
        self.ledger = Ledger(config.budget_flops, charge_lost=config.charge_lost)
        self.guard = Guard(self.ledger)  # the budget guard and recorder (flopplan.guard), over this ledger
        self.step = 0
        self.data_position = 0
        self.last_eval: dict[str, float] = {}
        self._pending: list[PhaseCharge] = []
        self._orders: dict[int, list[int]] = {}
        self.on_step: list[Callable[[StepResult, Ledger], None]] = []
        self.notes: list[str] = []
        self.clock = ProcessClock()  # this process's start, CPU seconds and the run's wall time, for its files
        if resume and self.folder.has_checkpoint_files():
            self._restore()
        else:
            self._start(resume)

    @property
    def random_policy(self) -> bool:
        return self.policy.random_init

    # -- data -------------------------------------------------------------------------------------------------
    def _order(self, epoch: int) -> list[int]:
        """The training-set order of an epoch: a fixed permutation of (seed, epoch), independent of any state."""
        if epoch not in self._orders:
            order = list(range(len(self.data.train)))
            random.Random(self.config.seed * 1_000_003 + epoch).shuffle(order)
            self._orders = {epoch: order}
        return self._orders[epoch]

    def prompts_at(self, position: int) -> list[Problem]:
        """The prompts of the step that starts at ``position`` in the (epoch-shuffled) training stream."""
        n = len(self.data.train)
        return [self.data.train[self._order((position + i) // n)[(position + i) % n]]
                for i in range(self.recipe.prompts_per_step)]

    # -- checkpoints --------------------------------------------------------------------------------------------
    def save_checkpoint(self) -> None:
        state = {"step": self.step, "trainable": ckpt.trainable_state(self.policy.model),
                 "optimizer": self.policy.optimizer.state_dict(), "rng": ckpt.rng_state(),
                 "data_position": self.data_position, "last_eval": dict(self.last_eval),
                 "ledger": self.ledger.to_state(), "config": self.config.to_data(),
                 "wall_seconds": self.clock.wall(), "data_digests": self.data_digests}
        ckpt.save_checkpoint(self.folder.checkpoints, self.step, state, self.config.keep_checkpoints)
        self.folder.write_summary(self.summary())

    def _start(self, resume: bool) -> None:
        """A new run, or one killed before its first checkpoint started again (``resume``, or a new run in its
        folder): either way what its logs record as done is lost work, charged (or recorded) alike."""
        if not resume:  # refused before the folder holds the run's files (or its logs are read)
            self._refuse_a_run_without_a_step(fresh=True)
            self.folder.check_new()
        lost = self.folder.lost_after(-1)
        self.folder.create(self.config)
        if resume or lost:
            self.notes.append("no checkpoint yet: the run starts again" if resume else "the folder held a run killed "
                              "before its first checkpoint: this run replaces it")
        if lost:
            self.ledger.lost += lost
            self.notes.append(f"{lost:,} FLOPs done before the kill were lost and are "
                              f"{'charged' if self.config.charge_lost else 'recorded, not charged'}")
            self.save_checkpoint()  # before the baseline: a resume from it charges the baseline the logs hold

    def _restore(self) -> None:
        """Resume from the newest readable checkpoint. Work the log records after it (steps done before a kill,
        or a step in progress) was spent and is lost: it is charged as lost, against the budget, and checkpointed
        at once so that a second kill cannot forget it."""
        path, state, self.notes = ckpt.load_latest(self.folder.checkpoints, str(self.folder.path))
        if self.notes:
            self.notes.append(f"resumed from {path.name}")
        try:
            self.step = int(state["step"])
            ckpt.load_trainable_state(self.policy.model, state["trainable"])
            self.policy.optimizer.load_state_dict(state["optimizer"])
            ckpt.set_rng_state(state["rng"])
            self.data_position = int(state["data_position"])
            self.last_eval = dict(state["last_eval"])
            self.ledger = self.guard.ledger = Ledger.from_state(state["ledger"])
            self.clock.before = state.get("wall_seconds")  # None from a checkpoint that predates the record
        except Exception as exc:  # a checkpoint of another run or version: one clear line
            raise UserError(f"checkpoint {str(path)!r} cannot be read ({type(exc).__name__}: {exc})") from None
        ckpt.refuse_changed_data(state.get("data_digests"), self.data_digests, path)
        self.ledger.budget_flops = self.config.budget_flops
        self.ledger.charge_lost = self.config.charge_lost
        baseline = self.recipe.eval_every is not None and self.recipe.eval_at_start and (
            self.step > 0 or any(line["step"] == 0 for line in self.folder.metrics()))
        self.folder.check_history(self.step, baseline)
        self.folder.check_evaluations(self.step, tuple(self.data.targets))
        if not self.ledger.totals()["flops"]["evaluation"] and (logged := self.folder.baseline()) is not None:
            # a checkpoint with no evaluation charged while the logs hold a committed baseline predates it (_start's,
            # keeping a restarted run's lost work): the baseline ran and its records stay (not run again, not lost)
            self.guard.commit(0, logged[0])
            self.last_eval = logged[1]
        lost = self.folder.lost_after(self.step)
        self.ledger.lost += lost
        if self.config.budget_flops is not None and self.ledger.charged > self.config.budget_flops:
            raise UserError(f"the run has already spent {self.ledger.charged:,} FLOPs, more than the "
                            f"budget of {self.config.budget_flops:,}")
        check_cap_extends(self.ledger, self.config.train_flops)
        if self.config.max_steps is not None and self.config.max_steps <= self.step:
            raise UserError(f"the run has done {self.step} steps: --steps {self.config.max_steps} does not extend it "
                            "(give more steps, or a larger --budget)")
        self.folder.trim(self.step)
        if lost:
            self.notes.append(f"{lost:,} FLOPs done after the last checkpoint were lost and are "
                              f"{'charged' if self.config.charge_lost else 'recorded, not charged'}")
            self.save_checkpoint()

    # -- the budget guard -------------------------------------------------------------------------------------
    def worst_case(self, problems: list[Problem] | None, with_eval: bool) -> int:
        """An upper bound of the next round's FLOPs (and of an evaluation after it): the core's guard
        (:func:`flopplan.cost.worst_case_round`) fed with this round's prompt tokens, as the policy and the reward
        model read them, every completion at the maximum length; the evaluation's worst case over every target.
        ``problems`` None: the evaluation alone."""
        r = self.recipe
        total = self.eval_worst if with_eval else 0
        if problems is None:
            return total
        prompts = [len(self.codec.prompt_ids(p)) for p in problems for _ in range(r.group_size)]
        reward_prompts = extra = None
        if self.reward_model is not None:
            rm_codec = self.reward_model.codec or self.codec  # a local reward model has its own tokenizer
            reward_prompts = [len(rm_codec.encode(p.prompt)) for p in problems for _ in range(r.group_size)]
            extra = self.reward_model.extra_tokens
        return total + worst_case_round(r, prompts, self.config.max_new_tokens, reward_prompt_tokens=reward_prompts,
                                        reward_extra=extra, evaluation=False)

    @property
    def eval_max_new_tokens(self) -> int:
        return self.recipe.evaluation_completion_len.max

    def _next_step_worst(self, problems: list[Problem]) -> int:
        """The guard's price of the next step: its round, plus an evaluation whenever one may be due after it
        (every eval_every steps, or a FLOP threshold its worst case could reach)."""
        step_worst = self.worst_case(problems, False)
        if self.recipe.eval_every is None:
            return step_worst
        due = self.config.eval_at_end or self.schedule.may_be_due(self.step + 1, self.ledger.training_flops,
                                                                  step_worst)
        return step_worst + (self.eval_worst if due else 0)

    def _is_last(self, result: StepResult) -> bool:
        """Whether ``result`` (done, not yet committed) is the run's last step: --steps reached, or the step after
        it would not fit what the budget leaves (its round and the evaluation kept in reserve) or could take the
        training FLOPs past --train-flops."""
        if self.config.max_steps is not None and result.step >= self.config.max_steps:
            return True
        if self.config.budget_flops is None and self.config.train_flops is None:
            return False  # (nothing to price the following step against)
        following = self.worst_case(self.prompts_at(self.data_position + self.recipe.prompts_per_step), False)
        trained = self.ledger.training_flops + charges_training_flops(result.charges)
        if passes_cap(trained, following, self.config.train_flops):  # --train-flops ends the run after it
            return True
        if self.config.budget_flops is None:
            return False
        left = self.ledger.remaining - sum(c.executed_total for c in result.charges)
        return following + self.eval_worst > left

    # -- phases -----------------------------------------------------------------------------------------------
    @contextmanager
    def _phase(self, last_interruptible: bool = True) -> Iterator[None]:
        """A phase; on Ctrl-C the step is abandoned after it, until the first update (``last_interruptible``
        False from then on: the policy has moved, so the step is completed instead)."""
        with self._autocast():
            yield
        if self.ctrl_c.requested and last_interruptible:
            raise Interrupted

    def _autocast(self) -> Any:
        """bf16 autocast around the policy's work when it keeps float32 master weights on a GPU."""
        if self.precision.mixed:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def evaluate(self, on_charges: Any = lambda _: None) -> tuple[list[TargetScores], list[PhaseCharge]]:
        """Every evaluation target, greedily (:func:`flopplan.train.evaluation.evaluate_targets`)."""
        with self._autocast():
            return evaluate_targets(self.policy.model, self.codec, self.data.targets, ctx=self.ctx,
                                    charge_as=(self.passes["eval.prefill"], self.passes["eval.decode"]),
                                    batch=self.recipe.evaluation_batch_size,
                                    max_new_tokens=self.eval_max_new_tokens, on_charges=on_charges)

    def run_step(self, problems: list[Problem]) -> StepResult:
        r, cfg, model, passes = self.recipe, self.config, self.policy.model, self.passes
        result = StepResult(self.step + 1, {})
        self._pending = result.charges  # what an interruption abandons
        prompt_ids = [self.codec.prompt_ids(p) for p in problems for _ in range(r.group_size)]
        repeated = [p for p in problems for _ in range(r.group_size)]
        with self._phase():
            rollouts, generated = P.generate(model, self.codec, prompt_ids, ctx=self.ctx,
                                             charge_as=(passes["rollout.prefill"], passes["rollout.decode"]),
                                             batch=r.generation_batch_size, max_new_tokens=cfg.max_new_tokens,
                                             temperature=cfg.temperature,
                                             min_new_tokens=cfg.max_new_tokens if cfg.fixed_completion else 0)
            self._charged(result, *generated)
        ended = [bool(c) and c[-1] == self.codec.eos_id for c in rollouts.completion_ids]
        with self._phase():
            rewards, correct = self.rewards.score_problems(repeated, rollouts.completions, rollouts.completion_ids)
            if cfg.format_reward:
                rewards = [v + bonus for v, bonus in zip(rewards, format_bonus(rollouts.completions, ended,
                                                                               cfg.format_reward), strict=True)]
            if self.reward_model is not None:
                texts = [p.prompt for p in problems for _ in range(r.group_size)]
                rewards, charge = self.reward_model.score(self.codec, texts, rollouts.completions, passes["reward"],
                                                          cfg.measure_flops, cfg.max_new_tokens)
                self._charged(result, charge)
        advantages = finite_advantages(rewards, r.group_size, cfg.loss.scale_rewards, self.device)
        batches = scoring_batches(rollouts, self.codec.pad_id, r.micro_batch_size, self.device, r.update_padding)
        old = ref = None
        if "old_logprobs" in passes:
            with self._phase():
                old, charge = P.score(model, batches, rollouts, ctx=self.ctx, charge_as=passes["old_logprobs"],
                                      temperature=cfg.temperature)
                self._charged(result, charge)
        if "reference" in passes:
            with self._phase():
                reference = self.policy.reference
                ref, charge = P.score(reference if reference is not None else model, batches, rollouts,
                                      ctx=self.ctx, charge_as=passes["reference"], temperature=cfg.temperature,
                                      adapter_disabled=reference is None)
                self._charged(result, charge)
        stats: dict[str, float] = {}
        for _ in range(r.iterations):  # from the first update on, an interrupted step is completed
            with self._phase(last_interruptible=False):
                pass_stats, charge = P.update(model, self.policy.optimizer, batches, rollouts, advantages,
                                              ctx=self.ctx, charge_as=passes["update"], loss_cfg=cfg.loss_config,
                                              optimizer_batch=r.optimizer_batch_size,
                                              max_grad_norm=cfg.max_grad_norm, old=old, ref=ref)
                self._charged(result, charge)
            for key, value in pass_stats.items():  # means over the mu passes
                stats[key] = stats.get(key, 0.0) + value / r.iterations
        lengths = [len(c) for c in rollouts.completion_ids]
        result.metrics = {
            "reward": float(np.mean(rewards)), "reward_std": float(np.std(rewards)),
            "accuracy": float(np.mean(correct)), "completion_tokens": float(np.mean(lengths)),
            "ended_with_eos": float(np.mean(ended)), **stats,
        }
        trained = self.ledger.training_flops
        if self.recipe.eval_every is not None and (self.schedule.due(
                result.step, trained, trained + charges_training_flops(result.charges)) or (
                cfg.eval_at_end and self._is_last(result))):
            with self._phase(last_interruptible=False):
                result.evaluation, _ = self.evaluate(lambda done: self._charged(result, *done))
                result.metrics.update(evaluation_metrics(result.evaluation))
        return result

    def _charged(self, result: StepResult, *charges: PhaseCharge) -> None:
        """Units of the step in progress: kept for the commit, and logged at once as partial lines, so that a kill
        mid-step leaves a record of the work it lost."""
        for charge in charges:
            result.charges.append(charge)
            self.folder.append_partial(result.step, charge.to_data())

    # -- the loop ---------------------------------------------------------------------------------------------
    def _commit(self, step: int, charges: list[PhaseCharge], metrics: dict[str, float],
                evaluation: list[TargetScores] | None = None) -> None:
        flops = self.guard.commit(step, charges)
        line = metrics_line(step, metrics, flops, self.clock.line(torch.get_num_threads()))
        records = [e.record(step, self.ledger.training_flops, flops["flops"]["total"]).to_data()
                   for e in evaluation or []]
        self.folder.append(step, [c.to_data() for c in charges], line, records)

    def _should_stop(self, problems: list[Problem]) -> bool:
        if self.config.max_steps is not None and self.step >= self.config.max_steps:
            return self.guard.stop("steps", f"reached {self.config.max_steps} steps").stop
        if self.ctrl_c.requested:
            return self.guard.stop("interrupted", "interrupted").stop
        if self.config.budget_flops is not None and self.guard.decide(self._next_step_worst(problems)).stop:
            return True  # then --train-flops: the step's round (evaluations excluded) within the training cap
        cap = self.config.train_flops
        return cap is not None and self.guard.decide_cap(self.worst_case(problems, False), cap).stop

    def run(self) -> RunSummary:
        try:
            with self.ctrl_c.handling():
                return self._run()
        finally:
            self.folder.unlock()

    def _refuse_a_run_without_a_step(self, fresh: bool = False) -> None:
        """A fresh run whose budget cannot pay for its first step (and the baseline evaluation before it), or whose
        training cap (--train-flops) is below that step's training FLOPs, is refused before any work, with what that
        step could cost, as the planner refuses such a plan; ``fresh``: a new run, checked before its folder is
        written (no baseline done)."""
        budget, cap = self.config.budget_flops, self.config.train_flops
        if self.step > 0:
            return
        problems = self.prompts_at(self.data_position)
        if budget is not None:
            first = self._next_step_worst(problems)
            baseline = self.eval_worst if self.recipe.eval_every is not None and self.recipe.eval_at_start and \
                (fresh or not self._baseline_done()) else 0
            if first + baseline > self.ledger.remaining:
                extra = f" plus {baseline:,} for the baseline evaluation" if baseline else ""
                raise UserError(f"the budget ({budget:,} FLOPs) buys no step: the first could cost up to {first:,} "
                                f"FLOPs{extra}")
        if cap is not None:
            check_cap_buys_one(self.ledger, self.worst_case(problems, False), cap, "step")

    def _run(self) -> RunSummary:
        r, cfg = self.recipe, self.config
        self._refuse_a_run_without_a_step()
        baseline = self.step == 0 and r.eval_every is not None and r.eval_at_start and not self._baseline_done()
        if baseline and self.ledger.fits(self.eval_worst):
            evaluation, charges = self.evaluate(self._baseline_in_progress)
            metrics = evaluation_metrics(evaluation)
            self.last_eval = {"eval_accuracy": metrics["eval_accuracy"]}
            self._commit(0, charges, metrics, evaluation)
        with progress_bar(self) as bar:
            self.on_step.append(bar)
            while True:
                problems = self.prompts_at(self.data_position)
                if self._should_stop(problems):
                    break
                rng = ckpt.rng_state()
                try:
                    result = self.run_step(problems)
                except (Interrupted, RewardFailed) as exc:  # before the first update: the step is abandoned
                    partial = self._abandon(rng)
                    failed = exc if isinstance(exc, RewardFailed) else None
                    how = "failed" if failed else "interrupted"
                    self.guard.stop(how, f"{how} during step {self.step + 1} ({partial:,} FLOPs abandoned)"
                                         f"{f': {failed}' if failed else ''}")
                    if failed:
                        self.save_checkpoint()
                        raise failed.abandoned(self.step + 1, partial, cfg.out_dir, cfg.charge_lost) from None
                    break
                self.step = result.step
                self.data_position += r.prompts_per_step
                if "eval_accuracy" in result.metrics:
                    self.last_eval = {"eval_accuracy": result.metrics["eval_accuracy"]}
                self._commit(self.step, result.charges, result.metrics, result.evaluation)
                for observer in self.on_step:
                    observer(result, self.ledger)
                if cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0:
                    self.save_checkpoint()
        self.save_checkpoint()
        return self.summary()

    def _baseline_in_progress(self, charges: list[PhaseCharge]) -> None:
        for charge in charges:  # logged as they run: a kill mid-baseline leaves a record of the work it lost
            self.folder.append_partial(0, charge.to_data())

    def _baseline_done(self) -> bool:
        return any(line["step"] == 0 for line in self.folder.metrics())

    def _abandon(self, rng: dict[str, Any]) -> int:
        """Abandon a step interrupted before its first update: the model and optimizer are untouched, so putting
        back the RNG (the data position only moves when a step completes) makes a resumed run redo it exactly.
        The FLOPs its finished phases spent are recorded apart from the buckets and still count against the
        budget."""
        partial = sum(c.executed_total for c in self._pending)
        ckpt.set_rng_state(rng)
        self.folder.clear_progress()  # its units: the abandoned count holds their FLOPs
        self.ledger.abandoned += partial
        self.ledger.interrupted = {"step": self.step + 1, "abandoned_flops": self.ledger.abandoned}
        return partial

    # -- summary ----------------------------------------------------------------------------------------------
    def summary(self) -> RunSummary:
        lines = self.folder.metrics()
        train_lines = [x for x in lines if x["step"] > 0]
        evals = [x for x in lines if "eval_accuracy" in x]
        plan = self.config.plan
        return self.guard.summary(
            model=self.spec.name, reward=str(self.recipe.reward), final=train_lines[-1] if train_lines else None,
            eval_accuracy=tuple((x["step"], x["eval_accuracy"], x["flops"]["total"]) for x in evals),
            chance=self.data.chance, random_init_policy=self.random_policy,
            random_init_reward_model=bool(self.reward_model and self.reward_model.random_init),
            conventions={"attention": self.conv.attention, "attention_kernel": self.conv.attention_kernel},
            device=str(self.device), hardware=hardware_name(self.device), dtype=self.precision.describe(),
            plan=None if plan is None else PlanReference.of(plan), wall_seconds=self.clock.wall(),
            core_share=self.clock.core_share(torch.get_num_threads()) if self.device.type == "cpu" else None)

