"""verl 0.9.1 (``python3 -m verl.trainer.main_ppo``, FSDP actor, v1 sync trainer) as flopplan sees it, torch-free.

``path:N``: a line of ``verl/path`` in the PyPI wheel; ``gen:N``: of its default config (``trainer/config/
_generated_ppo_trainer.yaml``). A flopplan step is a verl training step (``trainer/ppo/v1/trainer_base.py:562-612``).

==============================  =============================================  ======================================
flopplan (Recipe)               verl key                                       source
==============================  =============================================  ======================================
prompts_per_step                data.train_batch_size (prompts)                gen:506; trainer_base.py:741,765
group_size                      actor_rollout_ref.rollout.n                    gen:329; rollout/rollout.yaml:126
prompt_len/completion_len .max  data.max_prompt_length / max_response_length  gen:504-505; data/legacy_data.yaml:32-39
optimizer_batch / group_size    actor.ppo_mini_batch_size (prompts, global)    trainer_base.py:1829-1830
micro_batch (FLOP-neutral)      actor.ppo_micro_batch_size_per_gpu (samples)   engine_workers.py:627-637
iterations                      actor.ppo_epochs                               engine_workers.py:272-287
beta > 0 (a reference forward)  actor.use_kl_loss, actor.kl_loss_coef         trainer/ppo/utils.py:75-79
lora_rank, lora_targets         model.lora_rank, lora_alpha, target_modules    fsdp/transformer_impl.py:339-368
grad_ckpt                       model.enable_gradient_checkpointing            fsdp/transformer_impl.py:335-336
update_padding none / batch     model.use_remove_padding true / false          fsdp/transformer_impl.py:1186-1300
old_logprobs off                algorithm.rollout_correction.bypass_mode       trainer_base.py:1634-1650
prefix_sharing                  rollout.enable_prefix_caching                  vllm_rollout/vllm_async_server.py:336
reward rule / orm:MODEL         reward.custom_reward_function.path / reward.   trainer/ppo/reward.py:70-76;
                                reward_model.{enable,model_path} (ORM)         reward_loop/reward_loop.py:232-246
eval_every, eval_at_start       trainer.test_freq, trainer.val_before_train    trainer_base.py:439,491-492
==============================  =============================================  ======================================

Decided from the code (each refusal cites its line):

* **Log-prob head: ``all``.** ``self.module(**model_inputs, use_cache=False)``, no ``logits_to_keep``
  (``fsdp/transformer_impl.py:1566-1569``): logits on every packed prompt and response token (``:1191,1382``), or
  every position unpacked (``:1477``), in the update, old- and reference-log-prob passes alike.
* **Padding.** ``use_remove_padding`` packs (``none``); false pads a micro-batch to its longest sequence
  (``:1281-1290``): TRL's ``batch`` padding only for fixed lengths, the one case exported as false.
* **LoRA.** verl serves the adapter *unmerged* to vLLM (``vllm_async_server.py:244-247,417-431``) unless
  ``model.lora.merge``; flopplan's vllm engine prices merged weights: the export merges (FSDP streams merged
  weights, ``transformer_impl.py:996-1014``), a config read back unmerged gets a note. The reference is the
  actor with adapters disabled (``trainer_base.py:237``, ``engine_workers.py:425``).
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Collection
from pathlib import Path
from typing import Any

from flopplan import __version__
from flopplan.arch import REGISTRY, resolve, split_targets
from flopplan.attention import FULL, SLIDING
from flopplan.catalog import CONFIGS, registry_name
from flopplan.cost import step_cost
from flopplan.engines.hydra import format_override
from flopplan.engines.verl_keys import VERL_VERSION
from flopplan.engines.verl_read import DEFAULTS as DEFAULTS  # re-exported: the defaults flopplan assumes
from flopplan.engines.verl_read import MISSING, REF, RM, A, M, R, VerlConfig, compose, read_overrides, verl_lengths
from flopplan.errors import UserError, check_int
from flopplan.lengths import Length
from flopplan.moe import PEFT_ALL_LINEAR, all_linear_targets
from flopplan.passes import old_logprobs_run
from flopplan.projections import FUSED_PROJECTIONS, LORA_TARGETS
from flopplan.recipe import Recipe, RewardSystem

REWARD_FUNCTION_PLACEHOLDER = "FILL_IN_path_to_reward_function.py"  # reward.custom_reward_function.path of a rule
VLLM_MAX_LORA_RANK = 512  # vllm_rollout/utils.py:94 (vLLM's MaxLoRARanks: 1, 8, ..., 320, 512)
TRAINERS = ("colocate_async", "separate_async", "sync")  # trainer/ppo/v1/__init__.py: each @register_trainer
REWARD_MANAGERS = ("naive", "dapo", "gdpo", "rate_limited", "remote")  # experimental/reward_loop/reward_manager/

UNPRICED = {  # keys whose feature flopplan does not price: a config with one of them on is refused
    "critic.enable": "a critic's forward and update", "algorithm.filter_groups.enable": "dynamic sampling generates "
    "extra batches per step (trainer_base.py:190-210)", A + "pad_to_length": "bucket padding of packed batches "
    "(fsdp/transformer_impl.py:666-678)", M + "use_fused_kernels": "verl's fused linear-for-PPO head (utils/"
    "experimental/torch_functional.py:96) matches no flopplan log-prob head", M + "exclude_modules": "not "
    "expressible as lora_targets", R + "multi_turn.enable": "multi-turn rollouts", R + "over_sample_rate": "aborted "
    "rollouts", "distillation.enabled": "teacher forwards", "reward_model.enable": "the legacy key main_ppo ignores in "
    "0.9.1 (experimental/reward_loop/reward_loop.py:39): use reward.reward_model.enable", "data.gen_batch_size":
    "the dataloader's own batch", M + "lora_adapter_path": "the adapter's rank and targets are in its files",
    M + "target_parameters": "LoRA on nn.Parameters (peft's target_parameters: workers/config/model.py:127, "
    "fsdp/transformer_impl.py:364), not expressible as lora_targets"}
def _rule(bad: bool, text: str, where: str) -> None:
    if bad:
        raise UserError(f"verl would reject this config: {text} ({where})")


def check_verl_rules(overrides: dict[str, Any], *, known_keys: Collection[str] | None = None) -> None:
    """Refuse (UserError, in verl's words) what verl 0.9.1 rejects for GRPO on the FSDP actor: ``validate_config``
    (``utils/config.py:88-217``; no critic) and the dataclasses it builds, then what the workers assert; first the
    keys, as Hydra's compose checks them (:func:`~flopplan.engines.verl_read.compose`; ``known_keys`` default:
    verl 0.9.1's). MoE router replay (``:74-85``) has no FSDP key: unchecked."""
    c = VerlConfig(compose(overrides.items(), known_keys))
    if c.get(A + "strategy") not in ("fsdp", "fsdp2"):
        raise UserError(f"{A}strategy {c.get(A + 'strategy')!r}: flopplan checks the FSDP actor (fsdp, fsdp2)")
    # typed fields flopplan does not price, as verl's dataclasses type them: RolloutConfig's bool, HFModelConfig's
    # int (workers/config/rollout.py, model.py); an alpha below 1 scales the adapter away or backwards
    c.flag(R + "calculate_log_probs"), c.whole(M + "lora_alpha", 1)
    n_gpus = c.whole("trainer.n_gpus_per_node", 1) * c.whole("trainer.nnodes", 1)  # utils/config.py:101
    batch, n, mini = c.whole("data.train_batch_size", 1), c.whole(R + "n", 1), c.whole(A + "ppo_mini_batch_size", 1)
    fixed, sp = not c.flag(A + "use_dynamic_bsz"), c.whole(A + "ulysses_sequence_parallel_size", 1)
    micro = c.get(A + "ppo_micro_batch_size_per_gpu")
    old_micro = None if c.get(A + "ppo_micro_batch_size") is None else c.whole(A + "ppo_micro_batch_size", 1)
    _rule(fixed and (batch * n) % n_gpus != 0, f"real_train_batch_size ({batch * n}) must be divisible by minimal "
          f"possible batch size ({n_gpus})", "utils/config.py:122-127")
    _rule((engine := c.get(A + "fsdp_config.strategy")) not in ("fsdp", "fsdp2", "fsdp_turbo"), f"strategy {engine} "
          "not supported", "workers/config/engine.py:306")
    _rule(fixed and old_micro is not None and micro is not None, "[actor] You have set both "
          "'actor.ppo_micro_batch_size' AND 'actor.ppo_micro_batch_size_per_gpu'. Please remove "
          "'actor.ppo_micro_batch_size' because only '*_ppo_micro_batch_size_per_gpu' is supported (the former is "
          "deprecated).", "workers/config/actor.py:199-205")
    _rule(fixed and old_micro is None and micro is None, "[actor] Please set at least one of "
          "'actor.ppo_micro_batch_size' or 'actor.ppo_micro_batch_size_per_gpu' if use_dynamic_bsz is not enabled.",
          "workers/config/actor.py:206-210")
    _rule((mode := c.get(A + "loss_agg_mode")) not in ("token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-"
          "token-mean", "seq-mean-token-sum-norm"), f"Invalid loss_agg_mode: {mode}", "workers/config/actor.py:212-220")
    for key in (A + "optim.warmup_style", A + "optim.lr_scheduler_type"):
        _rule(c.get(key) not in (None, "constant", "cosine"), f"assert {key.rsplit('.', 1)[1]} in ['constant', "
              f"'cosine'] failed ({c.get(key)!r})", "workers/config/optimizer.py:117-123")
    _rule(c.get(A + "optim.lr") == MISSING, "assert self.lr != MISSING failed", "workers/config/optimizer.py:58")
    _rule(fixed and batch < mini, f"train_batch_size ({batch}) must be >= actor.ppo_mini_batch_size ({mini})",
          "workers/config/actor.py:224-229")
    if fixed and old_micro is not None:
        _rule(mini % old_micro != 0, f"ppo_mini_batch_size ({mini}) must be divisible by ppo_micro_batch_size "
              f"({old_micro})", "workers/config/actor.py:232-237")
        _rule(old_micro * sp < n_gpus, f"ppo_micro_batch_size ({old_micro}) * ulysses_sequence_parallel_size ({sp}) "
              f"must be >= n_gpus ({n_gpus})", "workers/config/actor.py:238-242")
    _rule(n_gpus % sp != 0, f"the {n_gpus} GPUs do not divide into ulysses_sequence_parallel_size ({sp}) groups: "
          "the actor's device mesh is (world // sp, sp)", "workers/fsdp_workers.py, init_device_mesh")
    _rule(sp > 1 and not c.flag(M + "use_remove_padding"), "When using sequence parallelism for actor/ref policy, "
          "you must enable `use_remove_padding`.", "workers/config/actor.py:331-341")
    use_reference = c.flag("algorithm.use_kl_in_reward") or c.flag(A + "use_kl_loss")  # trainer/ppo/utils.py:75-79
    for section in ("actor_rollout_ref.ref", "actor_rollout_ref.rollout")[0 if use_reference else 1:] if fixed else ():
        old, new = f"{section}.log_prob_micro_batch_size", f"{section}.log_prob_micro_batch_size_per_gpu"
        _rule(c.get(old) is None and c.get(new) is None, f"[{section}] Please set at least one of '{old}' or "
              f"'{new}'.", "utils/config.py:150-182")
        _rule(c.get(old) is not None and c.get(new) is not None, f"[{section}] You have set both '{old}' AND "
              f"'{new}'. Please remove '{old}' because only '*_log_prob_micro_batch_size_per_gpu' is supported (the "
              "former is deprecated).", "utils/config.py:157-161")
    _rule(c.flag(R + "val_kwargs.do_sample") and c.num(R + "temperature") <= 0, "validation gen temperature should be "
          "greater than 0 when enabling do_sample", "utils/config.py:200-203")
    name, rank = c.get(R + "name"), 0 if c.flag(M + "lora.merge") else c.lora_rank()
    # validate_config reads the name only with LoRA (utils/config.py:212); RolloutConfig needs it on the workers
    _rule(name == MISSING, f"Missing mandatory value: {R}name", "utils/config.py:212, rollout/rollout.yaml:4-5")
    _rule(rank > VLLM_MAX_LORA_RANK and name == "vllm", f"lora_rank must be less than or equal to "
          f"{VLLM_MAX_LORA_RANK}, but got {rank}", "utils/config.py:213-215, rollout/vllm_rollout/utils.py:97-98")
    # what only the GPU workers assert (worker start, first step); dp: fsdp/transformer_impl.py:652
    dp, samples, mini = n_gpus // sp, batch * n, mini * n
    _rule(c.flag(A + "use_dynamic_bsz") != c.flag(R + "log_prob_use_dynamic_bsz"), "assert actor.use_dynamic_bsz == "
          "rollout.log_prob_use_dynamic_bsz failed", "workers/engine_workers.py:616")
    if fixed:
        for key in (R + "log_prob_micro_batch_size_per_gpu", A + "ppo_micro_batch_size_per_gpu"):
            _rule(c.get(key) is None, f"assert {key.split('.', 1)[1]} is not None failed",
                  "workers/engine_workers.py:636-637")
        _rule(mini % dp != 0, f"Got mini_batch_size={mini} and self.engine.get_data_parallel_size()={dp}",
              "workers/engine_workers.py:267-270")
        multiple = math.lcm(dp, mini)  # the batch is padded to a multiple of this (trainer_base.py:1589-1621)
        per_gpu = {"update": mini // dp, "log-prob": -(-samples // multiple) * multiple // dp}
        checks = [("update", A + "ppo_micro_batch_size_per_gpu"), ("log-prob", R + "log_prob_micro_batch_size_per_gpu")]
        if use_reference and not (c.lora_rank() > 0 or c.get(M + "lora_adapter_path") is not None):
            checks.append(("log-prob", REF + "log_prob_micro_batch_size_per_gpu"))  # ref_in_actor: trainer_base:237
        for what, key in checks:
            _rule(per_gpu[what] % c.whole(key, 1) != 0, "data size must be divisible by force_group_size * "
                  f"micro_batch_size_per_gpu ({per_gpu[what]} samples per GPU, {key}={c.get(key)})",
                  "workers/engine/utils.py:123-128")
    tp, rdp, pp, ep = (c.whole(R + key, 1) for key in ("tensor_model_parallel_size", "data_parallel_size",
                                                      "pipeline_model_parallel_size", "expert_parallel_size"))
    _rule(n_gpus % (tp * rdp * pp) != 0, f"rollout world_size: {n_gpus} is not divisible by infer_world_size: "
          f"{tp * rdp * pp}", "workers/engine_workers.py:655-661")
    _rule(c.get(R + "mode") == "sync", "Rollout mode 'sync' has been removed.", "workers/config/rollout.py:281-285")
    _rule(name != "trtllm" and ep > 1 and ep != tp * rdp, "expert_parallel_size must be equal to "
          "tensor_model_parallel_size * data_parallel_size", "workers/config/rollout.py:294-297")
    _rule(pp > 1 and name in ("vllm", "sglang", "trtllm"), f"Current rollout self.name='{name}' not implemented "
          "pipeline_model_parallel_size > 1 yet.", "workers/config/rollout.py:319-323")
    _rule(c.flag(R + "disaggregation.enabled") and name not in ("sglang", "vllm"), "rollout.disaggregation.enabled="
          f"True requires rollout.name in ('sglang', 'vllm'); got '{name}'.", "workers/config/rollout.py:341-344")
    mode = c.get("trainer.v1.trainer_mode")  # read only by the v1 trainer (trainer/main_ppo.py:141,183-191)
    _rule(c.flag("trainer.use_v1") and mode not in TRAINERS, f"Unknown trainer '{mode}'. Available "
          f"trainers: {', '.join(TRAINERS)}.", "trainer/main_ppo.py:141, trainer/ppo/v1/trainer_base.py:2017-2023")
    manager = c.get("reward.reward_manager.name")
    _rule(c.get("reward.reward_manager.source") == "register" and manager not in REWARD_MANAGERS,
          f"Reward manager is not registered: self.name='{manager}'", "workers/config/reward.py:51-58")
    if c.flag(RM + "enable"):
        pool = c.flag(RM + "enable_resource_pool")
        _rule(c.get(RM + "rollout.name") == MISSING, f"Missing mandatory value: {RM}rollout.name", "gen:800")
        for key in ("n_gpus_per_node", "nnodes") if pool else ():
            _rule(c.whole(RM + key) <= 0, f"config.{RM}{key} must be greater than 0", "trainer_base.py:823-827")
        _rule(c.flag("algorithm.filter_groups.enable") and not pool, "algorithm.filter_groups requires the reward "
              "metric at sampling time: use rule-based reward or reward.reward_model.enable_resource_pool=True.",
              "trainer_base.py:198-203")


def verl_recipe(recipe: Recipe, notes: list[str] | None = None) -> Recipe:
    """``recipe`` as verl runs it (each change noted): ``engine`` vllm, ``logprob_head`` all, ``update_padding``
    none (packed: verl's default ``use_remove_padding``; at fixed lengths nothing pads either way, so the count is
    the same, and the export keeps verl's packing for the lengths a real run draws). A PRM reward or an optimizer
    batch of part of a group stay refused."""
    r = recipe
    changes = {"engine": "vllm", "generation_batch": None, "logprob_head": "all", "update_padding": "none"}
    changes = {key: value for key, value in changes.items() if getattr(r, key) != value}
    (notes if notes is not None else []).extend(f"for verl: {k} {getattr(r, k)!r} -> {v!r}" for k, v in changes.items())
    return r.with_(**changes) if changes else r


def _check_expressible(r: Recipe) -> None:
    fixed = r.prompt_len.is_fixed and r.completion_len.is_fixed
    longer_eval = max(r.evaluation_prompt_len.max - r.prompt_len.max, r.evaluation_completion_len.max
                      - r.completion_len.max) > 0 and r.eval_every is not None
    for bad, why in (
            (r.engine != "vllm", "engine 'hf': verl generates with vLLM/SGLang servers (actor_rollout_ref.rollout.name)"
             ", never HF generate: use engine vllm (verl_recipe converts a recipe)"),
            (r.logprob_head != "all", f"logprob_head {r.logprob_head!r}: verl's actor runs the LM head on every prompt "
             "and response token (fsdp/transformer_impl.py:1566-1569, 1382): use logprob_head all"),
            (r.reward.kind == "prm", "reward prm: verl 0.9.1 has no process-reward path (its reward model scores a "
             "response once, experimental/reward_loop/reward_loop.py:232-246): use rule or orm:MODEL"),
            (r.optimizer_batch_size % r.group_size != 0, f"optimizer_batch {r.optimizer_batch_size} is not a multiple "
             f"of group_size {r.group_size}: verl's ppo_mini_batch_size counts prompts (trainer_base.py:1829-1830)"),
            (r.update_padding == "batch" and not fixed, "update_padding 'batch' with length distributions: verl pads "
             "each micro-batch to its longest sequence (fsdp/transformer_impl.py:1281-1290): use none (packed)"),
            (longer_eval, "eval lengths above the training maxima: verl validates within data.max_*_length")):
        if bad:
            raise UserError(why)


def _model_path(name: str, what: str) -> str:
    """A Hugging Face repository (registry Qwen2.5 models) or the folder of a config.json, for verl to load."""
    spec = resolve(name)
    if spec.name in REGISTRY and spec.name.startswith("qwen2.5-"):  # qwen2.5-math-prm-7b: Qwen/Qwen2.5-Math-PRM-7B
        return "Qwen/Qwen2.5-" + spec.name.removeprefix("qwen2.5-").title().replace("Prm", "PRM")
    if spec.name in REGISTRY and (repo := next((r for r in CONFIGS if registry_name(r) == spec.name), None)):
        return repo  # the repository the registry's shapes come from (flopplan/catalog.py)
    if Path(name).exists():
        return str(Path(name).parent if Path(name).is_file() else Path(name))
    raise UserError(f"{what}: {name!r} has no Hugging Face repository: pass {what} (a folder verl can load)")


def verl_overrides(recipe: Recipe, *, steps: int, gpus_per_node: int, nnodes: int = 1, model_path: str | None = None,
                   rollout: str = "vllm", micro_batch_per_gpu: int | None = None, rollout_tp: int | None = None,
                   reward_function: str | None = None, reward_model_path: str | None = None, merge_lora: bool = True,
                   logger: tuple[str, ...] = ("console",), notes: list[str] | None = None) -> dict[str, Any]:
    """The Hydra overrides (dotted key -> value) running ``recipe`` for ``steps`` verl steps on ``gpus_per_node`` x
    ``nnodes`` GPUs (mapped as the module docstring says), checked by :func:`check_verl_rules`; what verl cannot
    express is refused naming the field. ``micro_batch_per_gpu`` (FLOP-neutral; default the largest divisor of the
    per-GPU mini-batch up to the recipe's micro-batch) serves the update and log-prob passes; ``rollout_tp``: vLLM
    tensor parallelism (2 if it divides the GPUs, else 1); ``merge_lora`` False: verl's unmerged vLLM adapter."""
    r, says = recipe, notes if notes is not None else []
    for name, value in (("steps", steps), ("gpus_per_node", gpus_per_node), ("nnodes", nnodes)):
        check_int(name, value, 1)
    if rollout not in ("vllm", "sglang"):
        raise UserError(f"rollout must be vllm or sglang, not {rollout!r}")
    _check_expressible(r)
    _check_paths(r, {"--model-path": model_path, "--reward-function": reward_function,
                     "--reward-model-path": reward_model_path})
    n_gpus, lora = gpus_per_node * nnodes, r.lora_rank is not None
    micro = math.gcd(r.micro_batch_size, max(1, r.optimizer_batch_size // n_gpus)) if micro_batch_per_gpu is None \
        else check_int("micro_batch_per_gpu", micro_batch_per_gpu, 1)
    tp = rollout_tp or (2 if n_gpus % 2 == 0 else 1)
    out: dict[str, Any] = {
        "algorithm.adv_estimator": "grpo", "data.train_batch_size": r.prompts_per_step,
        "data.max_prompt_length": r.prompt_len.max, "data.max_response_length": r.completion_len.max,
        M + "path": model_path or _model_path(r.policy, "--model-path"), R + "name": rollout, R + "n": r.group_size,
        R + "tensor_model_parallel_size": tp, R + "enable_prefix_caching": r.prefix_sharing,
        R + "log_prob_micro_batch_size_per_gpu": micro, A + "ppo_micro_batch_size_per_gpu": micro,
        A + "ppo_mini_batch_size": r.optimizer_batch_size // r.group_size, A + "ppo_epochs": r.iterations,
        A + "use_kl_loss": r.beta > 0, M + "enable_gradient_checkpointing": r.grad_ckpt,
        M + "use_remove_padding": r.update_padding == "none",
        M + "lora_rank": r.lora_rank or 0, "algorithm.rollout_correction.bypass_mode": not old_logprobs_run(
            r.old_logprobs, r.optimizer_steps_per_round, r.engine),
        "trainer.n_gpus_per_node": gpus_per_node, "trainer.nnodes": nnodes, "trainer.total_training_steps": steps,
        "trainer.logger": list(logger), "trainer.val_before_train": r.eval_every is not None and r.eval_at_start,
        "trainer.test_freq": r.eval_every or -1, R + "calculate_log_probs": True}  # bypass reads vLLM's log-probs
    if r.beta > 0:
        out.update({A + "kl_loss_coef": r.beta, REF + "log_prob_micro_batch_size_per_gpu": micro})
    if lora:  # alpha is FLOP-neutral: 2 x rank as flopplan train; peft's all-linear = the seven projections of a
        # dense policy (it adapts more of an MoE one: flopplan.moe.PEFT_ALL_LINEAR)
        every = set(r.lora_targets) == set(LORA_TARGETS) and r.policy_spec.family not in PEFT_ALL_LINEAR
        out.update({M + "lora_alpha": 2 * (r.lora_rank or 0), M + "lora.merge": merge_lora, M + "target_modules":
                    "all-linear" if every else list(r.lora_targets)})
    if r.reward.kind == "orm":
        rm_path = reward_model_path or _model_path(str(r.reward.model), "--reward-model-path")
        out.update({RM + "enable": True, RM + "model_path": rm_path, RM + "rollout.name": rollout,
                    RM + "rollout.tensor_model_parallel_size": tp})
    else:
        out.update({"reward.custom_reward_function.path": reward_function or REWARD_FUNCTION_PLACEHOLDER,
                    "reward.custom_reward_function.name": "compute_score"})
    try:
        check_verl_rules(out)
    except UserError as exc:
        raise UserError(f"{exc}; from prompts_per_step {r.prompts_per_step} x group_size {r.group_size}, "
                        f"optimizer_batch {r.optimizer_batch_size}, {n_gpus} GPUs") from None
    says += [note for due, note in (
        (reward_function is None and r.reward.kind == "rule", f"reward.custom_reward_function.path is "
         f"{REWARD_FUNCTION_PLACEHOLDER}: your rule's file (compute_score(data_source, solution_str, ground_truth))"),
        (True, "data.train_files/val_files keep verl's example paths (data/legacy_data.yaml): set them"),
        (not (r.prompt_len.is_fixed and r.completion_len.is_fixed), "verl caps lengths at the maxima (prompt "
         f"{r.prompt_len.max}, completion {r.completion_len.max}); the plan priced the distributions"),
        (r.prefix_sharing, "prefix sharing: one prefill per group priced; vLLM's cache may prefill more"),
        (lora and not merge_lora, "LoRA unmerged in vLLM (vllm_async_server.py:244-247): adapter FLOPs not priced"),
        (r.eval_every is not None, f"validation: data.val_files must hold eval_prompts ({r.eval_prompts}) prompts; "
         "verl also validates after the last step (trainer_base.py:491-492) and scores it")) if due]
    return out


def _check_paths(r: Recipe, paths: dict[str, str | None]) -> None:
    """Refuse a path verl would not read as the file it names: ``${NAME}`` is OmegaConf's reference to another
    config key (an environment variable is ``${oc.env:NAME}``), a ``$NAME`` the shell left unexpanded stays literal;
    and a reward option the plan's reward system does not use (it was ignored without a word)."""
    for option, path in paths.items():
        if path is not None and (re.search(r"\$\{(?!oc\.)", path) or re.search(r"\$[A-Za-z_]", path)):
            raise UserError(f"{option} {path!r}: verl's config (OmegaConf) reads ${{NAME}} as another config key and "
                            "$NAME as text: let the shell expand it (unquoted $HOME), or write ${oc.env:NAME}")
    if paths["--reward-function"] is not None and r.reward.kind != "rule":
        raise UserError(f"--reward-function is a rule reward's file; the plan's reward is {r.reward}, which verl "
                        "scores with its reward model (--reward-model-path)")
    if paths["--reward-model-path"] is not None and r.reward.kind != "orm":
        raise UserError(f"--reward-model-path is a reward model's folder; the plan's reward is {r.reward} "
                        "(a rule: --reward-function)")


def _model_name(path: Any, key: str) -> str:
    if path is None or path == MISSING:  # (read as 'None', the registry's list followed)
        raise UserError(f"{key} is not set: give the model's path or Hub id")
    try:
        spec = resolve(str(path))
    except UserError as exc:
        hint = "pass --model, a model flopplan knows" if key == M + "path" else "use a model flopplan knows there"
        raise UserError(f"{key} {path!r}: {exc} ({hint})") from None
    return spec.name if spec.name in REGISTRY else str(path)


def recipe_from_verl(overrides: dict[str, Any] | str | Path, *, model: str | None = None,
                     prompt_len: int | Length | None = None, completion_len: int | Length | None = None,
                     reward_model: str | None = None, notes: list[str] | None = None,
                     **conventions: Any) -> tuple[Recipe, int | None]:
    """The Recipe flopplan prices for a verl config (overrides, or a file: :func:`read_overrides`) and its
    ``trainer.total_training_steps`` (None: verl derives the steps from the data). ``model``/``reward_model``:
    flopplan names for ``model.path``/``reward_model.model_path`` (default: those paths); lengths: default the
    maxima; ``conventions``: counting choices a config does not hold (``attention``, ...). Old log-probs ``on``
    unless bypass; head ``all``; LoRA rollouts priced merged (noted when verl does not merge)."""
    data = read_overrides(overrides) if isinstance(overrides, (str, Path)) else compose(overrides.items())
    check_verl_rules(data)
    c = VerlConfig(data)
    batch, n, mini = c.whole("data.train_batch_size", 1), c.whole(R + "n", 1), c.whole(A + "ppo_mini_batch_size", 1)
    kl_loss, kl_reward, fixed = c.flag(A + "use_kl_loss"), c.flag("algorithm.use_kl_in_reward"), not c.flag(
        A + "use_dynamic_bsz")
    beta = c.num(A + "kl_loss_coef") if kl_loss else c.num("algorithm.kl_ctrl.kl_coef") if kl_reward else 0.0
    rank, targets, mode = c.adapter_rank(), c.get(M + "target_modules"), c.get("trainer.v1.trainer_mode")
    function = c.get("reward.custom_reward_function.path")
    for bad, why in [(c.get(key) not in (None, False, 0), f"{key}: {why}") for key, why in UNPRICED.items()] + [
            (c.flag(RM + "enable") and function is not None,
             f"reward.custom_reward_function.path {function!r} with reward.reward_model.enable: verl scores with the "
             "custom function, not the reward model's forward (experimental/reward_loop/reward_loop.py:145-153, a "
             "generative reward model), and flopplan cannot price what the function runs"),
            (not (v1 := c.flag("trainer.use_v1")), "trainer.use_v1 false: verl runs the legacy trainer (main_ppo_v0, "
             "trainer/main_ppo.py:183-191); flopplan prices the v1 sync trainer (trainer.use_v1 true)"),
            (v1 and mode != "sync", f"trainer.v1.trainer_mode {mode!r}: "
             "flopplan prices the sync trainer (sync; trainer/main_ppo.py:141)"),
            (c.whole("trainer.critic_warmup") > 0, f"trainer.critic_warmup {c.get('trainer.critic_warmup')}: the "
             "first steps run without the actor update (trainer_base.py:608); flopplan prices an update every step"),
            (c.get("algorithm.adv_estimator") != "grpo", f"algorithm.adv_estimator {c.get('algorithm.adv_estimator')!r}"
             ": flopplan prices GRPO (grpo); gae trains a critic (trainer/ppo/utils.py:96-107)"),
            (bool(rank) and targets != "all-linear" and not (isinstance(targets, list) and set(targets) <= set(
                LORA_TARGETS) | set(FUSED_PROJECTIONS)), f"model.target_modules {targets!r}: not projections"),
            (c.get(R + "name") not in ("vllm", "sglang", "trtllm"), f"rollout.name {c.get(R + 'name')!r}"),
            (fixed and batch % mini != 0, f"data.train_batch_size {batch} is not a multiple of ppo_mini_batch_size "
             f"{mini}: verl adds synthetic 128-token samples (trainer_base.py:1589-1621, padding_utils.py:144-168)"),
            (not fixed and batch % mini != 0, f"data.train_batch_size {batch} is not a multiple of {A}"
             f"ppo_mini_batch_size {mini} (with {A}use_dynamic_bsz): flopplan prices whole mini-batches"),
            ((kl_loss or kl_reward) and beta <= 0, f"use_kl_loss or use_kl_in_reward with a KL coefficient of {beta:g} "
             "runs the reference forward all the same (trainer/ppo/utils.py:75-79), and flopplan prices that forward "
             "only with a coefficient above 0: set the coefficient above 0, or the KL off")]:
        if bad:
            raise UserError(f"cannot price this verl config: {why}")
    prompt, completion = verl_lengths(c, prompt_len, completion_len)
    reward = RewardSystem("orm", reward_model or _model_name(c.get(RM + "model_path"), RM + "model_path")) \
        if c.flag(RM + "enable") else RewardSystem("rule")
    policy = model or _model_name(c.get(M + "path"), M + "path")
    lora_targets = LORA_TARGETS if not rank else split_targets(tuple(targets), policy, "model.target_modules") \
        if targets != "all-linear" else all_linear_targets(resolve(policy).family, "model.target_modules")
    recipe = Recipe(
        policy=policy, lora_rank=rank or None, lora_targets=lora_targets, prompts_per_step=batch, group_size=n,
        iterations=c.whole(A + "ppo_epochs", 1), beta=beta,
        old_logprobs="off" if c.flag("algorithm.rollout_correction.bypass_mode") else "on",
        grad_ckpt=c.flag(M + "enable_gradient_checkpointing"), logprob_head="all", engine="vllm",
        prefix_sharing=c.flag(R + "enable_prefix_caching"), optimizer_batch=None if mini >= batch else mini * n,
        micro_batch=c.whole(A + "ppo_micro_batch_size_per_gpu", 1) if fixed else None, reward=reward,
        update_padding="none" if c.flag(M + "use_remove_padding") else "batch", prompt_len=prompt,
        completion_len=completion, **conventions)
    _ = recipe.policy_spec, recipe.reward_spec  # unknown models and shapes refused here, in one line
    if recipe.update_padding == "batch" and not (prompt.is_fixed and completion.is_fixed):
        raise UserError("model.use_remove_padding false pads each micro-batch to its longest sequence: flopplan "
                        "prices that only for fixed lengths")
    (notes if notes is not None else []).extend(note for due, note in (
        (rank and not c.flag(M + "lora.merge"), "verl serves the LoRA adapter unmerged in vLLM (vllm_async_server.py:"
         "244-247): flopplan prices merged rollouts, without the adapter's FLOPs (model.lora.merge=true: exact)"),
        (c.whole(M + "lora.rank") not in (0, rank), f"model.lora.rank {c.get(M + 'lora.rank')} is Megatron's LoRA: "
         f"the FSDP actor trains {f'a rank-{rank} adapter (model.lora_rank)' if rank else 'every weight'} "
         "(fsdp/transformer_impl.py:162,359-368)"),
        (prompt_len is None or completion_len is None, "lengths: the longest verl produces "
         f"(rollout.prompt_length {prompt.max}, response_length {completion.max}): pass --prompt-len/--completion-len"),
        (recipe.prefix_sharing, "rollout.enable_prefix_caching: one prompt prefill per group priced (a lower bound)"),
        (c.flag("trainer.val_before_train") or c.whole("trainer.test_freq", -1) > 0, "validation is not priced: the "
         "size of data.val_files is not in the config")) if due)
    return recipe, None if c.get(key := "trainer.total_training_steps") is None else c.whole(key, 1)


# verl's ESTIMATE_FUNC (utils/flops_counter.py:678-701) by model_type: the ones flopplan reproduces, and the others
QWEN2_FORMULA = ("qwen2", "llama", "qwen3", "mistral", "minicpmv", "minicpmo", "seed_oss", "glm4v", "mimo")
VERL_FORMULAS = (*QWEN2_FORMULA, "qwen2_moe", "qwen3_moe", "gemma3_text")
GEMMA3_MULTIMODAL = ("gemma-3-4b", "gemma-3-12b", "gemma-3-27b")
"""Registry models whose repository's config.json has model_type ``gemma3`` (Gemma3ForConditionalGeneration; the
registry holds its text_config, flopplan/catalog.py): verl builds its counter from AutoConfig
(workers/config/model.py:187, workers/engine_workers.py:153), and ESTIMATE_FUNC has no ``gemma3``: it counts 0."""
OTHER_FORMULAS = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "deepseek_v3",
                  "apertus", "gpt_oss", "hy_v3")


def verl_mfu_estimate(recipe: Recipe, *, update_seconds: float | None = None, n_gpus: int | None = None,
                      peak_flops: float | None = None) -> dict[str, Any]:
    """verl's actor-update FLOPs for one step beside flopplan's exact update and step. verl counts ``6 dense_N s +
    6 H d s^2`` a layer and a sequence of ``s`` tokens (``utils/flops_counter.py:92-124``, the formula of qwen2/llama/
    qwen3/mistral/...; ``dense_N``: projections 3hI + h(q+k+v+o) a layer, + ``2 V h``: embedding as a matmul, and
    head); MoE (qwen2_moe/qwen3_moe, ``:417-449``): 3 h top_k I_expert + h E (the router) a layer for the MLP, no
    shared expert; gemma3_text (``:454-514``): ``s min(s, window)`` for a sliding layer. Over ``ppo_epochs`` x every
    sample (``engine_workers.py:291-300``): no LoRA, recompute, rollouts, log-prob passes or reward model. A
    model_type without an ESTIMATE_FUNC entry counts 0 (``:633-634``); one whose formula flopplan does not
    reproduce: None. With the update's wall time, ``n_gpus`` and ``peak_flops`` a GPU: verl's MFU
    (``engine_workers.py:228-235``)."""
    r, s = recipe, recipe.policy_spec
    update, step = (cost := step_cost(r)).phase_total("update"), cost.step_flops
    model_type = "gemma3" if s.family == "gemma3_text" and s.name in GEMMA3_MULTIMODAL else s.family
    out: dict[str, Any] = {"model_type": model_type, "update_flops": update, "step_flops": step,
                           "not_counted_by_verl": {p: v for p, v in cost.step_phases.items() if p != "update"}}
    if model_type not in VERL_FORMULAS:
        return {**out, "verl_update_flops": None if model_type in OTHER_FORMULAS else 0}
    h, moe = s.hidden_size, s.moe if s.family in ("qwen2_moe", "qwen3_moe") else None
    mlp = 3 * h * moe.top_k * moe.expert_intermediate + h * moe.experts if moe else 3 * h * s.intermediate_size
    dense = (mlp + h * (2 * s.q_dim + 2 * s.kv_dim)) * s.num_layers + 2 * s.vocab_size * h
    windows = [s.sliding_window if s.family == "gemma3_text" and kind == SLIDING else None
               for kind in s.layer_types or [FULL] * s.num_layers]
    per_sequence: Any = 0
    for p, wp in r.prompt_len.quadrature():  # exact for the quadratic: E[s^2], not E[s]^2
        for k, wk in r.completion_len.quadrature():
            value = 6 * dense * (p + k) + 6 * (p + k) ** 2 * s.head_dim * s.num_heads * windows.count(None)
            per_sequence += value if wp * wk == 1.0 else value * wp * wk
    for window in filter(None, windows):  # sliding layers: s * min(s, window), over the distribution of s
        per_sequence += 6 * s.head_dim * s.num_heads * _expected_capped_square(r.prompt_len, r.completion_len, window)
    verl = r.iterations * r.rollouts_per_step * per_sequence
    out.update({"verl_update_flops": verl, "verl_flops_per_optimizer_step": verl / r.optimizer_steps_per_round,
                "update_rel_diff": float(verl) / float(update) - 1.0, "step_rel_diff": float(verl) / float(step) - 1.0})
    if update_seconds and n_gpus and peak_flops:
        out["mfu"] = float(verl) / update_seconds / peak_flops / n_gpus
    return out


def _expected_capped_square(prompt: Length, completion: Length, window: int) -> Any:
    """E[s min(s, window)] for s = prompt + completion (independent): exact integers for fixed lengths."""
    if prompt.is_fixed and completion.is_fixed:
        return (total := prompt.max + completion.max) * min(total, window)
    import numpy as np
    from scipy.signal import fftconvolve

    first, second = (np.bincount(np.asarray(x.support), weights=np.asarray(x.probs)) for x in (prompt, completion))
    pmf = fftconvolve(first, second)  # the distribution of the sum
    lengths = np.arange(len(pmf), dtype=np.float64)
    return float(pmf @ (lengths * np.minimum(lengths, window)))


def launch_script(overrides: dict[str, Any], *, generated_by: str = "flopplan.engines.verl.verl_overrides") -> str:
    """A bash script running ``python3 -m verl.trainer.main_ppo`` with these overrides; it refuses a FILL_IN."""
    return "\n".join([
        "#!/usr/bin/env bash", f"# A verl {VERL_VERSION} GRPO run exported by flopplan {__version__} ({generated_by}):",
        "# python3 -m verl.trainer.main_ppo with the Hydra overrides below; arguments to this script are appended",
        "# (bash run.sh trainer.save_freq=50). Set data.train_files/val_files and every FILL_IN placeholder first.",
        "set -euo pipefail", "OVERRIDES=(", *(f"  {shlex.quote(format_override(k, v))}" for k, v in overrides.items()),
        ")", 'for arg in "${OVERRIDES[@]}"; do', '  case "$arg" in *FILL_IN*) echo "$0: replace the placeholder in: '
        '$arg" >&2; exit 2;; esac', "done", 'exec python3 -m verl.trainer.main_ppo "${OVERRIDES[@]}" "$@"', ""])
