"""The prompts a metered GRPOTrainer will read, in tokens, before it trains: the longest prompt of the training and
evaluation data as the policy reads it and as the reward model reads it. They are the budget guard's bounds before
any round has run (:meth:`flopplan.engines.trl_meter.TRLMeter.next_round_bound`) and a race pilot's length check.

A reward model reads each row the way TRL's ``_calculate_rewards`` lays it out: a plain-text prompt and completion
joined and tokenized by the reward model's tokenizer; a conversational prompt with the completion as an assistant
turn, through the reward model's own chat template. The prompt's part of that read is known before training
(:func:`reward_prompt_reads`); the completion's, tokenized again by another tokenizer than the policy's, is
estimated from the prompts' text before training and learned as rounds run (:func:`retokenising`).
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch

from flopplan.errors import UserError


def eval_datasets(trainer: Any) -> list[Any]:
    """The trainer's evaluation datasets: its ``eval_dataset``, or each of a dict of them (transformers evaluates
    each in turn at an evaluation, logging each under its name)."""
    dataset = getattr(trainer, "eval_dataset", None)
    return [] if dataset is None else list(dataset.values()) if isinstance(dataset, dict) else [dataset]


PromptSets = dict[str, list[list[Any]]]
"""The prompts of the training data and of each evaluation dataset, under ``train_dataset`` and ``eval_dataset``."""


def prompt_sets(trainer: Any, evaluation: bool) -> PromptSets:
    """The trainer's prompts, read once for :func:`longest_prompts`: the training data's and, when ``evaluation``,
    each evaluation dataset's. A streamed dataset is refused."""
    from datasets import IterableDataset

    train = getattr(trainer, "train_dataset", None)
    found = {"train_dataset": [] if train is None else [train],
             "eval_dataset": eval_datasets(trainer) if evaluation else []}
    for attribute, datasets in found.items():
        if any(isinstance(d, IterableDataset) for d in datasets):
            raise UserError(f"the trainer's {attribute} is an IterableDataset (streamed): the meter bounds a round by "
                            "the data's longest prompt, read before training (TRL truncates no prompt); give it a "
                            "Dataset (e.g. Dataset.from_list(list(stream.take(n))))")
    return {attribute: [list(d["prompt"]) for d in datasets] for attribute, datasets in found.items()}


def _token_lengths(encode: Any, texts: list[Any]) -> list[int]:
    """Each text's token count under ``encode`` (a batch of texts -> their ids), in batches of 512."""
    return [len(row) for start in range(0, len(texts), 512) for row in encode(texts[start:start + 512])]


def reward_models(trainer: Any) -> list[tuple[Any, Any]]:
    """The trainer's reward models (not functions) with their tokenizers."""
    return [(module, tokenizer) for module, tokenizer in
            zip(trainer.reward_funcs, trainer.reward_processing_classes, strict=True)
            if isinstance(module, torch.nn.Module) and tokenizer is not None]


def check_tokenizers(trainer: Any) -> list[str]:
    """Refuse, before training, a reward model whose tokenizer cannot feed it, which TRL would only find mid-round:
    one without a vocabulary or a padding (or end-of-sequence) token, as a folder without tokenizer files loads; or
    one holding more tokens than the model has embedding rows (another model's tokenizer: an id past them fails).
    Returns a note for each of the policy's and the reward models' tokenizers that reads text in other ids than the
    ``tokenizer.json`` saved in its model's folder (:func:`flopplan.grpo.codecs.reads_as_saved`: transformers 5
    rebuilds a Qwen2 folder's tokenizer with its own class, whatever the folder holds)."""
    from flopplan.grpo.codecs import check_feeds, reads_as_saved

    notes = []
    policy = getattr(getattr(trainer, "model", None), "config", None)
    for module, tokenizer in [(trainer.model, trainer.processing_class), *reward_models(trainer)]:
        name = "policy" if module is trainer.model else f"reward model {type(module).__name__}"
        folder = getattr(getattr(module, "config", policy), "_name_or_path", "")
        if module is not trainer.model:
            rows = getattr(module.get_input_embeddings(), "num_embeddings", None) \
                if hasattr(module, "get_input_embeddings") else None
            check_feeds(tokenizer, f"the {name}", rows if isinstance(rows, int) else None, eos=False)
        if isinstance(folder, str) and folder and reads_as_saved(tokenizer, folder) is False:
            notes.append(f"the {name}'s tokenizer reads text in other ids than the tokenizer.json in {folder!r} "
                         "(transformers 5 rebuilds some model types' tokenizers with their own class): if the model "
                         "learned with the file's, load it with flopplan.grpo.codecs.load_tokenizer(folder)")
    return notes


