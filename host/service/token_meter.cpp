#include "token_meter.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

namespace areal::host::service {

int64_t TokenMeter::total() {
  std::ifstream in(run_dir_ + "/metrics.jsonl", std::ios::binary);
  if (!in) return total_;
  // A resumed run rewrites the file from its checkpoint on: count it again
  // when it no longer continues where the last read stopped.
  if (offset_ > 0) {
    in.seekg(0, std::ios::end);
    char last = 0;
    if (static_cast<uint64_t>(in.tellg()) >= offset_) {
      in.seekg(static_cast<std::streamoff>(offset_ - 1));
      in.get(last);
    }
    if (last != '\n') offset_ = 0, total_ = 0;
    in.clear();
  }
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline yet: being written
    offset_ += line.size() + 1;
    const auto row = nlohmann::json::parse(line, nullptr, false);
    if (row.is_object() && !row.value("eval", false) && row.contains("tokens") && row["tokens"].is_number())
      total_ += row["tokens"].get<int64_t>();
  }
  return total_;
}

}  // namespace areal::host::service
