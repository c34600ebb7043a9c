/*
 * areal plugin ABI: inference backends (kind AREAL_KIND_INFERENCE).
 *
 * An inference plugin generates from token ids. It never sees chat messages:
 * templating and tokenization happen once, in the host, so the ids that were
 * sampled are exactly the ids that are trained on.
 */
#ifndef AREAL_INFERENCE_H_
#define AREAL_INFERENCE_H_

#include <stdint.h>

#include "areal/abi.h"
#include "areal/services.h"
#include "areal/tensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sampling controls for one request.
 * OWNERSHIP: caller-owned; the arrays are borrowed for the submit call only
 * (copy what you need). */
typedef struct areal_logit_bias {
  int32_t token_id;
  float bias; /* added to the token's logit; -100 practically bans it */
} areal_logit_bias;

/* What the output must be (areal_sampling_params.structured_output). */
typedef enum areal_structured_output {
  AREAL_STRUCTURED_NONE = 0,
  AREAL_STRUCTURED_JSON_OBJECT = 1, /* any JSON object */
  AREAL_STRUCTURED_JSON_SCHEMA = 2  /* a JSON value valid for json_schema */
  /* append only */
} areal_structured_output;

typedef struct areal_sampling_params {
  uint32_t struct_size;     /* AREAL_OFFSET_OF_END(areal_sampling_params, json_schema) since 1.3; (.., stop_strings_count) before */
  float temperature;        /* 0 means greedy */
  float top_p;              /* (0, 1]; 1 disables */
  int32_t top_k;            /* <= 0 disables */
  int32_t max_new_tokens;   /* > 0 */
  uint64_t seed;            /* used when has_seed != 0 */
  int32_t has_seed;         /* 0: the backend picks a seed */
  int32_t ignore_eos;       /* non-zero: generate until max_new_tokens */
  const int32_t* stop_token_ids; /* (optional) finish when one is sampled; it is kept in the output */
  size_t stop_token_ids_count;
  const areal_str* stop_strings; /* (optional) finish when the decoded text ends with one */
  size_t stop_strings_count;
  /* --- ABI 1.3: what else shapes the distribution. Plugins built for 1.2
   * never see these (their copy stops at stop_strings_count); remote plugins
   * pass them in the server's own request fields; a plugin that cannot honour
   * one says so in its description and ignores it. ------------------------ */
  float frequency_penalty;  /* @since 1.3 logit -= f * (times the token was generated so far); 0 disables */
  float presence_penalty;   /* @since 1.3 logit -= p once the token was generated; 0 disables */
  const areal_logit_bias* logit_bias; /* @since 1.3 (optional) added to the logits */
  size_t logit_bias_count;
  int32_t structured_output;          /* @since 1.3 areal_structured_output; tokens that cannot continue a
                                         valid output get probability 0 */
  areal_str json_schema;              /* @since 1.3 the schema (JSON text) for AREAL_STRUCTURED_JSON_SCHEMA */
} areal_sampling_params;

/* One generation request.
 * OWNERSHIP: caller-owned; every pointer is borrowed for the submit call. */
typedef struct areal_gen_request {
  uint32_t struct_size;       /* AREAL_OFFSET_OF_END(areal_gen_request, record_routing) since 1.7; (.., adapter) in 1.6; (.., sampling) before */
  uint64_t request_id;        /* unique within the host process; used by abort */
  areal_str affinity_key;     /* (optional) requests with the same key go to the same server */
  const int32_t* input_ids;   /* the full prompt, already templated and tokenized */
  size_t input_ids_count;     /* > 0 */
  const areal_sampling_params* sampling;
  /* @since 1.6 (optional) the name of a LoRA adapter loaded with
   * load_adapter; empty: the base model. A plugin whose info does not say
   * "adapters": true never gets a non-empty one (the host refuses first);
   * one that does answers NOT_FOUND for a name it has not loaded. */
  areal_str adapter;
  /* @since 1.7 (optional) non-zero: report the experts a mixture-of-experts
   * model routed each position to, through the sink's on_routing (once,
   * before on_done). A plugin whose info does not say "routing": true
   * ignores it. */
  uint32_t record_routing;
} areal_gen_request;

