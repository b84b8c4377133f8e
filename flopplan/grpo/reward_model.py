"""A learned outcome reward model for the built-in task: a small sequence classifier trained on rule-labelled
completions, so that a feedback arm has meaningful, imperfect scores and real inference FLOPs.

Samples: (prompt, completion) pairs of the digits task, the completion one of four kinds in the mix :data:`MIX`:
the answer, a wrong digit, two digits, or random tokens (ids of the policy's vocabulary, decoded), each labelled by
the rule reward (:func:`flopplan.grpo.tasks.is_correct`), so a malformed output that still ends in the right digit
is labelled correct, as the rule would reward it. Prompts are split between training, validation and held-out
samples (no prompt string in two of them).

The model (``tiny-rm`` by default: tiny's backbone with a one-label score head) reads exactly what it reads when it
scores a policy's completions, in each engine (:data:`READS`): each time a training sample is drawn, a coin of the
seed's generator reads it as the built-in trainer does (:func:`flopplan.grpo.rewards.reward_row` through the
built-in tokenizer as a Hugging Face tokenizer: prompt, completion, EOS) or as TRL's ``GRPOTrainer`` does (the text
prompt + completion, no EOS), and every check measures both reads. It learns from random initialisation with AdamW
(its rate decaying linearly to zero over the most steps) on the binary cross-entropy of its pooled logit, and is
saved with ``problem_type: multi_label_classification``: the trainer's reward is then its probability of "correct",
in [0, 1]. Training is deterministic for a seed (one CPU thread for small models, batches drawn from a seeded
generator). Every batch is charged with flopplan's formulas for a full fine-tuning step (forward + backward, the
score head on every position) at the shapes it ran, and every forward that checks it (validation and held-out
samples) with the forward's; ``measure`` also counts them with FlopCounterMode.

Imperfect on purpose: the classifier's agreement with the rule rises abruptly, at a step that depends on the seed,
and goes on rising with more training (seed 0: 0.986 held out with EOS, 0.980 without, after 500 full steps).
Training therefore stops at the first check (every ``check_every`` steps, on validation samples of prompts of their
own) whose agreement reaches ``target_agreement`` in both reads; the agreement reported is measured afterwards on
held-out samples of other prompts, not the ones the stop looked at. With the defaults (2,000 samples, batches of
128, lr 1e-3 decaying over at most 1,000 steps, target 0.9) seeds 0-7 stopped after 90-260 steps and agreed with the
rule on 0.887-0.959 of the held-out samples with EOS (AUC 0.91-0.98) and 0.899-0.961 without (AUC 0.93-0.97).
Trained on rows with EOS alone they had stopped after 110-440 steps at 0.883-0.914 with EOS (AUC 0.91-0.97), the
errors mostly wrong digits called correct; there smaller batches were less reliable (at 32 or 64 rows some seeds had
not reached the target after 1,000 steps: 0.74-0.85 held out), and so was a schedule of 600 steps (one seed in
eight). Training on both reads of every sample in each epoch (twice the rows) was too: seed 1 had not reached the
target with EOS after 1,000 steps (0.877 validation, 0.885 held out).
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from flopplan.arch import ArchSpec, resolve
from flopplan.errors import UserError, check_int, check_number
from flopplan.fileio import atomic_write_json, writable_folder
from flopplan.formulas import Training, forward_flops, train_flops
from flopplan.grpo.batching import right_pad
from flopplan.grpo.codecs import Codec, hf_char_tokenizer, hf_codec
from flopplan.grpo.rewards import reward_row
from flopplan.grpo.tasks import DigitTask, Problem, is_correct
from flopplan.grpo.tokenizer import CharTokenizer
from flopplan.measure.models import build_model, recommended_threads
from flopplan.measure.timer import timed_and_counted
from flopplan.runfile import REWARD_MODEL_CARD, RewardModelCard

KINDS = ("correct", "wrong", "any")
MIX = {"correct": 0.25, "wrong": 0.25, "any": 0.5}
"""Shares of the kinds of completion in the samples: the answer, another digit, and any completion a policy of the
tiny family can produce in ``completion_tokens`` tokens (:func:`short_completions`, equally often each: nothing,
symbols, two digits, ids the tokenizer cannot spell, ...; correct when they happen to end in the answer). GRPO finds
whatever the model over-rates: trained on fewer kinds, a model scored ``00`` 0.6 whatever the answer, another
``1\n``, and a 99 %-agreeing one accepted ``43`` for nine prompts in ten; each time the policy collapsed onto that
completion. Every short completion, with several prompts each, leaves no such string unseen."""
READS = ("eos", "no_eos")
"""How an engine reads a completion for the model, both trained on and both checked: ``eos``, the built-in
trainer's row (prompt, completion, EOS: the FLOP model's ORM convention); ``no_eos``, TRL's (its reward-model
branch re-tokenises the text prompt + completion, the completion decoded with ``skip_special_tokens``: no EOS).
Trained on the first alone, a model read the second as near-random (seed 0: accuracy 0.915 with EOS, 0.742 and AUC
0.609 without, most of its "correct" verdicts lost)."""
CHECK_BATCH = 256  # rows per no-grad forward of a check: few large forwards cost less time than many small
POLICY_VOCAB = 32  # the tiny family's embedding rows: the built-in tokenizer's 23 ids and 9 it cannot spell


@dataclass(frozen=True)
class Sample:
    prompt: str
    completion: str
    kind: str
    label: int  # the rule reward: 1 if the completion's final answer is the prompt's answer


@dataclass(frozen=True)
class RewardModelTraining:
    """What ``flopplan reward-model train`` is asked to do."""

    task: DigitTask
    samples: int = 2000  # training samples
    held_out: int = 1000  # held-out samples for the reported agreement, on prompts no other sample has
    steps: int = 1000  # at most (the learning rate decays to zero over them)
    batch: int = 128
    lr: float = 1e-3
    seed: int = 0
    architecture: str = "tiny-rm"
    measure: bool = False
    target_agreement: float | None = 0.9  # stop at the first check reaching it; None: train every step
    validation: int = 300  # samples the stop checks, on prompts of their own
    check_every: int = 10
    completion_tokens: int = 2  # the longest completion "any" covers (the demo recipe's completion length)

    def __post_init__(self) -> None:
        for name in ("samples", "held_out", "steps", "batch", "validation", "check_every"):
            check_int(name, getattr(self, name), 1)
        check_int("completion_tokens", self.completion_tokens, 1, 3)
        check_number("lr", self.lr, 0.0, strict=True)
        check_int("seed", self.seed, 0, 2**32 - 1)
        if self.target_agreement is not None and not 0 < self.target_agreement <= 1:
            raise UserError(f"the target agreement must be in (0, 1], not {self.target_agreement}")
        space = 10 ** self.task.length
        if self.samples + self.held_out + self.validation > 4 * space:
            raise UserError(f"the digits task of length {self.task.length} has {space:,} prompts: "
                            f"{self.samples + self.held_out + self.validation:,} samples would repeat each more "
                            "than 4 times")

    @property
    def spec(self) -> ArchSpec:
        spec = resolve(self.architecture)
        if spec.head.kind != "score" or len(spec.head.layers) != 1 or spec.head.layers[0].out_features != 1:
            raise UserError(f"{spec.name} is not a one-label sequence classifier (e.g. tiny-rm)")
        return spec


_TOKENIZER = CharTokenizer()


@functools.cache
def short_completions(tokens: int) -> tuple[str, ...]:
    """Every distinct text a tiny-family policy can complete with in at most ``tokens`` tokens (generation stops at
    EOS; special ids decode to nothing, ids the tokenizer cannot spell to U+FFFD), sorted."""
    ids = [t for t in range(POLICY_VOCAB) if t != _TOKENIZER.eos_token_id]
    texts = {""}
    for n in range(1, tokens + 1):
        texts |= {_TOKENIZER.decode(list(seq)) for seq in itertools.product(ids, repeat=n)}
    return tuple(sorted(texts))


def completion_of(kind: str, answer: str, rng: random.Random, tokens: int = 2) -> str:
    """A completion of the given kind for a problem whose answer is ``answer``."""
    if kind == "correct":
        return answer
    if kind == "wrong":
        return rng.choice([d for d in "0123456789" if d != answer])
    return rng.choice(short_completions(tokens))


def make_samples(task: DigitTask, prompts: list[Problem], n: int, rng: random.Random,
                 tokens: int = 2) -> list[Sample]:
    """``n`` samples on the given prompts (cycled in a shuffled order), kinds drawn by :data:`MIX`."""
    order = list(prompts)
    rng.shuffle(order)
    kinds, weights = list(MIX), list(MIX.values())
    out = []
    for i in range(n):
        problem = order[i % len(order)]
        kind = rng.choices(kinds, weights)[0]
        completion = completion_of(kind, problem.answer, rng, tokens)
        out.append(Sample(problem.prompt, completion, kind, int(is_correct(completion, problem.answer))))
    return out


def split_prompts(task: DigitTask, sizes: tuple[int, ...], seed: int) -> list[list[Problem]]:
    """Disjoint prompt sets, one per sample set of the given sizes (prompts repeat only when the task has fewer
    strings than samples: each then serves several samples of its own set)."""
    space = 10 ** task.length
    total = sum(sizes)
    counts = [max(1, min(n, n * space // total)) for n in sizes]
    everything = task.split(sum(counts), 0, seed=seed * 7919 + 17)[0]
    out, start = [], 0
    for count in counts:
        out.append(everything[start:start + count])
        start += count
    return out


def auc(scores: np.ndarray, labels: np.ndarray) -> float | None:
    """Area under the ROC curve (the Mann-Whitney statistic, ties counted half); None with one class only."""
    from scipy.stats import rankdata

    positives, negatives = int(labels.sum()), int(len(labels) - labels.sum())
    if not positives or not negatives:
        return None
    ranks = rankdata(scores)
    return float((ranks[labels == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


class _Meter:
    """FLOPs of the batches a phase ran: flopplan's count, and FlopCounterMode's when measured."""

    def __init__(self, measure: bool) -> None:
        self.measure, self.closed_form, self.measured = measure, 0, 0

    def add(self, closed_form: int, info: dict[str, Any]) -> None:
        self.closed_form += closed_form
        self.measured += info["measured"] or 0


def _batch(model: Any, codec: Codec, rows: list[list[int]]) -> tuple[torch.Tensor, int]:
    width = max(len(r) for r in rows)
    ids, mask = right_pad(rows, codec.pad_id, width, torch.device("cpu"))
    return model(input_ids=ids, attention_mask=mask).logits.view(-1), width


def _probabilities(model: Any, codec: Codec, spec: ArchSpec, rows: list[list[int]], batch: int,
                   meter: _Meter) -> np.ndarray:
    """P(correct) of every row (no-grad forwards in batches, charged to ``meter``)."""
    was_training = model.training
    model.eval()
    out: list[float] = []
    with torch.no_grad():
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            with timed_and_counted(meter.measure, False) as info:
                logits, width = _batch(model, codec, chunk)
            meter.add(int(forward_flops(spec, len(chunk), width, width).total), info)
            out += torch.sigmoid(logits).tolist()
    model.train(was_training)
    return np.asarray(out)


def read_rows(codec: Codec, samples: list[Sample]) -> dict[str, list[list[int]]]:
    """Each sample's row in each of :data:`READS`: ``eos`` as the built-in trainer reads it
    (:func:`~flopplan.grpo.rewards.reward_row`: prompt, completion, EOS), ``no_eos`` as TRL's ``GRPOTrainer`` does
    (the text prompt + completion, its completion decoded without special tokens, tokenised with
    ``add_special_tokens=False``)."""
    return {"eos": [reward_row("orm", codec, s.prompt, s.completion) for s in samples],
            "no_eos": [codec.encode_piece(s.prompt + s.completion) for s in samples]}


def _read_probabilities(model: Any, codec: Codec, spec: ArchSpec, rows: dict[str, list[list[int]]],
                        meter: _Meter) -> dict[str, np.ndarray]:
    """P(correct) of every row of every read: one pass over the reads' rows together (charged to ``meter``)."""
    together = _probabilities(model, codec, spec, [row for read in READS for row in rows[read]], CHECK_BATCH, meter)
    return dict(zip(READS, np.split(together, len(READS)), strict=True))


