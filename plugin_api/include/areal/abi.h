/*
 * areal plugin ABI: the base layer every plugin kind shares.
 *
 * Pure C99. Nothing here may depend on C++ or on any library other than the C
 * standard headers and DLPack. Read docs/plugin-abi-guidelines.md before editing:
 * the rules below (append-only, struct_size, ownership lines) are what lets a
 * plugin built against ABI 1.0 keep loading into a host built against 1.8.
 *
 * Conventions used on every declaration in this directory:
 *   OWNERSHIP: who allocates and who frees each pointer argument or result.
 *   THREADING: which calls may run concurrently.
 *   (optional) as the first word of a slot comment: the slot may be NULL.
 *   @since 1.N: the ABI minor version that appended the member.
 */
#ifndef AREAL_ABI_H_
#define AREAL_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Versioning
 * ------------------------------------------------------------------------- */

/* A plugin loads only when its major equals the host's. Any minor loads: the
 * host reads a plugin struct only up to the plugin's struct_size, and the
 * plugin SDK checks the host's struct_size before using a newer host slot. */
#define AREAL_ABI_MAJOR 1
/* Bump when anything is appended to any struct or enum in this directory, or
 * when a member's documented meaning is refined (see the @since notes). */
#define AREAL_ABI_MINOR 8

/* On every slot that returns a status: ignoring one drops an error and leaks
 * the status object, so compilers that can say so warn (-Wunused-result). */
#if defined(__GNUC__) || defined(__clang__)
#define AREAL_MUST_USE __attribute__((warn_unused_result))
#else
#define AREAL_MUST_USE
#endif

/* Size of a struct up to and including member m, excluding trailing padding.
 * Every struct_size field is set with this to its last member. */
#define AREAL_OFFSET_OF_END(type, member) \
  (offsetof(type, member) + sizeof(((type*)0)->member))

#if defined(_WIN32)
#define AREAL_PLUGIN_EXPORT __declspec(dllexport)
#else
#define AREAL_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------
 * Status objects: NULL means success.
 * ------------------------------------------------------------------------- */

/* Opaque. Always created by the host (areal_host_api.status_new) so the host
 * can always free it, whichever side it crosses to.
 * OWNERSHIP: whoever receives a non-NULL areal_status* from a call owns it and
 * releases it with areal_host_api.status_free, unless the call says otherwise. */
typedef struct areal_status areal_status;

/* Error categories. Values are explicit and only ever appended. The gateway
 * maps them to HTTP statuses (docs/http-api.md). */
typedef enum areal_code {
  AREAL_CODE_OK = 0,
  AREAL_CODE_INVALID_ARGUMENT = 1,    /* caller's input is wrong (HTTP 400) */
  AREAL_CODE_NOT_FOUND = 2,           /* named thing does not exist (404) */
  AREAL_CODE_UNSUPPORTED = 3,         /* valid request this plugin cannot do */
  AREAL_CODE_UNAVAILABLE = 4,         /* dependency down, retry may work (502) */
  AREAL_CODE_CANCELLED = 5,           /* aborted by request */
  AREAL_CODE_INTERNAL = 6,            /* a bug (500) */
  AREAL_CODE_ABI_MISMATCH = 7,        /* incompatible plugin/host versions */
  AREAL_CODE_ALREADY_EXISTS = 8,      /* conflict (409) */
  AREAL_CODE_FAILED_PRECONDITION = 9, /* wrong state for this call (409) */
  AREAL_CODE_RESOURCE_EXHAUSTED = 10, /* capacity or quota exhausted (429) */
  AREAL_CODE_UNAUTHENTICATED = 11,    /* missing or bad credentials (401) */
  AREAL_CODE_PERMISSION_DENIED = 12,  /* credentials lack the right (403) */
  AREAL_CODE_DEADLINE_EXCEEDED = 13   /* took too long */
  /* append only */
} areal_code;

/* ---------------------------------------------------------------------------
 * Strings and byte sinks
 * ------------------------------------------------------------------------- */

/* A UTF-8 string view; not NUL-terminated unless stated. data may be NULL
 * only when size is 0.
 * OWNERSHIP: borrowed. Valid only for the duration of the call it is passed
 * to (or as documented where it is returned); copy to keep. */
typedef struct areal_str {
  const char* data;
  size_t size;
} areal_str;

/* A host-owned byte sink. Plugins return text (JSON results, stats, URLs)
 * by calling write zero or more times; the chunks are concatenated. This
 * way no allocation crosses the boundary.
 * OWNERSHIP: the writer and ctx belong to the caller of the function it is
 * passed to and are valid only during that call. `chunk` is borrowed by
 * write and copied before it returns.
 * THREADING: not thread-safe; call from one thread at a time. */
typedef struct areal_writer {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_writer, write) */
  void* ctx;
  /* Returns NULL, or a status the plugin must propagate (e.g. out of memory). */
  areal_status* (*write)(void* ctx, areal_str chunk) AREAL_MUST_USE;
} areal_writer;

/* ---------------------------------------------------------------------------
 * Host services handed to every plugin
 * ------------------------------------------------------------------------- */

typedef enum areal_log_level {
  AREAL_LOG_TRACE = 0,
  AREAL_LOG_DEBUG = 1,
  AREAL_LOG_INFO = 2,
  AREAL_LOG_WARN = 3,
  AREAL_LOG_ERROR = 4,
  AREAL_LOG_CRITICAL = 5
  /* append only */
} areal_log_level;

/* The host's function table. Filled by the host, passed to areal_plugin_init.
 * OWNERSHIP: host-owned, valid from areal_plugin_init until after the
 * plugin's finalize returns; the plugin may keep the pointer.
 * THREADING: every slot is thread-safe. */