/* Why a generation ended. */
typedef enum areal_finish_reason {
  AREAL_FINISH_STOP = 1,   /* stop token id, EOS, or stop string */
  AREAL_FINISH_LENGTH = 2, /* max_new_tokens or context length */
  AREAL_FINISH_ABORT = 3,  /* abort() or a sink that returned an error */
  AREAL_FINISH_ERROR = 4   /* the backend failed; see the status */
  /* append only */
} areal_finish_reason;

/* New tokens of one request, in order.
 * OWNERSHIP: plugin-owned; borrowed by on_tokens for that call only. */
typedef struct areal_gen_chunk {
  uint32_t struct_size;     /* AREAL_OFFSET_OF_END(areal_gen_chunk, count) */
  const int32_t* token_ids; /* sampled ids */
  const float* logprobs;    /* log p(token) under the sampling distribution softmax(logits / T), T the
                               request's temperature (1 when greedy), before top-k/top-p truncation.
                               @since 1.2 (until 1.1: T = 1 whatever the temperature)
                               @since 1.3 the logits are those sampled from: with the request's
                               penalties, logit_bias and structured-output mask applied */
  const int64_t* versions;  /* policy (weight) version that sampled each token */
  size_t count;             /* >= 1 */
} areal_gen_chunk;

/* @since 1.7 The experts a mixture-of-experts model routed a request's
 * positions to: for each position p (the prompt's, then every generated
 * token's but the last, which is never fed back), for each MoE layer l (in
 * layer order), the top_k experts, at experts[(p * moe_layers + l) * top_k + j].
 * Position p is the one whose token is the input there, as a training
 * forward over prompt + output routes it: what routing replay feeds back.
 * OWNERSHIP: plugin-owned; borrowed by on_routing for that call only. */
typedef struct areal_routing {
  uint32_t struct_size;   /* AREAL_OFFSET_OF_END(areal_routing, experts) */
  uint32_t moe_layers;
  uint32_t top_k;
  uint32_t num_experts;   /* every id is below it */
  size_t positions;
  const uint16_t* experts;
} areal_routing;

/* Where a request's output goes. Host-owned.
 * OWNERSHIP: the sink struct and ctx are owned by the caller of submit and
 * stay valid until on_done has returned.
 * THREADING: the plugin calls on_tokens and on_done from any thread, never
 * concurrently for the same request, and never after on_done. */
typedef struct areal_gen_sink {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_gen_sink, on_done); (.., on_routing) for a host that takes routing (1.7) */
  void* ctx;
  /* Zero or more times. A non-NULL return (owned by the plugin, which frees
   * it) asks the plugin to abort this request; on_done then follows with
   * AREAL_FINISH_ABORT. */
  areal_status* (*on_tokens)(void* ctx, const areal_gen_chunk* chunk) AREAL_MUST_USE;
  /* Exactly once per successfully submitted request. `error` is non-NULL only
   * with AREAL_FINISH_ERROR. OWNERSHIP: error is borrowed for the call. */
  void (*on_done)(void* ctx, int32_t finish_reason, const areal_status* error);
  /* @since 1.7 (optional) For a request with record_routing, once, before
   * on_done (whatever the finish reason): the routing of every position the
   * model computed. A plugin calls it only when the sink's struct_size covers
   * it and it is not NULL. */
  void (*on_routing)(void* ctx, const areal_routing* routing);
} areal_gen_sink;

/* The inference function table.
 * THREADING: every slot may be called concurrently from many threads on the
 * same instance, except create/destroy. */
