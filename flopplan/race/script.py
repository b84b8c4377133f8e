"""The contract between RACE and a pilot that is the user's own TRL script (``flopplan race run DIR --pilot CMD``).

For each pilot the runner writes a :class:`PilotSpec` (``pilot.json`` in the pilot's run folder, atomically) and
starts the user's command with :data:`PILOT_ENV` set to its path. The script asks for it with
:func:`flopplan.race.pilot` (None when the script was not started as a pilot, so the same script runs standalone),
applies the arm's settings to its ``GRPOConfig`` (:meth:`PilotSpec.apply`) and meters its trainer with the rung's
budget (:meth:`PilotSpec.meter`: :func:`flopplan.trl.meter` plus evaluation at the race's FLOP points through
TRL's evaluation loop), then calls ``trainer.train(resume_from_checkpoint=spec.resume_from_checkpoint)``.

Conventions: ``budget`` is the pilot's FLOP budget at its rung (training plus its evaluations, as a built-in
pilot's), ``train_flops`` its training FLOPs, which the meter stops it before passing (a round that passes several
evaluation points evaluates once, and the reserve of those not run would buy training); ``eval_points`` are training
FLOPs (evaluations excluded) after which the pilot evaluates, besides step 0 and the step it stops after; ``rung``
-1 is the validating run. ``grpo`` holds the ``GRPOConfig`` fields of the
arm's recipe on the processes its generation batch implies, one unless designed with a share of the round's rollouts
(:func:`flopplan.engines.trl.grpo_config_kwargs`, :func:`~flopplan.engines.trl.implied_world_size`), ``settings``
the GRPOConfig fields its FLOP-neutral axes set (learning rate, loss type, ...: :mod:`flopplan.race.axes`);
:meth:`PilotSpec.apply` adds the protocol's fields (:meth:`PilotSpec.overrides`) and recomputes the batch for the
script's world size.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flopplan import serial
from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, read_json
from flopplan.race.pilot_data import check_prompts
from flopplan.recipe import Recipe

PILOT_ENV = "FLOPPLAN_PILOT"
"""The environment variable that holds the path of a pilot's spec (``pilot.json``)."""
SPEC_FILE = "pilot.json"
SPEC_VERSION = 1
SPEC_LAYOUT = serial.Layout("pilot spec", "pilot_spec_version", SPEC_VERSION)
MAX_STEPS = 10**7
"""``max_steps`` of every pilot: beyond any budget, so the budget ends each rung (and a linear schedule over it is
flat: a pilot continued to the next rung is the same run)."""
ALIASES = {"gradient_checkpointing": "activation_checkpointing"}
"""transformers' new names of fields the arm sets under their old (TRL's, flopplan's) names."""


