"""The keys of verl 0.9.1's composed ``ppo_trainer`` config, torch- and Hydra-free: what ``plan --from-verl`` accepts
without a ``+`` (Hydra's compose refuses any other key: "Could not override 'KEY'").

The text below is generated from the wheel's ``verl/trainer/config/_generated_ppo_trainer.yaml`` (verl's own dump of
the composed ``ppo_trainer.yaml``, its defaults lists applied), plus ``model_engine``, the ``@package _global_`` key of
``trainer/config/model_engine/dp.yaml`` that the dump leaves out (``ppo_trainer.yaml:10``). Regenerate it with::

    python -m flopplan.engines.verl_keys PATH/TO/verl/trainer/config/_generated_ppo_trainer.yaml

which prints this module with the new text. A line is ``node: leaf leaf ...`` (a node's leaves, wrapped); a leaf is a
scalar, a list, null or an empty mapping (``{}``: verl's open dicts such as ``model.override_config``, which still
take new keys only with ``+``, as every node of the composed config is in struct mode).
"""

from __future__ import annotations

import functools
import sys
import textwrap
from typing import Any

VERL_VERSION = "0.9.1"
KEYS_TEXT = """
.: model_engine
actor_rollout_ref: hybrid_engine nccl_timeout
actor_rollout_ref.actor: _target_ rollout_n strategy ppo_mini_batch_size ppo_micro_batch_size
actor_rollout_ref.actor: ppo_micro_batch_size_per_gpu use_dynamic_bsz ppo_max_token_len_per_gpu clip_ratio
actor_rollout_ref.actor: clip_ratio_low clip_ratio_high tau_pos tau_neg freeze_vision_tower clip_ratio_c loss_agg_mode
actor_rollout_ref.actor: loss_scale_factor entropy_coeff calculate_entropy calculate_sum_pi_squared use_kl_loss
actor_rollout_ref.actor: use_prefix_grouper use_torch_compile kl_loss_coef kl_loss_type ppo_epochs shuffle
actor_rollout_ref.actor: data_loader_seed use_fused_kernels grad_clip ulysses_sequence_parallel_size
actor_rollout_ref.actor: entropy_from_logits_with_chunking entropy_from_logits_chunk_size entropy_checkpointing
actor_rollout_ref.actor: pad_to_length use_remove_padding
actor_rollout_ref.actor.optim: _target_ optimizer optimizer_impl lr lr_warmup_steps_ratio total_training_steps
actor_rollout_ref.actor.optim: weight_decay lr_warmup_steps betas clip_grad min_lr_ratio num_cycles lr_scheduler_type
actor_rollout_ref.actor.optim: zero_indexed_step warmup_style override_optimizer_config
actor_rollout_ref.actor.fsdp_config: _target_ param_offload optimizer_offload offload_policy reshard_after_forward
actor_rollout_ref.actor.fsdp_config: fsdp_size forward_prefetch model_dtype use_orig_params seed full_determinism
actor_rollout_ref.actor.fsdp_config: ulysses_sequence_parallel_size entropy_from_logits_with_chunking
actor_rollout_ref.actor.fsdp_config: entropy_from_logits_chunk_size use_torch_compile entropy_checkpointing
actor_rollout_ref.actor.fsdp_config: use_no_sync_for_gradient_accumulation pad_to_length pad_to_length_bucket
actor_rollout_ref.actor.fsdp_config: forward_only strategy dtype
actor_rollout_ref.actor.fsdp_config.wrap_policy: min_num_params
actor_rollout_ref.actor.fsdp_config.qat: _target_ enable mode group_size ignore_patterns activation_observer
actor_rollout_ref.actor.fsdp_config.qat: quantization_config_path
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed: fully_shard_parallel_size tensor_parallel_size
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed: expert_parallel_size expert_fully_shard_parallel_size
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed: ulysses_parallel_size
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: param_dtype reduce_dtype output_dtype
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: fsdp_implementation num_to_forward_prefetch
actor_rollout_ref.actor.fsdp_config.turbo_config.distributed.fsdp_plan: num_to_backward_prefetch
actor_rollout_ref.actor.policy_loss: _target_ loss_mode clip_cov_ratio clip_cov_lb clip_cov_ub kl_cov_ratio
actor_rollout_ref.actor.policy_loss: ppo_kl_coef dro_beta
actor_rollout_ref.actor.checkpoint: _target_ save_contents load_contents async_save strict
actor_rollout_ref.actor.profiler: _target_ tool enable all_ranks ranks save_path relocate_results finish_hook_cmd
actor_rollout_ref.actor.profiler: finish_hook_all_ranks finish_hook_ranks
actor_rollout_ref.actor.profiler.tool_config.nsys: _target_ discrete
actor_rollout_ref.actor.profiler.tool_config.npu: _target_ contents level analysis discrete
actor_rollout_ref.actor.profiler.tool_config.torch: _target_ contents discrete
actor_rollout_ref.actor.profiler.tool_config.torch.schedule: _target_ skip_first wait warmup active repeat
actor_rollout_ref.actor.profiler.tool_config.torch_memory: _target_ trace_alloc_max_entries stack_depth
actor_rollout_ref.actor.profiler.tool_config.torch_memory: memory_snapshot_num_steps
actor_rollout_ref.actor.profiler.tool_config.precision_debugger: _target_ config_path steps stages strict
actor_rollout_ref.actor.qat: enable mode group_size ignore_patterns activation_observer quantization_config_path
actor_rollout_ref.ref: rollout_n strategy use_torch_compile log_prob_micro_batch_size
actor_rollout_ref.ref: log_prob_micro_batch_size_per_gpu log_prob_use_dynamic_bsz log_prob_max_token_len_per_gpu
actor_rollout_ref.ref: _target_ ulysses_sequence_parallel_size entropy_from_logits_with_chunking
actor_rollout_ref.ref: entropy_from_logits_chunk_size entropy_checkpointing pad_to_length
actor_rollout_ref.ref.profiler: _target_ tool enable all_ranks ranks save_path relocate_results finish_hook_cmd
actor_rollout_ref.ref.profiler: finish_hook_all_ranks finish_hook_ranks
actor_rollout_ref.ref.profiler.tool_config.nsys: _target_ discrete
actor_rollout_ref.ref.profiler.tool_config.npu: _target_ contents level analysis discrete
actor_rollout_ref.ref.profiler.tool_config.torch: _target_ contents discrete
actor_rollout_ref.ref.profiler.tool_config.torch.schedule: _target_ skip_first wait warmup active repeat
actor_rollout_ref.ref.profiler.tool_config.torch_memory: _target_ trace_alloc_max_entries stack_depth
actor_rollout_ref.ref.profiler.tool_config.torch_memory: memory_snapshot_num_steps
actor_rollout_ref.ref.profiler.tool_config.precision_debugger: _target_ config_path steps stages strict
actor_rollout_ref.ref.fsdp_config: _target_ param_offload optimizer_offload offload_policy reshard_after_forward
actor_rollout_ref.ref.fsdp_config: fsdp_size forward_prefetch model_dtype use_orig_params seed full_determinism
actor_rollout_ref.ref.fsdp_config: ulysses_sequence_parallel_size entropy_from_logits_with_chunking
actor_rollout_ref.ref.fsdp_config: entropy_from_logits_chunk_size use_torch_compile entropy_checkpointing
actor_rollout_ref.ref.fsdp_config: use_no_sync_for_gradient_accumulation pad_to_length pad_to_length_bucket
actor_rollout_ref.ref.fsdp_config: forward_only strategy dtype
actor_rollout_ref.ref.fsdp_config.wrap_policy: min_num_params
actor_rollout_ref.ref.fsdp_config.qat: _target_ enable mode group_size ignore_patterns activation_observer
actor_rollout_ref.ref.fsdp_config.qat: quantization_config_path
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed: fully_shard_parallel_size tensor_parallel_size
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed: expert_parallel_size expert_fully_shard_parallel_size
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed: ulysses_parallel_size
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: param_dtype reduce_dtype output_dtype
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: fsdp_implementation num_to_forward_prefetch
actor_rollout_ref.ref.fsdp_config.turbo_config.distributed.fsdp_plan: num_to_backward_prefetch
actor_rollout_ref.rollout: _target_ name mode nnodes n_gpus_per_node temperature top_k top_p full_determinism seed
actor_rollout_ref.rollout: prompt_length response_length dtype gpu_memory_utilization ignore_eos enforce_eager
actor_rollout_ref.rollout: cudagraph_capture_sizes free_cache_engine tensor_model_parallel_size data_parallel_size
actor_rollout_ref.rollout: expert_parallel_size pipeline_model_parallel_size max_num_batched_tokens max_model_len
actor_rollout_ref.rollout: max_num_seqs enable_chunked_prefill enable_prefix_caching logprobs_mode scheduling_policy
actor_rollout_ref.rollout: load_format layered_summon log_prob_micro_batch_size log_prob_micro_batch_size_per_gpu
actor_rollout_ref.rollout: log_prob_use_dynamic_bsz log_prob_max_token_len_per_gpu disable_log_stats do_sample n
actor_rollout_ref.rollout: over_sample_rate multi_stage_wake_up router_config_path calculate_log_probs
actor_rollout_ref.rollout: skip_tokenizer_init enable_rollout_routing_replay moe_load_balance_metrics_interval
actor_rollout_ref.rollout: quantization quantization_config_file mtp qat
actor_rollout_ref.rollout.engine_kwargs: vllm sglang trtllm
actor_rollout_ref.rollout.val_kwargs: _target_ top_k top_p temperature n do_sample
actor_rollout_ref.rollout.multi_turn: _target_ enable max_assistant_turns tool_config_path function_tool_path
actor_rollout_ref.rollout.multi_turn: max_user_turns max_parallel_calls max_tool_response_length
actor_rollout_ref.rollout.multi_turn: tool_response_truncate_side use_inference_chat_template
actor_rollout_ref.rollout.multi_turn: tokenization_sanity_check_mode format num_repeat_rollouts
actor_rollout_ref.rollout.agent: _target_ num_workers default_agent_loop agent_loop_config_path
actor_rollout_ref.rollout.agent.custom_async_server: _target_ path name
actor_rollout_ref.rollout.checkpoint_engine: _target_ backend update_weights_bucket_megabytes engine_kwargs
actor_rollout_ref.rollout.checkpoint_engine: custom_backend_module
actor_rollout_ref.rollout.trace: _target_ project_name experiment_name backend token2text
actor_rollout_ref.rollout.trace: max_samples_per_step_per_worker
actor_rollout_ref.rollout.profiler: _target_ tool enable all_ranks ranks save_path relocate_results finish_hook_cmd
actor_rollout_ref.rollout.profiler: finish_hook_all_ranks finish_hook_ranks
actor_rollout_ref.rollout.profiler.tool_config.npu: _target_ contents level analysis discrete profile_token_start
actor_rollout_ref.rollout.profiler.tool_config.npu: profile_token_end
actor_rollout_ref.rollout.profiler.tool_config.torch: _target_ contents discrete profile_token_start profile_token_end
actor_rollout_ref.rollout.profiler.tool_config.precision_debugger: _target_ config_path steps stages strict
actor_rollout_ref.rollout.prometheus: _target_ enable port file served_model_name
actor_rollout_ref.rollout.disaggregation: enabled prefill_replicas decode_replicas decode_tensor_model_parallel_size
actor_rollout_ref.rollout.disaggregation: transfer_backend bootstrap_port ib_device
actor_rollout_ref.model: _target_ path hf_config_path tokenizer_path use_shm trust_remote_code custom_chat_template
actor_rollout_ref.model: external_lib override_config enable_gradient_checkpointing enable_activation_offload
actor_rollout_ref.model: use_remove_padding lora_rank lora_alpha target_modules exclude_modules lora_adapter_path
actor_rollout_ref.model: use_liger use_fused_kernels
actor_rollout_ref.model.fused_kernel_options: impl_backend
actor_rollout_ref.model.tiled_mlp: enabled num_shards
actor_rollout_ref.model.mtp: _target_ enable enable_train enable_rollout detach_encoder mtp_loss_scaling_factor
actor_rollout_ref.model.mtp: speculative_algorithm speculative_num_steps speculative_eagle_topk
actor_rollout_ref.model.mtp: speculative_num_draft_tokens method num_speculative_tokens
actor_rollout_ref.model.lora: type merge rank alpha dropout target_modules exclude_modules dropout_position
actor_rollout_ref.model.lora: lora_A_init_method lora_B_init_method a2a_experimental dtype adapter_path
actor_rollout_ref.model.lora: freeze_vision_model freeze_vision_projection freeze_language_model
data: tokenizer use_shm train_files val_files train_max_samples val_max_samples prompt_key reward_fn_key
data: max_prompt_length max_response_length train_batch_size gen_batch_size val_batch_size tool_config_path
data: function_tool_path return_raw_input_ids return_raw_chat return_full_prompt shuffle seed dataloader_num_workers
data: image_patch_size validation_shuffle filter_overlong_prompts filter_overlong_prompts_workers truncation image_key
data: video_key audio_key trust_remote_code return_multi_modal_inputs apply_chat_template_kwargs mm_processor_kwargs
data.custom_cls: path name
critic: _target_ rollout_n strategy enable ppo_mini_batch_size ppo_micro_batch_size ppo_micro_batch_size_per_gpu
critic: use_dynamic_bsz ppo_max_token_len_per_gpu forward_max_token_len_per_gpu ppo_epochs shuffle data_loader_seed
critic: cliprange_value loss_agg_mode loss_scale_factor forward_micro_batch_size forward_micro_batch_size_per_gpu
critic: ulysses_sequence_parallel_size grad_clip
critic.optim: _target_ optimizer optimizer_impl lr lr_warmup_steps_ratio total_training_steps weight_decay
critic.optim: lr_warmup_steps betas clip_grad min_lr_ratio num_cycles lr_scheduler_type zero_indexed_step warmup_style
critic.optim: override_optimizer_config
critic.fsdp: _target_ param_offload optimizer_offload offload_policy reshard_after_forward fsdp_size forward_prefetch
critic.fsdp: model_dtype use_orig_params seed full_determinism ulysses_sequence_parallel_size
critic.fsdp: entropy_from_logits_with_chunking entropy_from_logits_chunk_size use_torch_compile entropy_checkpointing
critic.fsdp: use_no_sync_for_gradient_accumulation pad_to_length pad_to_length_bucket forward_only strategy dtype
critic.fsdp.wrap_policy: min_num_params
critic.fsdp.qat: _target_ enable mode group_size ignore_patterns activation_observer quantization_config_path
critic.fsdp.turbo_config.distributed: fully_shard_parallel_size tensor_parallel_size expert_parallel_size
critic.fsdp.turbo_config.distributed: expert_fully_shard_parallel_size ulysses_parallel_size
critic.fsdp.turbo_config.distributed.fsdp_plan: param_dtype reduce_dtype output_dtype fsdp_implementation
critic.fsdp.turbo_config.distributed.fsdp_plan: num_to_forward_prefetch num_to_backward_prefetch
critic.checkpoint: _target_ save_contents load_contents async_save
critic.profiler: _target_ tool enable all_ranks ranks save_path relocate_results finish_hook_cmd finish_hook_all_ranks
critic.profiler: finish_hook_ranks
critic.profiler.tool_config.nsys: _target_ discrete
critic.profiler.tool_config.npu: _target_ contents level analysis discrete
critic.profiler.tool_config.torch: _target_ contents discrete
critic.profiler.tool_config.torch.schedule: _target_ skip_first wait warmup active repeat
critic.profiler.tool_config.torch_memory: _target_ trace_alloc_max_entries stack_depth memory_snapshot_num_steps
critic.profiler.tool_config.precision_debugger: _target_ config_path steps stages strict
critic.model: _target_ path hf_config_path tokenizer_path use_shm trust_remote_code custom_chat_template external_lib
critic.model: override_config enable_gradient_checkpointing enable_activation_offload use_remove_padding lora_rank
critic.model: lora_alpha target_modules exclude_modules lora_adapter_path use_liger use_fused_kernels
critic.model.fused_kernel_options: impl_backend
critic.model.tiled_mlp: enabled num_shards
critic.model.mtp: _target_ enable enable_train enable_rollout detach_encoder mtp_loss_scaling_factor
critic.model.mtp: speculative_algorithm speculative_num_steps speculative_eagle_topk speculative_num_draft_tokens
critic.model.mtp: method num_speculative_tokens
critic.model.lora: type merge rank alpha dropout target_modules exclude_modules dropout_position lora_A_init_method
critic.model.lora: lora_B_init_method a2a_experimental dtype adapter_path freeze_vision_model freeze_vision_projection
critic.model.lora: freeze_language_model
custom_reward_function: path name
reward_model: num_workers reward_manager enable enable_resource_pool n_gpus_per_node nnodes reward_loop_source
reward_model: reward_loop_module_path reward_loop_class_name
reward_model.model: path external_lib trust_remote_code
reward_model.rollout: name dtype gpu_memory_utilization enforce_eager cudagraph_capture_sizes free_cache_engine
reward_model.rollout: data_parallel_size expert_parallel_size tensor_model_parallel_size max_num_batched_tokens
reward_model.rollout: max_model_len max_num_seqs load_format engine_kwargs limit_images enable_chunked_prefill
reward_model.rollout: enable_prefix_caching disable_log_stats skip_tokenizer_init prompt_length response_length
sandbox_fusion: url max_concurrent memory_limit_mb
reward: _target_ num_workers
reward.custom_reward_function: path name
reward.reward_manager: _target_ source name
reward.reward_manager.module: _target_ path name
reward.reward_model: _target_ enable enable_resource_pool n_gpus_per_node nnodes model_path
reward.reward_model.rollout: _target_ name dtype gpu_memory_utilization enforce_eager cudagraph_capture_sizes
reward.reward_model.rollout: free_cache_engine data_parallel_size expert_parallel_size tensor_model_parallel_size
reward.reward_model.rollout: pipeline_model_parallel_size max_num_batched_tokens max_model_len max_num_seqs
reward.reward_model.rollout: load_format layered_summon scheduling_policy full_determinism seed multi_stage_wake_up
reward.reward_model.rollout: engine_kwargs limit_images enable_chunked_prefill enable_prefix_caching disable_log_stats
reward.reward_model.rollout: skip_tokenizer_init ignore_eos temperature top_k top_p do_sample n prompt_length
reward.reward_model.rollout: response_length quantization quantization_config_file mtp
reward.reward_model.rollout.disaggregation: enabled prefill_replicas decode_replicas decode_tensor_model_parallel_size
reward.reward_model.rollout.disaggregation: transfer_backend bootstrap_port ib_device
reward.sandbox_fusion: _target_ url max_concurrent memory_limit_mb
algorithm: _target_ gamma lam adv_estimator norm_adv_by_std_in_grpo use_kl_in_reward kl_penalty use_pf_ppo
algorithm.rollout_correction: rollout_is rollout_is_threshold rollout_rs rollout_rs_threshold bypass_mode loss_type
algorithm.rollout_correction: rollout_is_batch_normalize
algorithm.filter_groups: _target_ enable metric max_num_gen_batches max_inflight_gen_batches
algorithm.kl_ctrl: _target_ type kl_coef horizon target_kl
algorithm.pf_ppo: reweight_method weight_pow
distillation: _target_ enabled n_gpus_per_node nnodes teacher_key
distillation.distillation_loss: _target_ loss_mode topk use_task_rewards distillation_loss_coef loss_max_clamp
distillation.distillation_loss: log_prob_min_clamp use_policy_gradient policy_loss_mode clip_ratio clip_ratio_low
distillation.distillation_loss: clip_ratio_high
distillation.teacher_models.teacher_model: _target_ key model_path num_replicas
distillation.teacher_models.teacher_model.inference: _target_ name dtype gpu_memory_utilization enforce_eager
distillation.teacher_models.teacher_model.inference: cudagraph_capture_sizes free_cache_engine data_parallel_size
distillation.teacher_models.teacher_model.inference: expert_parallel_size tensor_model_parallel_size
distillation.teacher_models.teacher_model.inference: max_num_batched_tokens max_model_len max_num_seqs load_format
distillation.teacher_models.teacher_model.inference: engine_kwargs limit_images enable_chunked_prefill
distillation.teacher_models.teacher_model.inference: enable_prefix_caching disable_log_stats skip_tokenizer_init
distillation.teacher_models.teacher_model.inference: prompt_length response_length temperature
transfer_queue: enable
transfer_queue.metrics: enabled port
transfer_queue.backend: storage_backend
transfer_queue.backend.SimpleStorage: total_storage_size num_data_storage_units
transfer_queue.backend.MooncakeStore: auto_init metadata_server master_server_address local_hostname protocol
transfer_queue.backend.MooncakeStore: global_segment_size local_buffer_size device_name
trainer: balance_batch total_epochs total_training_steps project_name experiment_name logger log_val_generations
trainer: rollout_data_dir validation_data_dir nnodes n_gpus_per_node save_freq esi_redundant_time resume_mode
trainer: resume_from_path checkpoint_callback_class val_before_train val_only test_freq critic_warmup default_hdfs_dir
trainer: del_local_ckpt_after_load default_local_dir max_actor_ckpt_to_keep max_critic_ckpt_to_keep
trainer: ray_wait_register_center_timeout device use_v1
trainer.v1: trainer_mode sync
trainer.v1.colocate_async: num_warmup_batches
trainer.v1.separate_async: num_warmup_batches parameter_sync_step
trainer.v1.separate_async.hybrid_rollout: _target_ enable_switch switch_threshold_ratio adaptive_switch_threshold
trainer.v1.separate_async.hybrid_rollout: switch_threshold_step_up switch_threshold_step_down
trainer.v1.separate_async.hybrid_rollout: switch_threshold_release_steps switch_cost_window_size
trainer.v1.sampler: max_off_policy_threshold max_off_policy_strategy sync_refill_failed_groups sampler_kwargs
trainer.v1.sampler.custom_sampler: path name
global_profiler: _target_ tool steps profile_continuous_steps save_path relocate_results finish_hook_cmd
global_profiler: finish_hook_all_ranks finish_hook_ranks
global_profiler.global_tool_config.nsys: _target_ discrete
global_profiler.global_tool_config.nsys.controller_nsight_options: trace cuda-memory-usage cuda-graph-trace
global_profiler.global_tool_config.nsys.worker_nsight_options: trace cuda-memory-usage cuda-graph-trace capture-range
global_profiler.global_tool_config.nsys.worker_nsight_options: capture-range-end kill
global_profiler.global_tool_config.torch_memory: trace_alloc_max_entries stack_depth memory_snapshot_num_steps context
global_profiler.global_tool_config.torch_memory: stacks kw_args
global_profiler.global_tool_config.precision_debugger: _target_ config_path steps stages strict
skip: _target_
skip.rollout: enable dump_dir steps action
skip.rollout_tq: enable dump_dir steps action
skip.async_rollout: enable dump_dir steps action
ray_kwargs: timeline_json_file
ray_kwargs.ray_init: num_cpus
ray_kwargs.ray_init.runtime_env: py_executable
"""


