"""GRPOConfig's fields (trl 1.16, TrainingArguments' among them) and the ones ``plan --from-trl`` reads past
besides :data:`flopplan.engines.trl.NO_FLOPS`: every field of the release is priced, read past or refused, so a field
noted as unknown is one that release does not have (a misspelling, or another release's)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from flopplan.errors import UserError
from flopplan.fileio import read_json

TRL_FIELDS = frozenset({
    'accelerator_config', 'activation_checkpointing', 'activation_checkpointing_kwargs', 'adam_beta1', 'adam_beta2',
    'adam_epsilon', 'auto_find_batch_size', 'average_tokens_across_devices', 'batch_eval_metrics', 'beta', 'bf16',
    'bf16_full_eval', 'cache_implementation', 'cast_lm_head_to_fp32', 'chat_template_kwargs', 'data_seed',
    'dataloader_drop_last', 'dataloader_in_order', 'dataloader_multiprocessing_context', 'dataloader_num_workers',
    'dataloader_persistent_workers', 'dataloader_pin_memory', 'dataloader_prefetch_factor', 'ddp_backend',
    'ddp_broadcast_buffers', 'ddp_bucket_cap_mb', 'ddp_find_unused_parameters', 'ddp_static_graph', 'ddp_timeout',
    'debug', 'deepspeed', 'delta', 'disable_dropout', 'disable_tqdm', 'do_eval', 'do_predict', 'do_train',
    'ds3_gather_for_generation', 'enable_jit_checkpoint', 'entropy_coef', 'entropy_coef_delta', 'entropy_coef_max',
    'entropy_coef_min', 'entropy_target', 'epsilon', 'epsilon_high', 'eval_accumulation_steps', 'eval_delay',
    'eval_do_concat_batches', 'eval_on_start', 'eval_steps', 'eval_strategy', 'eval_use_gather_object', 'fp16',
    'fp16_full_eval', 'fsdp', 'fsdp_config', 'full_determinism', 'generation_batch_size', 'generation_kwargs',
    'gradient_accumulation_steps', 'gradient_checkpointing', 'gradient_checkpointing_kwargs', 'greater_is_better',
    'hub_always_push', 'hub_model_id', 'hub_private_repo', 'hub_revision', 'hub_strategy', 'hub_token',
    'ignore_data_skip', 'importance_sampling_level', 'include_for_metrics', 'include_num_input_tokens_seen',
    'label_names', 'label_smoothing_factor', 'learning_rate', 'length_column_name', 'liger_kernel_config',
    'load_best_model_at_end', 'local_rank', 'log_completions', 'log_completions_hub_repo', 'log_level',
    'log_level_replica', 'log_multimodal', 'log_on_each_node', 'log_unique_prompts', 'logging_first_step',
    'logging_nan_inf_filter', 'logging_steps', 'logging_strategy', 'loss_type', 'lr_scheduler_kwargs',
    'lr_scheduler_type', 'mask_truncated_completions', 'max_completion_length', 'max_grad_norm', 'max_steps',
    'max_tool_calling_iterations', 'metric_for_best_model', 'min_p', 'model_init_kwargs',
    'multi_objective_aggregation', 'neftune_noise_alpha', 'num_completions_to_print', 'num_generations',
    'num_generations_eval', 'num_iterations', 'num_train_epochs', 'off_policy_mask_threshold', 'optim', 'optim_args',
    'optim_target_modules', 'output_dir', 'pad_to_multiple_of', 'parallelism_config', 'per_device_eval_batch_size',
    'per_device_train_batch_size', 'prediction_loss_only', 'project', 'push_to_hub', 'ref_model_mixup_alpha',
    'ref_model_sync_steps', 'remove_unused_columns', 'repetition_penalty', 'report_to',
    'restore_callback_states_from_checkpoint', 'resume_from_checkpoint', 'reward_weights', 'router_aux_loss_coef',
    'run_name', 'sapo_temperature_neg', 'sapo_temperature_pos', 'save_on_each_node', 'save_only_model', 'save_steps',
    'save_strategy', 'save_total_limit', 'scale_rewards', 'seed', 'shuffle_dataset', 'skip_memory_metrics',
    'steps_per_generation', 'sync_ref_model', 'temperature', 'tf32', 'top_entropy_quantile', 'top_k', 'top_p',
    'torch_compile', 'torch_compile_backend', 'torch_compile_mode', 'torch_empty_cache_steps', 'trackio_bucket_id',
    'trackio_space_id', 'trackio_static_space_id', 'train_sampling_strategy',
    'transformers_continuous_batching_config', 'trust_remote_code', 'use_adaptive_entropy', 'use_bias_correction_kl',
    'use_cache', 'use_cpu', 'use_liger_kernel', 'use_transformers_continuous_batching', 'use_transformers_paged',
    'use_vllm', 'vespo_k_neg', 'vespo_k_pos', 'vespo_lambda_neg', 'vespo_lambda_pos', 'vllm_enable_sleep_mode',
    'vllm_gpu_memory_utilization', 'vllm_group_port', 'vllm_importance_sampling_cap',
    'vllm_importance_sampling_clip_max', 'vllm_importance_sampling_clip_min', 'vllm_importance_sampling_correction',
    'vllm_importance_sampling_mode', 'vllm_max_model_length', 'vllm_mode', 'vllm_model_impl', 'vllm_server_base_url',
    'vllm_server_host', 'vllm_server_port', 'vllm_server_timeout', 'vllm_structured_outputs_regex',
    'vllm_tensor_parallel_size', 'warmup_steps', 'weight_decay',
})
"""The fields of trl 1.16.0's ``GRPOConfig`` (a test compares them with the installed TRL of that release)."""

