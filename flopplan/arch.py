"""Architecture specs: the registry and loading of Hugging Face ``config.json`` files.

An :class:`ArchSpec` holds exactly the shapes that decide how many FLOPs a decoder-only transformer executes,
plus what is needed to count its parameters. It never imports torch. A mixture-of-experts model carries its
sparse block as :class:`flopplan.moe.MoE` in place of the dense MLP.

Registry values are those of the public Hugging Face ``config.json`` files: the Qwen2.5 family (also Table 1 of the
Qwen2.5 technical report, arXiv:2412.15115; the parameter counts they give equal the safetensors totals), and the
Qwen3 dense and MoE, Qwen2-MoE, Mixtral and Llama 3.x entries of :mod:`flopplan.catalog`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from flopplan import catalog, hub
from flopplan.attention import FULL, SLIDING
from flopplan.config_defaults import check_values, windows, with_family_defaults
from flopplan.errors import Note, UserError
from flopplan.fileio import exists, is_dir, read_json
from flopplan.heads import Head, HeadLayer, head_from_config, prm_head
from flopplan.moe import MOE_MODEL_TYPES, MoE, moe_from_config
from flopplan.projections import (
    FUSED_FAMILIES,
    FUSED_PROJECTIONS,
    LORA_TARGETS,
    fused_shapes,
    lora_modules,
    projection_shapes,
)

FOUR_NORM_FAMILIES = ("gemma2", "gemma3_text")
"""Families with four RMSNorms per layer (before and after attention and MLP) instead of two."""


def split_targets(targets: tuple[str, ...], policy: str, field: str) -> tuple[str, ...]:
    """peft ``target_modules`` as flopplan's split projection names, in :data:`LORA_TARGETS` order (unknown names
    after, for the caller to refuse): where ``policy`` is a Phi-3, ``qkv_proj`` and ``gate_up_proj`` stand for the
    projections they fuse; elsewhere they are refused, with one line naming ``field``."""
    if not set(targets) & set(FUSED_PROJECTIONS):
        return targets
    try:
        lora_modules(resolve(policy).family, targets)
    except ValueError as exc:
        raise UserError(f"{field}: {exc}") from None
    names = {part for name in targets for part in FUSED_PROJECTIONS.get(name, (name,))}
    order = {name: i for i, name in enumerate(LORA_TARGETS)}
    return tuple(sorted(names, key=lambda t: (order.get(t, len(order)), t)))


@dataclass(frozen=True)
class ArchSpec:
    """Shapes of a decoder-only transformer with grouped-query attention and a gated (SwiGLU) MLP."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_embeddings: bool
    family: str = "qwen2"
    qkv_bias: bool = True
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    head: Head = field(default_factory=Head)
    max_position_embeddings: int | None = None
    rope_theta: float | None = None
    sliding_window: int | None = None
    source: str = "registry"
    moe: MoE | None = None
    layer_types: tuple[str, ...] | None = None  # per layer "sliding_attention"/"full_attention"; None: uniform

    def __post_init__(self) -> None:
        for key in ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                    "vocab_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{key} must be a positive integer, not {value!r}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) is not a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.head.kind == "score" and self.head.layers[0].in_features != self.hidden_size:
            raise ValueError("the score head's first layer must take the hidden size as input")
        if self.layer_types is not None:
            if len(self.layer_types) != self.num_layers or not set(self.layer_types) <= {SLIDING, FULL}:
                raise ValueError(f"layer_types must give {SLIDING} or {FULL} for each of the {self.num_layers} "
                                 "layers")
            if self.sliding_window is None and SLIDING in self.layer_types:
                raise ValueError("sliding_attention layers need a sliding_window")

    # -- derived shapes ---------------------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        """Width of the query projection output, ``num_heads * head_dim`` (may differ from hidden, e.g. Qwen3)."""
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of each of the key and value projection outputs, ``num_kv_heads * head_dim``."""
        return self.num_kv_heads * self.head_dim

    @property
    def head_layers(self) -> tuple[HeadLayer, ...]:
        """The head's linear layers; for an LM head the single ``hidden -> vocab`` projection."""
        if self.head.kind == "lm":
            return (HeadLayer(self.hidden_size, self.vocab_size, False),)
        return self.head.layers

    def projection_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear projection module of one decoder layer: the seven of a dense
        layer; in an MoE layer the four attention projections and the shared expert's three, if any (the routed
        experts are 3-D parameters, not modules)."""
        if self.moe is None and self.family in FUSED_FAMILIES:
            return fused_shapes(self.hidden_size, self.q_dim, self.kv_dim, self.intermediate_size)
        if self.moe is None:
            return projection_shapes(self.hidden_size, self.q_dim, self.kv_dim, self.intermediate_size)
        shapes = projection_shapes(self.hidden_size, self.q_dim, self.kv_dim, self.moe.shared_intermediate)
        if not self.moe.shared_intermediate:
            for name in ("gate_proj", "up_proj", "down_proj"):
                del shapes[name]
        return shapes

    # -- parameter counts -------------------------------------------------------------------------------------
    def layer_params(self) -> int:
        """Parameters of one decoder layer: its projections (and MoE block), biases, two RMSNorms (four in Gemma 2/3),
        q/k norms."""
        shapes = self.projection_shapes()
        weights = sum(n_in * n_out for n_in, n_out in shapes.values())
        if self.moe is not None:  # the shared expert is in ``shapes`` already
            weights += self.moe.params(self.hidden_size) - 3 * self.hidden_size * self.moe.shared_intermediate
        biases = 0
        if self.qkv_bias:
            biases += self.q_dim + 2 * self.kv_dim
        if self.o_bias:
            biases += self.hidden_size
        if self.mlp_bias:
            biases += 2 * self.intermediate_size + self.hidden_size
        norms = (4 if self.family in FOUR_NORM_FAMILIES else 2) * self.hidden_size \
            + (2 * self.head_dim if self.qk_norm else 0)
        return weights + biases + norms

    def embedding_params(self) -> int:
        """Parameters of the input embedding table (``vocab x hidden``)."""
        return self.vocab_size * self.hidden_size

    def head_params(self) -> int:
        """Parameters of the head: 0 for a tied LM head, ``hidden x vocab`` untied, or the score head's layers."""
        if self.head.kind == "lm":
            return 0 if self.tie_embeddings else self.hidden_size * self.vocab_size
        return sum(layer.in_features * layer.out_features + (layer.out_features if layer.bias else 0)
                   for layer in self.head.layers)

    def check_lora_rank(self, rank: int) -> None:
        if rank > self.hidden_size:
            raise UserError(f"LoRA rank {rank} is above {self.name}'s width ({self.hidden_size}): the update B @ A "
                            "can have no higher rank than its matrices' sides")

    @property
    def params(self) -> int:
        """All parameters, counted once (a tied LM head shares the embedding table)."""
        return self.params_non_embedding + self.embedding_params() + (
            self.head_params() if self.head.kind == "lm" else 0)

    @property
    def params_active(self) -> int:
        """Parameters one token goes through (:attr:`params` for a dense model; an MoE token skips the experts
        the router did not choose)."""
        if self.moe is None:
            return self.params
        h, moe = self.hidden_size, self.moe
        return self.params - self.num_layers * (moe.experts - moe.top_k) * moe.expert_params(h)

    @property
    def params_non_embedding(self) -> int:
        """Parameters without the embedding table and without an LM head (a score head is counted)."""
        body = self.num_layers * self.layer_params() + self.hidden_size  # + the final RMSNorm
        return body + (self.head_params() if self.head.kind == "score" else 0)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description of the spec."""
        return {
            "name": self.name,
            "family": self.family,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "vocab_size": self.vocab_size,
            "tie_embeddings": self.tie_embeddings,
            "qkv_bias": self.qkv_bias,
            "o_bias": self.o_bias,
            "mlp_bias": self.mlp_bias,
            "qk_norm": self.qk_norm,
            "head": {"kind": self.head.kind,
                     "layers": [[lay.in_features, lay.out_features, lay.bias] for lay in self.head_layers]},
            "max_position_embeddings": self.max_position_embeddings,
            "rope_theta": self.rope_theta,
            "sliding_window": self.sliding_window,
            "moe": self.moe.describe() if self.moe is not None else None,
            **({"layer_types": list(self.layer_types)} if self.layer_types is not None else {}),
            "params": self.params,
            "params_active": self.params_active,
            "params_non_embedding": self.params_non_embedding,
            "source": self.source,
        }


# -- the registry ---------------------------------------------------------------------------------------------

def _qwen25(name: str, hidden: int, inter: int, layers: int, heads: int, kv: int, vocab: int, tied: bool,
            max_pos: int, rope_theta: float = 1e6, head: Head | None = None) -> ArchSpec:
    return ArchSpec(name=name, hidden_size=hidden, intermediate_size=inter, num_layers=layers, num_heads=heads,
                    num_kv_heads=kv, head_dim=hidden // heads, vocab_size=vocab, tie_embeddings=tied,
                    family="qwen2", qkv_bias=True, head=head or Head(), max_position_embeddings=max_pos,
                    rope_theta=rope_theta)


_PRM_HEAD = prm_head(3584)

REGISTRY: dict[str, ArchSpec] = {spec.name: spec for spec in (
    _qwen25("qwen2.5-0.5b", 896, 4864, 24, 14, 2, 151936, True, 32768),
    _qwen25("qwen2.5-1.5b", 1536, 8960, 28, 12, 2, 151936, True, 131072),
    _qwen25("qwen2.5-3b", 2048, 11008, 36, 16, 2, 151936, True, 32768),
    _qwen25("qwen2.5-7b", 3584, 18944, 28, 28, 4, 152064, False, 131072),
    _qwen25("qwen2.5-14b", 5120, 13824, 48, 40, 8, 152064, False, 131072),
    _qwen25("qwen2.5-32b", 5120, 27648, 64, 40, 8, 152064, False, 131072),
    _qwen25("qwen2.5-72b", 8192, 29568, 80, 64, 8, 152064, False, 131072),
    _qwen25("qwen2.5-math-1.5b", 1536, 8960, 28, 12, 2, 151936, True, 4096, rope_theta=1e4),
    _qwen25("qwen2.5-math-7b", 3584, 18944, 28, 28, 4, 152064, False, 4096, rope_theta=1e4),
    _qwen25("qwen2.5-math-prm-7b", 3584, 18944, 28, 28, 4, 152064, False, 4096, rope_theta=1e4, head=_PRM_HEAD),
    # A Qwen2-architecture test policy of 300,160 parameters for CPU runs of `flopplan train` (the built-in
    # character tokenizer has 23 symbols; the head is padded to 32 rows like real LM heads).
    _qwen25("tiny", 128, 256, 2, 4, 2, 32, True, 512),
    # The tiny family for RACE's model-size axis on CPU: the same architecture and 32-row vocabulary, about 1/3
    # and 3x tiny's parameters (100,928 and 966,912; head_dim 32 throughout), so the three span ~10x.
    _qwen25("tiny-s", 64, 192, 2, 2, 1, 32, True, 512),
    _qwen25("tiny-l", 192, 384, 3, 6, 2, 32, True, 512),
    # A learned outcome reward model for the built-in task: tiny's backbone with the sequence-classification
    # score head (one bias-free hidden -> 1 layer on every position, pooled at the last token); trained by
    # `flopplan reward-model train`, used as `--reward orm:tiny-rm --reward-model-path DIR`.
    _qwen25("tiny-rm", 128, 256, 2, 4, 2, 32, False, 512, head=Head("score", (HeadLayer(128, 1, False),))),
    # A mixture-of-experts test policy for CPU runs (Qwen3-MoE: q/k norms, no biases): tiny's widths and
    # vocabulary with 8 experts of width 128, top-2, so a token's experts are as wide as tiny's MLP (256).
    ArchSpec(name="tiny-moe", hidden_size=128, intermediate_size=256, num_layers=2, num_heads=4, num_kv_heads=2,
             head_dim=32, vocab_size=32, tie_embeddings=True, family="qwen3_moe", qkv_bias=False, qk_norm=True,
             max_position_embeddings=512, rope_theta=1e6, moe=MoE(8, 2, 128)),
)}

TINY_FAMILY: tuple[str, ...] = ("tiny-s", "tiny", "tiny-l")
"""Registry policies of the Qwen2 architecture with the built-in 23-symbol tokenizer, smallest first: trained from
random initialisation on CPU (no weights exist for them)."""
TINY_POLICIES: tuple[str, ...] = (*TINY_FAMILY, "tiny-moe")
"""Every registry policy with the built-in tokenizer and no weights: the tiny family and the MoE ``tiny-moe``."""

QWEN25_SIZES: tuple[str, ...] = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b",
                                 "qwen2.5-32b", "qwen2.5-72b")
"""The general-purpose Qwen2.5 policies, smallest first."""

_ALIASES = {name.replace("qwen2.5-", "qwen2.5/"): name for name in REGISTRY}


def _registry_key(text: str) -> str | None:
    """The registry name of ``text``: itself, an alias, or the name part of a Hub id, with or without -Instruct
    (or Gemma's -it and -pt)."""
    key = text.strip().lower()
    for candidate in (key, key.removesuffix("-instruct"), key.removesuffix("-it"), key.removesuffix("-pt")):
        for name in (candidate, candidate.rsplit("/", 1)[-1]):  # the organisation does not change the shapes
            name = _ALIASES.get(name, name)
            if name in REGISTRY:
                return name
    return None


_ORGS = {**{name: "qwen" for name in REGISTRY if name.startswith("qwen2.5")},  # (their configs are built here)
         **{catalog.registry_name(repo): repo.split("/")[0].lower() for repo in catalog.CONFIGS}}


def _another_org(text: str, key: str) -> bool:
    """Whether ``text`` is a Hub id of the registry model ``key`` under another organisation than its publisher's
    (``myorg/Qwen2.5-0.5B-Instruct``: a fine-tune may change the vocabulary or prune layers)."""
    text = text.strip().lower()
    return "/" in text and text not in _ALIASES and text.split("/", 1)[0] != _ORGS.get(key)


def resolve(name_or_path: str, reward: bool = False) -> ArchSpec:
    """A registry name or Hub id (case-insensitive: ``qwen2.5-7b``, ``Qwen/Qwen2.5-7B-Instruct``,
    ``Qwen/Qwen3-30B-A3B``), a config.json file or folder, or another Hub id through :mod:`flopplan.hub` (the
    local Hugging Face cache, else a download of config.json alone). A registry model's Hub id is read as
    transformers' ``from_pretrained`` reads it: a local folder (or file) of that name first, then the config.json
    the local cache holds for it; else, under its publisher's organisation, the registry's shapes (no download),
    and under another organisation (a fine-tune may change the vocabulary or prune layers) a download of its
    config.json, else the registry's shapes with a :class:`~flopplan.errors.Note` saying so. ``reward``: read as
    a reward model's config (:func:`flopplan.heads.head_from_config`)."""
    key = _registry_key(name_or_path)
    name = name_or_path.rsplit("/", 1)[-1].lower()
    if key is not None and "/" in name_or_path:  # a local folder first, as from_pretrained reads it
        other = _another_org(name_or_path, key)
        found = Path(name_or_path) if exists(name_or_path, "model ") else \
            hub.found_config(name_or_path) if other else hub.cached_config(name_or_path)
        if found is not None:
            return load_config(found, name=name, reward=reward)
        why = "HF_HUB_OFFLINE is set" if hub.offline() else "it could not be downloaded"
        if other:
            warnings.warn(f"{name_or_path} has no config.json in the local Hugging Face cache and {why}: counted "
                          f"with the registry's {key} shapes (a fine-tune that changed them needs its config.json "
                          "there)", Note, stacklevel=2)
    if key is not None:
        return REGISTRY[key]
    path = Path(name_or_path)
    there = exists(path, "model ")
    if not there and hub.is_repo_id(name_or_path):
        return load_config(hub.config_path(name_or_path), name=name, reward=reward)
    if there or name_or_path.endswith(".json") or "/" in name_or_path:
        return load_config(path, reward=reward)
    raise UserError(f"unknown model {name_or_path!r}: use one of {', '.join(REGISTRY)}, a Hub id ORG/NAME "
                    "or a path to a config.json")


def is_local_model(name: Any) -> bool:
    """Whether :func:`resolve` could read ``name`` as a local file or folder (not a registry name, which is the
    registry's whatever folder of that name is here)."""
    return isinstance(name, str) and not (_registry_key(name) is not None and "/" not in name)


def local_model_path(name_or_path: str) -> str | None:
    """The absolute path of the local config file or folder :func:`resolve` reads for ``name_or_path``, or None
    where it reads the registry or the Hub. A record that must be read again from another folder (a race's arms,
    which its pilots and Ray workers read wherever they run) keeps this path, not the spelling it was given."""
    if not is_local_model(name_or_path):
        return None
    return str(Path(name_or_path).absolute()) if exists(name_or_path, "model ") else None


# -- Hugging Face config.json ---------------------------------------------------------------------------------

SUPPORTED_MODEL_TYPES = ("qwen2", "qwen3", "llama", "mistral", "gemma2", "gemma3_text", "phi3", *MOE_MODEL_TYPES)
_MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size", "num_experts_per_tok")


def load_config(path: str | Path, name: str | None = None, reward: bool = False) -> ArchSpec:
    """Load a Hugging Face ``config.json`` (or a folder holding one) of a supported decoder-only model.

    Refuses, with a :class:`UserError` naming the reason, anything whose FLOPs this model would get wrong:
    mixture-of-experts models other than Qwen3-MoE, Qwen2-MoE and Mixtral, encoder-decoder, layers with mixed
    sliding-window/full attention, unknown model types, and configs missing a size key.
    """
    path = Path(path)
    file = path / "config.json" if is_dir(path, "config ") else path
    cfg = read_json(file, "config")
    if not isinstance(cfg, dict):
        raise UserError(f"config {str(file)!r} is not a JSON object")
    return spec_from_config(cfg, name=name or _name_from_path(file), source=str(file), reward=reward)


def _name_from_path(file: Path) -> str:
    return file.parent.name if file.name == "config.json" and file.parent.name else file.stem


def spec_from_config(cfg: dict[str, Any], name: str, source: str = "config", reward: bool = False) -> ArchSpec:
    """Build an :class:`ArchSpec` from the dictionary of a Hugging Face config (``reward``: a reward model's,
    :func:`flopplan.heads.head_from_config`)."""
    where = f"config {source!r}"
    if cfg.get("is_encoder_decoder"):
        raise UserError(f"{where}: encoder-decoder models are not supported (decoder-only only)")
    model_type = cfg.get("model_type")
    moe_keys = [key for key in _MOE_KEYS if cfg.get(key)]
    moe_type = isinstance(model_type, str) and model_type in MOE_MODEL_TYPES
    if not moe_type and (moe_keys or (isinstance(model_type, str) and "moe" in model_type)
                         or model_type == "deepseek_v3"):
        raise UserError(f"{where}: mixture-of-experts model_type {model_type!r} is not supported "
                        f"(supported: {', '.join(MOE_MODEL_TYPES)})")
    if model_type == "gemma3" and isinstance(cfg.get("text_config"), dict):
        # Gemma 3 4B and up: the language model only (the vision tower and projector are not counted)
        outer = cfg.get("architectures")  # a sequence classifier's class and labels are the outer config's
        classifier = isinstance(outer, list) and bool(outer) and str(outer[0]).endswith("ForSequenceClassification")
        cfg = {**cfg["text_config"], "model_type": "gemma3_text",
               "architectures": outer if classifier else ["Gemma3ForCausalLM"],
               **({k: cfg[k] for k in ("num_labels", "id2label") if k in cfg} if classifier else {})}
        model_type = "gemma3_text"
    cfg = with_family_defaults(cfg, model_type)  # the keys a config.json leaves out, as transformers reads them
    if "text_config" in cfg or "vision_config" in cfg:
        raise UserError(f"{where}: multimodal configs are not supported (text decoder only; Gemma 3: its language "
                        "model)")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UserError(f"{where}: model_type {model_type!r} is not supported "
                        f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
    base = MOE_MODEL_TYPES.get(model_type, model_type)  # the dense family whose attention an MoE model shares
    required = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    missing = [key for key in required if cfg.get(key) is None]  # absent or null
    if missing:
        raise UserError(f"{where}: missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    sizes: dict[str, int] = {}
    for key in (*required, "num_key_value_heads", "head_dim"):
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise UserError(f"{where}: {key} must be a positive integer, not {value!r}")
        sizes[key] = value
    check_values(cfg, where, sizes)
    hidden, heads = sizes["hidden_size"], sizes["num_attention_heads"]
    moe = moe_from_config(cfg, model_type, where, sizes["num_hidden_layers"]) if moe_type else None
    kv_heads = sizes.get("num_key_value_heads", heads)  # null (or absent in Llama and Phi-3): the heads
    if "head_dim" in sizes:
        head_dim = sizes["head_dim"]
    elif hidden % heads:
        raise UserError(f"{where}: hidden_size {hidden} is not divisible by num_attention_heads {heads} "
                        "and there is no head_dim")
    else:
        head_dim = hidden // heads
    if heads % kv_heads:
        raise UserError(f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    sliding_window, layer_types = windows(cfg, model_type, where)
    attention_bias = bool(cfg.get("attention_bias", False))
    bias = {
        "qwen2": (bool(cfg.get("qkv_bias", True)), False, False),
        "qwen3": (attention_bias, attention_bias, False),
        "llama": (attention_bias, attention_bias, bool(cfg.get("mlp_bias", False))),
        "mistral": (False, False, False),
        "gemma2": (attention_bias, attention_bias, False),
        "gemma3_text": (attention_bias, attention_bias, False),
        "phi3": (False, False, False),
    }[base]
    head = head_from_config(cfg, hidden, where, reward)
    context = cfg.get("max_position_embeddings")
    if context is not None and (isinstance(context, bool) or not isinstance(context, int) or context <= 0):
        raise UserError(f"{where}: max_position_embeddings must be a positive integer or null, not {context!r:.60}")
    rope = cfg.get("rope_theta")
    if rope is None and isinstance(cfg.get("rope_parameters"), dict):
        rope = cfg["rope_parameters"].get("rope_theta")
    try:
        return ArchSpec(
            name=name, hidden_size=hidden, intermediate_size=sizes["intermediate_size"],
            num_layers=sizes["num_hidden_layers"], num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
            vocab_size=sizes["vocab_size"], tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            family=model_type, qkv_bias=bias[0], o_bias=bias[1], mlp_bias=bias[2],
            qk_norm=base in ("qwen3", "gemma3_text"),
            head=head, max_position_embeddings=context,
            rope_theta=float(rope) if isinstance(rope, (int, float)) else None,
            sliding_window=sliding_window, source=source, moe=moe, layer_types=layer_types)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None


def with_head(spec: ArchSpec, head: Head, name: str | None = None) -> ArchSpec:
    """The same backbone with another head (e.g. a policy architecture used as an outcome reward model)."""
    return replace(spec, head=head, name=name or spec.name)


def orm_head(spec: ArchSpec, labels: int = 1) -> Head:
    """The score head of ``AutoModelForSequenceClassification``: one bias-free ``hidden -> labels`` layer."""
    return Head("score", (HeadLayer(spec.hidden_size, labels, False),))


REGISTRY.update({catalog.registry_name(repo): spec_from_config(cfg, catalog.registry_name(repo), source="registry")
                 for repo, cfg in catalog.CONFIGS.items()})