def reward_prompt_reads(trainer: Any, prompts: list[Any]) -> list[int]:
    """Each prompt as the trainer's reward models read it, the longest over its reward models (0 without one): a
    plain-text prompt tokenized by the reward model's tokenizer; a conversational one laid out with the reward
    model's chat template over its messages and an empty assistant turn, as TRL's ``_calculate_rewards`` lays out
    the row with its completion (so the read of a row is this plus its completion's tokens, the template's own
    tokens included)."""
    from jinja2 import TemplateError
    from trl.data_utils import apply_chat_template

    kwargs = getattr(trainer, "chat_template_kwargs", None) or {}
    models = reward_models(trainer)
    if not prompts or not models:
        return [0] * len(prompts)
    keys = [p if isinstance(p, str) else repr(p) for p in prompts]  # a round holds each prompt once per generation
    distinct = dict(zip(keys, prompts, strict=True))  # each read once
    unique = list(distinct.values())
    out = [0] * len(unique)
    for module, tokenizer in models:
        texts = unique
        if not isinstance(unique[0], str):
            try:
                texts = [apply_chat_template({"messages": [*p, {"role": "assistant", "content": ""}]}, tokenizer,
                                             **kwargs)["text"] for p in unique]
            except (ValueError, TemplateError) as exc:  # as TRL's reward call would fail at the first round
                why = (str(exc).splitlines() or [type(exc).__name__])[0]
                raise UserError(f"the reward model {type(module).__name__}'s tokenizer cannot lay out the chat "
                                f"prompts with a completion, as TRL's reward call does ({why}): give it a chat "
                                "template") from None
        lengths = _token_lengths(lambda b, t=tokenizer: t(text=b, add_special_tokens=False)["input_ids"], texts)
        out = [max(a, b) for a, b in zip(out, lengths, strict=True)]
    read = dict(zip(distinct, out, strict=True))
    return [read[key] for key in keys]


def longest_prompts(trainer: Any, sets: PromptSets) -> tuple[int, int, int, int]:
    """The longest prompt of the training data and of the evaluation data (``sets``, :func:`prompt_sets`),
    tokenized as TRL tokenizes them (``_tokenize_prompts``), and of each the longest as the reward models read it
    (:func:`reward_prompt_reads`): the guard's bounds before any round has run. Returns (train, train as the
    reward model reads it, evaluation, evaluation as the reward model reads it)."""
    found = {"train_dataset": 0, "eval_dataset": 0}
    reward = {"train_dataset": 0, "eval_dataset": 0}
    for attribute in found:
        for prompts in sets[attribute]:
            found[attribute] = max([found[attribute],
                                    *_token_lengths(lambda b: trainer._tokenize_prompts(b)[0], prompts)])
            reward[attribute] = max([reward[attribute], *reward_prompt_reads(trainer, prompts)])
    return found["train_dataset"], reward["train_dataset"], found["eval_dataset"], reward["eval_dataset"]


