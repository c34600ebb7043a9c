/*
 * areal plugin ABI: HTTP gateways (kind AREAL_KIND_GATEWAY).
 *
 * The gateway is the agents' front door (OpenAI/Anthropic-compatible HTTP).
 * areal's own gateway is built into areal-host but registers through this
 * same table and passes the same conformance suite as any .so.
 */
#ifndef AREAL_GATEWAY_H_
#define AREAL_GATEWAY_H_

#include "areal/abi.h"
#include "areal/services.h"

#ifdef __cplusplus
extern "C" {
#endif

/* THREADING: create/start/stop/destroy are called from one thread;
 * control (ABI 1.1) from any thread while started. */
typedef struct areal_gateway_vtable {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_gateway_vtable, control) since 1.1; (.., stop) in 1.0 */

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

  /* The trainer's in-process control of agent sessions, one JSON request
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
} areal_gateway_vtable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_GATEWAY_H_ */
