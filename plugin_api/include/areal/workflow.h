/*
 * areal plugin ABI: rollout workflows (kind AREAL_KIND_WORKFLOW).
 *
 * A workflow runs one episode for one dataset item: it asks the policy for
 * completions (through the host, which records every token) and reports a
 * reward. The host, not the workflow, keeps the token-level record, so a
 * workflow cannot lose or alter what was sampled.
 */
#ifndef AREAL_WORKFLOW_H_
#define AREAL_WORKFLOW_H_

#include <stdint.h>

#include "areal/abi.h"
#include "areal/inference.h"
#include "areal/services.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The result of one generation made during an episode.
 * OWNERSHIP: host-owned; valid until run_episode returns. */
typedef struct areal_completion {
  uint32_t struct_size;       /* AREAL_OFFSET_OF_END(areal_completion, finish_reason) */
  areal_str completion_id;    /* names this call for set_reward */
  const int32_t* output_ids;
  const float* logprobs;
  const int64_t* versions;
  size_t count;
  int32_t finish_reason;      /* areal_finish_reason */
} areal_completion;

/* Host callbacks available during one episode.
 * OWNERSHIP: host-owned; valid until run_episode returns.
 * THREADING: may be called from any thread the workflow starts, as long as
 * the calls finish before run_episode returns. */
typedef struct areal_episode_api {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_episode_api, chat) since 1.1; (.., set_reward) in 1.0 */
  void* ctx;
  /* Generates from token ids and waits for the result; the host records it
   * as part of this episode. OWNERSHIP: request borrowed for the call;
   * *out_completion is host-owned (see areal_completion). */
  areal_status* (*generate)(void* ctx, const areal_gen_request* request,
                            const areal_completion** out_completion) AREAL_MUST_USE;
  /* Sets the reward of one completion of this episode (an empty id means
   * the last one). Calling it again replaces the value. */
  areal_status* (*set_reward)(void* ctx, areal_str completion_id, double reward) AREAL_MUST_USE;

  /* --- ABI 1.1 (check struct_size) -------------------------------------- */

  /* An OpenAI chat completion through the gateway in process (no HTTP):
   * request_json is a /v1/chat/completions body without "stream"; the
   * answer is its JSON response. The call is recorded in this episode's
   * gateway session (the one episode.api_key names), exactly as an HTTP call
   * with that key would be. UNSUPPORTED when the run has no gateway with a
   * tokenizer. OWNERSHIP: request borrowed; out is the caller's writer. */
  areal_status* (*chat)(void* ctx, areal_str request_json, const areal_writer* out_json) AREAL_MUST_USE;
} areal_episode_api;

/* One episode to run.
 * OWNERSHIP: host-owned; valid until run_episode returns. */
typedef struct areal_episode {
  uint32_t struct_size;   /* AREAL_OFFSET_OF_END(areal_episode, api) */
  areal_str episode_id;   /* unique per episode */
  areal_str data_json;    /* the dataset item, a JSON object */
  areal_str base_url;     /* (empty when no gateway runs) the gateway's OpenAI base URL */
  areal_str api_key;      /* (empty when no gateway runs) a key scoped to this episode:
                           * the host starts a gateway session per episode and
                           * trains on everything called with this key */
  const areal_episode_api* api;
} areal_episode;

/* THREADING: run_episode is called concurrently on the same instance, once
 * per episode in flight; create/destroy are not. */
typedef struct areal_workflow_vtable {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_workflow_vtable, run_episode) */

  /* As for areal_inference_vtable.create. */
  areal_status* (*create)(areal_str config_json, const areal_services* services, void** out_self) AREAL_MUST_USE;
  /* Releases an instance. NULL is allowed. */
  void (*destroy)(void* self);

  /* Runs one episode. Writes a JSON object to out_result_json:
   * {"reward": number} gives the reward of the last completion (the usual
   * single-turn case); {} leaves rewards to set_reward. Extra keys are kept
   * in the episode record as metadata. */
  areal_status* (*run_episode)(void* self, const areal_episode* episode,
                               const areal_writer* out_result_json) AREAL_MUST_USE;
} areal_workflow_vtable;

/* Optional extension, found through areal_plugin_info.get_proc_address:
 * returns a dataset item (a NUL-terminated JSON object in static storage)
 * that run_episode accepts. The conformance suite runs episodes with it. */
typedef const char* (*areal_workflow_sample_data_fn)(void);
#define AREAL_WORKFLOW_SAMPLE_DATA_PROC "areal_workflow_sample_data"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_WORKFLOW_H_ */
