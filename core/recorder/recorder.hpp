// The recorder: the token-level record of every model call areal trains on,
// one per gateway session and one per workflow episode.
//
// Each call (an "interaction") keeps its input messages, the exact prompt
// ids, the sampled ids with their behaviour log-probs and policy versions,
// the reply, and its reward. Gateway calls find their parent at insertion
// by message prefix (as AReaL does): a call whose messages start with an
// earlier call's messages + reply continues that conversation. A workflow's
// api->generate calls form one linear conversation in call order. Rewards
// flow back along conversations by one rule (returns()), and export_rows()
// turns the record into TrajectoryRows.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/recorder/expert_routing.hpp"
#include "core/recorder/trajectory.hpp"

namespace areal::recorder {

class Journal;

using Json = nlohmann::ordered_json;

struct Interaction {
  std::string id;                // the id the client got: "chatcmpl-..." ("-<i>" for choice i > 0) / "resp_..." / "msg_..."; "<episode>-c<n>"
  Json messages;                 // input messages, null-valued keys dropped (null for generate calls)
  std::optional<Json> output;    // the reply (null for generate calls); empty while in flight
  int parent = -1;               // index of the parent interaction, -1 for a conversation root
  bool concat = false;           // verified: prompt_ids extend the parent's prompt + output tokens
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> output_ids;
  std::vector<float> output_logprobs;
  std::vector<int64_t> output_versions;
  std::string finish_reason;
  ExpertRouting routing;         // MoE: the experts of every position but the last; empty if not recorded
  bool failed = false;           // the backend failed: no output; never rewarded, discounted or exported
  std::optional<double> reward;  // as set by the client or the workflow
  bool complete() const { return output.has_value(); }
};

// A call or reward for a session that was exported (handed to the trainer
// or to /export_trajectories) after the request was let in: recording it
// would answer the client for something nobody receives. The gateway
// answers 410, as for any ended session.
class SessionClosed : public Error {
 public:
  explicit SessionClosed(const std::string& message) : Error(AREAL_CODE_FAILED_PRECONDITION, message) {}
};

class Recorder {
 public:
  // Journals every change to `journal` under `session_id` (nullptr: memory
  // only). A call's completion and a reward are committed before complete()
  // and set_reward() return; if the commit fails they are undone and
  // StateUnavailable is thrown. Set before the record is shared.
  void journal_to(Journal* journal, std::string session_id);
  // Replaces the record with calls read back from a journal.
  void restore(std::vector<Interaction> calls);

  // Records a gateway call at arrival and resolves its parent by messages.
  // Returns its index. Throws ALREADY_EXISTS for a duplicate id.
  size_t insert(const std::string& id, Json messages);

  // Records a call that continues the previous one (a workflow's
  // api->generate calls: the episode is one linear conversation), with the
  // id "<id_prefix>-c<index>". Returns its index.
  size_t insert_next_turn(const std::string& id_prefix);

  // The interaction whose messages + reply are the longest prefix of
  // `messages` (null keys dropped), or -1. Used before insert to build a
  // concat prompt from the parent's tokens.
  int find_parent(const Json& messages) const;

  // Completes a call with what was sampled. With `concat`, the call joins its
  // parent's export row only if prompt_ids start with the parent's prompt +
  // output ids (checked here); otherwise both keep rows of their own.
  // `routing`, when recorded, covers prompt + output - 1 positions
  // (INTERNAL otherwise). Returns the stored interaction: its address and
  // token fields never change afterwards (the episode API lends them to
  // workflows).
  const Interaction& complete(size_t index, Json output, std::vector<int32_t> prompt_ids, std::vector<int32_t> output_ids,
                              std::vector<float> logprobs, std::vector<int64_t> versions, std::string finish_reason,
                              bool concat, ExpertRouting routing = {});

  // Marks a call whose generation failed (the client got an error): it keeps
  // its place but takes no reward and yields no row, so nothing half-made is
  // trained on and a reward for "the last call" reaches the last real one
  // (a reward already set on it moves to the last earlier call that answered,
  // unless that call has one).
  void fail(size_t index);

