// What the recorder writes ahead to durable storage, and what it reads back
// after a restart. The gateway's sessions and their calls (Recorder) are
// journaled here before a client sees its answer; state_db.hpp is the
// SQLite implementation. An interface so that the recorder itself carries
// no database dependency (episodes and unit tests record in memory only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/plugin_host/error.hpp"
#include "core/recorder/recorder.hpp"

namespace areal::recorder {

// A write that could not be committed (disk full, state dir gone or
// unwritable). The change it carried was undone in memory; the gateway
// answers 503 and the client may retry.
class StateUnavailable : public Error {
 public:
  explicit StateUnavailable(const std::string& message) : Error(AREAL_CODE_UNAVAILABLE, message) {}
};

// A session as journaled. state: "active", "ended", "taken" (handed to the
// trainer; delivered again after a restart), or "trained" (the trainer
// trained it in the steps of checkpoint `trained_step`, which is being
// written: forgotten once that checkpoint is committed, delivered again if
// the run resumes from an earlier one).
struct SessionRecord {
  std::string id, task_id, group_id, api_key;
  std::string state = "active";
  std::string end_reason;
  int64_t trained_step = -1;
};

struct RecoveredSession {
  SessionRecord session;
  std::vector<Interaction> calls;  // by index; calls in flight at the crash come back failed
  bool was_taken = false;          // handed to the trainer before the crash, never marked trained: first in line again
};

struct RecoveredState {
  std::vector<RecoveredSession> sessions;  // in start order
  std::optional<int64_t> capacity;         // the last journaled capacity, if any
  size_t failed_in_flight = 0;             // calls that were in flight at the crash
};

class Journal {
 public:
  using Ticket = uint64_t;
  virtual ~Journal() = default;

  // Writes are queued in call order and committed in batches by one
  // writer; wait(ticket) returns once the batch holding it is committed,
  // or throws StateUnavailable if that commit failed.
  virtual Ticket write_call(const std::string& session_id, size_t index, const Interaction& call) = 0;
  virtual Ticket write_reward(const std::string& session_id, size_t index, std::optional<double> reward) = 0;
  // Sessions (inserted or their state updated) and, when given, the
  // capacity, in one transaction: a refresh ends the old session and starts
  // the new one atomically.
  virtual Ticket write_sessions(std::vector<SessionRecord> sessions, std::optional<int64_t> capacity) = 0;
  virtual Ticket delete_sessions(std::vector<std::string> session_ids) = 0;  // with their calls
  // Taken sessions -> trained for checkpoint `step`.
  virtual Ticket mark_trained(std::vector<std::string> session_ids, int64_t step) = 0;
  // Deletes the sessions trained for checkpoints <= step; those trained for
  // a later one become ended again.
  virtual Ticket commit_checkpoint(int64_t step) = 0;
  virtual Ticket write_capacity(int64_t capacity) = 0;
  virtual void wait(Ticket ticket) = 0;
};

}  // namespace areal::recorder
