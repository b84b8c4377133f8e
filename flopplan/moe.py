"""Mixture-of-experts blocks: their shapes, parameter counts and config keys (torch-free).

A sparse MoE block (Qwen3-MoE, Qwen2-MoE, Mixtral in transformers 5.x) replaces the dense MLP of a decoder layer:

* a router ``hidden -> experts`` on every token, softmax, top-``k``;
* each token through its ``k`` chosen experts, each a gated MLP ``hidden -> 2*I`` (gate and up fused in one
  ``gate_up_proj`` weight) and ``I -> hidden``;
* Qwen2-MoE only: a shared expert (a gated MLP of width ``I_shared``) on every token, scaled by
  ``sigmoid(shared_expert_gate(x))``, a ``hidden -> 1`` projection.

The routed matmuls run on ``tokens * k`` token-expert pairs (:func:`routed_pairs`): which experts the router picks
changes how the rows are split between experts, never their number, so the count depends on the routing only
through ``k``. This holds for every experts implementation of transformers 5.x (:data:`EXPERTS_IMPLEMENTATIONS`):
``eager`` loops over the experts that received tokens, ``batched_mm`` gathers one weight per pair and runs a batched
matmul, ``grouped_mm`` sorts the pairs by expert and runs one grouped matmul; none computes an expert on a token
that did not choose it (capacity-free, dropless routing).
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flopplan.errors import UserError
from flopplan.projections import LORA_TARGETS

EXPERTS_IMPLEMENTATIONS = ("grouped_mm", "batched_mm", "eager")
"""transformers' experts implementations this model counts; ``grouped_mm`` is transformers' default. All execute
the same matmul FLOPs; torch's FlopCounterMode has no formula for the grouped matmul, so it misses them there."""

MOE_MODEL_TYPES = {"qwen3_moe": "qwen3", "qwen2_moe": "qwen2", "mixtral": "mistral"}
"""Supported MoE model types and the dense family whose attention they share."""


