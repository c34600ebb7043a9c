/*
 * areal plugin ABI: named tensor sets, the way batches cross the boundary.
 *
 * Tensors are DLPack (dlpack/dlpack.h, Debian libdlpack-dev, DLPACK_VERSION
 * 0.6), so neither side needs libtorch to read them and a libtorch plugin can
 * wrap them without a copy (torch::fromDLPack / at::toDLPack).
 */
#ifndef AREAL_TENSORS_H_
#define AREAL_TENSORS_H_

#include <stdint.h>

#include <dlpack/dlpack.h>

#include "areal/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A set of tensors by name, e.g. a packed training batch:
 *   "input_ids" int32 [T], "cu_seqlens" int32 [B+1], "loss_mask" int32 [T],
 *   "logprobs" float32 [T], "versions" int64 [T], "rewards" float32 [B], ...
 * (the names each kind reads are listed in docs/plugin-guide.md).
 * OWNERSHIP: the map, the name strings and the DLTensor structs belong to the
 * caller and are borrowed for the call. Tensor data is writable only where
 * a slot says so ("out" maps). */
typedef struct areal_tensor_map {
  uint32_t struct_size; /* AREAL_OFFSET_OF_END(areal_tensor_map, count) */
  const areal_str* names;
  DLTensor* const* tensors;
  size_t count;
} areal_tensor_map;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AREAL_TENSORS_H_ */
