"""Reading a verl config for ``plan --from-verl``: the file (Hydra overrides or a YAML config) and its keys, checked
against verl 0.9.1's composed config (:mod:`flopplan.engines.verl_keys`) as Hydra's compose checks them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from flopplan.engines.hydra import parse_override, parse_value
from flopplan.engines.verl_keys import VERL_VERSION, verl_keys, verl_leaves
from flopplan.errors import UserError, is_int, is_number
from flopplan.fileio import read_text
from flopplan.lengths import Length

A, R, M, REF, RM = ("actor_rollout_ref.actor.", "actor_rollout_ref.rollout.", "actor_rollout_ref.model.",
                    "actor_rollout_ref.ref.", "reward.reward_model.")
MISSING = "???"

DEFAULTS: dict[str, Any] = {  # defaults of the keys the rules and the reverse mapping read (gen:N); others: None
    "data.train_batch_size": 1024, "data.max_prompt_length": 512, "data.max_response_length": 512,  # gen:504-506
    "trainer.n_gpus_per_node": 8, "trainer.nnodes": 1, "trainer.total_training_steps": None,  # gen:952-962
    "trainer.val_before_train": True, "trainer.test_freq": -1, "algorithm.adv_estimator": "gae",  # gen:861,968-970
    "trainer.critic_warmup": 0, "trainer.use_v1": True, "trainer.v1.trainer_mode": "sync",  # gen:971,979,981
    "reward.custom_reward_function.path": None,  # gen:781
    "algorithm.use_kl_in_reward": False, "algorithm.kl_ctrl.kl_coef": 0.001, "algorithm.filter_groups.enable": False,
    "algorithm.rollout_correction.bypass_mode": False, A + "strategy": "fsdp", A + "fsdp_config.strategy": "fsdp",
    A + "ppo_mini_batch_size": 256, A + "ppo_micro_batch_size": None, A + "ppo_micro_batch_size_per_gpu": None,
    A + "use_dynamic_bsz": False, A + "loss_agg_mode": "token-mean", A + "use_kl_loss": False,  # gen:50-106,855-869
    A + "kl_loss_coef": 0.001, A + "ppo_epochs": 1, A + "ulysses_sequence_parallel_size": 1, A + "optim.lr": 1e-6,
    A + "optim.lr_scheduler_type": "constant", A + "optim.warmup_style": None,  # gen:12-25,109-178
    REF + "log_prob_micro_batch_size": None, REF + "log_prob_micro_batch_size_per_gpu": None,  # gen:188-189
    R + "prompt_length": "${oc.select:data.max_prompt_length,512}", "data.filter_overlong_prompts": False,
    R + "response_length": "${oc.select:data.max_response_length,512}", R + "name": MISSING,  # gen:302-303,521
    R + "mode": "async", R + "n": 1, R + "temperature": 1.0,  # gen:293-297,329
    R + "calculate_log_probs": True,  # verl 0.9.1's default (a config that left it out was refused as None)
    R + "tensor_model_parallel_size": 2, R + "data_parallel_size": 1, R + "expert_parallel_size": 1,
    R + "pipeline_model_parallel_size": 1, R + "enable_prefix_caching": True,  # gen:310-318
    R + "log_prob_micro_batch_size": None, R + "log_prob_micro_batch_size_per_gpu": None,  # gen:323-324
    R + "log_prob_use_dynamic_bsz": "${oc.select:actor_rollout_ref.actor.use_dynamic_bsz,false}",  # gen:325
    R + "val_kwargs.do_sample": False, R + "disaggregation.enabled": False, M + "lora_rank": 0,  # gen:342,427,447
    M + "path": "~/models/deepseek-llm-7b-chat", M + "enable_gradient_checkpointing": True,  # gen:436-444
    M + "use_remove_padding": True, M + "lora_alpha": 16, M + "target_modules": "all-linear",  # gen:446-449
    M + "lora.merge": False, M + "lora.rank": 0, "reward.reward_manager.source": "register",  # gen:474-475,785
    "reward.reward_manager.name": "naive", RM + "enable": False, RM + "enable_resource_pool": False,  # gen:786-794
    RM + "n_gpus_per_node": 8, RM + "nnodes": 0, RM + "rollout.name": MISSING,  # gen:795-800
}
_INTERPOLATION = re.compile(r"\$\{(?:oc\.select:)?\s*([\w.]+)\s*(?:,(.*))?\}")


class VerlConfig:
    """A verl config as overrides over :data:`DEFAULTS`, read with ``${a.b}`` / ``${oc.select:a.b,default}``
    interpolations followed and values checked (a bad one is a UserError naming the key)."""

    def __init__(self, overrides: dict[str, Any]) -> None:
        self.values = {**DEFAULTS, **{key.lstrip("+"): value for key, value in overrides.items()}}

    def get(self, key: str) -> Any:
        """The value, interpolations followed: ``${oc.select:a.b,default}`` is the default only where a.b is absent
        (a null stays null: OmegaConf's select); another interpolation (``${oc.env:VAR}``) is refused."""
        value = self.values.get(key)
        for _ in range(8):  # interpolations nest at most two deep in verl's config
            if not (isinstance(value, str) and "${" in value):
                break
            if not (match := _INTERPOLATION.fullmatch(value)):
                raise UserError(f"{key} {value!r}: flopplan follows only ${{a.b}} and ${{oc.select:a.b,default}}, not "
                                "this interpolation (oc.env and other resolvers read where verl runs): write the value")
            target = match.group(1)
            if target not in self.values:  # Hydra reads the target where flopplan may not know it
                if target.startswith("."):
                    raise UserError(f"{key} {value!r}: flopplan does not follow relative interpolations: write the "
                                    "value")
                if target in verl_keys():  # (a default of verl's that DEFAULTS does not carry: not absent)
                    raise UserError(f"{key} {value!r}: {target} is at verl's default, which flopplan does not "
                                    f"carry: set {target} in the file, or write the value")
                if match.group(2) is None:  # (oc.select's default is for a key verl's config lacks)
                    raise UserError(f"{key} {value!r}: {target} is not a key of verl's config")
            value = self.values[target] if target in self.values else parse_value(match.group(2).strip())
        return value

    def whole(self, key: str, minimum: int = 0) -> int:
        if not is_int(value := self.get(key)) or value < minimum:
            raw = self.values.get(key)
            via = f" ({raw}, as Hydra composes it)" if isinstance(raw, str) and raw.startswith("${") else ""
            raise UserError(f"{key} must be an integer >= {minimum}, not {value!r}{via}")
        return value

    def num(self, key: str) -> float:
        if not is_number(value := _number(v) if isinstance(v := self.get(key), str) else v):
            raise UserError(f"{key} must be a number, not {v!r}")
        return float(value)

    def flag(self, key: str) -> bool:
        if not isinstance(value := self.get(key), bool):
            raise UserError(f"{key} must be true or false, not {value!r}")
        return value

    def lora_rank(self) -> int:
        """The rank validate_config and the trainer read (model.lora.rank, else model.lora_rank: utils/config.py:
        205-211, trainer_base.py:234-237); the FSDP actor's adapter is :meth:`adapter_rank`."""
        return self.whole(M + "lora.rank") or self.whole(M + "lora_rank")

    def adapter_rank(self) -> int:
        """The rank of the adapter the FSDP actor trains: model.lora_rank alone. actor.strategy fsdp/fsdp2 is the
        engine's backend (workers/config/actor.py:321-325) and picks the FSDP engine (fsdp/transformer_impl.py:
        1143), which builds LoRA from model_config.lora_rank (:162, :359-368); model.lora is Megatron's LoRA config
        (workers/config/model.py:131-132)."""
        return self.whole(M + "lora_rank")


def _number(text: str) -> Any:
    """A YAML dump's number PyYAML left as text (``1e-3``), read as OmegaConf reads it; else the text."""
    try:
        return parse_value(text)
    except UserError:
        return text


def read_overrides(path: str | Path) -> dict[str, Any]:
    """A verl config file as dotted key -> value (:func:`compose`'s form): YAML (``.yaml``/``.yml``: a full config
    such as a run's ``.hydra/config.yaml``), else Hydra overrides, ``key=value`` (``#`` comments, shell quoting),
    read with Hydra's grammar (:mod:`flopplan.engines.hydra`) and applied in order as compose applies them. A YAML
    key verl's config lacks is refused, unless it lies under one of verl's leaves (``model.override_config: {}``,
    a null): such a key, which a run added with ``+``, comes back as ``++key`` (set whether or not it exists)."""
    path, text = Path(path), read_text(path, "verl config")
    if path.suffix in (".yaml", ".yml"):
        return {_yaml_key(key, path): value for key, value in _flatten(read_yaml(text, path)).items()}
    composer = Composer()
    for number, line in enumerate(text.splitlines(), 1):
        try:
            tokens = _words(line.strip().removesuffix("\\"))
        except ValueError as exc:
            raise UserError(f"{path}:{number}: {exc}") from None
        for token in tokens:
            try:
                override = parse_override(token)
                composer.apply(override.prefix, override.key, override.value)
            except UserError as exc:
                raise UserError(f"{path}:{number}: {exc}") from None
    return composer.result()


def _words(line: str) -> list[str]:
    """A line's words as bash splits them: quotes and escapes as ``shlex`` reads them, and a comment from a ``#``
    that starts a word to the end of the line (``n=8#4`` is one word, which Hydra then refuses; ``shlex``'s
    comments cut it at the ``#``)."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    words = []
    for word in lexer:
        if word.startswith("#"):
            break
        words.append(word)
    return words


def read_yaml(text: str, path: Path) -> dict[str, Any]:
    """A YAML verl config as a mapping; a duplicate key is refused as OmegaConf's loader refuses it
    (omegaconf/_utils.py: ``get_yaml_loader``, "found duplicate key"), where PyYAML keeps the last."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    mark = key_node.start_mark
                    raise UserError(f"verl config {path}:{mark.line + 1}:{mark.column + 1}: found duplicate key "
                                    f"{key!r} (OmegaConf refuses it)")
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        data = yaml.load(text, Loader=Loader)  # a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"verl config {path}{where}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise UserError(f"verl config {path}: the YAML is a {type(data).__name__}, not a mapping of verl's keys")
    return data


def _yaml_key(key: str, path: Path) -> str:
    if key in verl_keys():
        return key
    parts = key.split(".")
    if any(".".join(parts[:n]) in verl_leaves() for n in range(1, len(parts))):
        return "++" + key
    raise UserError(f"verl config {path}: {key} is not a key of verl {VERL_VERSION}'s config (misspelt?)")


def _flatten(node: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    dotted = next((str(key) for key in node if "." in str(key)), None)
    if dotted is not None:  # (OmegaConf keeps a.b: 1 as one literal key beside the tree a: {b: ...})
        raise UserError(f"the YAML key {prefix}{dotted} holds a dot: OmegaConf reads it as one literal key, not the "
                        "path verl reads; nest it")
    return {k: v for key, value in node.items() for k, v in (_flatten(value, f"{prefix}{key}.") if isinstance(
        value, dict) and value else {prefix + str(key): value}).items()}


_UNSET = object()


class Composer:
    """verl's config as Hydra's compose builds it from overrides applied in order (hydra/_internal/
    config_loader_impl.py:336-390; verl's config is in struct mode): ``key=`` sets a key that exists (verl's, or one
    added before) and merges a mapping into a section, keys checked; ``+key=`` adds a key where none is (or a null:
    ``select`` is None) and merges a mapping or list anyway; ``++key=`` adds or sets; the last value of a key wins.
    ``~key`` (delete) is refused. :meth:`result`: verl's keys bare, added ones as ``++key``."""

    def __init__(self, known: Collection[str] | None = None) -> None:
        self.known = verl_keys() if known is None else frozenset(known)
        self.nodes = verl_keys() - verl_leaves() if known is None else frozenset(
            key[:i] for key in self.known for i in range(len(key)) if key[i] == ".")
        self.values: dict[str, Any] = {}

    def exists(self, key: str) -> bool:
        return key in self.known or key in self.nodes or key in self.values or any(
            k.startswith(key + ".") for k in self.values)

    def is_null(self, key: str) -> bool:
        """``OmegaConf.select(cfg, key, throw_on_missing=False) is None`` where flopplan knows the value: an absent
        key, a null or ``???`` (set, or a default of :data:`DEFAULTS`); verl's other keys are taken as set."""
        if key in self.values:
            return self.values[key] in (None, MISSING)
        return not self.exists(key) or (key in DEFAULTS and DEFAULTS[key] in (None, MISSING))

    def apply(self, prefix: str, key: str, value: Any = _UNSET) -> None:
        if prefix == "~":
            raise UserError(f"~{key}: flopplan does not read deletions (~key): give the config without the key")
        if prefix not in ("", "+", "++") or not key or key.startswith("+"):
            raise UserError(f"verl would reject this config: {prefix + key!r} is not a Hydra override key (Hydra "
                            "compose)")
        if prefix == "+" and not isinstance(value, (dict, list)) and not self.is_null(key):
            raise UserError(f"verl would reject this config: Could not append to config. An item is already at "
                            f"'{key}' (Hydra compose: +{key} adds a key; drop the + to set it, or ++ to force)")
        if prefix == "" and not self.exists(key):
            raise UserError(f"verl would reject this config: Could not override '{key}'. To append to your config use "
                            f"+{key}=... (Hydra compose: {key} is not a key of verl {VERL_VERSION}'s config)")
        if value is not _UNSET:
            self._set(key, value, force=bool(prefix), top=key)

    def _set(self, key: str, value: Any, *, force: bool, top: str) -> None:
        section = key in self.nodes or any(k.startswith(key + ".") for k in self.values)
        if isinstance(value, dict) and (section or value):
            for sub, item in value.items():  # OmegaConf.update(merge=True): merged key by key
                if not force and not self.exists(f"{key}.{sub}"):
                    raise UserError(f"verl would reject this config: Could not override '{top}' ({top}={{...}} "
                                    f"merges into the section, and {key}.{sub} is not a key of verl "
                                    f"{VERL_VERSION}'s config; Hydra compose)")
                self._set(f"{key}.{sub}", item, force=force, top=top)
        elif section:
            raise UserError(f"{key} is a section of verl's config: flopplan reads it set key by key ({key}.KEY=...) "
                            f"or as a mapping ({key}={{KEY: ...}}), not as {value!r}")
        else:
            self.values.pop(key, None)  # keep the order of the last setting
            self.values[key] = value

    def result(self) -> dict[str, Any]:
        return {key if key in self.known else "++" + key: value for key, value in self.values.items()}


def compose(overrides: Iterable[tuple[str, Any]], known: Collection[str] | None = None) -> dict[str, Any]:
    """``(key, value)`` pairs (``+``/``++`` prefixes on the key) applied in order by :class:`Composer`."""
    composer = Composer(known)
    for key, value in overrides:
        plus = "~" if key.startswith("~") else key[:len(key) - len(key.lstrip("+"))]
        composer.apply(plus, key[len(plus):], value)
    return composer.result()


def check_keys(overrides: Iterable[str], known: Collection[str] | None = None) -> None:
    """Refuse, as Hydra's compose does, ``key=`` for a key verl's config lacks and ``+key=`` (append) for one it has;
    ``++key=`` (force) always passes. ``known``: verl's keys (default :func:`verl_keys`: every node of the config in
    struct mode, so a key under an empty mapping such as ``model.override_config`` needs ``+`` too)."""
    composer = Composer(known)
    for key in overrides:
        plus = "~" if key.startswith("~") else key[:len(key) - len(key.lstrip("+"))]
        composer.apply(plus, key[len(plus):])


def verl_lengths(c: VerlConfig, prompt_len: int | Length | None,
                 completion_len: int | Length | None) -> tuple[Length, Length]:
    """The prompt and completion lengths to price (default: the longest verl produces), refused above them. A
    prompt is cut to rollout.prompt_length (experimental/agent_loop/agent_loop.py:437-445; with
    data.filter_overlong_prompts, longer than data.max_prompt_length is dropped: utils/dataset/rl_dataset.py:199-271);
    a completion to rollout.response_length (vllm_async_server.py:611-613, single_turn_agent_loop.py:96). Both
    default to data.max_*_length (gen:302-303)."""
    prompt_max, prompt_key = c.whole(R + "prompt_length", 1), R + "prompt_length"
    if c.flag("data.filter_overlong_prompts") and c.whole("data.max_prompt_length", 1) < prompt_max:
        prompt_max, prompt_key = c.whole("data.max_prompt_length", 1), "data.max_prompt_length"
    out = []
    for given, most, flag, key in ((prompt_len, prompt_max, "--prompt-len", prompt_key), (
            completion_len, c.whole(R + "response_length", 1), "--completion-len", R + "response_length")):
        length = Length.fixed(given) if isinstance(given, int) else given or Length.fixed(most)
        if length.max > most:
            raise UserError(f"{flag} reaches {length.max} tokens, longer than verl produces with this config: {key} "
                            f"{most}{' (data.filter_overlong_prompts)' if key.startswith('data.') else ''}")
        out.append(length)
    return out[0], out[1]
