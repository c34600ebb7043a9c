/*
 * areal plugin ABI: HTTP gateways (kind AREAL_KIND_GATEWAY).
 *
 * The gateway is the agents' front door (OpenAI/Anthropic-compatible HTTP).
 * areal's own gateway is built into areal-host but registers through this
 * same table and passes the same conformance suite as any .so.
 */
#ifndef AREAL_GATEWAY_H_
#define AREAL_GATEWAY_H_

#include <stdint.h>

#include "areal/abi.h"
#include "areal/inference.h"
#include "areal/services.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Trajectories handed to the trainer (@since 1.4)
 * ------------------------------------------------------------------------- */

/* One training row: the prompt then the sampled tokens of one call (or a
 * whole conversation, concat style). Every array has `count` elements,
 * aligned token by token (docs/http-api.md "Export format").
 * OWNERSHIP: gateway-owned; borrowed by the sink for one on_session call. */
typedef struct areal_trajectory_row {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_trajectory_row, routing) since 1.8; (.., turns) before */
  areal_str interaction_id;
  size_t count;
  const int32_t* input_ids;
  const int32_t* loss_mask; /* 1 on sampled tokens, 0 on prompt tokens */
  const float* logprobs;    /* behaviour log-probs; 0 on prompt tokens */
  const int64_t* versions;  /* policy version per sampled token; -1 on prompt tokens */
  double reward;            /* discounted along the conversation */
  uint32_t turns;           /* assistant turns in the row */
  /* @since 1.8 (optional) mixture-of-experts models: the experts the rollout
   * routed positions 0 .. count - 2 to (positions == count - 1), from the
   * calls of the row that recorded them (areal_gen_request.record_routing);
   * 0xFFFF where a position was not recorded. NULL: none was. */
  const areal_routing* routing;
} areal_trajectory_row;

/* An ended session's rows, exported and removed from the gateway.
 * OWNERSHIP: gateway-owned, every pointer included; borrowed by the sink
 * for one on_session call. Copy what you keep. */
typedef struct areal_session_trajectory {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_session_trajectory, skipped_incomplete) */
  areal_str session_id;
  areal_str task_id;
  areal_str group_id;   /* the GRPO group; the task id unless the agent named one */
  areal_str end_reason; /* "ended", "refreshed", "expired" */
  int32_t concat;       /* 1: concat rows (a row per conversation); 0: a row per call */
  double discount;      /* the reward discount applied along conversations */
  const areal_trajectory_row* rows;
  size_t rows_count;
  size_t skipped_incomplete; /* calls still in flight at export, not in rows */
} areal_session_trajectory;

/* Where a gateway delivers exported sessions: no allocation crosses the ABI.
 * OWNERSHIP: the sink and ctx are owned by the caller of the slot it is
 * passed to and valid only during that call. on_session must copy what it
 * keeps and cannot fail (the session has already left the gateway). */
typedef struct areal_trajectory_sink {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_trajectory_sink, on_session) */
  void* ctx;
  void (*on_session)(void* ctx, const areal_session_trajectory* session);
} areal_trajectory_sink;

/* THREADING: create/start/stop/destroy are called from one thread;
 * control (ABI 1.1) and the session slots (ABI 1.4) from any thread while
 * the instance exists. */
