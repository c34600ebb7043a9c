// two_turn_count: an example of a user's own workflow plugin.
//
// Each episode asks the policy twice: a first turn from the prompt, then a
// second turn that continues from the prompt plus the first answer. Each
// turn is rewarded separately with set_reward: the fraction of its tokens
// equal to the item's "lucky" token id. The host records both completions
// at the token level; this plugin never stores or reports tokens itself.
//
// Data item: {"input_ids": [int...], "lucky": int}
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"

namespace sdk = areal::sdk;
using nlohmann::json;

class TwoTurnCount {
 public:
  static constexpr const char* kName = "two_turn_count";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr const char* kDescription = "Example: two turns, each rewarded by how often it says the lucky token.";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "tokens_per_turn": {"type": "integer", "default": 8, "minimum": 1, "doc": "max_new_tokens of each turn."},
    "temperature": {"type": "number", "default": 1.0, "minimum": 0, "doc": "Sampling temperature."}}})";
  static constexpr const char* kSampleData = R"({"input_ids": [1, 2, 3], "lucky": 5})";

  explicit TwoTurnCount(const sdk::CreateContext& ctx) {
    const json c = sdk::parse_object(ctx.config_json(), "two_turn_count: config");
    sampling_.max_new_tokens = c.value("tokens_per_turn", 8);
    sampling_.temperature = c.value("temperature", 1.0f);
  }

  std::string run_episode(sdk::Episode& episode) {
    const json data = sdk::parse_object(episode.data_json(), "two_turn_count: data item");
    if (!data.contains("input_ids") || !data["input_ids"].is_array() || data["input_ids"].empty() ||
        !data.contains("lucky") || !data["lucky"].is_number_integer())
      throw sdk::invalid_argument("two_turn_count: data needs \"input_ids\" (non-empty int array) and \"lucky\" (int)");
    std::vector<int32_t> context = data["input_ids"].get<std::vector<int32_t>>();
    const int32_t lucky = data["lucky"].get<int32_t>();
    double total = 0;
    for (int turn = 0; turn < 2; ++turn) {
      sdk::Completion c = episode.generate(context, sampling_);
      size_t hits = 0;
      for (int32_t t : c.output_ids) hits += t == lucky;
      const double reward = c.output_ids.empty() ? 0.0 : static_cast<double>(hits) / c.output_ids.size();
      episode.set_reward(c.id, reward);
      total += reward;
      context.insert(context.end(), c.output_ids.begin(), c.output_ids.end());  // the next turn sees this one
    }
    // No "reward" key: the per-turn rewards above are the episode's rewards.
    return json{{"total", total}}.dump();
  }

 private:
  sdk::Sampling sampling_;
};

AREAL_EXPORT_WORKFLOW(TwoTurnCount)
