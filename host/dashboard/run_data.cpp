#include "run_data.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>
#include <exception>

namespace areal::host::dashboard {

namespace fs = std::filesystem;
using nlohmann::json;

json metrics_since(const std::string& run_dir, uint64_t offset) {
  json out = {{"rows", json::array()}, {"offset", offset}};
  std::ifstream in(fs::path(run_dir) / "metrics.jsonl", std::ios::binary);
  if (!in) return out;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (offset > size) offset = 0;  // the file was rewritten (a resumed run trims it): start over
  in.seekg(static_cast<std::streamoff>(offset));
  std::string chunk(size - offset, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  size_t pos = 0;
  for (size_t nl; (nl = chunk.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    try {
      json row = json::parse(chunk.substr(pos, nl - pos));
      if (!row.is_object()) continue;
      for (const char* heavy : {"sample_versions", "session_ids", "tasks"}) row.erase(heavy);
      out["rows"].push_back(std::move(row));
    } catch (const std::exception&) {
      // A damaged line (a crash mid-write): skip it.
    }
  }
  out["offset"] = offset + pos;
  return out;
}

namespace {

std::string text_of(const std::vector<int32_t>& ids, const tokenizer::Tokenizer* tok) {
  if (tok != nullptr) {
    try {
      return tok->decode(ids, false);
    } catch (const std::exception&) {
      // Ids the tokenizer does not know: show them.
    }
  }
  return json(ids).dump();
}

}  // namespace

json latest_sessions(const std::string& run_dir, size_t limit, const tokenizer::Tokenizer* tok) {
  json out = {{"sessions", json::array()}};
  std::ifstream in(fs::path(run_dir) / "rollouts.jsonl", std::ios::binary);
  if (!in || limit == 0) return out;
  // Only the file's tail: records are a few kB each.
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  const uint64_t span = std::min<uint64_t>(size, 64 * 1024 * std::max<uint64_t>(limit, 1));
  in.seekg(static_cast<std::streamoff>(size - span));
  std::string chunk(span, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(span));
  std::vector<std::string> lines;
  size_t pos = span == size ? 0 : chunk.find('\n') + 1;  // the first line may be cut
  for (size_t nl; pos < chunk.size() && (nl = chunk.find('\n', pos)) != std::string::npos; pos = nl + 1)
    lines.push_back(chunk.substr(pos, nl - pos));
  for (auto it = lines.rbegin(); it != lines.rend() && out["sessions"].size() < limit; ++it) {
    json rec;
    try {
      rec = json::parse(*it);
    } catch (const std::exception&) {
      continue;
    }
    if (!rec.is_object() || !rec.contains("rows") || !rec["rows"].is_array() || rec["rows"].empty()) continue;
    const json& row = rec["rows"].back();  // the session's last call: what its reward judged
    const auto ids = row.value("input_ids", std::vector<int32_t>{});
    const auto mask = row.value("loss_mask", std::vector<int32_t>{});
    const auto versions = row.value("versions", std::vector<int64_t>{});
    const size_t first = static_cast<size_t>(std::find(mask.begin(), mask.end(), 1) - mask.begin());
    std::vector<int32_t> prompt(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min(first, ids.size())));
    std::vector<int32_t> answer;
    int64_t version = -1;
    for (size_t t = first; t < ids.size() && t < mask.size(); ++t)
      if (mask[t]) answer.push_back(ids[t]), version = std::max(version, t < versions.size() ? versions[t] : -1);
    out["sessions"].push_back({{"session_id", rec.value("session_id", rec.value("task_id", std::string()))},
                               {"task", rec.value("task", int64_t{-1})},
                               {"status", rec.value("status", std::string())},
                               {"reward", row.value("reward", 0.0)},
                               {"version", version},
                               {"calls", rec["rows"].size()},
                               {"prompt", text_of(prompt, tok)},
                               {"answer", text_of(answer, tok)}});
  }
  return out;
}

}  // namespace areal::host::dashboard