  // Sets (replaces) the reward of `id`, or of the last call that did not
  // fail when id is empty. Throws NOT_FOUND / FAILED_PRECONDITION (no
  // interactions, or the call failed), and INVALID_ARGUMENT, changing
  // nothing, for a reward that is not finite or that would take the
  // session's reward magnitude past kMaxRewardMagnitude.
  void set_reward(const std::string& id, double reward);

  // The most the magnitudes of a record's rewards may add up to: half the
  // largest double. Every return-to-go (returns(), what export writes) is
  // bounded by that sum for any discount in [0, 1], whatever the calls'
  // parents, and the headroom absorbs rounding, so no export carries an
  // inf (which JSON would write as null).
  static constexpr double kMaxRewardMagnitude = std::numeric_limits<double>::max() / 2;

  // Returns-to-go along each conversation, by call index: a call's return
  // is its own reward (0 if unset) plus gamma times that of its latest
  // child. For one linear conversation this is AReaL's formula; side calls
  // and other conversations do not leak rewards into each other. Failed
  // calls get 0 and pass nothing back.
  std::vector<double> returns(double gamma) const;

  // Rows for training, rewards discounted by `gamma`. Incomplete (in-flight)
  // calls are skipped and counted. individual: one row per complete call.
  // concat: one row per leaf holding the whole chain, every assistant turn
  // in the loss mask. A row's routing gives each position the experts of
  // the first call of its chain that computed it (each sampled token's
  // predecessor is then routed as when that token was sampled); positions
  // no call recorded are kNotRecorded; no recorded call: empty.
  std::vector<TrajectoryRow> export_rows(ExportStyle style, double gamma, size_t* skipped_incomplete = nullptr) const;

  // The record was exported: from now on insert(), insert_next_turn() and
  // set_reward() throw SessionClosed (a call in flight may still complete;
  // the export counted it as skipped_incomplete).
  void close();

  size_t size() const;
  size_t completed() const;             // calls that answered and did not fail: the rows an export holds now
  size_t unrewarded() const;            // complete calls without a reward
  size_t in_flight() const;             // calls let in that have neither answered nor failed
  // The id of the last call that answered (and did not fail), if any: where
  // a session's final reward goes, even while a side call (a title, a
  // summary) is still in flight.
  std::optional<std::string> last_answered_id() const;
  std::vector<double> rewards() const;  // the rewards that were set, in call order
  std::string last_id() const;
  int index_of(const std::string& id) const;  // -1 if absent
  Interaction get(size_t index) const;

  // Drops null-valued keys recursively (pydantic exclude_none), the form
  // messages are compared and stored in.
  static Json normalize(const Json& v);

 private:
  int find_parent_locked(const Json& messages) const;
  size_t insert_locked(const std::string& id, Json messages, int parent);
  std::vector<double> returns_locked(double gamma) const;
  size_t reward_target_locked(const std::string& id) const;
  const Interaction& complete_locked(size_t index, Json output, std::vector<int32_t> prompt_ids, std::vector<int32_t> output_ids,
                                     std::vector<float> logprobs, std::vector<int64_t> versions, std::string finish_reason, bool concat,
                                     ExpertRouting routing);
  TrajectoryRow row_of(size_t index, bool with_chain, const std::vector<double>& returns) const;
  // Extends a row's routing to `positions` with what `call` recorded past it.
  static void extend_routing(ExpertRouting& row, const ExpertRouting& call, size_t positions);

  uint64_t journal_call_locked(size_t index) const;  // the journal's ticket (0: no journal)

  Journal* journal_ = nullptr;
  std::string journal_id_;
  mutable std::mutex mutex_;
  std::deque<Interaction> items_;  // deque: completed interactions keep their address
  // Per completed call, a hash of each message of its history in comparable
  // form, made once: finding a call's parent is then O(messages) hashing and
  // integer compares, not a JSON round trip of every earlier history (a
  // 300-turn agent session re-serialised megabytes per call, under this lock).
  mutable std::vector<std::vector<size_t>> history_hashes_;
  const std::vector<size_t>& history_hashes_locked(size_t index) const;
  bool closed_ = false;            // close()
};

}  // namespace areal::recorder
