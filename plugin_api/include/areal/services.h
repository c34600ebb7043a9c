/*
 * areal plugin ABI: the services the host hands to an instance at create.
 *
 * Plugins reach other plugins only through these references, never by
 * linking to them, so any inference backend can sit behind any gateway or
 * workflow.
 */
#ifndef AREAL_SERVICES_H_
#define AREAL_SERVICES_H_

#include <stdint.h>

#include "areal/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

struct areal_inference_vtable;

/* A live inference instance.
 * OWNERSHIP: host-owned; valid until the instance that received it is
 * destroyed. Call vtable slots with `self` as the first argument; check
 * vtable->struct_size before using a slot appended after 1.0. */
typedef struct areal_inference_ref {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_inference_ref, self) */
  const struct areal_inference_vtable* vtable;
  void* self;
} areal_inference_ref;

/* Everything an instance may use besides its config.
 * OWNERSHIP: host-owned; valid from create until destroy returns. */
typedef struct areal_services {
  uint32_t struct_size;                 /* AREAL_OFFSET_OF_END(areal_services, inference) */
  const areal_host_api* host;           /* same table as given to areal_plugin_init */
  areal_str instance_name;              /* the config section's name, e.g. "inference" */
  const areal_inference_ref* inference; /* (optional) the configured inference backend */
} areal_services;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_SERVICES_H_ */
