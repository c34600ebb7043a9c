// Submits one sampled request to an inference plugin through its ABI table:
// temperature 1, top_p 1, ignore_eos, seed 5 (the remote interruption tests,
// whose log-prob checks assume the full distribution at temperature 1).
#pragma once

#include <cstdint>
#include <vector>

#include "areal/inference.h"
#include "core/plugin_host/error.hpp"

namespace areal::testing {

inline void submit_sampled(const areal_inference_vtable& vt, void* self, const areal_gen_sink* sink, uint64_t request_id,
                           const std::vector<int32_t>& prompt, int32_t max_new_tokens, const areal_str* stop = nullptr) {
  areal_sampling_params s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.max_new_tokens = max_new_tokens;
  s.ignore_eos = 1;
  s.has_seed = 1;
  s.seed = 5;
  s.stop_strings = stop;
  s.stop_strings_count = stop ? 1 : 0;
  areal_gen_request r{};
  r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, sampling);
  r.request_id = request_id;
  r.input_ids = prompt.data();
  r.input_ids_count = prompt.size();
  r.sampling = &s;
  areal::throw_if_status(vt.submit(self, &r, sink), "submit");
}

}  // namespace areal::testing
