// token_match: a single-turn RLVR workflow on token ids. Each dataset item
// gives a prompt and a target; the verifier rewards the fraction of target
// positions the completion reproduces. It needs no tokenizer, so it runs
// against any inference backend, and its reward is exact and checkable.
//
// Data item: {"input_ids": [int...], "target_ids": [int...]}
// Result:    {"reward": matched / len(target_ids), "matched": int}
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;

std::vector<int32_t> int_array(const json& data, const char* key) {
  if (!data.contains(key) || !data[key].is_array() || data[key].empty())
    throw sdk::invalid_argument(std::string("token_match: data item needs a non-empty integer array '") + key + "'");
  std::vector<int32_t> out;
  for (const auto& v : data[key]) {
    if (!v.is_number_integer()) throw sdk::invalid_argument(std::string("token_match: '") + key + "' must hold integers");
    out.push_back(v.get<int32_t>());
  }
  return out;
}

class TokenMatch {
 public:
  static constexpr const char* kName = "token_match";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription =
      "Single-turn RLVR on token ids: reward = fraction of target_ids reproduced position by position.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "temperature": {"type": "number", "default": 1.0, "minimum": 0, "doc": "Sampling temperature (0 = greedy)."},
    "top_p": {"type": "number", "default": 1.0, "minimum": 0, "maximum": 1, "doc": "Nucleus sampling threshold."},
    "top_k": {"type": "integer", "default": 0, "minimum": 0, "doc": "Top-k sampling; 0 disables."},
    "extra_tokens": {"type": "integer", "default": 0, "minimum": 0, "doc": "max_new_tokens = len(target_ids) + extra_tokens."}
  }})";
  static constexpr const char* kSampleData = R"({"input_ids": [1, 2, 3], "target_ids": [4, 5]})";

  explicit TokenMatch(const sdk::CreateContext& ctx) {
    const json c = sdk::parse_object(ctx.config_json(), "token_match: config");
    sampling_.temperature = c.value("temperature", 1.0f);
    sampling_.top_p = c.value("top_p", 1.0f);
    sampling_.top_k = c.value("top_k", 0);
    extra_ = c.value("extra_tokens", 0);
  }

  std::string run_episode(sdk::Episode& episode) {
    const json data = sdk::parse_object(episode.data_json(), "token_match: data item");
    const auto input = int_array(data, "input_ids");
    const auto target = int_array(data, "target_ids");
    sdk::Sampling s = sampling_;
    s.max_new_tokens = static_cast<int32_t>(target.size()) + extra_;
    const sdk::Completion c = episode.generate(input, s);
    size_t matched = 0;
    for (size_t i = 0; i < target.size() && i < c.output_ids.size(); ++i) matched += c.output_ids[i] == target[i];
    return json{{"reward", static_cast<double>(matched) / target.size()}, {"matched", matched}}.dump();
  }

 private:
  sdk::Sampling sampling_;
  int extra_ = 0;
};

}  // namespace

AREAL_EXPORT_WORKFLOW(TokenMatch)
