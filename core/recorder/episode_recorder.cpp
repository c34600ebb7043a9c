#include "core/recorder/episode_recorder.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <chrono>
#include <exception>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/generation.hpp"

namespace areal {

EpisodeRecorder::EpisodeRecorder(std::string episode_id, const areal_inference_vtable* vtable, void* inference_self,
                                 uint64_t seed_base, bool record_routing)
    : episode_id_(std::move(episode_id)), vtable_(vtable), inference_self_(inference_self), seed_base_(seed_base), record_routing_(record_routing) {
  api_.struct_size = AREAL_OFFSET_OF_END(areal_episode_api, chat);
  api_.ctx = this;
  api_.generate = &EpisodeRecorder::generate;
  api_.set_reward = &EpisodeRecorder::set_reward;
  api_.chat = &EpisodeRecorder::chat;
}

void EpisodeRecorder::attach_session(const GatewaySessions* gateway, std::string session_id) {
  gateway_ = gateway;
  session_id_ = std::move(session_id);
}

areal_status* EpisodeRecorder::chat(void* ctx, areal_str request_json, const areal_writer* out) {
  auto* self = static_cast<EpisodeRecorder*>(ctx);
  try {
    if (out == nullptr) return make_status(AREAL_CODE_INVALID_ARGUMENT, "chat: out is required");
    if (self->gateway_ == nullptr)
      return make_status(AREAL_CODE_UNSUPPORTED, "chat: this run has no gateway with session slots (configure the gateway plugin)");
    return self->gateway_->chat(self->session_id_, request_json, out);
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
    if (self->record_routing_) {
      req.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, record_routing);
      req.adapter = areal_str{nullptr, 0};
      req.record_routing = 1;
    }
    req.request_id = next_request_id();  // the host owns request ids
    areal_sampling_params sampling{};
    // What the workflow's ABI has of it (penalties, logit_bias and structured
    // output since 1.3), and no more than this host knows.
    const size_t known = std::min<size_t>(request->sampling->struct_size, sizeof sampling);
    std::memcpy(&sampling, request->sampling, known);
    sampling.struct_size = static_cast<uint32_t>(known);
    // The call's place in the episode: its id, and its seed when the workflow gave none.
    const size_t index = self->record_.insert_next_turn(self->episode_id_);
    if (!sampling.has_seed) {
      sampling.seed = self->seed_base_ * 1000003ULL + index;  // reproducible runs
      sampling.has_seed = 1;
    }
    req.sampling = &sampling;
    GenerationResult r;
    try {
      r = generate_blocking(*self->vtable_, self->inference_self_, req, std::chrono::hours(24));
    } catch (...) {
      self->record_.fail(index);  // keeps its place; never trained on
      throw;
    }
    recorder::ExpertRouting routing;
    if (r.on_routing_calls == 1 && r.routing_positions + 1 == request->input_ids_count + r.output_ids.size()) {
      routing.moe_layers = r.routing_layers, routing.top_k = r.routing_top_k, routing.num_experts = r.routing_experts;
      routing.experts = std::move(r.routing);
      check_routing(routing, "the backend's routing");
    }
    const recorder::Interaction& c = self->record_.complete(
        index, nlohmann::ordered_json(), std::vector<int32_t>(request->input_ids, request->input_ids + request->input_ids_count),
        std::move(r.output_ids), std::move(r.logprobs), std::move(r.versions), finish_reason_name(r.finish_reason), false,
        std::move(routing));
    std::lock_guard<std::mutex> lock(self->views_mutex_);
    areal_completion& v = self->views_.emplace_back();
    v.struct_size = AREAL_OFFSET_OF_END(areal_completion, finish_reason);
    v.completion_id = areal_str{c.id.data(), c.id.size()};
    v.output_ids = c.output_ids.data();
    v.logprobs = c.output_logprobs.data();
    v.versions = c.output_versions.data();
    v.count = c.output_ids.size();
    v.finish_reason = r.finish_reason;
    *out = &v;
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
    if (self->record_.size() == 0) return make_status(AREAL_CODE_FAILED_PRECONDITION, "set_reward: the episode has no completion yet");
    const std::string id(completion_id.data == nullptr ? "" : completion_id.data, completion_id.size);
    self->record_.set_reward(id, reward);
    return nullptr;
  } catch (const Error& e) {
    return make_status(e.code(), e.what());
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
  if (record_.size() == 0) {
    if (!other_calls) throw Error(AREAL_CODE_FAILED_PRECONDITION, "workflow returned a reward but made no completion");
  } else {
    record_.set_reward("", r.get<double>());
  }
  return r.get<double>();
}

nlohmann::json EpisodeRecorder::to_json() const {
  nlohmann::json completions = nlohmann::json::array();
  for (size_t i = 0; i < record_.size(); ++i) {
    const recorder::Interaction c = record_.get(i);
    if (!c.complete()) continue;  // failed calls have no output; the episode's error says why
    completions.push_back({{"id", c.id},
                           {"input_ids", c.prompt_ids},
                           {"output_ids", c.output_ids},
                           {"logprobs", c.output_logprobs},
                           {"versions", c.output_versions},
                           {"finish_reason", c.finish_reason},
                           {"reward", c.reward ? nlohmann::json(*c.reward) : nlohmann::json(nullptr)}});
  }
  return {{"episode_id", episode_id_}, {"completions", completions}};
}

}  // namespace areal
