"""``meter(trainer, budget=..., out=...)``: flopplan's FLOP meter attached to a GRPOTrainer the user built (public as
:func:`flopplan.trl.meter`; ``flopplan train --engine trl`` calls it too).

The recipe is read from the trainer (:mod:`flopplan.engines.trl_trainer`); what cannot be priced is refused here,
before anything runs or is written. Callbacks see no batch, so the executed shapes are read by wrapping the
trainer *instance's* methods where TRL builds them (a subclass's overrides stay in place): ``_generate_single_turn``
(the ids generation returned), ``_generate_and_score_completions`` (a generation round, whose no-grad forwards are
its scoring passes), ``_prepare_inputs`` (an update micro-step), ``_get_per_token_logps_and_entropies`` (a scoring
pass or an evaluation's loss forward, at its padded widths), ``accelerator.backward`` (timed and, when measuring,
counted), each reward model's forward, and ``log`` (the ``flops/*`` figures join TRL's logs, so they reach
whatever ``report_to`` names). Each unit is on disk as it ends (this process's share of the round in progress:
:mod:`flopplan.engines.trl_steplog`), so a kill after it charges it on resume. A callback holds the stop decision,
as TRL's ``_EpochStopCallback`` does: at the end of the optimizer step that closes a round it commits the round
(summed over processes: every process takes the same decision), prices the next one (with an evaluation's worst
case in reserve when evaluating) and, when that does not fit, stops and asks for the final save.

Ctrl-C, as in ``flopplan train``'s own loop (:mod:`flopplan.train.interrupt`): ``trainer.train`` is wrapped so that
the first SIGINT asks the run to stop at the end of the round in progress, where the same callback (summed over
processes, so every process stops on the same round) asks TRL for a checkpoint; the summary records the stop as
``interrupted``, then ``train`` raises KeyboardInterrupt, so the script stops as it would have (its code after
``train`` does not run) with nothing lost: resumed from that checkpoint, it records no lost work. A second SIGINT,
more than :data:`~flopplan.train.interrupt.SAME_CTRL_C` later, stops it at once (the round in progress is lost and
recorded as such on resume). A Ctrl-C in the round where the run ends anyway (its budget, ``max_steps``, the last
epoch) leaves the run's own stop reason, and ``train`` still raises. Under ``torchrun`` or ``accelerate launch``
the launcher passes a terminal's SIGINT on to its workers and kills them ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` seconds
later (30 by default): set it above a round and a save's time. Signal handlers are the main thread's: ``train``
called from another thread leaves SIGINT to the main thread's handler.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from flopplan.engines.trl_boundaries import check_boundaries, evaluations_before_next_round
from flopplan.engines.trl_evalguard import evaluation_rows, guard_evaluations
from flopplan.engines.trl_meter import TRLMeter
from flopplan.engines.trl_prompts import (
    check_tokenizers,
    longest_prompts,
    prompt_sets,
    retokenising,
    reward_models,
    reward_prompt_reads,
)
from flopplan.engines.trl_resume import (
    charge_lost_work,
    check_budget_covers,
    check_resume_point,
    check_same_recipe,
    check_start_over,
    record_budget,
    resumed_budget,
)
from flopplan.engines.trl_start import check_first_round, first_round_fits
from flopplan.engines.trl_steplog import attach_step_log
from flopplan.engines.trl_traincall import NoRoundFits, train_call
from flopplan.engines.trl_trainer import check_explicit, check_generation_configs, read_trainer
from flopplan.errors import UserError, is_number
from flopplan.fileio import scratch_folder
from flopplan.guard import check_cap_extends
from flopplan.planner import budget_flops
from flopplan.recipe import Recipe
from flopplan.runfile import CONFIG, last_complete_checkpoint
from flopplan.train.config import TrainConfig
from flopplan.train.interrupt import CtrlC
from flopplan.train.runfolder import RunFolder


def _described(trainer: Any, read: Any, flops: int | None) -> dict[str, Any]:
    """The run folder's configuration of a metered TRL script: the recipe read, the budget, the rounds max_steps
    makes (None: the budget or TRL's epochs decide) and the GRPOConfig fields flopplan read."""
    args = trainer.args
    return {"engine": "trl", "recipe": read.recipe.to_data(), "budget_flops": flops,
            "max_steps": read.run.rounds(args.max_steps) if args.max_steps > 0 else None,
            "world_size": read.run.world, "conventions": read.conventions,
            "grpo_config": {k: v for k, v in args.to_dict().items() if isinstance(v, (int, float, str, bool))
                            or v is None}}


def meter(trainer: Any, *, budget: Any = None, out: str | Path | None = None, profile: Any = None,
          price_per_hour: float | None = None, recipe: Recipe | None = None, measure: bool = False,
          peak_flops: float | None = None, resume: bool = False, config: TrainConfig | None = None,
          lost_outside_budget: bool = False, check_prompts: Any = None) -> TRLMeter:
    """Meter ``trainer`` (a ``GRPOTrainer`` or a subclass, before ``trainer.train()``); see :func:`flopplan.trl.meter`
    for the arguments. ``config``: the run configuration written to ``out`` (``flopplan train`` passes its own);
    ``check_prompts(train, evaluation, reward, eval_reward, retokenised)``: called with the data's longest prompts
    in tokens (the third and fourth as the reward model reads them, 0 without one) and the tokens by which a reward
    model with another tokenizer is taken to read a completion beyond the policy's count
    (:func:`flopplan.engines.trl_prompts.retokenising`), before anything is written (a race pilot refuses prompts
    longer than its race priced)."""
    if peak_flops is not None and not (is_number(peak_flops) and peak_flops > 0):  # (a bool, a string: refused)
        raise UserError(f"peak_flops must be the device's peak FLOP/s, a positive number (got {peak_flops!r})")
    if resume and out is None:  # (the ledger a checkpoint holds is continued without it)
        raise UserError("resume=True continues the run folder out= and charges what a kill lost after its "
                        "checkpoint: give out= (without one, trainer.train(resume_from_checkpoint=...) continues "
                        "the checkpoint's ledger, and no lost work can be known)")
    from trl import GRPOTrainer

    if not isinstance(trainer, GRPOTrainer):
        raise UserError(f"meter() takes a trl.GRPOTrainer (or a subclass): got {type(trainer).__name__}")
    if getattr(trainer, "flopplan_meter", None) is not None:
        raise UserError("this trainer is metered already")
    if trainer.state.global_step:
        raise UserError("attach the meter before trainer.train()")
    rank0 = trainer.accelerator.is_main_process
    folder = RunFolder(out) if out is not None else None
    if folder is not None and rank0 and not resume and config is None:
        folder.check_new()
    if folder is not None and resume and config is None and not (folder.path / CONFIG).is_file():
        raise UserError(f"nothing to resume in {str(folder.path)!r}: no {CONFIG} (start the run without resume)")
    # the models' configs, which the recipe names, go into a folder that lives as long as the meter (removed when it
    # is collected or Python exits) unless this process writes them into the run folder
    scratch = scratch_folder("flopplan-trl-")
    try:  # validate first: nothing written yet
        evaluation = read_trainer(trainer, Path(scratch.name), 1).eval_generations is not None
        tokenizer_notes = check_tokenizers(trainer)
        sets = prompt_sets(trainer, evaluation)
        lengths = longest_prompts(trainer, sets)
        prompt_max, reward_prompt_max, eval_prompt_max, eval_reward_prompt_max = lengths
        retokenised, retokenised_notes = retokenising(trainer, sets, trainer.args.max_completion_length)
        if check_prompts is not None:
            check_prompts(prompt_max, eval_prompt_max, reward_prompt_max, eval_reward_prompt_max, retokenised)
        read = read_trainer(trainer, Path(scratch.name), prompt_max)
        if recipe is not None:
            check_explicit(recipe, read)
        if resume and folder is not None and config is None:  # (flopplan train's folder holds its own recipe, and
            check_same_recipe(folder.path, read.recipe)  # its --resume takes no option that would change it)
        flops = budget_flops(budget, read.recipe, profile, price_per_hour)
        if resume and folder is not None and config is None:  # the run's own, unless another is given
            flops = resumed_budget(folder.path, flops)
        check_boundaries(trainer.args, read.run.optimizer_steps_per_round, read.eval_generations is not None,
                         trainer.args.max_steps if trainer.args.max_steps > 0 else None)
        if not resume:  # a budget that buys no round is refused here, not when training starts
            probe = TRLMeter(read.recipe, read.run, flops,
                             eval_rows=evaluation_rows(trainer, read.eval_generations)[0])
            probe.know_prompts(lengths, retokenised)
            probe.train_flops_cap = _train_cap(config)
            check_first_round(probe, trainer.args)
    except BaseException:  # refused: nothing left behind
        scratch.cleanup()
        raise
    writes = folder is not None and rank0  # the models' configs go into the run folder (rank 0)
    if writes:  # the models' configs into the run folder, which names them in its config
        assert folder is not None
        own = config is None  # else the caller (flopplan train) created and locked the folder
        if own:
            folder.lock()
            if not resume:
                folder.create(_described(trainer, read, flops))
        read = read_trainer(trainer, folder.path / "trl" / "models", prompt_max)
        if own and not resume:
            folder.write_config(_described(trainer, read, flops))
        scratch.cleanup()
    eval_rows, eval_batch = evaluation_rows(trainer, read.eval_generations)
    m = TRLMeter(read.recipe, read.run, flops, folder, measure=measure, peak_flops=peak_flops, rank=read.rank,
                 eval_rows=eval_rows, eval_batch=eval_batch, charge_lost=not lost_outside_budget)
    m.notes += [*read.notes, *tokenizer_notes, *retokenised_notes]
    m.know_prompts(lengths, retokenised)
    m.summary_fields = {"conventions": read.conventions, "device": str(trainer.accelerator.device),
                        "dtype": read.conventions["dtype"]}
    m.owns_folder = writes and config is None
    m.train_flops_cap = _train_cap(config)
    m.resuming = resume
    m.scratch = None if writes else scratch
    _attach(trainer, m)
    return m


def _train_cap(config: TrainConfig | None) -> int | None:
    """The training cap of a run ``flopplan train`` configured (``--train-flops``); a race pilot sets its rung's on
    the meter after this."""
    return None if config is None else config.train_flops


def _watched(meter: TRLMeter, step: Any) -> Any:
    """``step`` (TRL's training or prediction step) counted whole when measuring (:meth:`TRLMeter.watching`)."""
    @functools.wraps(step)
    def run(*args: Any, **kwargs: Any) -> Any:
        with meter.watching():
            return step(*args, **kwargs)

    return run


def _timed(meter: TRLMeter, trainer: Any, fn: Any, unit: Any) -> Any:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        name = "eval" if not trainer.model.training else unit() if callable(unit) else unit
        with meter.measuring(name):
            return fn(*args, **kwargs)
    return run


def _then_progress(meter: TRLMeter, fn: Any) -> Any:
    """``fn``, a unit the meter recorded, then this process's share of the round in progress on disk."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        meter.ran_unit()
        return result
    return run


def _forwards(meter: TRLMeter, trainer: Any, fn: Any) -> Any:
    """TRL's ``_get_per_token_logps_and_entropies``: with grad in training, an update's forward (its micro-step
    recorded by ``_prepare_inputs``); without, a round's scoring pass or an evaluation's loss forward, each recorded
    at its widths and on disk as it ends, so a kill after it charges it. A no-grad call that is neither (a
    subclass's own) runs outside the units: when measuring, it is counted as such."""
    @functools.wraps(fn)
    def run(model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, *args: Any, **kwargs: Any) -> Any:
        call = functools.partial(fn, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        training = bool(trainer.model.training)
        if training and torch.is_grad_enabled():
            with meter.measuring("update"):
                return call()
        phase = meter.scoring_pass()
        if phase is None and (training or meter.in_round):
            return call()
        with meter.measuring("eval" if not training else str(phase)):
            result = call()
        rows, batch = input_ids.shape[0], kwargs.get("batch_size", args[0] if args else None)
        width = (input_ids.shape[1] - int(logits_to_keep), int(logits_to_keep))
        meter.record_forward(phase, rows, width, int(batch or rows), evaluation=not training)
        meter.ran_unit()
        return result
    return run


def _attach(trainer: Any, meter: TRLMeter) -> None:
    """Wrap the trainer instance's methods (see the module docstring) and add the callbacks."""
    trainer.flopplan_meter = meter
    training = lambda: bool(trainer.model.training)  # noqa: E731

    generate = trainer._generate_single_turn

    @functools.wraps(generate)
    def generate_single_turn(prompt_ids: Any, *args: Any, **kwargs: Any) -> Any:
        with meter.measuring("rollout" if training() else "eval"):
            result = generate(prompt_ids, *args, **kwargs)
        group = kwargs.get("num_generations", args[2] if len(args) > 2 else trainer.num_generations)
        meter.record_generation(prompt_ids, result[0], int(group), evaluation=not training())
        meter.ran_unit()
        return result

    score_round = trainer._generate_and_score_completions

    @functools.wraps(score_round)
    def generate_and_score(*args: Any, **kwargs: Any) -> Any:
        with meter.scoring_round():  # (each unit inside it records itself as it ends)
            return score_round(*args, **kwargs)

    prepare = trainer._prepare_inputs

    @functools.wraps(prepare)
    def prepare_inputs(*args: Any, **kwargs: Any) -> Any:
        inputs = prepare(*args, **kwargs)
        if training():
            meter.record_micro_step(inputs)
        return inputs

    log = trainer.log

    @functools.wraps(log)
    def log_with_flops(logs: dict[str, float], *args: Any, **kwargs: Any) -> Any:
        if not training() and (meter.evaluation["passes"] or meter.evaluation["reward"]):
            committed = meter.commit_evaluation(callback.reduce)
            for observer in callback.on_evaluation:
                observer(committed)
        # within a round TRL has counted its tokens, the meter at its end (num_tokens); a callback's evaluation at a
        # round's last step runs before the meter's callback commits the round, and is not checked there
        if not trainer.state.global_step % meter.run.optimizer_steps_per_round and not meter.round_under_way():
            meter.check_tokens(trainer.state.num_input_tokens_seen)
        logs.update(meter.log_figures())
        return log(logs, *args, **kwargs)

    def reward_inputs(module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids: Any = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        own = mask.sum(1).tolist() if mask is not None else [ids.shape[1]] * ids.shape[0]
        meter.record_reward(ids.shape[0], ids.shape[1], own, evaluation=not training())

    calculate = trainer._calculate_rewards

    @functools.wraps(calculate)
    def calculate_rewards(inputs: Any, prompts: list[Any], *args: Any, **kwargs: Any) -> Any:
        if models:  # each row's prompt as the reward model reads it: what it reads beyond is learned per row
            meter.record_reward_prompts(reward_prompt_reads(trainer, prompts), evaluation=not training())
        return calculate(inputs, prompts, *args, **kwargs)

    models = reward_models(trainer)
    trainer._generate_single_turn = generate_single_turn
    trainer._calculate_rewards = calculate_rewards
    for name in ("training_step", "prediction_step") if meter.measure else ():
        setattr(trainer, name, _watched(meter, getattr(trainer, name)))
    trainer._generate_and_score_completions = generate_and_score
    trainer._prepare_inputs = prepare_inputs
    trainer.log = log_with_flops
    trainer._get_per_token_logps_and_entropies = _forwards(meter, trainer, trainer._get_per_token_logps_and_entropies)
    trainer.accelerator.backward = _then_progress(meter, _timed(meter, trainer, trainer.accelerator.backward,
                                                                "update"))
    for module in trainer.reward_funcs:
        if isinstance(module, torch.nn.Module):
            module.register_forward_pre_hook(reward_inputs, with_kwargs=True)
            module.forward = _then_progress(meter, _timed(meter, trainer, module.forward, "reward"))
    callback = FlopBudgetCallback(trainer, meter)
    trainer.flopplan_callback = callback
    trainer.add_callback(callback)
    trainer.train = train_call(trainer.train, meter, callback)
    determine = getattr(trainer, "_determine_best_metric", None)
    if determine is not None:  # save_strategy="best" sets should_save to this after an evaluation: a stop's
        @functools.wraps(determine)  # checkpoint (what a resume continues) is saved whatever the metric did
        def best_or_stopping(*args: Any, **kwargs: Any) -> bool:
            if callback.stopped and not kwargs.get("metrics", args[0] if args else None):
                return True  # (an evaluation the budget did not let run: no metrics, trl_evalguard)
            return bool(determine(*args, **kwargs)) or callback.stopped

        trainer._determine_best_metric = best_or_stopping
    log_callback = attach_step_log(trainer, meter, callback)
    guard_evaluations(trainer, meter, callback, log_callback)
    save_checkpoint = trainer._save_checkpoint

    @functools.wraps(save_checkpoint)
    def save_with_ledger(*args: Any, **kwargs: Any) -> Any:
        if log_callback is not None:
            log_callback.flush()  # the round's log line before the checkpoint that holds it
        if trainer.state.is_world_process_zero:  # the ledger before TRL's state: the checkpoint is complete when
            # that lands, before TRL deletes older ones (save_total_limit), so a kill leaves one to resume
            meter.save(Path(trainer.args.output_dir) / f"checkpoint-{trainer.state.global_step}")
        return save_checkpoint(*args, **kwargs)

    trainer._save_checkpoint = save_with_ledger


class FlopBudgetCallback(TrainerCallback):
    """Commits each round when its last optimizer step ends and stops before a round that could overrun the
    budget, or after one when Ctrl-C was pressed on any process (``ctrl_c``; ``should_training_stop`` is never set
    back; ``should_save`` asks for the final checkpoint)."""

    def __init__(self, trainer: Any, meter: TRLMeter) -> None:
        self.trainer, self.meter = trainer, meter
        self.ctrl_c = CtrlC()  # set by the handler train() runs under (_stops_on_ctrl_c)
        self.stopped = False  # this callback stopped the run and asked for its checkpoint
        self.ctrl_c_anywhere = False  # a Ctrl-C reached some process (reduced at each commit)
        self.resume_from: Any = None  # what trainer.train(resume_from_checkpoint=...) was given
        self.on_commit: list[Any] = []
        self.on_evaluation: list[Any] = []
        self.training = self.ended = False  # train() is running; a train() has ended (its summary written)
        self.calls = 0  # train() calls on this trainer
        self.measured_whole = True  # every charge in the ledger was measured (a resume may continue an unmeasured run)

    def reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        accelerator = self.trainer.accelerator
        return accelerator.reduce(tensor.to(accelerator.device), reduction="sum").cpu() \
            if accelerator.num_processes > 1 else tensor

    def _reserve(self, args: Any, global_step: int, max_steps: int | None = None) -> int:
        if not self.meter.eval_rows:
            return 0
        due = self.meter.boundary_evaluation
        if due is not None:  # the next round's evaluation, and this boundary's where it runs (FlopPoints decides)
            return 1 + bool(due())
        return evaluations_before_next_round(args, global_step, self.meter.run.optimizer_steps_per_round, max_steps)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        folder = self.meter.folder
        try:
            check_boundaries(args, self.meter.run.optimizer_steps_per_round, bool(self.meter.eval_rows),
                             state.max_steps)  # (a share of a run TRL's epochs decide is known now)
            check_generation_configs(self.trainer)  # (again: a script may change them after meter())
            if self.meter.rounds and not state.global_step:  # train() again on this trainer, from step 0
                raise UserError(f"trainer.train() again from step 0, but this metered run holds {self.meter.rounds} "
                                "rounds already: train it further with trainer.train(resume_from_checkpoint=True), "
                                "or meter a new trainer into another folder")
            if self.meter.resuming and not state.global_step:
                last = last_complete_checkpoint(args.output_dir)
                if last is not None:  # the ledger would go on while the model starts over: two histories in one run
                    raise UserError(f"the meter resumes this run but the trainer starts at step 0 although "
                                    f"{last.name} holds its last checkpoint: call trainer.train("
                                    "resume_from_checkpoint=...) (a race pilot: spec.resume_from_checkpoint)")
                if folder is not None:
                    check_start_over(folder, args.output_dir, self.resume_from)
            if state.global_step:  # resumed: continue the ledger saved with the checkpoint, whose training a cap
                check_resume_point(state.global_step, self.meter.run.optimizer_steps_per_round, args.output_dir)
                self.meter.load(Path(args.output_dir) / f"checkpoint-{state.global_step}")  # below it cannot extend
                check_cap_extends(self.meter.ledger, self.meter.train_flops_cap, self.meter.train_flops_cap_name)
                check_budget_covers(self.meter.ledger, state.global_step)
                self.measured_whole = set(self.meter.ledger.unit_measured) >= set(self.meter.ledger.unit_executed)
        except UserError:
            if self.meter.owns_folder and folder is not None:
                folder.unlock()  # nothing was written: the right call may follow in this process
            raise
        if self.meter.resuming and self.meter.on_resumed is not None and state.is_world_process_zero:
            self.meter.on_resumed()  # the checkpoint accepted the run's limits (flopplan train records them)
        elif self.meter.resuming and self.meter.owns_folder and folder is not None:  # a script's: its budget
            record_budget(folder.path, self.meter.ledger.budget_flops)
        # (eval_on_start is read by transformers after this) as flopplan train --engine trl does: an evaluation at
        # a logged step goes into a second line for it, which a later resume from that step's checkpoint would
        # neither keep nor charge
        if state.global_step and args.eval_on_start:
            args.eval_on_start = False
            self.meter.notes.append(f"eval_on_start skipped: the run resumed at optimizer step {state.global_step}, "
                                    "a step its logs hold")
        if folder is not None and (state.global_step or self.meter.resuming):  # trl_resume: what a kill lost
            charge_lost_work(self.meter, folder, state, args.output_dir, self.trainer.accelerator.wait_for_everyone)
        if state.global_step and state.global_step >= state.max_steps:  # resumed at its max_steps: the run is
            self._stop_for_steps(state)  # over (the Trainer would run a step past them: transformers does, unmetered)
            raise NoRoundFits
        if self.meter.rounds == 0 and not self.meter.ledger.lost:
            check_first_round(self.meter, args)
        elif not (first_round_fits(self.meter, args) if self.meter.rounds == 0 else
                  self.meter.fits_next_round(min(self._reserve(args, 0), 1))):
            # resumed from the checkpoint its budget stopped it at (killed before its summary was written), or
            # started again after lost work that leaves no round: the run is over (the Trainer runs a step before
            # it reads should_training_stop, and that round would overrun the budget)
            raise NoRoundFits
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.meter.run.optimizer_steps_per_round:
            if state.global_step >= state.max_steps:  # the run ends inside this round: charged before the final
                self._commit_partial(state)  # checkpoint is saved and the step logged (the same on every process)
            return control  # the round goes on
        self._commit_round()
        last = state.global_step >= state.max_steps  # the run ends here anyway (max_steps, or the last epoch's end):
        # no next round to price (one past max_steps that did not fit recorded a budget stop; on_train_end: steps)
        fits = last or self.meter.fits_next_round(self._reserve(args, state.global_step, state.max_steps))
        # the same decision on every process: stop when the next round does not fit anywhere, or after this one
        # when Ctrl-C reached any process (the budget's reason first: a run that cannot go on is finished)
        over, asked = (int(v) for v in self.reduce(torch.tensor([0 if fits else 1, int(self.ctrl_c.requested)])))
        self.ctrl_c_anywhere = bool(asked)
        if asked and not over and not last:
            self.meter.guard.stop("interrupted", f"interrupted after round {self.meter.rounds} (optimizer step "
                                  f"{state.global_step}), with a checkpoint")
        if over or asked:
            control.should_training_stop = True
            control.should_save = self.stopped = True
        return control

    def _commit_round(self) -> None:
        """The round under way, summed over the processes, into the ledger, and then to its observers (the step log,
        another process's progress). Every process calls it at once."""
        committed = self.meter.commit(self.reduce)
        for observer in self.on_commit:
            observer(committed)

    def _commit_partial(self, state: Any) -> None:
        """Training ends inside a round (at ``max_steps`` or the last epoch's end off a round's boundary, or a
        callback stopped it): the round's generation and the updates that ran are charged as a round of their own
        (the guard admitted the whole round), and TRL's token count checked against them. Every process calls it."""
        under_way, asked = (int(v) for v in self.reduce(torch.tensor([int(self.meter.round_under_way()),
                                                                       int(self.ctrl_c.requested)])))
        self.ctrl_c_anywhere = self.ctrl_c_anywhere or bool(asked)
        if not under_way:
            return
        self._commit_round()
        self.meter.check_tokens(state.num_input_tokens_seen)
        per_round = self.meter.run.optimizer_steps_per_round
        self.meter.notes.append(f"the last round ended after {state.global_step % per_round} of its {per_round} "
                                "optimizer steps: its generation and the updates that ran are charged")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self._commit_partial(state)  # (a callback's stop inside a round: after its checkpoint, if one was saved)
        if state.global_step:  # TRL's tokens against the meter's at the end (a run over at its checkpoint logs none)
            self.meter.check_tokens(state.num_input_tokens_seen)
        if self.meter.measure:  # what ran outside the charged units, over every process
            self.meter.commit_outside(self.reduce)
            outside, differ = self.meter.outside_committed, self.meter.ledger.measured_differences()
            if outside:
                self.meter.notes.append(f"{outside:,} FLOPs ran in TRL's steps outside the units the meter charges "
                                        "(a subclass's own model calls?): not in the ledger")
            if differ and self.measured_whole:  # (a subclass's own forward outside the units has its backward
                # inside the update's; a run measured from a resume on compares only part of each unit)
                beyond = outside + sum(v for v in differ.values() if v > 0)
                self.meter.notes.append(
                    "measured - charged FLOPs by unit: " + ", ".join(f"{u} {v:+,}" for u, v in differ.items())
                    + (f"; {beyond:,} FLOPs ran beyond the ledger in all" if beyond > outside else ""))
        if not self.meter.guard.decision.stop:
            self._stop_for_steps(state)
        self.ended = True
        return control

    def _stop_for_steps(self, state: Any) -> None:
        """Record the steps as the run's stop: ``max_steps`` reached (or the last epoch's end), or another callback
        stopped the trainer."""
        steps, rounds, reached = state.global_step, self.meter.rounds, state.global_step >= state.max_steps
        how = f"reached {steps} optimizer step{'s' * (steps != 1)}" if reached else \
            f"stopped by the trainer at optimizer step {steps} of {state.max_steps} (a callback)"  # (a race pilot
        self.meter.guard.stop("steps" if reached else "stopped", f"{how} ({rounds} round{'s' * (rounds != 1)})")
        # stopped so is short of its rung, not done with it: race.pilots.ended)