READ_PAST = frozenset({
    # where the run writes, logs, reports and pushes
    "log_completions_hub_repo", "log_multimodal", "log_unique_prompts", "disable_tqdm", "hub_always_push",
    "hub_private_repo", "hub_revision", "hub_strategy", "hub_token", "include_num_input_tokens_seen", "log_level",
    "log_level_replica", "log_on_each_node", "logging_first_step", "logging_nan_inf_filter", "project",
    "save_on_each_node", "save_only_model", "skip_memory_metrics", "trackio_bucket_id", "trackio_space_id",
    "trackio_static_space_id", "enable_jit_checkpoint", "restore_callback_states_from_checkpoint",
    "resume_from_checkpoint", "debug", "do_train", "do_eval", "do_predict",
    # the data loader and the processes (the same rounds, on the same shapes)
    "average_tokens_across_devices", "data_seed", "dataloader_drop_last",
    "dataloader_in_order", "dataloader_multiprocessing_context", "dataloader_persistent_workers",
    "dataloader_pin_memory", "dataloader_prefetch_factor", "ddp_backend", "ddp_broadcast_buffers", "ddp_bucket_cap_mb",
    "ddp_find_unused_parameters", "ddp_static_graph", "ddp_timeout", "deepspeed", "fsdp",
    "local_rank", "full_determinism", "ignore_data_skip", "train_sampling_strategy", "length_column_name",
    "label_names", "torch_empty_cache_steps", "trust_remote_code", "chat_template_kwargs",  # (the data's lengths
    # are stated: --prompt-len)
    # what is learned: the optimizer, its schedule, and the loss's elementwise terms (FlopCounterMode counts the
    # matmuls, which these leave as they were)
    "lr_scheduler_kwargs", "optim_args", "optim_target_modules", "label_smoothing_factor", "neftune_noise_alpha",
    "entropy_coef", "entropy_coef_delta", "entropy_coef_max", "entropy_coef_min", "entropy_target",
    "use_adaptive_entropy", "off_policy_mask_threshold", "use_bias_correction_kl", "multi_objective_aggregation",
    "sapo_temperature_neg", "sapo_temperature_pos", "vespo_k_neg", "vespo_k_pos", "vespo_lambda_neg",
    "vespo_lambda_pos", "router_aux_loss_coef",
    # numerics and compilation that keep every matmul's shape; the model's cache flag in training (generation keeps
    # its own, GenerationConfig's)
    "tf32", "torch_compile", "torch_compile_backend", "torch_compile_mode", "use_cache",
    # evaluation, which runs only where eval_strategy or eval_on_start asks for one (refused before: its FLOPs
    # depend on the eval dataset)
    "batch_eval_metrics", "bf16_full_eval", "fp16_full_eval", "eval_accumulation_steps", "eval_delay",
    "eval_do_concat_batches", "eval_steps", "eval_use_gather_object", "greater_is_better", "include_for_metrics",
    "load_best_model_at_end", "metric_for_best_model", "num_generations_eval", "per_device_eval_batch_size",
    "prediction_loss_only",
    # paths refused where they are on (tools come with the trainer, not the config; continuous batching, Liger)
    "max_tool_calling_iterations", "transformers_continuous_batching_config", "liger_kernel_config",
    # vLLM's server and engine settings (use_vllm prices vLLM's rollouts; these place or bound the server)
    "vllm_enable_sleep_mode", "vllm_group_port", "vllm_importance_sampling_mode", "vllm_max_model_length",
    "vllm_model_impl", "vllm_server_base_url", "vllm_server_timeout", "vllm_structured_outputs_regex",
})
"""GRPOConfig fields that change neither a round's shapes nor what FlopCounterMode counts of it, grouped by why."""

SPECIAL = frozenset({"auto_find_batch_size", "eval_on_start", "fsdp_config", "use_transformers_paged",
                     "activation_checkpointing", "activation_checkpointing_kwargs", "accelerator_config",
                     "parallelism_config"})
"""Fields read where they apply (:func:`check_fields`): refused where they are on (a batch found by trial, an
evaluation at the start, FSDP's own activation checkpointing, batches split across processes, tensor parallelism,
the paged path), or another name's value (checkpointing: trl_checkpointing)."""
TRUE_STRINGS = ("true", "1", "yes", "y", "on", "t")
"""What transformers' ``str_to_bool`` reads as true (a fsdp_config value, which may come from a JSON file)."""