typedef struct areal_host_api {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_host_api, <last member>) */
  uint16_t abi_major;   /* AREAL_ABI_MAJOR the host was built with */
  uint16_t abi_minor;   /* AREAL_ABI_MINOR the host was built with */

  /* Creates a status. `code` is an areal_code other than OK.
   * OWNERSHIP: message is copied; the caller owns the result. Never NULL. */
  areal_status* (*status_new)(int32_t code, areal_str message) AREAL_MUST_USE;
  /* Releases a status. NULL is allowed and ignored. */
  void (*status_free)(areal_status* status);
  /* The code of a status; AREAL_CODE_OK for NULL. */
  int32_t (*status_code)(const areal_status* status);
  /* The message of a status; empty for NULL.
   * OWNERSHIP: borrowed; valid as long as `status` is. NUL-terminated. */
  areal_str (*status_message)(const areal_status* status);

  /* Logs one line under a component name (e.g. "plugin.vllm").
   * OWNERSHIP: both strings borrowed for the call. */
  void (*log)(int32_t level, areal_str component, areal_str message);
  /* The lowest level that is emitted, so callers can skip formatting. */
  int32_t (*log_level)(void);

  /* Allocates memory that the other side may free with `free`.
   * alignment is a power of two (0 means alignof(max_align_t)).
   * Returns NULL on failure or size 0. */
  void* (*alloc)(size_t size, size_t alignment);
  /* Frees memory from `alloc`. NULL is allowed and ignored. */
  void (*free)(void* ptr);

  /* Sets a gauge, shown on the gateway's /metrics. `name` follows
   * Prometheus rules and may carry labels: `areal_x{backend="vllm"}`.
   * OWNERSHIP: name borrowed for the call. */
  void (*metric_set)(areal_str name, double value);
  /* Adds to a counter (created at 0 on first use). */
  void (*metric_add)(areal_str name, double delta);

  /* Writes the JSON value at a dotted key of the whole effective config
   * (after overrides and defaults), e.g. "experiment.name". An empty key
   * writes the whole config. NOT_FOUND if the key is absent.
   * OWNERSHIP: key borrowed; out is the caller's writer. */
  areal_status* (*config_get)(areal_str dotted_key, const areal_writer* out) AREAL_MUST_USE;

  /* Writes every metric in Prometheus text format 0.0.4 (what /metrics
   * serves). OWNERSHIP: out is the caller's writer. */
  areal_status* (*metrics_render)(const areal_writer* out) AREAL_MUST_USE;

  /* v1.1+: append new slots here only, and bump AREAL_ABI_MINOR. */
} areal_host_api;

/* ---------------------------------------------------------------------------
 * Plugin description and entry point
 * ------------------------------------------------------------------------- */

typedef enum areal_plugin_kind {
  AREAL_KIND_INFERENCE = 1, /* serves generation from token ids (areal/inference.h) */
  AREAL_KIND_TRAIN = 2,     /* owns the trainable model (areal/train.h) */
  AREAL_KIND_ALGORITHM = 3, /* advantages and loss (areal/algorithm.h) */
  AREAL_KIND_WORKFLOW = 4,  /* runs one rollout episode (areal/workflow.h) */
  AREAL_KIND_GATEWAY = 5    /* HTTP front door for agents (areal/gateway.h) */
  /* append only */
} areal_plugin_kind;

/* What a plugin is. Filled by the plugin.
 * OWNERSHIP: plugin-owned, in static storage; must stay valid and unchanged
 * until the library is unloaded. All strings are NUL-terminated UTF-8. */
typedef struct areal_plugin_info {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_plugin_info, finalize) */
  uint16_t abi_major;   /* AREAL_ABI_MAJOR the plugin was built with */
  uint16_t abi_minor;   /* AREAL_ABI_MINOR the plugin was built with */
  int32_t kind;         /* an areal_plugin_kind (stored as int32_t: enum size varies) */
  const char* name;     /* [a-z0-9_]+, unique; the file is libareal-<name>.so */
  const char* version;  /* the plugin's own semantic version, e.g. "0.3.1" */
  const char* description; /* one line for `areal-host plugins` */
  /* (optional) JSON schema of the plugin's config section (format in
   * docs/plugin-guide.md). With it the host checks keys and types, fills
   * defaults and suggests the nearest key for a typo; without it the section
   * is handed over unchecked. */
  const char* config_schema_json;
  /* The kind's function table (areal_inference_vtable, ...). Its first
   * member is its own uint32_t struct_size. */
  const void* vtable;
  /* (optional) Looks up a plugin-specific extension function by name;
   * NULL if unknown. Extensions are documented by the plugin. */
  void* (*get_proc_address)(const char* name);
  /* (optional) Called once after every instance is destroyed and before the
   * library may be unloaded: join threads, release globals. Must not fail. */
  void (*finalize)(void);
} areal_plugin_info;

/* The one required export, named AREAL_PLUGIN_INIT_SYMBOL.
 * Called once per process per library, before anything else.
 * OWNERSHIP: `host` is host-owned (see areal_host_api). On success the
 * plugin sets *out_info to its static info and returns NULL; on failure it
 * returns a status (created with host->status_new, now owned by the host) and
 * leaves *out_info untouched.
 * THREADING: the host serialises all loads. */
typedef areal_status* (*areal_plugin_init_fn)(const areal_host_api* host,
                                              const areal_plugin_info** out_info) AREAL_MUST_USE;
#define AREAL_PLUGIN_INIT_SYMBOL "areal_plugin_init"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_ABI_H_ */
