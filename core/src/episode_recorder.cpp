#include "areal/core/episode_recorder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "areal/core/error.hpp"
#include "areal/core/generation.hpp"

namespace areal {

EpisodeRecorder::EpisodeRecorder(std::string episode_id, const areal_inference_vtable* vtable, void* inference_self,
                                 uint64_t seed_base)
    : episode_id_(std::move(episode_id)), vtable_(vtable), inference_self_(inference_self), seed_base_(seed_base) {
  api_.struct_size = AREAL_OFFSET_OF_END(areal_episode_api, chat);
  api_.ctx = this;
  api_.generate = &EpisodeRecorder::generate;
  api_.set_reward = &EpisodeRecorder::set_reward;
  api_.chat = &EpisodeRecorder::chat;
}

void EpisodeRecorder::attach_session(const areal_gateway_vtable* gateway, void* gateway_self, std::string session_id) {
  gateway_ = gateway;
  gateway_self_ = gateway_self;
  session_id_ = std::move(session_id);
}

areal_status* EpisodeRecorder::chat(void* ctx, areal_str request_json, const areal_writer* out) {
  auto* self = static_cast<EpisodeRecorder*>(ctx);
  try {
    if (out == nullptr) return make_status(AREAL_CODE_INVALID_ARGUMENT, "chat: out is required");
    if (self->gateway_ == nullptr || self->gateway_->control == nullptr)
      return make_status(AREAL_CODE_UNSUPPORTED, "chat: this run has no gateway with in-process control (configure the gateway plugin)");
    nlohmann::json request;
    try {
      request = nlohmann::json::parse(std::string_view(request_json.data == nullptr ? "" : request_json.data, request_json.size));
    } catch (const std::exception& e) {
      return make_status(AREAL_CODE_INVALID_ARGUMENT, std::string("chat: request is not JSON: ") + e.what());
    }
    const std::string op = nlohmann::json{{"op", "chat"}, {"session_id", self->session_id_}, {"request", std::move(request)}}.dump();
    return self->gateway_->control(self->gateway_self_, areal_str{op.data(), op.size()}, out);
  } catch (const std::exception& e) {
    return make_status(AREAL_CODE_INTERNAL, e.what());
  }
}

areal_status* EpisodeRecorder::generate(void* ctx, const areal_gen_request* request, const areal_completion** out) {
  auto* self = static_cast<EpisodeRecorder*>(ctx);
  try {
    if (request == nullptr || out == nullptr) return make_status(AREAL_CODE_INVALID_ARGUMENT, "generate: request and out are required");
    if (request->sampling == nullptr) return make_status(AREAL_CODE_INVALID_ARGUMENT, "generate: sampling params are required");
    areal_gen_request req = *request;
    req.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, sampling);
    req.request_id = next_request_id();  // the host owns request ids
    areal_sampling_params sampling{};
    std::memcpy(&sampling, request->sampling,
                std::min<size_t>(request->sampling->struct_size, sizeof sampling));
    sampling.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
    if (!sampling.has_seed) {
      // Reproducible runs: derive a seed from the episode's base seed.
      std::lock_guard<std::mutex> lock(self->mutex_);
      sampling.seed = self->seed_base_ * 1000003ULL + self->completions_.size();
      sampling.has_seed = 1;
    }
    req.sampling = &sampling;
    GenerationResult r = generate_blocking(*self->vtable_, self->inference_self_, req, std::chrono::hours(24));
    std::lock_guard<std::mutex> lock(self->mutex_);
    RecordedCompletion& c = self->completions_.emplace_back();
    c.id = self->episode_id_ + "-c" + std::to_string(self->completions_.size() - 1);
    c.input_ids.assign(request->input_ids, request->input_ids + request->input_ids_count);
    c.output_ids = std::move(r.output_ids);
    c.logprobs = std::move(r.logprobs);
    c.versions = std::move(r.versions);
    c.finish_reason = r.finish_reason;
    c.view.struct_size = AREAL_OFFSET_OF_END(areal_completion, finish_reason);
    c.view.completion_id = areal_str{c.id.data(), c.id.size()};
    c.view.output_ids = c.output_ids.data();
    c.view.logprobs = c.logprobs.data();
    c.view.versions = c.versions.data();
    c.view.count = c.output_ids.size();
    c.view.finish_reason = c.finish_reason;
    *out = &c.view;
    return nullptr;
  } catch (const Error& e) {
    return make_status(e.code(), e.what());
  } catch (const std::exception& e) {
    return make_status(AREAL_CODE_INTERNAL, e.what());
  }
}

areal_status* EpisodeRecorder::set_reward(void* ctx, areal_str completion_id, double reward) {
  auto* self = static_cast<EpisodeRecorder*>(ctx);
  try {
    if (!std::isfinite(reward)) return make_status(AREAL_CODE_INVALID_ARGUMENT, "reward must be a finite number");
    std::string id(completion_id.data == nullptr ? "" : completion_id.data, completion_id.size);
    std::lock_guard<std::mutex> lock(self->mutex_);
    if (self->completions_.empty())
      return make_status(AREAL_CODE_FAILED_PRECONDITION, "set_reward: the episode has no completion yet");
    if (id.empty()) {
      self->completions_.back().reward = reward;
      return nullptr;
    }
    for (auto& c : self->completions_)
      if (c.id == id) {
        c.reward = reward;
        return nullptr;
      }
    return make_status(AREAL_CODE_NOT_FOUND, "set_reward: no completion '" + id + "' in episode " + self->episode_id_);
  } catch (const std::exception& e) {
    return make_status(AREAL_CODE_INTERNAL, e.what());
  }
}

std::optional<double> EpisodeRecorder::apply_result(const nlohmann::json& result, bool other_calls) {
  if (!result.is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "workflow result must be a JSON object, got " + result.dump());
  if (!result.contains("reward")) return std::nullopt;
  const auto& r = result["reward"];
  if (!r.is_number() || !std::isfinite(r.get<double>()))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "workflow result 'reward' must be a finite number, got " + r.dump());
  std::lock_guard<std::mutex> lock(mutex_);
  if (completions_.empty() && !other_calls)
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "workflow returned a reward but made no completion");
  if (!completions_.empty()) completions_.back().reward = r.get<double>();
  return r.get<double>();
}

nlohmann::json EpisodeRecorder::to_json() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json completions = nlohmann::json::array();
  for (const auto& c : completions_) {
    completions.push_back({{"id", c.id},
                           {"input_ids", c.input_ids},
                           {"output_ids", c.output_ids},
                           {"logprobs", c.logprobs},
                           {"versions", c.versions},
                           {"finish_reason", c.finish_reason},
                           {"reward", c.reward ? nlohmann::json(*c.reward) : nlohmann::json(nullptr)}});
  }
  return {{"episode_id", episode_id_}, {"completions", completions}};
}

size_t EpisodeRecorder::completion_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completions_.size();
}

std::vector<RecordedCompletion> EpisodeRecorder::completions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<RecordedCompletion> out(completions_.begin(), completions_.end());
  for (auto& c : out) c.view = areal_completion{};
  return out;
}

std::vector<double> EpisodeRecorder::rewards() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<double> out;
  for (const auto& c : completions_)
    if (c.reward) out.push_back(*c.reward);
  return out;
}

}  // namespace areal