def check_fields(config: dict[str, Any]) -> None:
    """Refuse the fields whose FLOPs a configuration cannot price: ``auto_find_batch_size`` (TRL 1.16 refuses it);
    an evaluation at the start (transformers runs it whatever ``eval_strategy`` says; its FLOPs are the eval
    dataset's); FSDP's own activation checkpointing (read as transformers reads ``fsdp_config``: only with ``fsdp``
    on, from a dict or a JSON file, keys with or without ``fsdp_``); accelerate's ``split_batches`` (each process
    then gets its share of one batch, not a batch of its own) and tensor parallelism (ranks share a batch)."""
    if flag("auto_find_batch_size", config.get("auto_find_batch_size", False)):
        raise UserError("GRPOConfig auto_find_batch_size: TRL's GRPOConfig refuses it (GRPO does not support it)")
    if flag("eval_on_start", config.get("eval_on_start", False)):
        raise UserError("GRPOConfig eval_on_start: an evaluation's FLOPs depend on the eval dataset, which the config "
                        "does not hold: price the training without it")
    if _fsdp_checkpointing(config):
        raise UserError("GRPOConfig fsdp_config activation_checkpointing: flopplan prices transformers' own "
                        "checkpointing (gradient_checkpointing), not FSDP's wrapper; meter the run (flopplan.meter), "
                        "which charges the recompute as it runs")
    accelerator = _settings(config, "accelerator_config")
    check_batch_per_process(_true(accelerator.get("split_batches", False)),
                            _settings(config, "parallelism_config", files=False).get("tp_size", 1))


def flag(name: str, value: Any) -> bool:
    """A boolean field, true or false: TrlParser hands a YAML file's values to GRPOConfig as they are (parse_dict),
    so a string "false" or a number would reach TRL as truthy; it is refused, not read by its truthiness."""
    if not isinstance(value, bool):
        raise UserError(f"GRPOConfig {name} must be true or false, not {value!r:.60}")
    return value


def check_batch_per_process(split_batches: bool, tp_size: Any) -> None:
    """Refuse a run whose processes share a batch, where flopplan counts a batch per process
    (``per_device_train_batch_size`` each): accelerate's ``split_batches`` (each process trains on its share of one
    batch) and tensor parallelism (its ranks share one); the configuration's (:func:`check_fields`) or the
    trainer's accelerator's (the meter)."""
    if split_batches:
        raise UserError("GRPOConfig accelerator_config split_batches: each process then trains on its share of one "
                        "batch, where flopplan counts a batch per process: run it without split_batches")
    if tp_size is not None and (isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 1):
        raise UserError(f"GRPOConfig parallelism_config tp_size must be a positive integer, not {tp_size!r:.60}")
    if tp_size not in (None, 1):
        raise UserError(f"GRPOConfig parallelism_config tp_size {tp_size!r}: tensor-parallel ranks share one batch, "
                        "where flopplan counts a batch per process: run it without tensor parallelism")


def _true(value: Any) -> bool:
    """A setting read as transformers and accelerate read it: a string by ``str_to_bool``, anything else by its
    truthiness."""
    return value.strip().lower() in TRUE_STRINGS if isinstance(value, str) else bool(value)


def _settings(config: dict[str, Any], name: str, files: bool = True) -> dict[str, Any]:
    """A field of settings: an object, or (``files``) a JSON file's path holding one, as transformers takes them;
    {} where unset. Its keys are text."""
    settings = config.get(name)
    if settings is None:
        return {}
    if isinstance(settings, str) and files:
        settings = read_json(settings, name) if settings else settings
    if not isinstance(settings, dict):
        what = "an object or a JSON file's path" if files else "an object"
        raise UserError(f"GRPOConfig {name} must be {what}, not {settings!r:.60}")
    check_text_keys(settings, f"GRPOConfig {name}")
    return settings


def check_text_keys(data: dict[Any, Any], where: str) -> None:
    """Refuse keys that are not text (YAML reads ``5:``, ``null:`` or a date as one), which no field is named."""
    odd = [key for key in data if not isinstance(key, str)]
    if odd:
        raise UserError(f"{where}: field names are text, not {odd[0]!r}")


def _fsdp_checkpointing(config: dict[str, Any]) -> bool:
    """Whether the configuration turns on FSDP's activation checkpointing, as transformers 5.25's TrainingArguments
    reads it (``_process_fsdp_args``): only where ``fsdp`` is on; ``fsdp_config`` a dict or a JSON file's path."""
    if not config.get("fsdp"):
        return False
    keys = {key.removeprefix("fsdp_"): value for key, value in _settings(config, "fsdp_config").items()}
    return _true(keys.get("activation_checkpointing", False))


def field_notes(config: dict[str, Any], extra: Collection[str], complete: bool) -> list[str]:
    """A note of the configuration's fields trl 1.16 does not have (``extra``: flopplan's own keys beside them;
    none where ``complete``, a whole saved GRPOConfig, whose every field is its release's)."""
    unknown = [] if complete else sorted(k for k in config if k not in TRL_FIELDS and k not in extra)
    return [f"fields trl 1.16's GRPOConfig does not have (read past: check their spelling): {', '.join(unknown)}"] \
        if unknown else []
