/*
 * areal plugin ABI: training backends (kind AREAL_KIND_TRAIN).
 *
 * A train plugin owns the trainable model and its optimizer. The loss is not
 * the train plugin's business: it calls back into an areal_loss_fn (built by
 * the host from the algorithm plugin) with the fresh log-probs, receives
 * dLoss/dlogprob per token, and backpropagates that. Every RL objective
 * areal ships (PPO, GRPO, Dr.GRPO, RLOO, SFT, KL terms) is a function of
 * per-token log-probs, so this crosses the ABI without autograd.
 */
#ifndef AREAL_TRAIN_H_
#define AREAL_TRAIN_H_

#include <stdint.h>

#include "areal/abi.h"
#include "areal/services.h"
#include "areal/tensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A loss over per-token log-probs.
 * OWNERSHIP: host-owned; valid for the train_step call it is passed to.
 * THREADING: called from the train_step thread only. */
typedef struct areal_loss_fn {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_loss_fn, eval) */
  void* ctx;
  /* batch: the micro-batch of the batch given to train_step (its [T]
   * tensors sliced, "cu_seqlens" rebased, 0-d scalars unchanged) plus
   * "new_logprobs" float32 [T] (current policy, detached). Writes the scalar loss to *out_loss and
   * dLoss/d new_logprobs into out_grad (float32 [T], caller-allocated,
   * zeroed). Stats are a JSON object of scalars, may be empty. */
  areal_status* (*eval)(void* ctx, const areal_tensor_map* batch, double* out_loss,
                        DLTensor* out_grad, const areal_writer* out_stats_json) AREAL_MUST_USE;
} areal_loss_fn;

/* THREADING: an instance is used from one thread at a time. */
typedef struct areal_train_vtable {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_train_vtable, export_adapter) with it (1.6); (.., export_weights) since 1.1;
                           (.., set_version) in 1.0 */

  /* As for areal_inference_vtable.create. */
  areal_status* (*create)(areal_str config_json, const areal_services* services, void** out_self) AREAL_MUST_USE;
  /* Releases an instance. NULL is allowed. */
  void (*destroy)(void* self);

  /* Log-probs of batch "input_ids" (packed, "cu_seqlens") at `temperature`.
   * Position t holds log p(input_ids[t] | input_ids[<t]) within its sequence
   * (0 at each sequence's first position).
   * OWNERSHIP: batch borrowed. *out_logprobs (float32 [T], CPU) is owned by
   * the caller, who calls its deleter. */
  areal_status* (*compute_logprobs)(void* self, const areal_tensor_map* batch, float temperature,
                                    DLManagedTensor** out_logprobs) AREAL_MUST_USE;

  /* One optimizer step over `batch` (split into micro-batches by the
   * plugin), using `loss` for the gradient. The log-probs are of
   * logits / "temperature" when the batch has that float32 0-d scalar
   * (else 1), so they match compute_logprobs at the same temperature. Writes a JSON object of scalar
   * stats (loss, grad_norm, lr, tokens, ...). Increments the step. */
  areal_status* (*train_step)(void* self, const areal_tensor_map* batch, const areal_loss_fn* loss,
                              const areal_writer* out_stats_json) AREAL_MUST_USE;

  /* Saves to / loads from a directory. spec_json:
   * {"path": DIR, "optimizer": bool, "format": "hf"}. The HF format is what
   * inference backends reload. */
  areal_status* (*save)(void* self, areal_str spec_json) AREAL_MUST_USE;
  areal_status* (*load)(void* self, areal_str spec_json) AREAL_MUST_USE;

  /* The policy version of the current weights. */
  areal_status* (*get_version)(void* self, int64_t* out_version) AREAL_MUST_USE;
  areal_status* (*set_version)(void* self, int64_t version) AREAL_MUST_USE;

  /* --- ABI 1.1 (check struct_size; NULL when the plugin cannot) ---------- */

  /* Calls fn once with the current full weights, by Hugging Face tensor
   * name, as DLTensors in the model's dtype on the device the model computes
   * on (kDLCPU, or kDLCUDA for a trainer on a GPU: DLTensor.device says
   * which): the sending side of an in-memory weight update
   * (areal_inference_vtable.update_weights_from_tensors). The host hands
   * device tensors only to an inference plugin whose info names that device
   * (see there).
   * With world_size > 1 it is collective and every rank's fn sees the full
   * weights. Returns fn's status if it fails.
   * OWNERSHIP: the map, its names and tensors are plugin-owned and valid only
   * during fn. THREADING: fn runs on the calling thread. */
  areal_status* (*export_weights)(void* self, areal_status* (*fn)(void* ctx, const areal_tensor_map* weights), void* ctx) AREAL_MUST_USE;

  /* --- ABI 1.6 (check struct_size; NULL when the plugin cannot) ---------- */

  /* A plugin that trains a LoRA adapter on frozen base weights calls fn once
   * with it: config_json holds PEFT's adapter_config.json fields ("r",
   * "lora_alpha", "target_modules", "use_rslora", ...) and `tensors` every
   * lora_A [r, in] and lora_B [out, r] by PEFT's name, float32, on the
   * training device: exactly what areal_inference_vtable.load_adapter takes,
   * so a step's weight update carries the adapter (megabytes) instead of the
   * model. A plugin that trains every weight returns NOT_FOUND without
   * calling fn. Collective and owned like export_weights. */
  areal_status* (*export_adapter)(void* self, areal_status* (*fn)(void* ctx, areal_str config_json, const areal_tensor_map* tensors),
                                  void* ctx) AREAL_MUST_USE;
} areal_train_vtable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_TRAIN_H_ */
