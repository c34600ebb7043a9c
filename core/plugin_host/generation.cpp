#include "core/plugin_host/generation.hpp"

#include <atomic>
#include <memory>

#include "core/plugin_host/error.hpp"

namespace areal {

CollectingSink::CollectingSink() {
  sink_.struct_size = AREAL_OFFSET_OF_END(areal_gen_sink, on_routing);
  sink_.ctx = this;
  sink_.on_tokens = &CollectingSink::on_tokens;
  sink_.on_done = &CollectingSink::on_done;
  sink_.on_routing = &CollectingSink::on_routing;
}

void CollectingSink::on_routing(void* ctx, const areal_routing* routing) {
  auto* self = static_cast<CollectingSink*>(ctx);
  std::lock_guard<std::mutex> lock(self->mutex_);
  auto& r = self->result_;
  ++r.on_routing_calls;
  if (routing == nullptr || routing->struct_size < AREAL_OFFSET_OF_END(areal_routing, experts)) return;
  r.routing_layers = routing->moe_layers, r.routing_top_k = routing->top_k, r.routing_experts = routing->num_experts;
  r.routing_positions = routing->positions;
  const size_t n = routing->positions * routing->moe_layers * routing->top_k;
  if (routing->experts != nullptr) r.routing.assign(routing->experts, routing->experts + n);
}

areal_status* CollectingSink::on_tokens(void* ctx, const areal_gen_chunk* chunk) {
  auto* self = static_cast<CollectingSink*>(ctx);
  std::lock_guard<std::mutex> lock(self->mutex_);
  auto& r = self->result_;
  if (chunk != nullptr && chunk->count > 0) {
    r.output_ids.insert(r.output_ids.end(), chunk->token_ids, chunk->token_ids + chunk->count);
    r.logprobs.insert(r.logprobs.end(), chunk->logprobs, chunk->logprobs + chunk->count);
    r.versions.insert(r.versions.end(), chunk->versions, chunk->versions + chunk->count);
  }
  ++r.chunks;
  if (r.chunks >= self->fail_after_) return make_status(AREAL_CODE_CANCELLED, "consumer asked to stop");
  return nullptr;
}

void CollectingSink::on_done(void* ctx, int32_t reason, const areal_status* error) {
  auto* self = static_cast<CollectingSink*>(ctx);
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    auto& r = self->result_;
    ++r.on_done_calls;
    r.finish_reason = reason;
    if (error != nullptr) {
      r.error_code = status_code(error);
      r.error_message = std::string(status_message(error));
    }
    // Under the lock: once the waiter sees on_done_calls it may free this
    // sink, so nothing of it may be touched after the lock is released.
    self->done_cv_.notify_all();
  }
}

bool CollectingSink::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return done_cv_.wait_for(lock, timeout, [&] { return result_.on_done_calls > 0; });
}

GenerationResult CollectingSink::result() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return result_;
}

const char* finish_reason_name(int32_t reason) {
  switch (reason) {
    case AREAL_FINISH_STOP: return "stop";
    case AREAL_FINISH_LENGTH: return "length";
    case AREAL_FINISH_ABORT: return "abort";
    case AREAL_FINISH_ERROR: return "error";
    default: return "unknown";
  }
}

uint64_t next_request_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

GenerationResult generate_blocking(const areal_inference_vtable& vt, void* self, const areal_gen_request& request,
                                   std::chrono::milliseconds timeout) {
  auto sink = std::make_unique<CollectingSink>();
  throw_if_status(vt.submit(self, &request, sink->sink()), "inference submit");
  if (!sink->wait(timeout)) {
    free_status(vt.abort(self, request.request_id));
    // The plugin may still write into the sink: wait for its on_done after
    // the abort, and when that never comes (a plugin that lost the request)
    // leave the sink allocated rather than free it under the plugin.
    const bool ended = sink->wait(std::chrono::seconds(60));
    if (!ended) (void)sink.release();
    throw Error(AREAL_CODE_DEADLINE_EXCEEDED, "generation timed out after " + std::to_string(timeout.count()) + " ms" +
                                                  (ended ? "" : ", and the backend did not end it after an abort"));
  }
  GenerationResult r = sink->result();
  if (r.finish_reason == AREAL_FINISH_ERROR)
    throw Error(r.error_code ? r.error_code : AREAL_CODE_UNAVAILABLE, "inference backend failed: " + r.error_message);
  return r;
}

}  // namespace areal
