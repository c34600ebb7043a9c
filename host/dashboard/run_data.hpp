// What the dashboard shows, read from a run directory's files while the run
// writes them: metrics.jsonl rows (steps and evaluations) from a byte
// offset on, and the latest sessions of rollouts.jsonl as text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/hf/tokenizer/tokenizer.hpp"

namespace areal::host::dashboard {

// Complete lines of RUN/metrics.jsonl from byte `offset` on: {"rows": [...],
// "offset": where the next call starts}. A line still being written is left
// for the next call. Per-sample lists (sample_versions, session_ids, tasks)
// are dropped: the page plots scalars.
nlohmann::json metrics_since(const std::string& run_dir, uint64_t offset);

// The last `limit` sessions of RUN/rollouts.jsonl that have rows, newest
// first: {"sessions": [{"session_id", "task", "status", "reward", "version",
// "prompt", "answer"}]}. Text is decoded with `tok` (special tokens kept, so
// the chat template shows); without a tokenizer, the ids are shown.
nlohmann::json latest_sessions(const std::string& run_dir, size_t limit, const tokenizer::Tokenizer* tok);

}  // namespace areal::host::dashboard
