/*
 * areal plugin ABI: RL algorithms (kind AREAL_KIND_ALGORITHM).
 *
 * An algorithm turns rewards into advantages and defines the per-token loss
 * on log-probs. It needs no model and no libtorch: batches arrive as DLPack
 * tensors on the CPU.
 */
#ifndef AREAL_ALGORITHM_H_
#define AREAL_ALGORITHM_H_

#include <stdint.h>

#include "areal/abi.h"
#include "areal/services.h"
#include "areal/tensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* THREADING: an instance is used from one thread at a time. */
typedef struct areal_algorithm_vtable {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_algorithm_vtable, loss) */

  /* As for areal_inference_vtable.create. */
  areal_status* (*create)(areal_str config_json, const areal_services* services, void** out_self) AREAL_MUST_USE;
  /* Releases an instance. NULL is allowed. */
  void (*destroy)(void* self);

  /* Fills per-token advantages for a packed batch.
   * batch (read-only): "rewards" float32 [B], "cu_seqlens" int32 [B+1],
   * "loss_mask" int32 [T], "group_ids" int64 [B], and "logprobs" float32 [T]
   * (behaviour log-probs, aligned with the tokens: position t holds the
   * log-prob of token t). Optional: "prox_logprobs" float32 [T] (recomputed
   * by the trainer before the step), "ref_logprobs" float32 [T] (a reference
   * model), "versions" int64 [T] (policy version per token, -1 on prompts),
   * "policy_version" int64 0-d (the version being trained).
   * out (writable data, caller-allocated): "advantages" float32 [T]; tokens
   * outside loss_mask must be written as 0.
   * OWNERSHIP: both maps borrowed for the call. */
  areal_status* (*compute_advantages)(void* self, const areal_tensor_map* batch,
                                      const areal_tensor_map* out) AREAL_MUST_USE;

  /* The loss of one micro-batch given the current policy's log-probs.
   * Same contract as areal_loss_fn.eval (areal/train.h). The batch holds the
   * per-token tensors above sliced to the micro-batch, "advantages", and the
   * 0-d scalars unchanged. The loss is a mean over the micro-batch's loss
   * tokens; the train plugin weights micro-batches (and ranks) by their loss
   * tokens, so the step optimises a token-level mean over the global batch. */
  areal_status* (*loss)(void* self, const areal_tensor_map* batch, double* out_loss, DLTensor* out_grad,
                        const areal_writer* out_stats_json) AREAL_MUST_USE;
} areal_algorithm_vtable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_ALGORITHM_H_ */
