// What the workflows that run an agent outside the host (subproc,
// agent_pool) hand it: the episode's gateway session as OpenAI and Anthropic
// base URLs and key, and the extra environment from their config.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"

namespace areal::workflows {

struct AgentSession {
  std::string base_url;            // OpenAI style, ends in /v1
  std::string api_key;             // the session key
  std::string anthropic_base_url;  // the same server without /v1 (Anthropic SDKs add it)
};

// The episode's session; FAILED_PRECONDITION when there is none.
inline AgentSession agent_session(sdk::Episode& episode, const std::string& plugin) {
  AgentSession s{std::string(episode.base_url()), std::string(episode.api_key()), {}};
  if (s.base_url.empty() || s.api_key.empty())
    throw sdk::Error(AREAL_CODE_FAILED_PRECONDITION, plugin + ": the episode has no gateway session (configure the gateway plugin)");
  s.anthropic_base_url = s.base_url;
  if (s.anthropic_base_url.size() >= 3 && s.anthropic_base_url.compare(s.anthropic_base_url.size() - 3, 3, "/v1") == 0)
    s.anthropic_base_url.resize(s.anthropic_base_url.size() - 3);
  return s;
}

// The environment variables an agent reads (AReaL's subproc mode names).
inline std::vector<std::string> session_env(const AgentSession& s) {
  return {"OPENAI_BASE_URL=" + s.base_url, "OPENAI_API_KEY=" + s.api_key, "ANTHROPIC_BASE_URL=" + s.anthropic_base_url,
          "ANTHROPIC_API_KEY=" + s.api_key};
}

// The config's "env" object as NAME=value strings (string values only).
inline std::vector<std::string> config_env(const nlohmann::json& config, const std::string& plugin) {
  std::vector<std::string> env;
  for (const auto& [k, v] : config.value("env", nlohmann::json::object()).items()) {
    if (!v.is_string()) throw sdk::invalid_argument(plugin + ": env." + k + " must be a string");
    env.push_back(k + "=" + v.get<std::string>());
  }
  return env;
}

}  // namespace areal::workflows
