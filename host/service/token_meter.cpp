#include "token_meter.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

namespace areal::host::service {

int64_t TokenMeter::total() {
  std::ifstream in(run_dir_ + "/metrics.jsonl", std::ios::binary);
  if (!in) return total_;
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