@dataclass(frozen=True)
class PilotSpec:
    """What a pilot must know (``pilot.json``). ``model``: the arm's policy as designed (a registry name, a model id
    or a folder; the script loads it); ``peft``: ``LoraConfig`` fields or None (full fine-tuning); ``reward``: the
    arm's reward system (``rule``: the script's own reward functions; ``orm:ARCH``: a reward model the script adds
    to its ``reward_funcs``, from the folder ``reward_model`` where the design trained one)."""

    race: str
    arm: str
    axes: dict[str, Any]
    seed: int
    rung: int
    budget: int = field(metadata=serial.spec(check=serial.POSITIVE))
    folder: str
    output_dir: str
    resume: bool
    target: str
    eval_points: tuple[int, ...]
    model: str
    grpo: dict[str, Any]
    peft: dict[str, Any] | None
    reward: str
    recipe: Recipe
    settings: dict[str, Any] = field(default_factory=dict)  # the arm's FLOP-neutral GRPOConfig fields (axes)
    eval_prompts: int | None = None  # the prompts of an evaluation, as designed (None: a spec written before)
    eval_generations: int | None = None  # completions per evaluation prompt, as designed (race design --eval-loop
    #                                      trl; None: the design priced flopplan's evaluation, or a spec before)
    reward_model: str | None = None  # an orm arm's trained reward model (race design --reward-model-path): a folder
    train_flops: int | None = field(default=None, metadata=serial.spec(check=serial.POSITIVE))  # the rung's training
    #   FLOPs, which no round may take the pilot past (:meth:`meter`); None: the validating run, or a spec before

    @property
    def resume_from_checkpoint(self) -> str | None:
        """What to pass to ``trainer.train(resume_from_checkpoint=...)`` when continuing this pilot: its newest
        checkpoint written to the end (a kill during a save leaves a newer, partial one); None for a new pilot, or
        when no checkpoint was completed (the pilot starts over)."""
        from flopplan.runfile import last_complete_checkpoint

        last = last_complete_checkpoint(self.output_dir) if self.resume else None
        return None if last is None else str(last)

    def overrides(self, world_size: int = 1) -> dict[str, Any]:
        """The ``GRPOConfig`` fields a pilot runs with: the arm's (its batch for ``world_size`` processes) and the
        protocol's: its checkpoint folder and seed, a checkpoint and a possible evaluation at every round boundary
        (the meter decides which evaluations run), the baseline evaluation unless continuing a checkpoint (a pilot
        killed before its first starts again, baseline included), ``max_steps`` beyond the budget, and, where the
        design priced TRL's evaluation loop, its ``num_generations_eval``."""
        from flopplan.engines.trl import EXTRA_KEYS, grpo_config_kwargs

        arm = {k: v for k, v in grpo_config_kwargs(self.recipe, world_size=world_size).items()
               if k not in EXTRA_KEYS}
        per_round = arm["steps_per_generation"] * arm["num_iterations"] // arm["gradient_accumulation_steps"]
        return {**arm, **self.settings, "output_dir": self.output_dir, "seed": self.seed, "max_steps": MAX_STEPS,
                "save_strategy": "steps", "save_steps": per_round, "save_total_limit": 2,
                "eval_strategy": "steps", "eval_steps": per_round, "eval_on_start": self.resume_from_checkpoint is None,
                **({"num_generations_eval": self.eval_generations} if self.eval_generations else {})}

    def apply(self, config: Any) -> Any:
        """``config`` (a ``GRPOConfig``, or a dict of its keyword arguments) with :meth:`overrides`: a new
        ``GRPOConfig`` (or dict), the same fields either way. A field a ``GRPOConfig`` does not have is refused with
        one line (a dict is not checked: its ``GRPOConfig`` refuses it); a generation batch the script set gives way
        to the arm's ``steps_per_generation`` (TRL refuses both); a per-process evaluation batch that would repeat
        rows gives way to :meth:`evaluation_batch`'s; a warmup given as a share of ``max_steps`` is refused
        (:func:`check_warmup`)."""
        if isinstance(config, dict):
            fields, names = dict(config), None
            world = int(os.environ.get("WORLD_SIZE", "1"))
            changes = self.overrides(world)
        elif dataclasses.is_dataclass(config) and not isinstance(config, type):
            names = {f.name for f in dataclasses.fields(config) if f.init}
            world = int(getattr(config, "world_size", 1))
            changes = self.overrides(world)
            unknown = sorted(set(changes) - names)
            if unknown:
                raise UserError(f"{type(config).__name__} has no field {unknown[0]!r}: this TRL cannot run the arm's "
                                "settings")
            fields = {name: getattr(config, name) for name in names}
        else:
            raise UserError(f"spec.apply takes a GRPOConfig or a dict of its fields, not {type(config).__name__}")
        if "steps_per_generation" in changes:
            fields["generation_batch_size"] = None
        for old, new in ALIASES.items():  # a rebuilt config reads the new name first
            if old in changes and (new in names if names is not None else new in fields):
                changes[new] = changes[old]
        merged = {**fields, **changes}
        batch = self.evaluation_batch(merged.get("per_device_eval_batch_size"), world)
        if batch is not None:
            merged["per_device_eval_batch_size"] = batch
        check_warmup(merged)  # the script's warmup, or an axis's (--axis warmup_steps=...)
        if names is None:
            return merged
        rebuilt: Any = type(config)
        return rebuilt(**merged)

    def evaluation_rows(self) -> int | None:
        """The rows of one evaluation as designed (prompts x completions each), None where the design does not say
        (flopplan's greedy pass priced, or a spec written before)."""
        return self.eval_prompts * self.eval_generations if self.eval_prompts and self.eval_generations else None

    def evaluation_batch(self, batch: Any, world: int) -> int | None:
        """A per-process evaluation batch with which TRL's evaluation runs the designed rows and no more, where the
        script's (``batch``) would not: accelerate repeats rows to fill the last global batch (``batch`` x
        ``world`` processes), which evaluates and charges more than the design priced (16 rows on 2 processes in
        batches of 16: 32). The largest batch not above the script's that divides each process's rows and whose
        global batch TRL's sampler splits into groups of ``num_generations_eval``; None where nothing needs
        changing, or nothing fits (the meter then refuses the trainer)."""
        rows = self.evaluation_rows()
        if rows is None or not isinstance(batch, int) or batch < 1 or world < 1 or rows % (batch * world) == 0 \
                or rows % world:
            return None
        share, generations = rows // world, int(self.eval_generations or 1)
        fits = [d for d in range(min(batch, share), 0, -1) if share % d == 0 and (d * world) % generations == 0]
        return fits[0] if fits else None

    def meter(self, trainer: Any, *, score: str | None = None, correct: float = 1.0, **options: Any) -> Any:
        """Meter ``trainer`` for this pilot: :func:`flopplan.trl.meter` with the rung's budget, the pilot's run
        folder and ``resume``, and evaluation at the race's FLOP points on the trainer's ``eval_dataset`` (each
        evaluation prompt scores 1 when the mean of the reward function named ``score``, by default the first,
        over its completions is at least ``correct``). ``options``: :func:`flopplan.trl.meter`'s others (work a kill
        lost is recorded outside the budget unless ``lost_outside_budget=False``). The
        trainer must have been built with :meth:`apply`'s config (a field it lacks is refused, naming it) and train
        the arm's LoRA rank, or full fine-tuning (``peft``: a script that ignored it trained another arm)."""
        from flopplan.engines.trl_hook import meter
        from flopplan.engines.trl_points import evaluate_at_points

        expected = self.overrides(int(trainer.accelerator.num_processes))
        for name, value in expected.items():
            have = getattr(trainer.args, name, None)
            if str(getattr(have, "value", have)) != str(value):
                raise UserError(f"the trainer's GRPOConfig {name} is {have!r}, the pilot's {value!r}: build it from "
                                "spec.apply(config)")
        from flopplan.engines.trl_trainer import policy_lora

        rank, arm_rank = policy_lora(getattr(trainer, "model", None))[0], self.recipe.lora_rank
        if rank != arm_rank:  # the script ignored spec.peft (or adds its own): its pilot trains another arm
            have = f"LoRA rank {rank}" if rank is not None else "no adapters (full fine-tuning)"
            want = (f"LoRA rank {arm_rank} (spec.peft: pass peft_config=LoraConfig(**spec.peft) to GRPOTrainer)"
                    if arm_rank is not None else "full fine-tuning (spec.peft is None)")
            raise UserError(f"the trainer's model has {have}; the arm trains {want}")
        evaluation = getattr(trainer, "eval_dataset", None)
        if evaluation is None:
            raise UserError("a pilot evaluates on the trainer's eval_dataset: give GRPOTrainer an eval_dataset")
        if isinstance(evaluation, dict):
            raise UserError("a pilot evaluates on one eval_dataset (the race's target), not a dict of "
                            f"{len(evaluation)}: give GRPOTrainer that one")
        if hasattr(evaluation, "__len__"):  # now, not after every pilot ran
            check_prompts(len(evaluation), "the trainer's eval_dataset has")
            designed = self.eval_prompts
            if designed is not None and len(evaluation) != designed:  # priced so, and every arm evaluates on them
                raise UserError(f"the trainer's eval_dataset has {len(evaluation)} prompts, the race's evaluations "
                                f"{designed} (race design --eval-prompts; spec.eval_prompts): give the pilot "
                                f"{designed}, or design the race with --eval-prompts {len(evaluation)}")
        rows, world = self.evaluation_rows(), int(trainer.accelerator.num_processes)
        batch = int(getattr(trainer.args, "per_device_eval_batch_size", 1) or 1)
        if rows is not None and rows % (batch * world):  # accelerate would repeat rows to even the batches
            fit = self.evaluation_batch(batch, world)
            raise UserError(f"TRL's evaluation of {rows} rows in batches of {batch} on {world} process"
                            f"{'es' if world > 1 else ''} repeats rows to fill its last batch, beyond the rows the "
                            "race priced: " + (f"set per_device_eval_batch_size to {fit} (spec.apply does)" if fit else
                                          f"design the race with --eval-prompts a multiple of {world}" if rows % world
                                          else f"set per_device_eval_batch_size to a divisor of {rows // world}"))
        self.check_round(trainer)
        options.setdefault("lost_outside_budget", True)  # as a built-in pilot: a resumed pilot runs its rounds
        metered = meter(trainer, budget=self.budget, out=self.folder, resume=self.resume,
                        check_prompts=self.check_lengths, **options)
        metered.train_flops_cap = self.train_flops  # the budget also holds evaluations that may not run
        metered.train_flops_cap_name = "the rung's training-FLOP cap"  # (the pilot's user gave no --train-flops)
        evaluate_at_points(trainer, metered, self.eval_points, self.target, score=score, correct=correct)
        return metered

    def check_round(self, trainer: Any) -> None:
        """The trainer must run the round the design priced for the arm (:data:`~flopplan.engines.trl_trainer.
        COMPARED`): a pilot whose script loads another model, or runs another attention kernel (transformers' SDPA
        where the race priced eager attention), would be charged another round's FLOPs than its rung was sized in,
        and stop short of it; refused in one line that says what to change. The reward model is compared only for an
        ``orm:`` arm."""
        import tempfile

        from flopplan.engines.trl_trainer import describe_difference, first_difference, read_trainer

        with tempfile.TemporaryDirectory(prefix="flopplan-pilot-") as scratch:  # the model's config, read in it
            read = read_trainer(trainer, Path(scratch), 1)
            # a ``rule`` arm's rewards are the script's own functions, a reward model among them included (charged
            # as it runs, and named by the learned-reward caveat): only an ``orm:`` arm names the model to run
            own = ("reward_spec",) if self.recipe.reward.kind == "rule" else ()
            difference = first_difference(self.recipe, read.recipe, skip=own)
        if difference is None:
            return
        name, priced, runs = difference
        if name == "attention_kernel":
            fix = (f"design the race with --attention-kernel {runs}, or load the policy with "
                   f"attn_implementation={'eager' if priced == 'eager' else 'sdpa'!r}")
        elif name.endswith("_spec"):
            fix = f"load the arm's model ({'spec.model' if name == 'policy_spec' else 'its reward model'})"
        else:
            flag = {f.name: f.metadata.get("option") for f in dataclasses.fields(Recipe)}.get(name)
            setting = f" ({flag} {runs})" if flag and isinstance(runs, str) else ""
            fix = f"build the trainer from spec.apply(config), or design the race with the script's setting{setting}"
        shown = describe_difference(name, priced, runs, read.conventions, whose="the arm's")
        raise UserError(f"the trainer does not run the round the race priced for {self.arm}: its {shown}; {fix}")

    def check_lengths(self, train: int, evaluation: int, reward: int = 0, eval_reward: int = 0,
                      retokenised: int = 0) -> None:
        """The trainer's prompts must fit the lengths the design priced: its longest training prompt (``train``
        tokens, as TRL tokenizes them: its chat template included; TRL 1.16 truncates no prompt) within
        ``--prompt-len``'s maximum and its longest evaluation prompt within ``--eval-prompt-len``'s. The meter keeps the
        worst case of the next round in reserve at the data's longest prompt, so a pilot whose prompts are longer than
        priced stops short of the steps its rung was planned for, and the analysis reads it as an arm that stopped
        early; refused in one line, naming the length to design with (the meter calls this with the lengths it read,
        before it writes anything). So is a reward model whose own tokenizer reads the prompts (``reward`` tokens,
        the longest training prompt; ``eval_reward``, the longest evaluation prompt) beyond what the design priced
        its reads at: ``--prompt-len``'s maximum (``--eval-prompt-len``'s) plus ``--reward-overhead``, with the
        ``retokenised`` tokens by which the meter takes it to read a completion at its longest beyond the policy's
        count where its tokenizer is not the policy's (:func:`flopplan.engines.trl_prompts.retokenising`)."""
        r = self.recipe
        sets = (("train_dataset", train, reward, int(r.prompt_len.max), "--prompt-len"),
                ("eval_dataset", evaluation, eval_reward, int(r.evaluation_prompt_len.max), "--eval-prompt-len"))
        for what, found, _, priced, flag in sets:
            if found > priced:
                raise UserError(f"the trainer's {what} has prompts of up to {found} tokens as TRL tokenizes them "
                                f"(its chat template included), the race priced at most {priced} ({flag}): design "
                                f"the race with {flag} {found} (or MEAN:{found}), or shorten the prompts")
        if r.reward_spec is None:
            return
        # what the reward model reads beyond the priced prompt, for each data set: one overhead covers both
        over, what, read, priced, flag = max((read + retokenised - priced, what, read, priced, flag)
                                             for what, _, read, priced, flag in sets)
        if over > r.reward_overhead_tokens:
            completion = f" and a completion at its longest in about {retokenised} tokens more than the policy's" \
                if retokenised else ""
            beyond = "its template or its own split of the prompts" + (", and the completion read again"
                                                                       if retokenised else "")
            raise UserError(f"the reward model's tokenizer reads the trainer's {what} prompts as up to {read} "
                            f"tokens{completion}, the race priced its reads at most {priced} ({flag}) + "
                            f"{r.reward_overhead_tokens} (--reward-overhead): design the race with "
                            f"--reward-overhead {over} (what it reads beyond {flag}: {beyond}), or shorten the "
                            "prompts")

    def to_data(self) -> dict[str, Any]:
        return serial.write(SPEC_LAYOUT, self)

    @staticmethod
    def from_data(data: Any, where: str) -> PilotSpec:
        spec: PilotSpec = serial.read(SPEC_LAYOUT, PilotSpec, data, where)
        return spec

    def save(self) -> Path:
        return atomic_write_json(Path(self.folder) / SPEC_FILE, self.to_data())


