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

/* THREADING: create/start/stop/destroy are called from one thread. */
typedef struct areal_gateway_vtable {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_gateway_vtable, stop) */

  /* As for areal_inference_vtable.create. Does not bind any socket yet. */
  areal_status* (*create)(areal_str config_json, const areal_services* services, void** out_self);
  /* Stops if running, then releases. NULL is allowed. */
  void (*destroy)(void* self);

  /* Binds and starts serving in background threads; returns once requests
   * are accepted. Writes the base URL actually bound, e.g.
   * "http://127.0.0.1:8080" (port 0 in config picks a free port). */
  areal_status* (*start)(void* self, const areal_writer* out_base_url);
  /* Stops accepting, finishes or aborts in-flight requests, returns when no
   * request thread touches the instance any more. Idempotent. */
  areal_status* (*stop)(void* self);
} areal_gateway_vtable;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_GATEWAY_H_ */
