"""The FLOP meter of a TRL GRPOTrainer run: every executed phase of every round charged through the core's formulas
into flopplan's ledger, the budget guard's bound of the next round (and of an evaluation, kept in reserve), and the
figures TRL's logs carry (so they reach whatever ``report_to`` names: the FLOP metric trl#3967 asks for).

The meter is told what ran by :mod:`flopplan.engines.trl_hook`, which wraps the trainer instance's methods where
TRL builds the shapes: each ``_generate_single_turn`` call (:meth:`TRLMeter.record_generation`: the ids HF
``generate`` or vLLM returned), each no-grad forward (:meth:`TRLMeter.record_forward`: a round's scoring passes and
an evaluation's loss forward, at the widths TRL padded them to), each update micro-step, each reward-model call.
As each unit ends, the run folder keeps this process's share of the round in progress (:meth:`TRLMeter.ran_unit`),
so a kill loses none of it. Each process charges its own shard; a round's totals are summed over processes
(:meth:`TRLMeter.commit`), so every process holds the same ledger and decides alike.

Conventions: HF ``generate`` runs a process's rows as one call, left-padded to the longest prompt and decoding
until the longest completion; vLLM pages its KV cache, so every row is charged at its own lengths, and in server
mode the prompt's prefill once per group (TRL sends each prompt once with ``n = num_generations``). TRL's
evaluation (``evaluate``: generation, the no-grad scoring and loss forwards, reward models) is charged to the
evaluation bucket (``eval.*`` phases).

Measuring (``measure=True``) counts each unit with :class:`flopplan.measure.meter.FlopMeter`: FlopCounterMode's
count, plus its named blind spots (:data:`flopplan.measure.meter.BLIND_SPOTS`: in-place GEMMs, which TRL's chunked
head accumulates its gradients with on the CPU, and the CPU's fused SDPA kernels), so measured equals the closed
form when both are right.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from flopplan.cost import worst_case_round
from flopplan.engines.trl import TRLRun, mfu
from flopplan.engines.trl_evaluation import (
    SCORING,
    as_evaluation,
    evaluation_bound,
    loss_forward,
    round_passes,
)
from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, read_json
from flopplan.guard import Guard
from flopplan.ledger import Ledger, PhaseCharge, charge, ran, unit_of
from flopplan.measure.meter import BLIND_SPOTS, FlopMeter
from flopplan.passes import BUCKET_OF, BUCKETS, STEP_PHASES
from flopplan.recipe import Recipe
from flopplan.runfile import SUMMARY, TRL_ABANDONED, RunSummary, last_complete_checkpoint
from flopplan.runfile import TRL_LEDGER as LEDGER_FILE

UNITS = (*dict.fromkeys(unit_of(phase) for phase in STEP_PHASES), "eval")
"""The units of a round, each charging its phases (:func:`flopplan.ledger.unit_of`)."""
PHASES_OF = {unit: tuple(phase for phase in BUCKET_OF if unit_of(phase) == unit) for unit in UNITS}
LEDGER_VERSION = 1
"""The layout of :data:`LEDGER_FILE` (its ``flopplan_trl_ledger_version`` key)."""


def _summary_notes(folder: Any) -> list[str]:
    """The notes of the summary a finished run left in its folder (``folder``: a RunFolder or None), else none."""
    path = Path(folder.path) / SUMMARY if folder is not None else None
    if path is None or not path.is_file():
        return []
    notes = read_json(path, "run summary").get("notes", [])
    return [str(note) for note in notes] if isinstance(notes, list) else []


class TRLMeter:
    """The charges of the round (and evaluation) in progress on this process, their reduction into the run's
    ledger, and the budget guard. ``ledger``: the run's :class:`~flopplan.ledger.Ledger`; ``decision``: the guard's
    latest :class:`~flopplan.guard.StopDecision`."""

    def __init__(self, recipe: Recipe, run: TRLRun, budget_flops: int | None, folder: Any = None, *,
                 measure: bool = False, peak_flops: float | None = None, rank: int = 0,
                 eval_rows: int = 0, eval_batch: int = 1, charge_lost: bool = True) -> None:
        self.recipe, self.run, self.folder, self.rank = recipe, run, folder, rank
        self.spec = recipe.policy_spec
        # which phases a round runs, with which adapters, training and head: each unit is charged as its pass
        self.passes = round_passes(recipe)
        self.measure, self.peak_flops = measure, peak_flops
        self.eval_rows, self.eval_batch = eval_rows, eval_batch  # an evaluation's rows over all processes (0: off)
        self.ledger = Ledger(budget_flops, charge_lost=charge_lost)
        self.guard = Guard(self.ledger, noun="round")  # the budget guard and recorder (flopplan.guard)
        self.last_flops: dict[str, Any] = {}  # the FLOP fields of the last committed round's metrics line
        self.round: dict[str, Any] = self._empty()
        self.evaluation: dict[str, Any] = self._empty()
        self.rounds = self.evaluations = 0
        self.tokens = 0  # unpadded prompt + completion tokens over all processes (TRL's num_tokens)
        self.trl_tokens: int | None = None
        self.prompt_max = self.reward_prompt_max = self.eval_prompt_max = self.eval_reward_prompt_max = 0
        self.reward_extra = 0  # tokens a reward model read beyond prompt + completion (re-tokenisation), seen
        self.notes: list[str] = []
        self.on_unit: list[Any] = []  # called after each unit ran and was recorded (the run folder's progress)
        self.summary_fields: dict[str, Any] = {}  # what the run summary says besides the ledger (conventions...)
        self.accuracy_metric: str | None = None  # a logged metric that is the run's accuracy (flopplan train's)
        self.names: tuple[str, str] | None = None  # the run's policy and reward as its recipe names them (flopplan
        #                                            train's: tiny, orm:tiny-rm), not its folders' (policy, ...)
        self.owns_folder = False  # the meter locked the run folder (and unlocks it when training ends)
        self.resuming = False  # meter(resume=True): the run continues its last checkpoint
        self.on_resumed: Any = None  # () -> None, once a resumed run's checks passed (flopplan train's limits)
        self.train_flops_cap: int | None = None  # training FLOPs (evaluations excluded) no round may take the run
        #                                          past (a race pilot's rung, flopplan train --train-flops); None: none
        self.train_flops_cap_name = "--train-flops"  # what a refusal calls the cap (a race pilot: its rung's)
        self.boundary_evaluation: Any = None  # () -> whether the evaluation at this round boundary runs, where a
        #                                       callback picks the boundaries that evaluate (FlopPoints); None: TRL's
        self.scratch: Any = None  # a temporary folder with the models' configs where no run folder holds them
        self.raise_on_ctrl_c = True  # trainer.train() raises KeyboardInterrupt after a Ctrl-C's checkpoint (a
        #                              caller that reports the stop itself, flopplan train, sets it False)
        self.says_budget_stop = True  # rank 0 prints a budget stop's line on stderr (flopplan train prints its own)
        self.last_round_flops = 0
        self.outside_units = 0  # when measuring: what FlopMeter counted in TRL's steps outside the units on this
        #                         process since the last commit (work the meter does not charge: a subclass's own)
        self.outside_committed = 0  # and before it, summed over the processes at each commit (saved, resumed)
        self._whole: FlopMeter | None = None  # the meter of the TRL step under way (paused inside a unit)
        self._started = time.perf_counter()
        self._round_seconds = 0.0
        self._scoring_calls = 0
        self.in_round = False  # a generation round is under way (scoring_round)

    @property
    def decision(self) -> Any:
        """The guard's latest stop decision (:class:`flopplan.guard.StopDecision`)."""
        return self.guard.decision

    @staticmethod
    def _empty() -> dict[str, Any]:
        return {"charges": {}, "passes": [], "update": [], "measured": dict.fromkeys(UNITS, 0),
                "blind": {unit: dict.fromkeys(BLIND_SPOTS, 0) for unit in UNITS},
                "seconds": dict.fromkeys(UNITS, 0.0), "reward": [], "reward_prompts": [], "lengths": [], "tokens": 0}

    def _template(self, phase: str, evaluation: bool) -> Any:
        template = self.passes[phase]
        return as_evaluation(template) if evaluation else template

    # -- what ran (this process) ----------------------------------------------------------------------------------
    def record_generation(self, prompt_ids: list[list[int]], completion_ids: list[list[int]], group: int,
                          evaluation: bool = False) -> None:
        """One ``_generate_single_turn`` call: the prompt ids it was given and the completion ids it returned
        (unpadded lists; duplicated prompts, ``group`` in a row). HF ``generate``: one call at the longest prompt
        and completion; vLLM: each row at its own lengths, the prefill once per group in server mode."""
        lengths = [(len(p), len(c)) for p, c in zip(prompt_ids, completion_ids, strict=True)]
        target = self.evaluation if evaluation else self.round
        target["lengths"] += lengths
        width = (max(p for p, _ in lengths), max(k for _, k in lengths))
        prefill, decode = (self._template(phase, evaluation) for phase in ("rollout.prefill", "rollout.decode"))
        if not self.run.use_vllm:
            passes = [ran(prefill, lengths, width), ran(decode, lengths, width)]
        else:
            heads = lengths
            if self.run.vllm_mode == "server":  # the rows that open a group, by their index in the whole batch
                offset = self.rank * len(lengths)
                heads = [row for i, row in enumerate(lengths) if (offset + i) % group == 0]
            passes = [replace(ran(prefill, heads, width), padded=False),
                      replace(ran(decode, lengths, width), padded=False)]
        target["passes"] += passes
        if evaluation:
            self.eval_prompt_max = max(self.eval_prompt_max, width[0])
        else:
            self.prompt_max = max(self.prompt_max, width[0])
        target["tokens"] += sum(p + k for p, k in lengths)

    def record_forward(self, phase: str | None, rows: int, width: tuple[int, int], batch: int,
                       evaluation: bool = False) -> None:
        """One no-grad forward (TRL's ``_get_per_token_logps_and_entropies``) as it ended, over the last ``rows``
        rows generation recorded (in their order), padded to ``width`` (prompt, completion), in micro-batches of
        ``batch`` rows: a scoring pass of :attr:`scoring_order` (``phase``), or, with ``phase`` None, an
        evaluation's loss forward (``prediction_step``: :func:`loss_forward`)."""
        target = self.evaluation if evaluation else self.round
        lengths = target["lengths"][-rows:]
        template = self._loss_template() if phase is None else self._template(phase, evaluation)
        calls = [ran(template, lengths[start:start + batch], width) for start in range(0, len(lengths), batch)]
        if evaluation:
            target["passes"] += calls
        else:
            assert phase is not None
            target["charges"][phase] = charge(*calls)

    def _loss_template(self) -> Any:
        """The no-grad loss forward of TRL's ``prediction_step`` (:func:`loss_forward`)."""
        return loss_forward(self.passes)

    def record_micro_step(self, inputs: dict[str, Any]) -> None:
        """One update micro-step: ``bs`` rows at the round's padded widths."""
        mask = inputs["completion_mask"]
        k = mask.shape[1]
        p = inputs["prompt_ids"].shape[1]
        lengths = list(zip(inputs["prompt_mask"].sum(1).tolist(), mask.sum(1).tolist(), strict=True))
        self.round["update"].append(ran(self.passes["update"], lengths, (p, k)))

    def know_prompts(self, lengths: tuple[int, int, int, int], retokenised: int) -> None:
        """The guard's reads before any round has run: the data's longest prompts (``lengths``, as
        :func:`flopplan.engines.trl_prompts.longest_prompts` gives them) and the tokens by which a reward model with
        another tokenizer is taken to read a completion beyond the policy's (:func:`~flopplan.engines.trl_prompts.
        retokenising`; learned upward from here)."""
        self.prompt_max, self.reward_prompt_max, self.eval_prompt_max, self.eval_reward_prompt_max = lengths
        self.reward_extra = retokenised

    def round_under_way(self) -> bool:
        """Whether any unit of a round has run on this process since its last commit."""
        r = self.round
        return bool(r["passes"] or r["charges"] or r["update"] or r["reward"])

    def record_reward(self, rows: int, width: int, own: list[int], evaluation: bool = False) -> None:
        """One reward-model call: its rows, its padded width and each row's own tokens."""
        (self.evaluation if evaluation else self.round)["reward"].append((rows, width, own))

    def record_reward_prompts(self, reads: list[int], evaluation: bool = False) -> None:
        """One ``_calculate_rewards`` call: each row's prompt as the reward model reads it
        (:func:`flopplan.engines.trl_prompts.reward_prompt_reads`), in the rows' order."""
        (self.evaluation if evaluation else self.round)["reward_prompts"].extend(reads)

    def ran_unit(self) -> None:
        """A unit has run and been recorded: tell the observers (:attr:`on_unit`)."""
        for observer in self.on_unit:
            observer()

    @contextlib.contextmanager
    def measuring(self, unit: str) -> Any:
        """Time the block into ``unit`` (synchronising a GPU) and, when measuring, count it with FlopMeter."""
        sync = torch.cuda.is_available() and torch.cuda.is_initialized()
        if sync:
            torch.cuda.synchronize()
        start = time.perf_counter()
        meter = FlopMeter() if self.measure else contextlib.nullcontext()
        whole = self._whole
        if whole is not None:
            whole.paused += 1
        try:
            with meter:
                yield
        finally:
            if whole is not None:
                whole.paused -= 1
        if sync:
            torch.cuda.synchronize()
        target = self.evaluation if unit == "eval" else self.round
        target["seconds"][unit] += time.perf_counter() - start
        if isinstance(meter, FlopMeter):
            target["measured"][unit] += meter.total
            for name, flops in meter.blind.items():
                target["blind"][unit][name] += flops

    @contextlib.contextmanager
    def watching(self) -> Any:
        """When measuring, count a whole TRL step (``training_step``, ``prediction_step``) with FlopMeter too: what
        it ran outside the units inside it (that meter paused while one runs) is work the meter does not charge
        (:attr:`outside_units`)."""
        if not self.measure:
            yield
            return
        with FlopMeter() as whole:
            self._whole = whole
            try:
                yield
            finally:
                self._whole = None
        self.outside_units += whole.executed

    @property
    def commits(self) -> int:
        """The reductions committed so far (rounds and evaluations, each summed over the processes): the same on
        every process at the same point; the run folder places its lines by it
        (:meth:`~flopplan.train.runfolder.RunFolder.lost_after`)."""
        return self.rounds + self.evaluations

    @property
    def scoring_order(self) -> list[str]:
        """The no-grad scoring passes of a round, in the order they run (old log-probs, then the reference)."""
        return [phase for phase in SCORING if phase in self.passes]

    @contextlib.contextmanager
    def scoring_round(self) -> Any:
        """A generation round under way (TRL's ``_generate_and_score_completions``: a training round's or an
        evaluation batch's): its no-grad forwards are its scoring passes (:meth:`scoring_pass`)."""
        self._scoring_calls, self.in_round = 0, True
        try:
            yield
        finally:
            self.in_round = False

    def scoring_pass(self) -> str | None:
        """The phase of a no-grad forward inside a generation round: each scoring pass once, in
        :attr:`scoring_order`; None outside one (an evaluation's loss forward) or past its passes."""
        order = self.scoring_order if self.in_round else []
        self._scoring_calls += 1
        return order[self._scoring_calls - 1] if self._scoring_calls <= len(order) else None

    # -- the commits ------------------------------------------------------------------------------------------------
    def _reward_passes(self, target: dict[str, Any], evaluation: bool) -> list[Any]:
        template = self._template("reward", evaluation)
        own = [t for _, _, lengths in target["reward"] for t in lengths]
        prompts = target["reward_prompts"] if len(target["reward_prompts"]) == len(own) else \
            [p for p, _ in target["lengths"]]  # (a reward call the hook did not see: the policy's prompt, as before)
        # what the reward model read beyond its prompt's read and the policy's completion tokens: the completion
        # tokenized again by its own tokenizer (the prompt's read is known for every prompt before training)
        excess = [t - (p + k) for t, p, (_, k) in zip(own, prompts, target["lengths"], strict=False)]
        self.reward_extra = max([self.reward_extra, *excess])
        return [ran(template, [(t, 0) for t in lengths], (width, 0)) for _, width, lengths in target["reward"]]

    def local_charges(self, evaluation: bool = False) -> dict[str, PhaseCharge]:
        if evaluation:
            passes = self.evaluation["passes"] + (self._reward_passes(self.evaluation, True)
                                                  if self.evaluation["reward"] else [])
            return {"eval": charge(*passes, unit="eval")} if passes else {}
        charges = dict(self.round["charges"])
        if self.round["passes"]:
            charges["rollout"] = charge(*self.round["passes"])
        if self.round["update"]:
            charges["update"] = charge(*self.round["update"])
        if self.round["reward"]:
            charges["reward"] = charge(*self._reward_passes(self.round, False))
        return charges

    def _reduce(self, target: dict[str, Any], local: dict[str, PhaseCharge], reduce: Any
                ) -> tuple[list[PhaseCharge], int]:
        """Sum ``local`` over processes (``reduce``: a tensor -> its sum over ranks), unit by unit."""
        values = []
        for unit in UNITS:
            c = local.get(unit)
            for phase in PHASES_OF[unit]:
                values += [c.executed.get(phase, 0) if c else 0, c.useful.get(phase, 0) if c else 0]
            values += [target["measured"][unit], *target["blind"][unit].values()]
        values += [target["tokens"]]
        # what each process's reward model read beyond its rows (learned in _reward_passes), one slot per process:
        # the sum holds every process's, and each takes their largest, so every process's guard prices alike (and
        # the checkpoint's, which rank 0 saves, is the run's)
        values += [self.reward_extra if rank == self.rank else 0 for rank in range(self.run.world)]
        total = iter(reduce(torch.tensor(values, dtype=torch.int64)).tolist())
        committed = []
        for unit in UNITS:
            executed, useful = {}, {}
            for phase in PHASES_OF[unit]:
                executed[phase], useful[phase] = int(next(total)), int(next(total))
            measured = int(next(total))
            blind = {name: int(next(total)) for name in BLIND_SPOTS}
            if sum(executed.values()) == 0:
                continue
            executed = {k: v for k, v in executed.items() if v}
            useful = {k: useful[k] for k in executed}
            local_shapes = dict(local[unit].shapes) if unit in local else {}
            if unit == "update":  # the rule its attention backward was charged by (eager 2x, sdpa 2.5x the forward)
                local_shapes["attention_kernel"] = self.recipe.attention_kernel
            committed.append(PhaseCharge(
                unit, executed, useful, measured + sum(blind.values()) if self.measure else None,
                seconds=target["seconds"][unit],  # this process's time in the unit
                shapes={**local_shapes, **({"flop_counter_mode": measured, "blind_spots": blind}
                                           if self.measure else {})}))
        tokens = int(next(total))
        self.reward_extra = max(int(next(total)) for _ in range(self.run.world))
        return committed, tokens  # and the unpadded tokens generated

    def commit(self, reduce: Any) -> list[PhaseCharge]:
        """This round's charges, summed over processes, into the ledger (every process calls it at once)."""
        committed, tokens = self._reduce(self.round, self.local_charges(), reduce)
        self.commit_outside(reduce)
        self.tokens += tokens
        now = time.perf_counter()
        self._round_seconds, self._started = now - self._started, now
        self.rounds += 1
        self.last_flops = self.guard.commit(self.rounds, committed)
        self.last_round_flops = sum(c.executed_total for c in committed)
        self.round = self._empty()
        return committed

    def commit_evaluation(self, reduce: Any) -> list[PhaseCharge]:
        """The evaluation just run, summed over processes, into the ledger's evaluation bucket."""
        self.commit_outside(reduce)
        committed, _ = self._reduce(self.evaluation, self.local_charges(evaluation=True), reduce)  # (not in TRL's
        # num_tokens, which counts training rollouts)
        self.evaluations += 1
        self.last_flops = self.guard.commit(self.rounds, committed)
        self.evaluation = self._empty()
        return committed

    def commit_outside(self, reduce: Any) -> None:
        """When measuring, the FLOPs run outside the units since the last commit, summed over the processes into
        :attr:`outside_committed` (every process calls it at once: at each commit, and at the training's end)."""
        if self.measure:
            self.outside_committed += int(reduce(torch.tensor(self.outside_units)))
            self.outside_units = 0

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

    def evaluation_bound(self, rows: int | None = None, prompts: tuple[int, int] | None = None) -> int:
        """The guard's bound of one evaluation (0 without): every row at the evaluation data's longest prompt and
        every completion at the maximum length, the reward model as in :meth:`next_round_bound`
        (:func:`flopplan.engines.trl_evaluation.evaluation_bound`). ``rows`` and ``prompts`` (the longest prompt as
        the policy and as the reward model read it): another evaluation's than the one training runs (a script's
        own ``trainer.evaluate``, :mod:`flopplan.engines.trl_evalguard`)."""
        rows = self.eval_rows if rows is None else rows
        prompt, reward = (self.eval_prompt_max, self.eval_reward_prompt_max) if prompts is None else prompts
        if not rows:
            return 0
        return evaluation_bound(self.recipe, rows, max(prompt, 1), passes=self.passes, reward_prompt=reward,
                                reward_extra=self.reward_extra)

    def fits_next_round(self, evaluations: int = 1) -> bool:
        """Whether the next round fits with ``evaluations`` evaluations kept in reserve (when evaluating), and its
        training within :attr:`train_flops_cap`; the stop message says what the bound holds where it is more than
        the round, or the cap."""
        round_bound, evaluation = self.next_round_bound(), self.evaluation_bound()
        what = (f"round {self.guard.next_round} (up to {round_bound:,} FLOPs) with {evaluations} evaluation"
                f"{'s' if evaluations > 1 else ''} kept in reserve (up to {evaluation:,} each)"
                if evaluations and evaluation else "")
        if self.guard.decide(round_bound + evaluations * evaluation, what).stop:
            return False
        return not self.guard.decide_cap(round_bound, self.train_flops_cap).stop

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
            figures["flops/mfu"] = utilisation
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
                 "reward_prompt_max": self.reward_prompt_max, "reward_extra": self.reward_extra,
                 "evaluations": self.evaluations, "eval_prompt_max": self.eval_prompt_max,
                 "eval_reward_prompt_max": self.eval_reward_prompt_max, "outside_units": self.outside_committed,
                 "notes": list(dict.fromkeys(self.notes))}
        Path(folder).mkdir(parents=True, exist_ok=True)
        atomic_write_json(Path(folder) / LEDGER_FILE, state)

    def load(self, folder: str | Path) -> None:
        path = Path(folder) / LEDGER_FILE
        if not path.exists() and (Path(folder) / TRL_ABANDONED).exists():
            newest = last_complete_checkpoint(Path(folder).parent)  # (the docs: the refusal names it)
            raise UserError(f"{str(folder)!r} was left behind when this run resumed from an older checkpoint: resume "
                            f"from {newest.name if newest else 'its newest complete one'}")
        if not path.exists():
            raise UserError(f"{str(folder)!r} holds no flopplan ledger: it is not a checkpoint of a metered run")
        state = read_json(path, "flopplan ledger")
        version = state.get("flopplan_trl_ledger_version") if isinstance(state, dict) else None
        if version != LEDGER_VERSION:
            raise UserError(f"{str(path)!r} is not a flopplan TRL ledger of version {LEDGER_VERSION} "
                            f"(flopplan_trl_ledger_version {version!r})")
        budget, charge_lost = self.ledger.budget_flops, self.ledger.charge_lost
        self.ledger = self.guard.ledger = Ledger.from_state(state["ledger"])
        self.ledger.budget_flops, self.ledger.charge_lost = budget, charge_lost
        self.rounds, self.tokens = state["rounds"], state["tokens"]
        # the run's notes so far: those saved with the checkpoint, then a finished summary's (a run resumed to go
        # further, or rerun at its max_steps), then this session's
        self.notes[:] = dict.fromkeys([*state.get("notes", []), *_summary_notes(self.folder), *self.notes])
        # the longest prompts: what the checkpoint saw or what the data holds, whichever is longer (a ledger saved
        # before the reward model's read of chat prompts was known has 0 for it)
        self.prompt_max = max(self.prompt_max, state["prompt_max"])
        self.reward_prompt_max = max(self.reward_prompt_max, state["reward_prompt_max"])
        self.reward_extra = max(self.reward_extra, state["reward_extra"])  # (the prompts' estimate or the learned)
        self.evaluations = state.get("evaluations", 0)
        self.outside_committed = state.get("outside_units", 0)
        self.eval_prompt_max = max(self.eval_prompt_max, state.get("eval_prompt_max", 0))
        # (a ledger saved before the two were apart bounded both with the larger)
        self.eval_reward_prompt_max = max(self.eval_reward_prompt_max,
                                          state.get("eval_reward_prompt_max", state["reward_prompt_max"]))

    def summary(self, **fields: Any) -> RunSummary:
        checks: dict[str, Any] = {"num_tokens": {"trl": self.trl_tokens, "flopplan": self.tokens,
                                                 "equal": self.trl_tokens == self.tokens}} \
            if self.trl_tokens is not None else {}
        if self.measure:  # FlopCounterMode over TRL's whole steps, outside the units it charges
            checks["outside_units"] = {"flops": self.outside_committed, "none": self.outside_committed == 0}
        model, reward = self.names or (self.spec.name, str(self.recipe.reward))
        return self.guard.summary(model=model, reward=reward, engine="trl", engine_checks=checks,
                                  **{"notes": tuple(dict.fromkeys(self.notes)), **fields})