def load_spec(path: str | Path) -> PilotSpec:
    return PilotSpec.from_data(read_json(path, "pilot spec"), f"pilot spec {str(path)!r}")


def pilot() -> PilotSpec | None:
    """The spec of the pilot this process runs (``$FLOPPLAN_PILOT``), or None when it was not started as one."""
    path = os.environ.get(PILOT_ENV)
    return load_spec(path) if path else None


def check_warmup(fields: dict[str, Any]) -> None:
    """A warmup given as a share of ``max_steps`` is refused: a pilot runs with :data:`MAX_STEPS`, so
    ``warmup_steps=0.1`` (transformers' ratio form, below 1) or ``warmup_ratio=0.1`` (older releases) would hold
    the learning rate near 0 for 10^6 steps, every pilot would learn almost nothing, and the race would rank arms
    by noise. A warmup in steps is the same in a pilot and in the run it stands for."""
    ratio = fields.get("warmup_ratio") or 0
    steps = fields.get("warmup_steps") or 0
    if isinstance(steps, float) and 0 < steps < 1:
        given, ratio = f"warmup_steps={steps:g}", steps
    elif ratio:
        given = f"warmup_ratio={ratio:g}"
    else:
        return
    raise UserError(f"{given} is a share of max_steps, which a pilot sets to {MAX_STEPS:,} (the budget ends each "
                    f"rung): its warmup would last {int(ratio * MAX_STEPS):,} steps; give it in steps "
                    "(warmup_steps=N)")
