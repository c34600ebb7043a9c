// The token-level record of one session's model calls.
//
// Each call (an "interaction") keeps its input messages, the exact prompt
// ids, the sampled ids with their behaviour logprobs and policy versions,
// the assistant message returned, and its reward. Parents are found at
// insertion by message prefix (as AReaL does): a call whose messages start
// with an earlier call's messages + reply continues that conversation.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::proxy {

using Json = nlohmann::ordered_json;

struct Interaction {
  std::string id;                // "chatcmpl-..." / "resp-..." / "msg_..."
  Json messages;                 // input messages, null-valued keys dropped
  std::optional<Json> output;    // the assistant message(s) returned; empty while in flight
  int parent = -1;               // index of the parent interaction, -1 for a conversation root
  bool concat = false;           // verified: prompt_ids extend the parent's prompt + output tokens
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::vector<float> output_logprobs;
  std::vector<int64_t> output_versions;
  std::string finish_reason;
  bool failed = false;           // the backend failed: no output; never rewarded, discounted or exported
  std::optional<double> reward;  // as set by the client
  double discounted_reward = 0;  // after apply_discount
  bool complete() const { return output.has_value(); }
};

// One exported training row (docs/http-api.md "Export format").
struct TrajectoryRow {
  std::string interaction_id;
  std::vector<int32_t> input_ids;
  std::vector<int32_t> loss_mask;
  std::vector<float> logprobs;
  std::vector<int64_t> versions;  // -1 on prompt tokens
  double reward = 0;
  size_t turns = 1;               // assistant turns in the row (concat rows: the chain length)
};

enum class ExportStyle { kIndividual, kConcat };
ExportStyle export_style_from(const std::string& name);  // throws INVALID_ARGUMENT

class InteractionCache {
 public:
  // Records a call at arrival and resolves its parent. Returns its index.
  // Throws ALREADY_EXISTS for a duplicate id.
  size_t insert(const std::string& id, Json messages);

  // The interaction whose messages + reply are the longest prefix of
  // `messages` (null keys dropped), or -1. Used before insert to build a
  // concat prompt from the parent's tokens.
  int find_parent(const Json& messages) const;

  // Completes a call with what was sampled. With `concat`, the call joins its
  // parent's export row only if prompt_ids start with the parent's prompt +
  // output ids (checked here); otherwise both keep rows of their own.
  void complete(size_t index, Json output, std::vector<int32_t> prompt_ids, std::vector<int32_t> output_ids,
                std::vector<float> logprobs, std::vector<int64_t> versions, std::string finish_reason, bool concat);

  // Marks a call whose generation failed (the client got an error): it keeps
  // its place but takes no reward and yields no row, so nothing half-made is
  // trained on and a reward for "the last call" reaches the last real one
  // (a reward already set on it moves to the last earlier call that answered,
  // unless that call has one).
  void fail(size_t index);

  // Sets the reward of `id`, or of the last call that did not fail when id
  // is empty. Throws NOT_FOUND / FAILED_PRECONDITION (no interactions, or
  // the call failed).
  void set_reward(const std::string& id, double reward);

  // Returns-to-go along each conversation: a call's discounted reward is its
  // own reward (0 if unset) plus gamma times that of its latest child. For a
  // single linear conversation this is AReaL's formula; side calls and other
  // conversations in the session do not leak rewards into each other.
  void apply_discount(double gamma);

  // Rows for training. Incomplete (in-flight) calls are skipped and counted.
  // individual: one row per complete call. concat: one row per leaf holding
  // the whole chain, every assistant turn in the loss mask.
  std::vector<TrajectoryRow> export_rows(ExportStyle style, size_t* skipped_incomplete = nullptr) const;

  size_t size() const;
  std::string last_id() const;
  int index_of(const std::string& id) const;  // -1 if absent
  Interaction get(size_t index) const;

  // Drops null-valued keys recursively (pydantic exclude_none), the form
  // messages are compared and stored in.
  static Json normalize(const Json& v);

 private:
  int find_parent_locked(const Json& messages) const;
  TrajectoryRow row_of(size_t index, bool with_chain) const;

  mutable std::mutex mutex_;
  std::vector<Interaction> items_;
};

}  // namespace areal::proxy
