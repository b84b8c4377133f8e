"""Feedback for the GRPO run: rule rewards and reward models (ORM, Qwen2.5-Math-PRM-style PRM).

* ``rule``: 1 if the completion's final answer equals the reference answer (exact match after normalisation),
  plus an optional format reward when the completion ended with EOS and has an extractable answer.
* ``orm``: a sequence-classification model reads the templated prompt + completion; the reward is its score at
  the last token, or its probability (the sigmoid of the score) when the model declares its single label a binary
  logit (``problem_type: multi_label_classification``, as ``flopplan reward-model train`` saves it), or its
  verdict, 0/1 (:data:`ORM_OUTPUTS`).
* ``prm``: the response is split into steps on blank lines, a separator token follows each step, ONE forward
  pass reads prompt + steps, and each step's score is the softmax probability of class 1 at its separator;
  the scalar reward aggregates the step scores by ``min``, ``prod`` or ``last``.

Reward models load from a local path or are random-initialised from a registry architecture: a random model's
scores mean nothing, but its FLOPs and plumbing are real, and the run says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from flopplan.arch import ArchSpec, load_config
from flopplan.errors import UserError, first_line
from flopplan.grpo.batching import model_device, right_pad
from flopplan.grpo.codecs import Codec
from flopplan.grpo.tasks import extract_answer, is_correct
from flopplan.ledger import PhaseCharge, charge, ran
from flopplan.measure.timer import timed_and_counted
from flopplan.passes import RoundPass
from flopplan.recipe import RewardSystem

PRM_AGGREGATES = ("min", "prod", "last")
ORM_OUTPUTS = ("auto", "score", "probability", "verdict")
"""What an ORM's pooled score becomes as a reward: ``score`` as it is, ``probability`` its sigmoid, ``verdict`` 1 if
that is at least 1/2 else 0 (the model's decision, 0/1 like the rule it stands in for); ``auto``: the probability
when the model declares its one label a binary logit (``problem_type: multi_label_classification``), else the
score."""


def rule_rewards(completions: list[str], answers: list[str], ended: list[bool],
                 format_weight: float = 0.0) -> tuple[list[float], list[bool]]:
    """Exact-match rewards (and whether each was correct); ``format_weight`` for a well-formed completion."""
    correct = [is_correct(c, a) for c, a in zip(completions, answers, strict=True)]
    rewards = []
    for c, ok, done in zip(completions, correct, ended, strict=True):
        well_formed = done and extract_answer(c) is not None
        rewards.append(float(ok) + (format_weight if well_formed else 0.0))
    return rewards, correct


@dataclass
class RewardModel:
    """A reward model, its architecture (for the ledger) and how it reads a completion."""

    system: RewardSystem
    spec: ArchSpec
    model: nn.Module
    random_init: bool
    aggregate: str = "min"
    max_steps: int = 32
    batch: int = 16
    codec: Codec | None = None  # its own tokenizer (a local model); None: it reads the policy's ids
    output: str = "auto"  # an ORM's reward: ORM_OUTPUTS

    @staticmethod
    def load(system: RewardSystem, device: torch.device, dtype: torch.dtype, attn: str, seed: int,
             policy_codec: Codec, policy_vocab: int, path: str | None = None, aggregate: str = "min",
             max_steps: int = 32, batch: int = 16, output: str = "auto") -> RewardModel:
        """A local outcome reward model (with its tokenizer), or a random-initialised registry architecture that
        reads the policy's token ids."""
        from flopplan.measure.models import build_model

        if aggregate not in PRM_AGGREGATES:
            raise UserError(f"PRM aggregate must be one of {', '.join(PRM_AGGREGATES)}")
        if output not in ORM_OUTPUTS:
            raise UserError(f"the reward output must be one of {', '.join(ORM_OUTPUTS)}")
        codec = None
        if path is not None:
            from flopplan.hf_config import require_local_orm

            require_local_orm(Path(path), f"the reward model in {path!r}")  # what the CLI's check says (train.config)
            spec = load_config(Path(path))
            if system.kind == "prm":
                raise UserError(f"{system} is a process reward model, but the folder {path!r} holds an outcome "
                                f"reward model: score with it as orm:{Path(path) / 'config.json'}; a local PRM "
                                "needs its own modeling code, which flopplan does not run")
            from flopplan.grpo.codecs import local_codec

            codec, _ = local_codec(path, f"--reward-model-path {path!r}", spec.vocab_size)
            try:
                model = _load_local(spec, path, device, dtype, attn)
            except (OSError, ValueError) as exc:  # no weights, unreadable files
                raise UserError(f"cannot load the reward model in {path!r}: {first_line(exc)}") from None
            random_init = False
        else:
            spec = system.spec()  # type: ignore[assignment]
            if spec.vocab_size < policy_vocab:
                raise UserError(f"the reward model {spec.name} has {spec.vocab_size:,} embeddings but reads the "
                                f"policy's tokens (up to {policy_vocab:,}): use a model with a larger vocabulary")
            model = build_model(spec, device=device, dtype=dtype, attn_implementation=attn, seed=seed)
            random_init = True
        config = getattr(model, "config", None)
        if config is not None:
            config.pad_token_id = (codec or policy_codec).pad_id
        model.eval()
        for p in model.parameters():
            p.requires_grad_(False)
        return RewardModel(system, spec, model, random_init, aggregate, max_steps, batch, codec, output)

    def token_rows(self, codec: Codec, prompts: list[str], completions: list[str],
                   max_completion_tokens: int | None = None) -> list[list[int]]:
        """What the reward model reads for each completion (prompt + response, separators for a PRM).

        Re-tokenising decoded text can yield more tokens than were generated; with ``max_completion_tokens`` a
        row longer than :meth:`worst_case_tokens` loses the start of its prompt, so the budget's worst case
        holds whatever the tokenizer does.
        """
        rows = []
        for prompt, completion in zip(prompts, completions, strict=True):
            ids = reward_row(self.system.kind, codec, prompt, completion, self.max_steps)
            if max_completion_tokens is not None:
                bound = self.worst_case_tokens(len(codec.encode(prompt)), max_completion_tokens)
                ids = ids[-bound:]
            rows.append(ids)
        return rows

    @property
    def extra_tokens(self) -> int:
        """Tokens read besides prompt and completion: the EOS an ORM reads after the response, or one separator
        per step for a PRM (at most ``max_steps`` steps: :func:`split_steps` merges the rest into the last)."""
        return self.max_steps if self.system.kind == "prm" else 1

    def worst_case_tokens(self, prompt_tokens: int, completion_tokens: int) -> int:
        """An upper bound on the tokens read for one completion (budget checks happen before generation):
        separators replace the blank lines between steps, and a row re-tokenised to more tokens than this is cut
        from the start of its prompt (:meth:`token_rows`), so the bound holds whatever the tokenizer does."""
        return prompt_tokens + completion_tokens + self.extra_tokens

    def score(self, codec: Codec, prompts: list[str], completions: list[str], charge_as: RoundPass,
              measure: bool = False, max_completion_tokens: int | None = None) -> tuple[list[float], PhaseCharge]:
        """Rewards of the completions; the batches charged as ``charge_as`` (the round's reward pass), each row
        at the tokens the model read."""
        codec = self.codec or codec
        rows = self.token_rows(codec, prompts, completions, max_completion_tokens)
        device = model_device(self.model)
        rewards: list[float] = []
        batches = []
        with torch.no_grad(), timed_and_counted(measure, device.type == "cuda") as info:
            for start in range(0, len(rows), self.batch):
                chunk = rows[start:start + self.batch]
                width = max(len(r) for r in chunk)
                ids, mask = right_pad(chunk, codec.pad_id, width, device)
                batches.append(ran(charge_as, [(len(r), 0) for r in chunk], (width, 0)))
                out = self.model(input_ids=ids, attention_mask=mask)
                scores = out.logits if hasattr(out, "logits") else out
                rewards += self._rewards(scores.float(), ids, chunk, codec)
        done = charge(*batches)
        done.measured, done.seconds = info["measured"], info["seconds"]
        return rewards, done

    @property
    def orm_output(self) -> str:
        """What an ORM's reward is (:data:`ORM_OUTPUTS`), ``auto`` resolved by the model's config."""
        return orm_output(self.output, self.model)

    def _rewards(self, scores: torch.Tensor, ids: torch.Tensor, rows: list[list[int]], codec: Codec) -> list[float]:
        if self.system.kind == "orm":  # sequence classification: already pooled at the last token
            return orm_reward(scores.view(len(rows), -1)[:, 0], self.orm_output).tolist()
        probs = torch.softmax(scores, dim=-1)[..., 1]
        out = []
        for i, row in enumerate(rows):
            steps = [probs[i, j].item() for j, token in enumerate(row) if token == codec.sep_id]
            if not steps:
                out.append(0.0)
            elif self.aggregate == "min":
                out.append(min(steps))
            elif self.aggregate == "prod":
                out.append(math.prod(steps))
            else:
                out.append(steps[-1])
        return out


def orm_output(output: str, model: Any) -> str:
    """What an ORM's reward is (:data:`ORM_OUTPUTS`): ``output``, or for ``auto`` the probability of a binary
    classifier (``problem_type`` multi-label: one logit, trained by ``flopplan reward-model train``) and else the
    score (its logit)."""
    if output != "auto":
        return output
    binary = getattr(getattr(model, "config", None), "problem_type", None) == "multi_label_classification"
    return "probability" if binary else "score"


def orm_reward(score: torch.Tensor, output: str) -> torch.Tensor:
    """An ORM's reward from its score (logit) by ``output`` (resolved: score, probability or verdict)."""
    if output == "probability":
        return torch.sigmoid(score)
    if output == "verdict":
        return (score >= 0).to(score.dtype)  # sigmoid(x) >= 1/2 exactly when x >= 0
    return score


def reward_row(kind: str, codec: Codec, prompt: str, completion: str, max_steps: int = 32) -> list[int]:
    """What a reward model reads for one completion: the prompt, then the response and EOS (ORM), or each step
    followed by a separator (PRM). A learned reward model is trained on these same rows."""
    ids = list(codec.encode(prompt))
    if kind == "prm":
        for step in split_steps(completion, max_steps):
            ids = ids + codec.encode_piece(step) + [codec.sep_id]
        return ids
    return ids + codec.encode_piece(completion) + [codec.eos_id]


def split_steps(response: str, max_steps: int) -> list[str]:
    """Steps of a response: blocks separated by blank lines; beyond ``max_steps`` the rest is the last step."""
    steps = [s for s in response.split("\n\n") if s.strip()] or [response]
    if len(steps) > max_steps:
        steps = [*steps[:max_steps - 1], "\n\n".join(steps[max_steps - 1:])]
    return steps


def _load_local(spec: ArchSpec, path: str, device: torch.device, dtype: torch.dtype, attn: str) -> Any:
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True, dtype=dtype,
                                                              attn_implementation=attn).to(device)