def train_reward_model(cfg: RewardModelTraining, out: str | Path, command: str = "",
                       progress: Callable[[int, float], None] = lambda step, loss: None) -> RewardModelCard:
    """Train the reward model of ``cfg`` and write it to ``out`` (a transformers folder with its tokenizer and
    ``reward_model.json``), atomically: a new folder, or an empty one, that appears complete or not at all."""
    out = Path(out)
    check_destination(out)
    spec = cfg.spec
    threads = recommended_threads(spec.params)
    previous_threads = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        card, model, tokenizer = _train(cfg, spec, command, progress)
    finally:
        torch.set_num_threads(previous_threads)
    _publish(out, lambda staging: _save(staging, model, tokenizer, card))
    return card


def check_destination(out: Path) -> None:
    """Refuse, before any training, a destination that is not a new or empty folder or cannot be written."""
    try:
        taken = out.exists() and (not out.is_dir() or any(out.iterdir()))
    except OSError as exc:
        raise UserError(f"cannot read --out {str(out)!r}: {exc.strerror or exc}") from None
    if taken:
        raise UserError(f"--out {str(out)!r} exists and is not an empty folder: give a new one")
    writable_folder(out.parent, "folder of --out")


def _save(folder: Path, model: Any, tokenizer: Any, card: RewardModelCard) -> None:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    atomic_write_json(folder / REWARD_MODEL_CARD, card.to_data())


