// The tokens a job has trained on, read from its metrics.jsonl as it grows
// (each step row's "tokens"): what the service's max_tokens quota counts.
// Each call reads only the lines added since the last one.
#pragma once

#include <cstdint>
#include <string>

namespace areal::host::service {

class TokenMeter {
 public:
  explicit TokenMeter(std::string run_dir) : run_dir_(std::move(run_dir)) {}
  // The total so far; a line still being written waits for the next call.
  int64_t total();

 private:
  std::string run_dir_;
  uint64_t offset_ = 0;
  int64_t total_ = 0;
};

}  // namespace areal::host::service