def _texts(prompts: list[Any]) -> list[str]:
    """The text of each distinct prompt: a plain one as it is, a conversational one its messages' text."""
    out: dict[str, None] = {}
    for prompt in prompts:
        if isinstance(prompt, str):
            out[prompt] = None
            continue
        for message in prompt:
            content = message.get("content") if isinstance(message, dict) else None
            parts = [content] if isinstance(content, str) else \
                [p.get("text") for p in content if isinstance(p, dict)] if isinstance(content, list) else []
            out.update((part, None) for part in parts if isinstance(part, str) and part)
    return list(out)


def _chunks(texts: list[str], size: int = 4096) -> list[str]:
    """``texts`` joined by newlines into chunks of about ``size`` characters: a tokenizer that starts each text
    with a token of its own (SentencePiece's word start) adds it once a chunk, not once a prompt, to the ratio."""
    out, chunk, length = [], [], 0
    for text in texts:
        chunk.append(text)
        length += len(text) + 1
        if length >= size:
            out.append("\n".join(chunk))
            chunk, length = [], 0
    return out + (["\n".join(chunk)] if chunk else [])


def _same_tokenizer(tokenizer: Any, policy: Any) -> bool:
    """Whether ``tokenizer`` reads text as ``policy`` does: the same object, or fast tokenizers with the same
    pipeline (normalizer, pre-tokenizer, model and added tokens, as ``tokenizers`` serialises them; padding and
    truncation, which TRL sets per call, aside)."""
    if tokenizer is policy:
        return True
    mine, theirs = getattr(tokenizer, "backend_tokenizer", None), getattr(policy, "backend_tokenizer", None)
    if mine is None or theirs is None:
        return False
    pipelines = [{k: v for k, v in json.loads(b.to_str()).items() if k not in ("padding", "truncation")}
                 for b in (mine, theirs)]
    return pipelines[0] == pipelines[1]


def retokenising(trainer: Any, sets: PromptSets, completion_max: int) -> tuple[int, list[str]]:
    """A reward model whose tokenizer is not the policy's reads each completion's decoded text in its own tokens,
    which the policy's count does not bound. Before any round has run the guard takes that excess from the
    training prompts' text: the completion at its longest (``completion_max`` policy tokens) times the reward
    tokenizer's tokens per policy token over that text, less the completion (the largest over the reward models;
    0 where each reads the text in no more tokens than the policy). Returns that excess and a note saying what it
    is: an estimate, not a bound (completions can split worse than the prompts); the guard goes on learning the
    largest excess a round shows (:attr:`flopplan.engines.trl_meter.TRLMeter.reward_extra`)."""
    policy = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    readers = [tokenizer for _, tokenizer in reward_models(trainer) if not _same_tokenizer(tokenizer, policy)]
    if not readers or not callable(policy):
        return 0, []  # (the policy's tokenizer: a completion's text is read back in its own tokens)
    texts = _chunks(_texts([p for prompts in sets["train_dataset"] for p in prompts]))
    own = sum(_token_lengths(lambda b: policy(text=b, add_special_tokens=False, verbose=False)["input_ids"], texts))
    read = [sum(_token_lengths(lambda b, t=t: t(text=b, add_special_tokens=False, verbose=False)["input_ids"],
                               texts)) for t in readers]
    learned = "learns the largest excess a round shows as rounds run; a round whose completions split worse than " \
        "any before can run beyond the guard's bound by that difference"
    if not own:  # nothing to measure the ratio on (no text, or none the policy's tokenizer reads)
        return 0, ["the reward model's tokenizer is not the policy's and the training prompts hold no text the "
                   f"policy's reads to compare them on: the guard {learned}, the first round included"]
    ratio = max(read) / own
    extra = max(0, math.ceil((ratio - 1) * completion_max - 1e-9))
    return extra, [f"the reward model's tokenizer is not the policy's: it reads the training prompts' text in "
                   f"{ratio:.3f} times the policy's tokens, so before any round has run the guard takes a "
                   f"completion at its longest to cost it {extra} tokens more than the policy's, and {learned}"]


__all__ = ["PromptSets", "eval_datasets", "longest_prompts", "prompt_sets", "retokenising", "reward_models",
           "reward_prompt_reads"]