@dataclass(frozen=True)
class MoE:
    """A sparse MoE block: ``experts`` routed experts of width ``expert_intermediate``, ``top_k`` per token, and
    optionally a shared expert of width ``shared_intermediate`` with its sigmoid gate (Qwen2-MoE)."""

    experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int = 0
    shared_gate: bool = False

    def __post_init__(self) -> None:
        for key in ("experts", "top_k", "expert_intermediate"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{key} must be a positive integer, not {value!r}")
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds the number of experts ({self.experts})")
        if self.shared_gate and not self.shared_intermediate:
            raise ValueError("a shared-expert gate needs a shared expert")

    def router_params(self, hidden: int) -> int:
        return self.experts * hidden

    def expert_params(self, hidden: int) -> int:
        """One routed expert: gate, up and down matrices."""
        return 3 * hidden * self.expert_intermediate

    def shared_params(self, hidden: int) -> int:
        return 3 * hidden * self.shared_intermediate + (hidden if self.shared_gate else 0)

    def params(self, hidden: int) -> int:
        """All parameters of the block (no norms)."""
        return self.router_params(hidden) + self.experts * self.expert_params(hidden) + self.shared_params(hidden)

    def active_params(self, hidden: int) -> int:
        """Parameters one token goes through: router, its ``top_k`` experts, the shared expert."""
        return self.router_params(hidden) + self.top_k * self.expert_params(hidden) + self.shared_params(hidden)

    def describe(self) -> dict[str, Any]:
        return {"experts": self.experts, "top_k": self.top_k, "expert_intermediate": self.expert_intermediate,
                "shared_intermediate": self.shared_intermediate, "shared_gate": self.shared_gate}


PEFT_EXPERT_LORA_FAMILIES = ("qwen3_moe", "qwen2_moe")
"""Families whose routed experts peft (0.22) adapts when the LoRA targets name the MLP projections: it maps
``gate_proj`` + ``up_proj`` to the fused ``gate_up_proj`` parameter (rank ``2r``: both adapters stacked) and
``down_proj`` to ``down_proj`` (rank ``r``), as ``ParamWrapper``s. Qwen2-MoE's names also match its shared expert's
``nn.Linear`` modules, which keep their own adapters: peft 0.22 adapts the routed experts' parameters beside them
(peft PR #3945; ``qwen2_moe`` joined its conversion patterns in 0.22, and peft 0.21 left Qwen2-MoE's routed experts
frozen, so flopplan's torch extra needs peft >= 0.22). Mixtral's experts answer only to ``w1``/``w2``/``w3``, so
there the MLP targets leave the routed experts frozen and unadapted."""


PEFT_ADAPTS_QWEN2_MOE_EXPERTS = (0, 22)
"""The first peft release that adapts Qwen2-MoE's routed experts for the MLP names (see PEFT_EXPERT_LORA_FAMILIES)."""


def check_peft_experts(family: str, targets: tuple[str, ...] | list[str], peft_version: str) -> None:
    """Refuses, with one line, LoRA on a Qwen2-MoE policy's MLP names under a peft release that leaves its routed
    experts frozen (before :data:`PEFT_ADAPTS_QWEN2_MOE_EXPERTS`): flopplan prices the adapters peft 0.22 puts on them,
    and would charge FLOPs that do not run."""
    if family != "qwen2_moe" or not set(targets) & set(MLP_TARGETS):
        return
    from packaging.version import Version  # peft's own dependency: read only where peft is installed

    if Version(peft_version).release[:2] < PEFT_ADAPTS_QWEN2_MOE_EXPERTS:
        raise UserError(f"peft {peft_version} leaves a Qwen2-MoE policy's routed experts frozen under LoRA on "
                        f"{', '.join(t for t in targets if t in MLP_TARGETS)}, where peft >= 0.22 adapts them and "
                        "flopplan prices that: pip install 'peft>=0.22'")


def expert_lora_targets(family: str, targets: tuple[str, ...]) -> tuple[str, ...]:
    """The routed-expert parameters peft adapts for these LoRA targets (see :data:`PEFT_EXPERT_LORA_FAMILIES`)."""
    if family not in PEFT_EXPERT_LORA_FAMILIES:
        return ()
    fused = [name for name in ("gate_proj", "up_proj") if name in targets]
    if len(fused) == 1:
        raise ValueError(f"peft cannot adapt {fused[0]} without {'up_proj' if fused[0] == 'gate_proj' else 'gate_proj'}"
                         " in an MoE model: they are fused into gate_up_proj")
    return (("gate_up_proj",) if fused else ()) + (("down_proj",) if "down_proj" in targets else ())


ATTENTION_TARGETS, MLP_TARGETS = LORA_TARGETS[:4], LORA_TARGETS[4:]


def adapts_nothing(family: str, moe: MoE, targets: tuple[str, ...]) -> bool:
    """Whether LoRA on ``targets`` adapts nothing in an MoE model: the MLP names match the shared expert's modules
    (Qwen2-MoE) or peft maps them onto the routed experts (:data:`PEFT_EXPERT_LORA_FAMILIES`), and elsewhere
    (Mixtral) match no module, so targets that name nothing else leave peft with no module to adapt
    (``get_peft_model`` raises ``ValueError: Target modules ... not found in the base model``)."""
    mlp_matches = bool(moe.shared_intermediate) or family in PEFT_EXPERT_LORA_FAMILIES
    return not any(t in ATTENTION_TARGETS or (mlp_matches and t in MLP_TARGETS) for t in targets)


PEFT_ALL_LINEAR: dict[str, tuple[str, str]] = {
    "qwen3_moe": ("the four attention projections, the routed experts (gate_up_proj at rank 2r, down_proj) and the "
                  "router (gate.weight)", "the router"),
    "mixtral": ("the four attention projections, the routed experts (w1 and w3 as gate_up_proj at rank 2r, w2 as "
                "down_proj) and the router (gate.weight)", "the router and on Mixtral's routed experts"),
    "qwen2_moe": ("the four attention projections, the shared expert (gate_proj, up_proj, down_proj) and its gate "
                  "(shared_expert_gate), the routed experts (gate_up_proj at rank 2r, down_proj) and the router "
                  "(gate.weight)", "the router and shared_expert_gate"),
}
"""What peft 0.22 adapts for ``target_modules="all-linear"`` on an MoE policy, and what of it flopplan does not price.
peft resolves all-linear to every ``nn.Linear`` but the output layer (the attention projections; Qwen2-MoE's shared
expert and its gate, whose router is no ``nn.Linear``), and for the model types transformers' conversion mapping
covers (qwen3_moe, mixtral, and from peft 0.22 qwen2_moe: ``_MODEL_TO_CONVERSION_PATTERN``) adds every key of peft's
``_MOE_TARGET_MODULE_MAPPING`` (utils/transformers_weight_conversion.py ``_resolve_string_target_modules``), which
``_convert_peft_config_moe`` turns into ``target_parameters``: the experts and the router (``gate.weight``)."""


def all_linear_targets(family: str, field: str) -> tuple[str, ...]:
    """The projections peft's ``target_modules="all-linear"`` adapts, as flopplan's targets (the seven projections)
    where flopplan prices all of what it adapts: a dense policy. On an MoE policy peft also
    adapts what flopplan does not price (:data:`PEFT_ALL_LINEAR`): refused, with one line naming ``field``."""
    if family not in PEFT_ALL_LINEAR:
        return LORA_TARGETS
    adapted, unpriced = PEFT_ALL_LINEAR[family]
    names = ", ".join(ATTENTION_TARGETS + (MLP_TARGETS if family != "mixtral" else ()))
    raise UserError(f"{field} all-linear on a {family} policy: peft adapts {adapted}; flopplan does not price LoRA "
                    f"on {unpriced}: name the targets (such as {names})")


FUSED_EXPERT_KEY = rf".*\.{re.escape('gate_up_proj')}"
"""peft 0.22's ``rank_pattern``/``alpha_pattern`` key for the fused ``gate_up_proj`` expert parameter (2r, 2 alpha)."""


@contextlib.contextmanager
def fused_expert_patterns_quiet(family: str, targets: tuple[str, ...]) -> Iterator[None]:
    """Around ``get_peft_model`` with LoRA on ``targets`` of a ``family`` model: silence peft 0.22's two
    RuntimeWarnings that the :data:`FUSED_EXPERT_KEY` rank and alpha patterns its own MoE conversion wrote "did not
    match any targeted module and were ignored", where the conversion adapts the fused experts
    (:func:`expert_lora_targets`). peft checks the patterns against the modules it adapted only, not the parameters
    the conversion made it adapt, and the pattern does apply (the fused adapter has rank 2r). Exactly those
    messages, nothing else, and only there (gate_proj and up_proj, fused, on a qwen3_moe model)."""
    with warnings.catch_warnings():
        if family in PEFT_EXPERT_LORA_FAMILIES and {"gate_proj", "up_proj"} <= set(targets):
            for attr in ("rank_pattern", "alpha_pattern"):
                message = f"The following {attr} keys did not match any targeted module and were ignored: " \
                          f"{[FUSED_EXPERT_KEY]}."
                warnings.filterwarnings("ignore", message=re.escape(message) + r"\Z", category=RuntimeWarning)
        yield


def peft_expert_targets(family: str, parameters: Any, rank: int, alpha: Any, rank_pattern: Any,
                        alpha_pattern: Any) -> tuple[str, ...]:
    r"""The MLP projection names a converted peft LoraConfig was given, read back from what peft 0.22's
    ``_convert_peft_config_moe`` (utils/transformers_weight_conversion.py) wrote for them on a
    :data:`PEFT_EXPERT_LORA_FAMILIES` policy: it moves ``gate_proj``/``up_proj``/``down_proj`` from
    ``target_modules`` into ``target_parameters`` as :func:`expert_lora_targets` names them, and for the fused
    ``gate_up_proj`` sets ``rank_pattern``/``alpha_pattern`` ``{r".*\.gate_up_proj": 2r / 2 alpha}``. Exactly that
    is read back (none: ``()``); any other ``target_parameters`` (the router's ``gate.weight``, Mixtral's experts,
    parameters the user named) or ``rank_pattern`` is refused with one line."""
    parameters, rank_pattern = set(parameters or ()), dict(rank_pattern or {})
    key = FUSED_EXPERT_KEY
    for names in (MLP_TARGETS, ("gate_proj", "up_proj"), ("down_proj",)) if parameters else ((),):
        converted = expert_lora_targets(family, names)
        fused = "gate_up_proj" in converted
        if set(converted) == parameters and rank_pattern == ({key: 2 * rank} if fused else {}) and (
                not fused or dict(alpha_pattern or {}).get(key) == 2 * alpha):
            return names
    if "gate.weight" in parameters:
        raise UserError(f"peft target_parameters {sorted(parameters)}: LoRA on the router (gate.weight, peft's "
                        "conversion of the target 'gate' or of all-linear) is not priced: name the projections")
    if parameters and family not in PEFT_EXPERT_LORA_FAMILIES:
        raise UserError(f"peft target_parameters {sorted(parameters)}: flopplan does not price LoRA on a {family} "
                        "model's routed experts")
    what = f"target_parameters={sorted(parameters)} with " if parameters else ""
    raise UserError(f"peft {what}rank_pattern={rank_pattern!r}: flopplan prices LoRA of one rank on every layer's "
                    "projections, and on Qwen3-MoE's routed experts as peft converts the MLP names (gate_proj, "
                    "up_proj, down_proj)")


def routed_pairs(tokens: Any, top_k: Any) -> Any:
    """Token-expert pairs the routed experts process: ``tokens * top_k``, whatever the router chose."""
    return tokens * top_k


def _positive(cfg: dict[str, Any], key: str, where: str) -> int:
    value = cfg.get(key)
    if value is None:
        raise UserError(f"{where}: a mixture-of-experts config needs {key}")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UserError(f"{where}: {key} must be a positive integer, not {value!r}")
    return value


EXPERT_COUNT_KEYS = {"qwen3_moe": ("num_local_experts", "num_experts"), "mixtral": ("num_experts", "num_local_experts"),
                     "qwen2_moe": ("num_experts",)}
"""The keys transformers 5.25 reads the expert count from, the winner first where a config states both:
``Qwen3MoeConfig`` stores ``num_experts`` as ``num_local_experts`` (its ``attribute_map``), which wins;
``MixtralConfig`` maps ``num_experts`` onto ``num_local_experts``, and ``num_experts`` wins; ``Qwen2MoeConfig`` has
no map and reads ``num_experts`` alone (a ``num_local_experts`` there is ignored)."""


def dense_layers(cfg: dict[str, Any], layers: int, where: str) -> list[int]:
    """The layers a Qwen3-MoE or Qwen2-MoE config builds with a dense MLP, as transformers 5.25's decoder layer
    decides (``Qwen3MoeDecoderLayer.__init__``, modeling_qwen3_moe.py:310; Qwen2-MoE's alike): layer ``i`` is
    sparse iff ``i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0``, so an index past the last
    layer changes nothing. What transformers cannot build (a step of 0 or null, indices that are not integers) is
    refused."""
    step, only = cfg.get("decoder_sparse_step", 1), cfg.get("mlp_only_layers")
    if isinstance(step, bool) or not isinstance(step, int) or step == 0:
        raise UserError(f"{where}: decoder_sparse_step must be a nonzero integer, not {step!r}")
    only = [] if only is None else only  # (Qwen3MoeConfig.__post_init__: None -> [])
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise UserError(f"{where}: mlp_only_layers must be a list of layer indices, not {only!r}")
    return [i for i in range(layers) if i in only or (i + 1) % step]


def moe_from_config(cfg: dict[str, Any], model_type: str, where: str, layers: int) -> MoE:
    """The MoE block of a Qwen3-MoE, Qwen2-MoE or Mixtral config.json of ``layers`` decoder layers (``cfg`` with
    its family's defaults: :func:`flopplan.config_defaults.with_family_defaults`); refuses configs that build dense
    layers among the MoE ones (:func:`dense_layers`), a missing top-k or an unknown experts implementation."""
    names = EXPERT_COUNT_KEYS[model_type]
    experts = _positive(cfg, next((key for key in names if cfg.get(key) is not None), names[-1]), where)
    top_k = _positive(cfg, "num_experts_per_tok", where)
    if top_k > experts:
        raise UserError(f"{where}: num_experts_per_tok {top_k} exceeds the {experts} experts")
    width = _positive(cfg, "intermediate_size" if model_type == "mixtral" else "moe_intermediate_size", where)
    dense = [] if model_type == "mixtral" else dense_layers(cfg, layers, where)  # (Mixtral: every layer sparse)
    if dense:
        raise UserError(f"{where}: layer{'s' if len(dense) > 1 else ''} {', '.join(map(str, dense))} of "
                        f"{layers} would be dense (mlp_only_layers, decoder_sparse_step): dense layers between MoE "
                        "layers are not supported")
    implementation = cfg.get("experts_implementation")
    if implementation is not None and implementation not in EXPERTS_IMPLEMENTATIONS:
        raise UserError(f"{where}: experts_implementation {implementation!r} is not supported "
                        f"(supported: {', '.join(EXPERTS_IMPLEMENTATIONS)})")
    if model_type != "qwen2_moe":
        return MoE(experts, top_k, width)
    shared = _positive(cfg, "shared_expert_intermediate_size", where)
    return MoE(experts, top_k, width, shared, shared_gate=True)


def moe_config(moe: MoE, model_type: str) -> dict[str, Any]:
    """The config.json keys of an MoE block (the inverse of :func:`moe_from_config`)."""
    if model_type == "mixtral":
        return {"num_local_experts": moe.experts, "num_experts_per_tok": moe.top_k,
                "intermediate_size": moe.expert_intermediate}
    cfg: dict[str, Any] = {"num_experts": moe.experts, "num_experts_per_tok": moe.top_k,
                           "moe_intermediate_size": moe.expert_intermediate, "decoder_sparse_step": 1,
                           "mlp_only_layers": [], "norm_topk_prob": True}
    if model_type == "qwen2_moe":
        cfg["shared_expert_intermediate_size"] = moe.shared_intermediate
    return cfg
