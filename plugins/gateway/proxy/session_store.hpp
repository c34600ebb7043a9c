// Sessions of the agent proxy: who may call, which calls belong together,
// and when a finished session's trajectory can be exported.
//
// Semantics follow AReaL's proxy (start/end/set_reward/export, capacity as
// the staleness gate behind HTTP 429) and fix its gaps: a fixed key can be
// refreshed (the old session is ended and kept for export, not lost), idle
// sessions are ended and kept rather than dropped, and sessions carry a
// group id (default: the task id) so GRPO groups never mix unrelated tasks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/recorder/journal.hpp"
#include "core/recorder/recorder.hpp"

namespace areal::proxy {

struct Session {
  std::string id;        // "<task_id>-<n>"
  std::string task_id;
  std::string group_id;
  std::string api_key;
  std::chrono::steady_clock::time_point created;
  recorder::Recorder record;  // every call of the session, token by token

  bool finished() const;
  std::string end_reason() const;  // "ended", "refreshed", "expired"; "" while active
  void touch();
  std::chrono::steady_clock::time_point last_access() const;

 private:
  friend class SessionStore;
  recorder::SessionRecord journal_record(const std::string& state) const;  // caller holds mutex_

  mutable std::mutex mutex_;
  bool finished_ = false;
  bool ending_ = false;  // an end is being committed
  std::string end_reason_;
  std::chrono::steady_clock::time_point last_access_;
};

struct SessionStoreConfig {
  std::string admin_key;
  int64_t capacity = -1;         // sessions that may start; -1 = unlimited (no trainer gating)
  double session_timeout_s = 3600;
};

struct StartedSession {
  std::shared_ptr<Session> session;
  std::string ended_session_id;  // set when a refresh ended the key's previous session
};

struct RecoverySummary {
  size_t active = 0, ended = 0, trained = 0, failed_in_flight = 0;
  int64_t capacity = -1;
  int64_t owed_grants = 0;
};

class SessionStore {
 public:
  explicit SessionStore(SessionStoreConfig config);

  // Journals every session, call, reward and capacity change from now on
  // (nullptr: memory only). Set before serving.
  void journal_to(recorder::Journal* journal);

  // Rebuilds the sessions a journal recovered; active ones keep their keys.
  // Capacity: when the trainer grants it (configured capacity 0), each
  // recovered session already holds a slot, so the next grants go to them
  // before new sessions may start (capacity never jumps); otherwise the
  // journaled capacity stands.
  RecoverySummary recover(recorder::RecoveredState state);

  // Constant-time comparison with the admin key.
  bool is_admin(const std::string& token) const;

  // Starts a session (admin call). `api_key`: reuse/refresh that key (its
  // active session, if any, is ended and kept for export); empty: mint one.
  // Errors: RESOURCE_EXHAUSTED (no capacity), INVALID_ARGUMENT (admin key or
  // a key shorter than 8 characters as session key, empty task id).
  StartedSession start(const std::string& task_id, const std::string& api_key, const std::string& group_id);

  // The active session of a key. UNAUTHENTICATED if unknown, CANCELLED-free
  // contract: an ended session is reported as FAILED_PRECONDITION (HTTP 410).
  std::shared_ptr<Session> authorize(const std::string& api_key) const;

  // A session by id (active or ended, until exported); NOT_FOUND otherwise.
  std::shared_ptr<Session> find(const std::string& session_id) const;

  // Ends a session (idempotent errors: FAILED_PRECONDITION if already ended).
  // Returns its calls that answered (Recorder::completed): the calls an
  // export holds, without those that failed or were refused.
  size_t end(const std::shared_ptr<Session>& s, const std::string& reason = "ended");

  // Adds capacity (what the trainer grants per rollout slot); returns it.
  int64_t grant_capacity(int64_t n = 1);
  int64_t capacity() const;

  // Ends sessions idle longer than the timeout; returns their ids.
  std::vector<std::string> expire_idle(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  // Exports and removes a finished session (admin). NOT_FOUND if unknown,
  // FAILED_PRECONDITION (409) if still active.
  recorder::SessionTrajectory export_session(const std::string& session_id, double discount, recorder::ExportStyle style);

  // Waits up to `timeout` for an ended session, then exports and removes it
  // (the trainer's consumer side), the longest-ended first; nullopt on timeout.
  std::optional<recorder::SessionTrajectory> take_finished(std::chrono::milliseconds timeout, double discount, recorder::ExportStyle style);

  // Exactly-once hand-off across restarts (journaled stores; no-ops
  // otherwise). The trainer marks the sessions it took and trained as
  // belonging to the checkpoint it is about to write...
  void mark_trained(const std::vector<std::string>& session_ids, int64_t checkpoint_step);
  // ...and commits it once written: sessions marked for checkpoints <= step
  // are forgotten; those marked for a later one (a run resumed from `step`
  // lost those steps) are ended again and handed out first. Returns how
  // many came back.
  size_t commit_checkpoint(int64_t step);

  std::vector<std::string> finished_session_ids() const;
  size_t active_count() const;

 private:
  // Discounts and exports a session already removed from the maps.
  static recorder::SessionTrajectory export_detached(Session& s, double discount, recorder::ExportStyle style);
  // Removes an ended session from the maps (caller holds mutex_) / puts it back.
  void detach_locked(const std::shared_ptr<Session>& s);
  void reattach(const std::shared_ptr<Session>& s);
  // Waits for a journal write (no-op without a journal).
  void wait(recorder::Journal::Ticket ticket) const;

  SessionStoreConfig config_;
  mutable std::mutex mutex_;
  int64_t capacity_;
  int64_t owed_grants_ = 0;  // grants that go to recovered sessions first
  recorder::Journal* journal_ = nullptr;
  // Taken (journaled) sessions not yet forgotten, by id -> the checkpoint
  // they are marked for (-1: not marked); their ids stay reserved.
  std::map<std::string, int64_t> taken_;
  // The next session index of each task id: an id is never handed out twice
  // in a process's life, even after its session was exported and forgotten.
  std::unordered_map<std::string, size_t> next_index_;
  // Sessions a restart found marked trained, kept until commit_checkpoint()
  // says whether their checkpoint holds them.
  std::map<std::string, std::pair<std::shared_ptr<Session>, int64_t>> recovered_trained_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;  // by id, until exported
  std::map<std::string, std::string> key_to_session_;         // api key -> session id
  // A session ended. One ended session is one take: notify_one when one
  // ends, notify_all when several do at once. The trainer waits with a taker
  // per rollout slot (144 in the quickstart); waking all of them for each
  // session was 14% of the host's CPU samples there.
  std::condition_variable finished_cv_;
  std::deque<std::string> finished_order_;  // ended sessions in the order they ended: take_finished is FIFO (oldest first, none starves)
};

// Whether `token` is `key`, in time that depends on the key's length only.
bool keys_equal(const std::string& key, const std::string& token);

// A fresh random session key: "sk-sess-" + 43 URL-safe characters (256 bits).
std::string mint_session_key();

}  // namespace areal::proxy