def _publish(out: Path, write: Callable[[Path], None]) -> None:
    """Fill a hidden staging folder beside ``out``, then rename it to ``out``: a reader sees the whole model or
    nothing, and whatever stops the writing (an error, Ctrl-C) takes the staging folder with it."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as exc:
        raise UserError(f"cannot write the reward model to {str(out)!r}: {exc.strerror or exc}") from None
    try:
        write(staging)
        umask = os.umask(0)
        os.umask(umask)
        for path in [staging, *staging.iterdir()]:  # mkdtemp makes the folder private; give it the usual modes
            path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
        if out.exists():
            out.rmdir()  # an empty folder (checked before training); a non-empty one fails here
        os.replace(staging, out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise UserError(f"cannot write the reward model to {str(out)!r}: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _train(cfg: RewardModelTraining, spec: ArchSpec, command: str,
           progress: Callable[[int, float], None]) -> tuple[RewardModelCard, Any, Any]:
    rng = random.Random(cfg.seed)
    sizes = (cfg.samples, cfg.validation, cfg.held_out)
    train_prompts, validation_prompts, held_prompts = split_prompts(cfg.task, sizes, cfg.seed)
    tokens = cfg.completion_tokens
    train = make_samples(cfg.task, train_prompts, cfg.samples, rng, tokens)
    validation = make_samples(cfg.task, validation_prompts, cfg.validation, rng, tokens)
    held = make_samples(cfg.task, held_prompts, cfg.held_out, rng, tokens)
    tokenizer = hf_char_tokenizer()
    codec = hf_codec(tokenizer, "the built-in tokenizer")
    rows = read_rows(codec, train)
    validation_rows, held_rows = read_rows(codec, validation), read_rows(codec, held)

    model: Any = build_model(spec, device="cpu", dtype=torch.float32, attn_implementation="eager", seed=cfg.seed)
    model.config.pad_token_id = codec.pad_id
    model.config.problem_type = "multi_label_classification"  # one binary logit: the reward is its sigmoid
    model.config.id2label, model.config.label2id = {0: "correct"}, {"correct": 0}
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    # linear decay to zero over the most steps: late steps settle instead of oscillating around the rule
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0 - done / cfg.steps)
    generator = torch.Generator().manual_seed(cfg.seed)
    labels = torch.tensor([s.label for s in train], dtype=torch.float32)
    validation_labels = np.asarray([s.label for s in validation])
    training, meter, checks = Training(), _Meter(cfg.measure), _Meter(cfg.measure)
    model.train()
    order: list[int] = []
    steps, checked = 0, dict[str, float | None].fromkeys(READS)
    for step in range(1, cfg.steps + 1):
        if len(order) < cfg.batch:  # epochs of a seeded permutation, the last batch of an epoch carried over
            order += torch.randperm(len(train), generator=generator).tolist()
        chosen, order = order[:cfg.batch], order[cfg.batch:]
        # each drawn sample in one of READS, by a coin of the seeded generator: over the epochs every sample is
        # read both ways, so the model scores a completion alike whichever engine reads it
        reads = torch.randint(len(READS), (len(chosen),), generator=generator).tolist()
        batch_rows = [rows[READS[read]][i] for i, read in zip(chosen, reads, strict=True)]
        with timed_and_counted(cfg.measure, False) as info:
            logits, width = _batch(model, codec, batch_rows)
            loss = F.binary_cross_entropy_with_logits(logits, labels[chosen])
            loss.backward()
        meter.add(int(train_flops(spec, len(chosen), width, width, training).total), info)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        steps = step
        progress(step, float(loss.detach()))
        if cfg.target_agreement is not None and step % cfg.check_every == 0:
            p = _read_probabilities(model, codec, spec, validation_rows, checks)
            accuracy = {read: float(((p[read] >= 0.5).astype(int) == validation_labels).mean()) for read in READS}
            checked = dict(accuracy)
            if min(accuracy.values()) >= cfg.target_agreement:  # each read: neither can hide behind the other
                break

    evaluation = _Meter(cfg.measure)
    probabilities = _read_probabilities(model, codec, spec, held_rows, evaluation)
    result = {read: {**agreement(held, probabilities[read]), "validation_accuracy": checked[read]} for read in READS}
    card = RewardModelCard(
        architecture=spec.name, params=spec.params, task=f"digits:{cfg.task.rule}:{cfg.task.length}",
        samples=cfg.samples, held_out_samples=cfg.held_out, steps=steps, batch=cfg.batch, lr=cfg.lr,
        seed=cfg.seed, training_flops=meter.closed_form, evaluation_flops=checks.closed_form + evaluation.closed_form,
        agreement=result["eos"], agreement_without_eos=result["no_eos"], mix=dict(MIX),
        measured_training_flops=meter.measured if cfg.measure else None,
        measured_evaluation_flops=checks.measured + evaluation.measured if cfg.measure else None, command=command,
        max_steps=cfg.steps, target_agreement=cfg.target_agreement,
        validation_samples=cfg.validation if cfg.target_agreement is not None else 0)
    return card, model, tokenizer


def agreement(samples: list[Sample], probabilities: np.ndarray) -> dict[str, Any]:
    """How the model's P(correct) agrees with the rule on held-out samples: accuracy at 0.5, AUC, and accuracy by
    kind of completion (with the share of samples the rule labels correct)."""
    labels = np.asarray([s.label for s in samples])
    right = (probabilities >= 0.5).astype(int) == labels
    kinds = np.asarray([s.kind for s in samples])
    return {"accuracy": float(right.mean()), "auc": auc(probabilities, labels),
            "positive_share": float(labels.mean()),
            "by_kind": {k: {"samples": int((kinds == k).sum()), "accuracy": float(right[kinds == k].mean())}
                        for k in KINDS if (kinds == k).any()}}
