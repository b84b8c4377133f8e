"""A model's head, what sits on its last hidden state: the LM head or a score head of a reward model, as the class a
config's ``architectures`` names builds it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopplan.errors import UserError


@dataclass(frozen=True)
class HeadLayer:
    """One linear layer of a model's head (activations between layers cost no counted FLOPs)."""

    in_features: int
    out_features: int
    bias: bool = False


@dataclass(frozen=True)
class Head:
    """What sits on the last hidden state: the LM head (``kind="lm"``) or a score head (``kind="score"``).

    The LM head's single layer is ``hidden -> vocab`` and is derived from the spec, so ``layers`` is empty for it.
    A score head lists its linear layers, e.g. Qwen2.5-Math-PRM: ``3584 -> 3584 (bias), ReLU, 3584 -> 2 (bias)``.
    """

    kind: str = "lm"
    layers: tuple[HeadLayer, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("lm", "score"):
            raise ValueError(f"head kind must be 'lm' or 'score', not {self.kind!r}")
        if self.kind == "score" and not self.layers:
            raise ValueError("a score head needs at least one layer")


def prm_head(hidden: int) -> Head:
    """Qwen2.5-Math-PRM's score head on every position: ``Linear(h, h, bias) -> ReLU -> Linear(h, 2, bias)``; a
    step's reward is the softmax probability of class 1 at the separator token after the step."""
    return Head("score", (HeadLayer(hidden, hidden, True), HeadLayer(hidden, 2, True)))


def orm_mlp_head(hidden: int) -> Head:
    """Qwen2.5-Math-RM's ``Qwen2ForRewardModel`` score head on every position: ``Linear(h, h, bias) -> ReLU ->
    Linear(h, 1, bias)`` (its remote code; vLLM's and SGLang's ``qwen2_rm.py`` build the same), the reward read at
    the last token."""
    return Head("score", (HeadLayer(hidden, hidden, True), HeadLayer(hidden, 1, True)))


HEADS = ("ForCausalLM", "ForSequenceClassification", "ForRewardModel", "ForProcessRewardModel")
"""The classes whose head flopplan counts, by the suffix of a config's ``architectures[0]`` (none: a causal LM)."""


def head_from_config(cfg: dict[str, Any], hidden: int, where: str, reward: bool = False) -> Head:
    """The head of the class a config's ``architectures[0]`` names (``where``: the config, for errors): a sequence
    classifier's bias-free ``hidden -> num_labels`` layer (transformers' default 2 labels), Qwen's reward and
    process-reward heads, or the LM head (a causal LM, or no class named); another class is refused.

    ``reward``: the config read as a reward model's (``orm:``/``prm:``), which TRL, verl and flopplan load with
    ``AutoModelForSequenceClassification`` whatever class it names (TRL: ``num_labels=1``): a sequence classifier
    keeps its head, a process reward model its own, and any other class comes without a head, which
    :meth:`flopplan.recipe.RewardSystem.spec` gives the one the loader builds (a token classifier or
    Qwen2.5-Math-RM's config given to TRL runs a one-label layer, not its own head)."""
    architectures = cfg.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
        raise UserError(f"{where}: architectures must be a list of class names, not {architectures!r}")
    arch = architectures[0] if architectures else ""
    if reward and not arch.endswith(("ForSequenceClassification", "ForProcessRewardModel")):
        return Head()
    if arch and not arch.endswith(HEADS):  # e.g. ...ForTokenClassification, ...Model: another head or none
        raise UserError(f"{where}: architectures {arch!r} is not counted: flopplan counts the heads of "
                        f"{', '.join('...' + h for h in HEADS)}")
    if arch.endswith("ForProcessRewardModel"):
        return prm_head(hidden)
    if arch.endswith("ForRewardModel"):
        return orm_mlp_head(hidden)
    if arch.endswith("ForSequenceClassification"):
        labels = cfg.get("num_labels")
        if labels is None and isinstance(cfg.get("id2label"), dict):
            labels = len(cfg["id2label"])
        labels = 2 if labels is None else labels  # transformers' default
        if isinstance(labels, bool) or not isinstance(labels, int) or labels <= 0:
            raise UserError(f"{where}: num_labels must be a positive integer, not {labels!r}")
        return Head("score", (HeadLayer(hidden, labels, False),))
    return Head()
