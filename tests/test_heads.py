"""flopplan.heads: a model's head is the one the class its config names builds, counted against FlopCounterMode on
that class (meta device); a class whose head flopplan does not count is refused, not counted as an LM head."""

from __future__ import annotations

import pytest

from flopplan.arch import spec_from_config
from flopplan.errors import UserError
from flopplan.formulas import forward_flops
from flopplan.heads import HeadLayer, head_from_config

B, T = 2, 8
CONFIG = {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 77, "pad_token_id": 0}


def _measured(model) -> int:
    from flopplan.measure import counters

    return counters.forward(model, B, T, None)


def _meta(build):
    import torch

    with torch.device("meta"):
        return build()


@pytest.mark.parametrize("labels", [1, 3])
def test_a_sequence_classifiers_head_is_its_num_labels_layer(labels):
    pytest.importorskip("torch")
    from transformers import Qwen2Config, Qwen2ForSequenceClassification

    cfg = {**CONFIG, "architectures": ["Qwen2ForSequenceClassification"], "num_labels": labels}
    spec = spec_from_config(cfg, "cls")
    model = _meta(lambda: Qwen2ForSequenceClassification(Qwen2Config(**cfg, attn_implementation="eager")))
    assert forward_flops(spec, B, T, T).total == _measured(model)


def test_qwens_reward_model_head_is_two_layers_with_biases():
    """Qwen2.5-Math-RM's Qwen2ForRewardModel (remote code: built here as its code builds it, a Qwen2Model and
    Linear(h, h) -> ReLU -> Linear(h, 1)) had been counted as one bias-free layer of 2 labels (2,048 FLOPs of a
    66,560-FLOP head in a held-out user's check)."""
    torch = pytest.importorskip("torch")
    from transformers import Qwen2Config, Qwen2Model

    cfg = {**CONFIG, "architectures": ["Qwen2ForRewardModel"]}
    spec = spec_from_config(cfg, "rm")
    assert spec.head.layers == (HeadLayer(64, 64, True), HeadLayer(64, 1, True))

    class RewardModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Qwen2Model(Qwen2Config(**cfg, attn_implementation="eager"))
            self.score = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

        def forward(self, input_ids, attention_mask):
            return self.score(self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state)

    model = _meta(RewardModel)
    assert forward_flops(spec, B, T, T).total == _measured(model)


@pytest.mark.parametrize(("architectures", "labels", "fragment"), [
    (["Qwen2ForTokenClassification"], 5, "architectures 'Qwen2ForTokenClassification' is not counted"),
    (["Qwen2Model"], None, "architectures 'Qwen2Model' is not counted"),
    (["Qwen2ForSequenceClassification"], 0, "num_labels must be a positive integer, not 0"),
    ("Qwen2ForCausalLM", None, "architectures must be a list of class names"),
])
def test_a_head_flopplan_does_not_count_is_refused(architectures, labels, fragment):
    """A token classifier was counted with the LM head (3,205,120 FLOPs against 3,057,664), 0 labels as 2."""
    cfg = {**CONFIG, "architectures": architectures, **({"num_labels": labels} if labels is not None else {})}
    with pytest.raises(UserError, match=fragment) as caught:
        head_from_config(cfg, 64, "cfg.json")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("cfg.json: ")


def test_a_causal_lm_or_no_class_named_has_the_lm_head_and_two_labels_is_the_default():
    for architectures in ([], ["Qwen2ForCausalLM"], None):
        assert head_from_config({"architectures": architectures}, 64, "x").kind == "lm"
    classifier = head_from_config({"architectures": ["LlamaForSequenceClassification"]}, 64, "x")
    assert classifier.layers == (HeadLayer(64, 2, False),)
    by_ids = head_from_config({"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "a"}}, 64, "x")
    assert by_ids.layers == (HeadLayer(64, 1, False),)


def test_a_reward_models_config_is_read_as_the_reward_loaders_build_it(tmp_path):
    """TRL, verl and flopplan load a reward model with AutoModelForSequenceClassification whatever class its config
    names: a token classifier (TRL's PRMTrainer output) or Qwen2.5-Math-RM's config given as a reward runs a
    one-label layer (a review: the first was refused and the second priced with its own two-layer head)."""
    import json

    from flopplan.recipe import RewardSystem

    for architecture in ("Qwen2ForTokenClassification", "Qwen2ForRewardModel", "Qwen2ForCausalLM"):
        path = tmp_path / f"{architecture}.json"
        path.write_text(json.dumps({**CONFIG, "architectures": [architecture]}))
        assert RewardSystem.parse(f"orm:{path}").spec().head.layers == (HeadLayer(64, 1, False),), architecture
    classifier = tmp_path / "cls.json"
    classifier.write_text(json.dumps({**CONFIG, "architectures": ["Qwen2ForSequenceClassification"], "num_labels": 3}))
    assert RewardSystem.parse(f"orm:{classifier}").spec().head.layers == (HeadLayer(64, 3, False),)


def test_a_gemma3_sequence_classifier_keeps_its_class_and_labels():
    """The multimodal Gemma 3 config is read as its language model: a sequence classifier's class and num_labels are
    the outer config's (a review: priced with the LM head's class, one label)."""
    text = {k: v for k, v in CONFIG.items() if k != "model_type"}
    cfg = {"model_type": "gemma3", "architectures": ["Gemma3ForSequenceClassification"], "num_labels": 3,
           "text_config": {**text, "head_dim": 16}, "vision_config": {}}
    assert spec_from_config(cfg, "g").head.layers == (HeadLayer(64, 3, False),)
    assert spec_from_config({**cfg, "architectures": ["Gemma3ForConditionalGeneration"]}, "g").head.kind == "lm"
