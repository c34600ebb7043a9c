// The recorder's durable state: one SQLite database in WAL mode under the
// gateway's state directory (docs/durability.md describes the format and
// the guarantees). Writes come from any thread, are applied in order by
// one writer thread, and are committed in batches (group commit), so a
// thousand concurrent sessions cost one fsync per batch rather than one
// per request. A second process cannot open a state directory in use.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <cstdint>
#include <optional>

#include "core/recorder/journal.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace areal::recorder {

struct StateDbOptions {
  std::string dir;
  // true: fsync at every commit (synchronous=FULL), committed data survives
  // power loss; false (NORMAL): it survives a crash of the process, the
  // last commits may be lost when the machine loses power.
  bool sync_full = true;
};

class StateDb final : public Journal {
 public:
  // The format this build writes (PRAGMA user_version).
  static constexpr int kFormatVersion = 2;  // 2: calls.routing (MoE)
  static constexpr const char* kFileName = "gateway_state.sqlite3";

  // Opens (or creates) DIR/gateway_state.sqlite3, locks the directory, and
  // recovers: calls in flight at a crash become failed, sessions taken but
  // not yet marked trained become ended again. Throws
  // FAILED_PRECONDITION with the reason when the directory cannot be
  // created or written, is in use by another process, or holds a newer
  // format.
  explicit StateDb(StateDbOptions options);
  ~StateDb() override;
  StateDb(const StateDb&) = delete;
  StateDb& operator=(const StateDb&) = delete;

  // What the previous process left (read once, at open).
  RecoveredState take_recovered() { return std::move(recovered_); }
  const std::string& path() const { return path_; }

  Ticket write_call(const std::string& session_id, size_t index, const Interaction& call) override;
  Ticket write_reward(const std::string& session_id, size_t index, std::optional<double> reward) override;
  Ticket write_sessions(std::vector<SessionRecord> sessions, std::optional<int64_t> capacity) override;
  Ticket delete_sessions(std::vector<std::string> session_ids) override;
  Ticket mark_trained(std::vector<std::string> session_ids, int64_t step) override;
  Ticket commit_checkpoint(int64_t step) override;
  Ticket write_capacity(int64_t capacity) override;
  void wait(Ticket ticket) override;

 private:
  struct Failed {
    Ticket first, last;
    std::string error;
  };
  // A thread blocked in wait(): the writer wakes it alone, once, when the
  // batch holding its ticket is committed. One condition for every waiter
  // woke them all at each commit, most of them to sleep again, each
  // retaking one mutex in turn (a quarter of the online quickstart's
  // context switches).
  struct Waiter {
    Ticket ticket = 0;
    std::mutex mutex;
    std::condition_variable woken;
    bool ready = false;
    std::string error;  // the batch's failure, if it failed
  };
  Ticket enqueue(std::function<void()> apply);
  void writer();
  void exec(const char* sql);
  sqlite3_stmt* prepare(const char* sql);
  void step_done(sqlite3_stmt* stmt);
  std::string error_text() const;
  void create_or_check_schema();
  void recover();
  void move_rewards_of_in_flight_calls();  // recover()'s, inside its transaction
  void put_capacity(int64_t capacity);

  StateDbOptions options_;
  std::string path_;
  int lock_fd_ = -1;
  sqlite3* db_ = nullptr;
  sqlite3_stmt *put_call_ = nullptr, *put_reward_ = nullptr, *put_session_ = nullptr, *del_calls_ = nullptr,
               *del_session_ = nullptr, *put_meta_ = nullptr, *mark_trained_ = nullptr;
  RecoveredState recovered_;

  std::mutex queue_mutex_;  // guards the queue, its tickets and stopping_
  std::condition_variable queued_;
  std::deque<std::function<void()>> queue_;
  Ticket next_ticket_ = 1;  // the ticket of the next write
  bool stopping_ = false;

  std::mutex commit_mutex_;  // guards the commit state below
  Ticket done_ = 0;          // every ticket up to this one is committed or failed; written by the writer alone
  std::vector<Failed> failed_;
  std::vector<std::shared_ptr<Waiter>> waiters_;  // shared: the writer may still notify one that has returned

  std::thread writer_;
};

}  // namespace areal::recorder