typedef struct areal_gateway_vtable {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_gateway_vtable, commit_checkpoint) since 1.5; (.., session_chat) in 1.4; (.., control) in 1.1-1.3; (.., stop) in 1.0 */

  /* As for areal_inference_vtable.create. Does not bind any socket yet. */
  areal_status* (*create)(areal_str config_json, const areal_services* services, void** out_self) AREAL_MUST_USE;
  /* Stops if running, then releases. NULL is allowed. */
  void (*destroy)(void* self);

  /* Binds and starts serving in background threads; returns once requests
   * are accepted. Writes the base URL actually bound, e.g.
   * "http://127.0.0.1:8080" (port 0 in config picks a free port). */
  areal_status* (*start)(void* self, const areal_writer* out_base_url) AREAL_MUST_USE;
  /* Stops accepting, finishes or aborts in-flight requests, returns when no
   * request thread touches the instance any more. Idempotent. */
  areal_status* (*stop)(void* self) AREAL_MUST_USE;

  /* --- ABI 1.1 (check struct_size; NULL in 1.0 gateways) ---------------- */

  /* (optional) Superseded by the typed session slots of 1.4, which hosts
   * use when present; areal's gateway leaves it NULL. Kept so 1.1-1.3
   * gateways keep their layout. The trainer's in-process control of agent
   * sessions, one JSON request
   * object per call with an "op":
   *   {"op":"grant_capacity","n":N}          -> {"capacity":C}
   *   {"op":"take_finished","timeout_ms":T}  -> {"session": S or null}
   * where S is an ended session exported as /export_trajectories returns it
   * (rows with input_ids, loss_mask, logprobs, versions, reward) and removed
   * from the gateway; null when none ended within T milliseconds.
   *   {"op":"start_session","task_id":..,"group_id":..} -> {"session_id","api_key"}
   *   {"op":"set_reward","session_id":..,"reward":R}    -> {} (the last call)
   *   {"op":"end_session","session_id":..}             -> {"interaction_count":N}
   *   {"op":"export_session","session_id":..,"discount":D} -> S (an ended session)
   *   {"op":"chat","session_id":..,"request":{OpenAI chat request}}
   *                                     -> the chat completion, recorded in the session
   * Unknown ops are UNSUPPORTED. OWNERSHIP: request borrowed for the call;
   * out is the caller's writer. */
  areal_status* (*control)(void* self, areal_str request_json, const areal_writer* out_json) AREAL_MUST_USE;

  /* --- ABI 1.4: typed session slots (check struct_size) ----------------- *
   * The trainer in the same process drives agent sessions through these,
   * with the semantics of the admin endpoints (docs/http-api.md) and
   * without HTTP or the admin key: it holds the instance. Token ids, masks,
   * log-probs and versions come back as arrays, never as text. All seven
   * are set together (a gateway has them all or none). OWNERSHIP: string
   * arguments borrowed for the call; writers and sinks are the caller's. */

  /* Adds n >= 1 sessions of capacity (one per rollout slot the trainer
   * frees); writes the capacity now (-1: unlimited). */
  areal_status* (*grant_capacity)(void* self, int64_t n, int64_t* out_capacity) AREAL_MUST_USE;
  /* Starts a session for task_id (group_id empty: the task id). Writes its
   * id and its API key. RESOURCE_EXHAUSTED when capacity is 0. */
  areal_status* (*start_session)(void* self, areal_str task_id, areal_str group_id, const areal_writer* out_session_id,
                                 const areal_writer* out_api_key) AREAL_MUST_USE;
  /* Sets the reward of one call (interaction_id), or of the session's last
   * call that answered when interaction_id is empty. */
  areal_status* (*set_session_reward)(void* self, areal_str session_id, areal_str interaction_id, double reward) AREAL_MUST_USE;
  /* Ends a session; FAILED_PRECONDITION when it already ended. */
  areal_status* (*end_session)(void* self, areal_str session_id) AREAL_MUST_USE;
  /* Waits up to timeout_ms for any ended session, then exports it with the
   * gateway's configured discount and style, removes it, and calls
   * sink->on_session once with it. Returns NULL without calling the sink
   * when none ended in time. */
  areal_status* (*take_finished)(void* self, int64_t timeout_ms, const areal_trajectory_sink* sink) AREAL_MUST_USE;
  /* Exports and removes one ended session with this discount (the
   * configured style), calling sink->on_session once. NOT_FOUND,
   * FAILED_PRECONDITION (still active). */
  areal_status* (*export_session)(void* self, areal_str session_id, double discount, const areal_trajectory_sink* sink) AREAL_MUST_USE;
  /* An OpenAI chat completion for a session, in process, recorded in it
   * (inline workflows' api->chat). request_json is a Chat Completions
   * request without streaming; out_json receives the response object. */
  areal_status* (*session_chat)(void* self, areal_str session_id, areal_str request_json, const areal_writer* out_json) AREAL_MUST_USE;

  /* --- ABI 1.5 (check struct_size) ---------------------------------------- *
   * (optional, set together) Exactly-once hand-off across restarts, for
   * gateways that keep durable state; NULL in gateways that keep none. The
   * trainer marks the sessions take_finished handed it, once trained, as
   * belonging to the checkpoint it is about to write, and commits that
   * checkpoint once it is written. A run resumed from checkpoint N commits N
   * again first: sessions marked for a later checkpoint come back through
   * take_finished (their steps died with the previous process), so each
   * session is trained once in the run's surviving history.
   * OWNERSHIP: the id array and its strings are borrowed for the call. */

  /* Marks n taken sessions as trained for checkpoint_step. Unknown ids are
   * ignored. */
  areal_status* (*mark_sessions_trained)(void* self, const areal_str* session_ids, size_t n, int64_t checkpoint_step) AREAL_MUST_USE;
  /* Forgets the sessions marked for checkpoints <= step; those marked for a
   * later one are ended again and handed out before any other. */
  areal_status* (*commit_checkpoint)(void* self, int64_t step) AREAL_MUST_USE;
} areal_gateway_vtable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_GATEWAY_H_ */