typedef struct areal_inference_vtable {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter) with adapters (1.6);
                           (.., update_weights_from_tensors) since 1.1; (.., info) in 1.0 */

  /* Creates an instance from its config section (a JSON object).
   * OWNERSHIP: config_json and services borrowed for the call (services
   * stays valid until destroy). *out_self is owned by the plugin and released
   * with destroy. On error *out_self is untouched. */
  areal_status* (*create)(areal_str config_json, const areal_services* services, void** out_self) AREAL_MUST_USE;
  /* Destroys an instance; aborts what is in flight first (each on_done is
   * called before destroy returns). NULL is allowed. */
  void (*destroy)(void* self);

  /* Starts a request and returns at once. On success the sink receives the
   * output later (possibly before submit returns). On error nothing is
   * called on the sink. */
  areal_status* (*submit)(void* self, const areal_gen_request* request, const areal_gen_sink* sink) AREAL_MUST_USE;
  /* Aborts a request; its on_done reports AREAL_FINISH_ABORT with the tokens
   * generated so far already delivered. Unknown ids are NOT_FOUND. */
  areal_status* (*abort)(void* self, uint64_t request_id) AREAL_MUST_USE;

  /* Stops producing tokens (requests stay queued) until resume. Used around
   * weight updates. Idempotent. */
  areal_status* (*pause)(void* self) AREAL_MUST_USE;
  areal_status* (*resume)(void* self) AREAL_MUST_USE;

  /* Loads new weights. spec_json: {"type":"disk","path":DIR,"version":N}
   * (kinds may add types). After success every new token is stamped N. */
  areal_status* (*update_weights)(void* self, areal_str spec_json) AREAL_MUST_USE;
  /* The version stamped on newly generated tokens. */
  areal_status* (*get_version)(void* self, int64_t* out_version) AREAL_MUST_USE;
  /* Sets that version without loading weights. */
  areal_status* (*set_version)(void* self, int64_t version) AREAL_MUST_USE;

  /* Writes a JSON object describing the served model:
   * {"model": str, "vocab_size": int, "max_context": int, ...}. */
  areal_status* (*info)(void* self, const areal_writer* out_json) AREAL_MUST_USE;

  /* --- ABI 1.1 (check struct_size; NULL when the plugin cannot) ---------- */

  /* Loads new weights from memory (an in-process trainer, no disk): every
   * tensor of the model by Hugging Face name, float of any width (converted
   * to the engine's dtype), shapes as in the checkpoint. Applied between
   * decoding steps, all tensors at once; afterwards every new token is
   * stamped `version`. A missing or misshapen tensor is INVALID_ARGUMENT and
   * leaves the old weights in place. Tensors are CPU memory unless the
   * plugin's info JSON has "device": "cuda:N" (it computes on a GPU): then
   * they may be kDLCUDA tensors too, which it reads by DLTensor.device (the
   * host refuses to hand device memory to a plugin that does not say so).
   * OWNERSHIP: the map and tensors are borrowed for the call. */
  areal_status* (*update_weights_from_tensors)(void* self, const areal_tensor_map* weights, int64_t version) AREAL_MUST_USE;

  /* --- ABI 1.6: LoRA adapters served beside the base model (optional, set
   * together; a plugin with them says "adapters": true in its info) ------ */

  /* Loads a LoRA adapter under a name, or replaces the one of that name.
   * spec_json: {"name": str, "version": N, ...} and either
   *   "path": DIR  a PEFT adapter folder (adapter_config.json +
   *                adapter_model.safetensors); `tensors` is NULL; or
   *   "config": {PEFT's adapter_config.json fields: "r", "lora_alpha",
   *              "target_modules", "use_rslora", ...} with `tensors`: every
   *              lora_A [r, in] and lora_B [out, r] by PEFT's name
   *              (base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight),
   *              float of any width, CPU memory unless info says "device": "cuda:N".
   * Applied between decoding steps: afterwards the adapter's requests, those
   * in flight too, compute with it and their new tokens are stamped N (the
   * adapter's version; base requests keep the base version). A bad spec or
   * tensor is INVALID_ARGUMENT and leaves the adapter as it was.
   * "default": true makes it the adapter of requests that name none (the
   * policy a trainer hands over after each step, areal_train_vtable.
   * export_adapter); loading it again without, or unloading it, gives those
   * back to the base.
   * OWNERSHIP: spec_json, the map and its tensors are borrowed for the call. */
  areal_status* (*load_adapter)(void* self, areal_str spec_json, const areal_tensor_map* tensors) AREAL_MUST_USE;
  /* Forgets an adapter: new requests naming it are NOT_FOUND; requests in
   * flight finish with it. Unknown names are NOT_FOUND. */
  areal_status* (*unload_adapter)(void* self, areal_str name) AREAL_MUST_USE;
} areal_inference_vtable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_INFERENCE_H_ */
