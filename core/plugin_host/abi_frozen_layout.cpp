// Freezes the layout of ABI 1.0. If one of these fails, a struct member was
// inserted, removed, reordered or resized: that breaks every plugin already
// built. Append new members at the end instead, bump AREAL_ABI_MINOR, and add
// assertions for the new members below (docs/plugin-abi-guidelines.md).
#include <cstddef>

#include "areal/plugin_api.h"

#define AREAL_FROZEN(type, member, offset) \
  static_assert(offsetof(type, member) == (offset), #type "." #member " moved: ABI 1.0 is frozen")

static_assert(sizeof(void*) == 8, "the frozen offsets below are for LP64 targets");

// abi.h
AREAL_FROZEN(areal_str, size, 8);
AREAL_FROZEN(areal_writer, write, 16);
AREAL_FROZEN(areal_host_api, abi_major, 4);
AREAL_FROZEN(areal_host_api, status_new, 8);
AREAL_FROZEN(areal_host_api, status_free, 16);
AREAL_FROZEN(areal_host_api, status_code, 24);
AREAL_FROZEN(areal_host_api, status_message, 32);
AREAL_FROZEN(areal_host_api, log, 40);
AREAL_FROZEN(areal_host_api, log_level, 48);
AREAL_FROZEN(areal_host_api, alloc, 56);
AREAL_FROZEN(areal_host_api, free, 64);
AREAL_FROZEN(areal_host_api, metric_set, 72);
AREAL_FROZEN(areal_host_api, metric_add, 80);
AREAL_FROZEN(areal_host_api, config_get, 88);
AREAL_FROZEN(areal_host_api, metrics_render, 96);
AREAL_FROZEN(areal_plugin_info, abi_major, 4);
AREAL_FROZEN(areal_plugin_info, kind, 8);
AREAL_FROZEN(areal_plugin_info, name, 16);
AREAL_FROZEN(areal_plugin_info, version, 24);
AREAL_FROZEN(areal_plugin_info, description, 32);
AREAL_FROZEN(areal_plugin_info, config_schema_json, 40);
AREAL_FROZEN(areal_plugin_info, vtable, 48);
AREAL_FROZEN(areal_plugin_info, get_proc_address, 56);
AREAL_FROZEN(areal_plugin_info, finalize, 64);

// services.h
AREAL_FROZEN(areal_inference_ref, vtable, 8);
AREAL_FROZEN(areal_inference_ref, self, 16);
AREAL_FROZEN(areal_services, host, 8);
AREAL_FROZEN(areal_services, instance_name, 16);
AREAL_FROZEN(areal_services, inference, 32);

// tensors.h
AREAL_FROZEN(areal_tensor_map, names, 8);
AREAL_FROZEN(areal_tensor_map, tensors, 16);
AREAL_FROZEN(areal_tensor_map, count, 24);

// inference.h
AREAL_FROZEN(areal_sampling_params, temperature, 4);
AREAL_FROZEN(areal_sampling_params, top_p, 8);
AREAL_FROZEN(areal_sampling_params, top_k, 12);
AREAL_FROZEN(areal_sampling_params, max_new_tokens, 16);
AREAL_FROZEN(areal_sampling_params, seed, 24);
AREAL_FROZEN(areal_sampling_params, has_seed, 32);
AREAL_FROZEN(areal_sampling_params, ignore_eos, 36);
AREAL_FROZEN(areal_sampling_params, stop_token_ids, 40);
AREAL_FROZEN(areal_sampling_params, stop_token_ids_count, 48);
AREAL_FROZEN(areal_sampling_params, stop_strings, 56);
AREAL_FROZEN(areal_sampling_params, stop_strings_count, 64);
// 1.3
AREAL_FROZEN(areal_sampling_params, frequency_penalty, 72);
AREAL_FROZEN(areal_sampling_params, presence_penalty, 76);
AREAL_FROZEN(areal_sampling_params, logit_bias, 80);
AREAL_FROZEN(areal_sampling_params, logit_bias_count, 88);
AREAL_FROZEN(areal_sampling_params, structured_output, 96);
AREAL_FROZEN(areal_sampling_params, json_schema, 104);
AREAL_FROZEN(areal_logit_bias, bias, 4);
AREAL_FROZEN(areal_gen_request, request_id, 8);
AREAL_FROZEN(areal_gen_request, affinity_key, 16);
AREAL_FROZEN(areal_gen_request, input_ids, 32);
AREAL_FROZEN(areal_gen_request, input_ids_count, 40);
AREAL_FROZEN(areal_gen_request, sampling, 48);
AREAL_FROZEN(areal_gen_chunk, token_ids, 8);
AREAL_FROZEN(areal_gen_chunk, logprobs, 16);
AREAL_FROZEN(areal_gen_chunk, versions, 24);
AREAL_FROZEN(areal_gen_chunk, count, 32);
AREAL_FROZEN(areal_gen_sink, ctx, 8);
AREAL_FROZEN(areal_gen_sink, on_tokens, 16);
AREAL_FROZEN(areal_gen_sink, on_done, 24);
AREAL_FROZEN(areal_inference_vtable, create, 8);
AREAL_FROZEN(areal_inference_vtable, destroy, 16);
AREAL_FROZEN(areal_inference_vtable, submit, 24);
AREAL_FROZEN(areal_inference_vtable, abort, 32);
AREAL_FROZEN(areal_inference_vtable, pause, 40);
AREAL_FROZEN(areal_inference_vtable, resume, 48);
AREAL_FROZEN(areal_inference_vtable, update_weights, 56);
AREAL_FROZEN(areal_inference_vtable, get_version, 64);
AREAL_FROZEN(areal_inference_vtable, set_version, 72);
AREAL_FROZEN(areal_inference_vtable, info, 80);

// train.h
AREAL_FROZEN(areal_loss_fn, ctx, 8);
AREAL_FROZEN(areal_loss_fn, eval, 16);
AREAL_FROZEN(areal_train_vtable, create, 8);
AREAL_FROZEN(areal_train_vtable, destroy, 16);
AREAL_FROZEN(areal_train_vtable, compute_logprobs, 24);
AREAL_FROZEN(areal_train_vtable, train_step, 32);
AREAL_FROZEN(areal_train_vtable, save, 40);
AREAL_FROZEN(areal_train_vtable, load, 48);
AREAL_FROZEN(areal_train_vtable, get_version, 56);
AREAL_FROZEN(areal_train_vtable, set_version, 64);

// algorithm.h
AREAL_FROZEN(areal_algorithm_vtable, create, 8);
AREAL_FROZEN(areal_algorithm_vtable, destroy, 16);
AREAL_FROZEN(areal_algorithm_vtable, compute_advantages, 24);
AREAL_FROZEN(areal_algorithm_vtable, loss, 32);

// workflow.h
AREAL_FROZEN(areal_completion, completion_id, 8);
AREAL_FROZEN(areal_completion, output_ids, 24);
AREAL_FROZEN(areal_completion, logprobs, 32);
AREAL_FROZEN(areal_completion, versions, 40);
AREAL_FROZEN(areal_completion, count, 48);
AREAL_FROZEN(areal_completion, finish_reason, 56);
AREAL_FROZEN(areal_episode_api, ctx, 8);
AREAL_FROZEN(areal_episode_api, generate, 16);
AREAL_FROZEN(areal_episode_api, set_reward, 24);
AREAL_FROZEN(areal_episode, episode_id, 8);
AREAL_FROZEN(areal_episode, data_json, 24);
AREAL_FROZEN(areal_episode, base_url, 40);
AREAL_FROZEN(areal_episode, api_key, 56);
AREAL_FROZEN(areal_episode, api, 72);
AREAL_FROZEN(areal_workflow_vtable, create, 8);
AREAL_FROZEN(areal_workflow_vtable, destroy, 16);
AREAL_FROZEN(areal_workflow_vtable, run_episode, 24);

// gateway.h
AREAL_FROZEN(areal_gateway_vtable, create, 8);
AREAL_FROZEN(areal_gateway_vtable, destroy, 16);
AREAL_FROZEN(areal_gateway_vtable, start, 24);
AREAL_FROZEN(areal_gateway_vtable, stop, 32);
// ABI 1.1
AREAL_FROZEN(areal_gateway_vtable, control, 40);
AREAL_FROZEN(areal_episode_api, chat, 32);
AREAL_FROZEN(areal_train_vtable, export_weights, 72);
AREAL_FROZEN(areal_inference_vtable, update_weights_from_tensors, 88);
// ABI 1.4: typed session hand-off (gateway.h)
AREAL_FROZEN(areal_trajectory_row, interaction_id, 8);
AREAL_FROZEN(areal_trajectory_row, count, 24);
AREAL_FROZEN(areal_trajectory_row, input_ids, 32);
AREAL_FROZEN(areal_trajectory_row, loss_mask, 40);
AREAL_FROZEN(areal_trajectory_row, logprobs, 48);
AREAL_FROZEN(areal_trajectory_row, versions, 56);
AREAL_FROZEN(areal_trajectory_row, reward, 64);
AREAL_FROZEN(areal_trajectory_row, turns, 72);
AREAL_FROZEN(areal_session_trajectory, session_id, 8);
AREAL_FROZEN(areal_session_trajectory, task_id, 24);
AREAL_FROZEN(areal_session_trajectory, group_id, 40);
AREAL_FROZEN(areal_session_trajectory, end_reason, 56);
AREAL_FROZEN(areal_session_trajectory, concat, 72);
AREAL_FROZEN(areal_session_trajectory, discount, 80);
AREAL_FROZEN(areal_session_trajectory, rows, 88);
AREAL_FROZEN(areal_session_trajectory, rows_count, 96);
AREAL_FROZEN(areal_session_trajectory, skipped_incomplete, 104);
AREAL_FROZEN(areal_trajectory_sink, ctx, 8);
AREAL_FROZEN(areal_trajectory_sink, on_session, 16);
AREAL_FROZEN(areal_gateway_vtable, grant_capacity, 48);
AREAL_FROZEN(areal_gateway_vtable, start_session, 56);
AREAL_FROZEN(areal_gateway_vtable, set_session_reward, 64);
AREAL_FROZEN(areal_gateway_vtable, end_session, 72);
AREAL_FROZEN(areal_gateway_vtable, take_finished, 80);
AREAL_FROZEN(areal_gateway_vtable, export_session, 88);
AREAL_FROZEN(areal_gateway_vtable, session_chat, 96);
AREAL_FROZEN(areal_gateway_vtable, mark_sessions_trained, 104);
AREAL_FROZEN(areal_gateway_vtable, commit_checkpoint, 112);
// ABI 1.6: LoRA adapters (inference.h)
AREAL_FROZEN(areal_gen_request, adapter, 56);
AREAL_FROZEN(areal_inference_vtable, load_adapter, 96);
AREAL_FROZEN(areal_inference_vtable, unload_adapter, 104);
AREAL_FROZEN(areal_train_vtable, export_adapter, 80);

// ABI 1.7: mixture-of-experts routing, recorded for routing replay (inference.h)
AREAL_FROZEN(areal_gen_request, record_routing, 72);
AREAL_FROZEN(areal_gen_sink, on_routing, 32);
AREAL_FROZEN(areal_routing, moe_layers, 4);
AREAL_FROZEN(areal_routing, top_k, 8);
AREAL_FROZEN(areal_routing, num_experts, 12);
AREAL_FROZEN(areal_routing, positions, 16);
AREAL_FROZEN(areal_routing, experts, 24);

// ABI 1.8: a trajectory row carries its routing (gateway.h)
AREAL_FROZEN(areal_trajectory_row, routing, 80);
