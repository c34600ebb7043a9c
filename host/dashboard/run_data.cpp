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

namespace {

// A rollouts.jsonl record as the table's row, or null when it has no call
// to show. Sessions (online) carry "rows", the trained rows; episodes
// (inline and subproc workflows) carry "completions", their calls.
json session_row(const json& rec, const tokenizer::Tokenizer* tok) {
  if (!rec.is_object()) return nullptr;
  std::vector<int32_t> prompt, answer;
  int64_t version = -1;
  double reward = 0;
  size_t calls = 0;
  if (rec.contains("rows") && rec["rows"].is_array() && !rec["rows"].empty()) {
    const json& row = rec["rows"].back();  // the session's last call: what its reward judged
    const auto ids = row.value("input_ids", std::vector<int32_t>{});
    const auto mask = row.value("loss_mask", std::vector<int32_t>{});
    const auto versions = row.value("versions", std::vector<int64_t>{});
    const size_t first = static_cast<size_t>(std::find(mask.begin(), mask.end(), 1) - mask.begin());
    prompt.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(std::min(first, ids.size())));
    for (size_t t = first; t < ids.size() && t < mask.size(); ++t)
      if (mask[t]) answer.push_back(ids[t]), version = std::max(version, t < versions.size() ? versions[t] : -1);
    reward = row.value("reward", 0.0);
    calls = rec["rows"].size();
  } else if (rec.contains("completions") && rec["completions"].is_array() && !rec["completions"].empty()) {
    const json& c = rec["completions"].back();
    prompt = c.value("input_ids", std::vector<int32_t>{});
    answer = c.value("output_ids", std::vector<int32_t>{});
    for (const int64_t v : c.value("versions", std::vector<int64_t>{})) version = std::max(version, v);
    reward = c.contains("reward") && c["reward"].is_number() ? c["reward"].get<double>() : 0.0;
    calls = rec["completions"].size();
  } else {
    return nullptr;
  }
  return {{"session_id", rec.value("session_id", rec.value("episode_id", rec.value("task_id", std::string())))},
          {"task", rec.value("task", int64_t{-1})},
          {"status", rec.value("status", std::string())},
          {"reward", reward},
          {"version", version},
          {"calls", calls},
          {"prompt", text_of(prompt, tok)},
          {"answer", text_of(answer, tok)}};
}

}  // namespace

json latest_sessions(const std::string& run_dir, size_t limit, const tokenizer::Tokenizer* tok) {
  json out = {{"sessions", json::array()}};
  std::ifstream in(fs::path(run_dir) / "rollouts.jsonl", std::ios::binary);
  if (!in || limit == 0) return out;
  // Only the file's tail, read again twice as long until it holds `limit`
  // records (an agent session's record can be megabytes), up to 256 MiB.
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  constexpr uint64_t kMaxSpan = uint64_t{256} << 20;
  for (uint64_t span = std::min<uint64_t>(size, 64 * 1024 * limit);; span = std::min<uint64_t>({size, span * 2, kMaxSpan})) {
    in.clear();
    in.seekg(static_cast<std::streamoff>(size - span));
    std::string chunk(span, '\0');
    in.read(chunk.data(), static_cast<std::streamsize>(span));
    std::vector<std::pair<size_t, size_t>> lines;  // [begin, end) of each whole line
    size_t pos = 0;
    if (span < size) {  // the first line may be cut
      pos = chunk.find('\n');
      pos = pos == std::string::npos ? chunk.size() : pos + 1;
    }
    for (size_t nl; pos < chunk.size() && (nl = chunk.find('\n', pos)) != std::string::npos; pos = nl + 1) lines.emplace_back(pos, nl);
    out["sessions"] = json::array();
    for (auto it = lines.rbegin(); it != lines.rend() && out["sessions"].size() < limit; ++it) {
      const json rec = json::parse(chunk.begin() + static_cast<std::ptrdiff_t>(it->first), chunk.begin() + static_cast<std::ptrdiff_t>(it->second),
                                   nullptr, false);
      if (json row = session_row(rec, tok); !row.is_null()) out["sessions"].push_back(std::move(row));
    }
    if (out["sessions"].size() >= limit || span >= size || span >= kMaxSpan) break;
  }
  return out;
}

}  // namespace areal::host::dashboard
