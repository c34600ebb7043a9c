// rlvr_math: reinforcement learning with a verifiable reward on math
// questions, as an inline workflow. It talks OpenAI chat to the gateway in
// process (episode.chat), so every call is templated, tokenized, recorded
// and trained exactly as an HTTP agent's would be, without a socket.
//
// Single turn (max_turns 1): ask, verify, reward 1 or 0. Multi-turn
// (max_turns > 1): after a wrong answer the workflow says so and asks again,
// echoing the assistant message back as returned, so the gateway links the
// calls into one conversation; the reward (1 if a turn got it right) goes on
// the last call and flows back to earlier calls by rollout.openai.turn_discount.
//
// Data item: {"question": str, "answer": str or number}
// Result:    {"reward": r, "turns": n, "answer": extracted final answer or null}
#include <string>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "math_verifier.hpp"

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;

class RlvrMath {
 public:
  static constexpr const char* kName = "rlvr_math";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription =
      "RLVR on math questions through the gateway in process: chat, verify the final answer, reward 1/0; "
      "optional retries with feedback (multi-turn).";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "max_turns": {"type": "integer", "default": 1, "minimum": 1, "maximum": 16, "doc": "Attempts per question; after a wrong answer the workflow gives feedback and asks again."},
    "max_tokens": {"type": "integer", "default": 512, "minimum": 1, "doc": "Completion budget per turn."},
    "temperature": {"type": "number", "default": 1.0, "minimum": 0, "doc": "Sampling temperature."},
    "top_p": {"type": "number", "default": 1.0, "minimum": 0, "maximum": 1, "doc": "Nucleus sampling threshold."},
    "system_prompt": {"type": "string", "default": "", "doc": "System message; empty sends none."},
    "instruction": {"type": "string", "default": " Give the final answer as \\boxed{...}.", "doc": "Appended to each question."},
    "feedback": {"type": "string", "default": "That is not correct. Check your work and give the final answer again.", "doc": "The user message after a wrong answer (multi-turn)."},
    "chat_template_kwargs": {"type": "object", "default": {}, "doc": "Passed to the chat template, e.g. {\"enable_thinking\": false}."}
  }})";
  static constexpr const char* kSampleData = R"({"question": "What is 2 + 3?", "answer": "5"})";

  explicit RlvrMath(const sdk::CreateContext& ctx) : config_(sdk::parse_object(ctx.config_json(), "rlvr_math: config")) {}

  std::string run_episode(sdk::Episode& episode) {
    const json data = sdk::parse_object(episode.data_json(), "rlvr_math: data item");
    if (!data.contains("question") || !data["question"].is_string())
      throw sdk::invalid_argument("rlvr_math: data item needs a string 'question'");
    if (!data.contains("answer") || !(data["answer"].is_string() || data["answer"].is_number()))
      throw sdk::invalid_argument("rlvr_math: data item needs 'answer' (a string or a number)");
    const std::string reference = data["answer"].is_string() ? data["answer"].get<std::string>() : data["answer"].dump();
    json messages = json::array();
    if (!config_.value("system_prompt", std::string()).empty())
      messages.push_back({{"role", "system"}, {"content", config_["system_prompt"]}});
    messages.push_back({{"role", "user"}, {"content", data["question"].get<std::string>() + config_.value("instruction", std::string())}});
    const int max_turns = config_.value("max_turns", 1);
    double reward = 0;
    int turns = 0;
    json final_answer = nullptr;
    for (; turns < max_turns && reward == 0; ++turns) {
      if (turns > 0) messages.push_back({{"role", "user"}, {"content", config_.value("feedback", std::string())}});
      json request = {{"model", "default"},
                      {"messages", messages},
                      {"max_tokens", config_.value("max_tokens", 512)},
                      {"temperature", config_.value("temperature", 1.0)},
                      {"top_p", config_.value("top_p", 1.0)}};
      if (!config_.value("chat_template_kwargs", json::object()).empty()) request["chat_template_kwargs"] = config_["chat_template_kwargs"];
      const json response = json::parse(episode.chat(request.dump()));
      const json& message = response.at("choices").at(0).at("message");
      const std::string content = message.value("content", json()).is_string() ? message["content"].get<std::string>() : "";
      const auto answer = areal::workflows::extract_final_answer(content);
      final_answer = answer ? json(*answer) : json(nullptr);
      if (answer && areal::workflows::answers_match(*answer, reference)) reward = 1.0;
      json echoed = message;  // as returned, so the gateway links the next call to this one
      messages.push_back(echoed);
    }
    return json{{"reward", reward}, {"turns", turns}, {"answer", final_answer}}.dump();
  }

 private:
  json config_;
};

}  // namespace

AREAL_EXPORT_WORKFLOW(RlvrMath)