@functools.cache
def verl_leaves() -> frozenset[str]:
    """Every dotted leaf key of verl 0.9.1's composed ``ppo_trainer`` config."""
    return frozenset(f"{node}.{leaf}" if node != "." else leaf for line in KEYS_TEXT.strip().splitlines()
                     for node, leaves in [line.split(": ", 1)] for leaf in leaves.split())


@functools.cache
def verl_keys() -> frozenset[str]:
    """The leaves and every node above them (Hydra overrides a whole node with a mapping, ``a.b={c:1}``)."""
    return verl_leaves() | {".".join(parts[:n]) for key in verl_leaves() for parts in [key.split(".")]
                            for n in range(1, len(parts))}


def _generate(config: dict[str, Any]) -> str:
    lines: list[str] = []

    def walk(node: dict[str, Any], path: str) -> None:
        leaves = [str(key) for key, value in node.items() if not (isinstance(value, dict) and value)]
        for chunk in textwrap.wrap(" ".join(leaves), 116 - len(path)):
            lines.append(f"{path or '.'}: {chunk}")
        for key, value in node.items():
            if isinstance(value, dict) and value:
                walk(value, f"{path}.{key}" if path else str(key))

    walk({**config, "model_engine": "dp"}, "")
    return "\n".join(lines)


if __name__ == "__main__":
    import yaml

    with open(sys.argv[1], encoding="utf-8") as file:
        text = _generate(yaml.safe_load(file))
    with open(__file__, encoding="utf-8") as file:
        head, _, rest = file.read().partition('KEYS_TEXT = """\n')
    sys.stdout.write(f'{head}KEYS_TEXT = """\n{text}\n{rest[rest.index(chr(34) * 3):]}')
