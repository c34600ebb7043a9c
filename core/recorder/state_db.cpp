#include "core/recorder/state_db.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <cstdint>
#include <optional>
#include <exception>
#include <string_view>

#include <sqlite3.h>

#include "core/telemetry/guarded_thread.hpp"

namespace areal::recorder {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions(
  id TEXT PRIMARY KEY, task_id TEXT NOT NULL, group_id TEXT NOT NULL, api_key TEXT NOT NULL,
  state TEXT NOT NULL, end_reason TEXT NOT NULL, trained_step INTEGER NOT NULL DEFAULT -1);
CREATE TABLE IF NOT EXISTS calls(
  session_id TEXT NOT NULL, idx INTEGER NOT NULL, id TEXT NOT NULL, parent INTEGER NOT NULL,
  state TEXT NOT NULL, messages TEXT, output TEXT, concat INTEGER NOT NULL,
  prompt_ids BLOB, output_ids BLOB, logprobs BLOB, versions BLOB, finish_reason TEXT NOT NULL, reward REAL, routing BLOB,
  PRIMARY KEY(session_id, idx)) WITHOUT ROWID;
)sql";

// Token ids, log-probs and versions as raw little-endian arrays.
template <class T>
void bind_array(sqlite3_stmt* s, int col, const std::vector<T>& v) {
  sqlite3_bind_blob64(s, col, v.data(), v.size() * sizeof(T), SQLITE_TRANSIENT);
}
template <class T>
std::vector<T> column_array(sqlite3_stmt* s, int col) {
  const void* p = sqlite3_column_blob(s, col);
  const size_t n = static_cast<size_t>(sqlite3_column_bytes(s, col)) / sizeof(T);
  std::vector<T> out(n);
  if (n > 0) std::memcpy(out.data(), p, n * sizeof(T));
  return out;
}
std::string column_text(sqlite3_stmt* s, int col) {
  const unsigned char* p = sqlite3_column_text(s, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s, col))) : std::string();
}
void bind_text(sqlite3_stmt* s, int col, const std::string& v) { sqlite3_bind_text64(s, col, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8); }

const char* call_state(const Interaction& c) { return c.failed ? "failed" : c.complete() ? "complete" : "in_flight"; }

}  // namespace

StateDb::StateDb(StateDbOptions options) : options_(std::move(options)) {
  // A file-size limit (ulimit -f) is a full disk to us: a failed write, answered 503, not a reason to die.
  ::signal(SIGXFSZ, SIG_IGN);
  const std::string where = "gateway.state_dir '" + options_.dir + "'";
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec) throw Error(AREAL_CODE_FAILED_PRECONDITION, where + ": cannot create it: " + ec.message());
  const std::string lock_path = (fs::path(options_.dir) / "LOCK").string();
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) throw Error(AREAL_CODE_FAILED_PRECONDITION, where + " is not writable: " + std::strerror(errno));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {0};
    const ssize_t n = ::pread(lock_fd_, pid, sizeof(pid) - 1, 0);
    ::close(lock_fd_);
    throw Error(AREAL_CODE_FAILED_PRECONDITION, where + " is in use by another process" +
                                                    (n > 0 ? " (pid " + std::string(pid, static_cast<size_t>(n)) + ")" : std::string()) +
                                                    "; give each gateway its own state directory");
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    ::close(lock_fd_);
    throw Error(AREAL_CODE_FAILED_PRECONDITION, where + " is not writable: " + std::strerror(errno));
  }
  path_ = (fs::path(options_.dir) / kFileName).string();
  // Session keys are stored here: owner-only, and SQLite gives its -wal and -shm files the same mode.
  if (const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); fd >= 0) ::close(fd);
  try {
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK)
      throw Error(AREAL_CODE_FAILED_PRECONDITION, "cannot open: " + error_text());
    sqlite3_busy_timeout(db_, 5000);
    create_or_check_schema();
    recover();
  } catch (const Error& e) {
    if (db_) sqlite3_close_v2(db_);
    ::close(lock_fd_);
    throw Error(AREAL_CODE_FAILED_PRECONDITION, where + " (" + path_ + "): " + e.what());
  }
  writer_ = guarded_thread("state_db", [this] { writer(); });
}

StateDb::~StateDb() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  if (writer_.joinable()) writer_.join();
  for (sqlite3_stmt* s : {put_call_, put_reward_, put_session_, del_calls_, del_session_, put_meta_, mark_trained_}) sqlite3_finalize(s);
  sqlite3_close_v2(db_);
  ::close(lock_fd_);  // releases the flock
}

std::string StateDb::error_text() const { return db_ ? std::string(sqlite3_errmsg(db_)) : std::string("out of memory"); }

void StateDb::exec(const char* sql) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    const std::string text = msg ? msg : error_text();
    sqlite3_free(msg);
    throw Error(AREAL_CODE_UNAVAILABLE, text);
  }
}

sqlite3_stmt* StateDb::prepare(const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) throw Error(AREAL_CODE_INTERNAL, error_text());
  return s;
}

void StateDb::step_done(sqlite3_stmt* stmt) {
  const int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  if (rc != SQLITE_DONE) throw Error(AREAL_CODE_UNAVAILABLE, error_text());
}

void StateDb::create_or_check_schema() {
  exec("PRAGMA journal_mode=WAL");
  exec(options_.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  sqlite3_stmt* s = prepare("PRAGMA user_version");
  int version = 0;
  if (sqlite3_step(s) == SQLITE_ROW) version = sqlite3_column_int(s, 0);
  sqlite3_finalize(s);
  if (version > kFormatVersion)
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "it holds state format " + std::to_string(version) + ", written by a newer areal; this build reads format " +
                                                    std::to_string(kFormatVersion));
  exec("BEGIN IMMEDIATE");
  exec(kSchema);
  // Format 1 (before MoE routing) gains the routing column; its calls have none.
  if (version == 1) exec("ALTER TABLE calls ADD COLUMN routing BLOB");
  exec(("PRAGMA user_version=" + std::to_string(kFormatVersion)).c_str());
  exec("COMMIT");
  // Only while its session is there: a call that finishes after its session
  // was exported (and deleted) must not come back as a row nobody owns.
  put_call_ = prepare(
      "INSERT OR REPLACE INTO calls(session_id, idx, id, parent, state, messages, output, concat, prompt_ids, output_ids, logprobs, "
      "versions, finish_reason, reward, routing) SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15 "
      "WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?1)");
  put_reward_ = prepare("UPDATE calls SET reward = ?3 WHERE session_id = ?1 AND idx = ?2");
  put_session_ = prepare(
      "INSERT INTO sessions(id, task_id, group_id, api_key, state, end_reason) VALUES(?1, ?2, ?3, ?4, ?5, ?6) "
      "ON CONFLICT(id) DO UPDATE SET state = excluded.state, end_reason = excluded.end_reason");
  del_calls_ = prepare("DELETE FROM calls WHERE session_id = ?1");
  del_session_ = prepare("DELETE FROM sessions WHERE id = ?1");
  put_meta_ = prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)");
  mark_trained_ = prepare("UPDATE sessions SET state = 'trained', trained_step = ?2 WHERE id = ?1 AND state = 'taken'");
}

// A reward set for "the last call" while that call was still generating
// was committed (and answered 200) on it. The call comes back failed, and a
// failed call has nothing to reward: as Recorder::fail does in a running
// gateway, the reward goes to the last earlier call that answered, unless
// that one has its own. Later calls first, so each keeps the nearest reward.
void StateDb::move_rewards_of_in_flight_calls() {
  sqlite3_stmt* pending = prepare("SELECT session_id, idx, reward FROM calls WHERE state = 'in_flight' AND reward IS NOT NULL ORDER BY session_id, idx DESC");
  sqlite3_stmt* target = prepare("SELECT idx, reward IS NOT NULL FROM calls WHERE session_id = ?1 AND idx < ?2 AND state = 'complete' ORDER BY idx DESC LIMIT 1");
  struct Move {
    std::string session;
    int64_t from;
    double reward;
  };
  std::vector<Move> moves;
  while (sqlite3_step(pending) == SQLITE_ROW) moves.push_back({column_text(pending, 0), sqlite3_column_int64(pending, 1), sqlite3_column_double(pending, 2)});
  sqlite3_finalize(pending);
  try {
    for (const Move& m : moves) {
      sqlite3_reset(target);
      bind_text(target, 1, m.session);
      sqlite3_bind_int64(target, 2, m.from);
      if (sqlite3_step(target) != SQLITE_ROW || sqlite3_column_int(target, 1) != 0) continue;  // no call answered before it, or it has a reward
      const int64_t to = sqlite3_column_int64(target, 0);
      sqlite3_reset(put_reward_);
      bind_text(put_reward_, 1, m.session);
      sqlite3_bind_int64(put_reward_, 2, to);
      sqlite3_bind_double(put_reward_, 3, m.reward);
      step_done(put_reward_);
    }
  } catch (...) {
    sqlite3_finalize(target);
    throw;
  }
  sqlite3_finalize(target);
}

void StateDb::recover() {
  // One write transaction: it also proves at start that the directory takes writes.
  exec("BEGIN IMMEDIATE");
  std::set<std::string> taken;  // handed out before the crash: they hold the oldest versions
  try {
    sqlite3_stmt* t = prepare("SELECT id FROM sessions WHERE state = 'taken'");
    while (sqlite3_step(t) == SQLITE_ROW) taken.insert(column_text(t, 0));
    sqlite3_finalize(t);
    exec("UPDATE sessions SET state = 'ended' WHERE state = 'taken'");
    // Rows a late call wrote after its session was exported (before the
    // write above checked for the session): another session reusing the id
    // would take them for its own.
    exec("DELETE FROM calls WHERE session_id NOT IN (SELECT id FROM sessions)");
    move_rewards_of_in_flight_calls();
    exec("UPDATE calls SET state = 'failed', reward = NULL WHERE state = 'in_flight'");
    recovered_.failed_in_flight = static_cast<size_t>(sqlite3_changes(db_));
    bind_text(put_meta_, 1, "opened_by_pid");
    bind_text(put_meta_, 2, std::to_string(::getpid()));
    step_done(put_meta_);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  std::map<std::string, size_t> by_id;
  sqlite3_stmt* s = prepare("SELECT id, task_id, group_id, api_key, state, end_reason, trained_step FROM sessions ORDER BY rowid");
  while (sqlite3_step(s) == SQLITE_ROW) {
    RecoveredSession r;
    r.session = {column_text(s, 0), column_text(s, 1), column_text(s, 2), column_text(s, 3), column_text(s, 4), column_text(s, 5),
                 sqlite3_column_int64(s, 6)};
    r.was_taken = taken.count(r.session.id) > 0;
    by_id[r.session.id] = recovered_.sessions.size();
    recovered_.sessions.push_back(std::move(r));
  }
  sqlite3_finalize(s);
  s = prepare(
      "SELECT session_id, idx, id, parent, state, messages, output, concat, prompt_ids, output_ids, logprobs, versions, finish_reason, reward, "
      "routing FROM calls ORDER BY session_id, idx");
  while (sqlite3_step(s) == SQLITE_ROW) {
    auto owner = by_id.find(column_text(s, 0));
    if (owner == by_id.end()) continue;  // cannot happen: deleted above, and no call is written without its session
    Interaction c;
    c.id = column_text(s, 2);
    c.parent = sqlite3_column_int(s, 3);
    const std::string state = column_text(s, 4);
    c.failed = state == "failed";
    c.messages = sqlite3_column_type(s, 5) == SQLITE_NULL ? Json() : Json::parse(column_text(s, 5));
    if (sqlite3_column_type(s, 6) != SQLITE_NULL) c.output = Json::parse(column_text(s, 6));
    c.concat = sqlite3_column_int(s, 7) != 0;
    c.prompt_ids = column_array<int32_t>(s, 8);
    c.output_ids = column_array<int32_t>(s, 9);
    c.output_logprobs = column_array<float>(s, 10);
    c.output_versions = column_array<int64_t>(s, 11);
    c.finish_reason = column_text(s, 12);
    if (sqlite3_column_type(s, 13) != SQLITE_NULL) c.reward = sqlite3_column_double(s, 13);
    if (sqlite3_column_type(s, 14) != SQLITE_NULL) {
      const auto* blob = static_cast<const char*>(sqlite3_column_blob(s, 14));
      c.routing = routing_from_blob(std::string_view(blob, static_cast<size_t>(sqlite3_column_bytes(s, 14))));
    }
    auto& calls = recovered_.sessions[owner->second].calls;
    const size_t idx = static_cast<size_t>(sqlite3_column_int64(s, 1));
    if (calls.size() <= idx) calls.resize(idx + 1);
    calls[idx] = std::move(c);
  }
  sqlite3_finalize(s);
  // A call whose every write failed (the disk was full) left a gap: its
  // client got an error, so it stands as a failed call, keeping indices.
  for (auto& r : recovered_.sessions)
    for (auto& c : r.calls)
      if (c.id.empty()) c.failed = true, c.id = "(not recorded)";
  s = prepare("SELECT value FROM meta WHERE key = 'capacity'");
  if (sqlite3_step(s) == SQLITE_ROW) recovered_.capacity = std::stoll(column_text(s, 0));
  sqlite3_finalize(s);
}

StateDb::Ticket StateDb::enqueue(std::function<void()> apply) {
  std::lock_guard<std::mutex> lock(queue_mutex_);
  queue_.push_back(std::move(apply));
  queued_.notify_one();
  return next_ticket_++;
}

StateDb::Ticket StateDb::write_call(const std::string& session_id, size_t index, const Interaction& call) {
  return enqueue([this, session_id, index, c = call] {
    sqlite3_stmt* s = put_call_;
    bind_text(s, 1, session_id);
    sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(index));
    bind_text(s, 3, c.id);
    sqlite3_bind_int(s, 4, c.parent);
    sqlite3_bind_text(s, 5, call_state(c), -1, SQLITE_STATIC);
    if (c.messages.is_null()) sqlite3_bind_null(s, 6);
    else bind_text(s, 6, c.messages.dump(-1, ' ', false, Json::error_handler_t::replace));
    if (c.output) bind_text(s, 7, c.output->dump(-1, ' ', false, Json::error_handler_t::replace));
    else sqlite3_bind_null(s, 7);
    sqlite3_bind_int(s, 8, c.concat ? 1 : 0);
    bind_array(s, 9, c.prompt_ids);
    bind_array(s, 10, c.output_ids);
    bind_array(s, 11, c.output_logprobs);
    bind_array(s, 12, c.output_versions);
    bind_text(s, 13, c.finish_reason);
    if (c.reward) sqlite3_bind_double(s, 14, *c.reward);
    else sqlite3_bind_null(s, 14);
    if (c.routing.empty()) {
      sqlite3_bind_null(s, 15);
    } else {
      const std::string blob = routing_blob(c.routing);
      sqlite3_bind_blob64(s, 15, blob.data(), blob.size(), SQLITE_TRANSIENT);
    }
    step_done(s);
  });
}

StateDb::Ticket StateDb::write_reward(const std::string& session_id, size_t index, std::optional<double> reward) {
  return enqueue([this, session_id, index, reward] {
    bind_text(put_reward_, 1, session_id);
    sqlite3_bind_int64(put_reward_, 2, static_cast<sqlite3_int64>(index));
    if (reward) sqlite3_bind_double(put_reward_, 3, *reward);
    else sqlite3_bind_null(put_reward_, 3);
    step_done(put_reward_);
  });
}

StateDb::Ticket StateDb::write_sessions(std::vector<SessionRecord> sessions, std::optional<int64_t> capacity) {
  return enqueue([this, rs = std::move(sessions), capacity] {
    for (const SessionRecord& r : rs) {
      bind_text(put_session_, 1, r.id);
      bind_text(put_session_, 2, r.task_id);
      bind_text(put_session_, 3, r.group_id);
      bind_text(put_session_, 4, r.api_key);
      bind_text(put_session_, 5, r.state);
      bind_text(put_session_, 6, r.end_reason);
      step_done(put_session_);
    }
    if (capacity) put_capacity(*capacity);
  });
}

StateDb::Ticket StateDb::delete_sessions(std::vector<std::string> session_ids) {
  return enqueue([this, ids = std::move(session_ids)] {
    for (const std::string& id : ids) {
      bind_text(del_calls_, 1, id);
      step_done(del_calls_);
      bind_text(del_session_, 1, id);
      step_done(del_session_);
    }
  });
}

StateDb::Ticket StateDb::mark_trained(std::vector<std::string> session_ids, int64_t step) {
  return enqueue([this, ids = std::move(session_ids), step] {
    for (const std::string& id : ids) {
      bind_text(mark_trained_, 1, id);
      sqlite3_bind_int64(mark_trained_, 2, step);
      step_done(mark_trained_);
    }
  });
}

StateDb::Ticket StateDb::commit_checkpoint(int64_t step) {
  return enqueue([this, step] {
    const std::string n = std::to_string(step);
    exec(("DELETE FROM calls WHERE session_id IN (SELECT id FROM sessions WHERE state = 'trained' AND trained_step <= " + n + ")").c_str());
    exec(("DELETE FROM sessions WHERE state = 'trained' AND trained_step <= " + n).c_str());
    exec(("UPDATE sessions SET state = 'ended', trained_step = -1 WHERE state = 'trained' AND trained_step > " + n).c_str());
  });
}

void StateDb::put_capacity(int64_t capacity) {
  bind_text(put_meta_, 1, "capacity");
  bind_text(put_meta_, 2, std::to_string(capacity));
  step_done(put_meta_);
}

StateDb::Ticket StateDb::write_capacity(int64_t capacity) {
  return enqueue([this, capacity] { put_capacity(capacity); });
}

namespace {
StateUnavailable unrecorded(const std::string& dir, const std::string& error) {
  return StateUnavailable("the gateway could not record this in its state directory (" + dir + "): " + error +
                          "; nothing was changed - retry once the state directory is writable again");
}
}  // namespace

void StateDb::wait(Ticket ticket) {
  std::shared_ptr<Waiter> waiter;
  {
    std::lock_guard<std::mutex> lock(commit_mutex_);
    if (done_ >= ticket) {
      for (auto it = failed_.rbegin(); it != failed_.rend(); ++it)
        if (ticket >= it->first && ticket <= it->last) throw unrecorded(options_.dir, it->error);
      return;
    }
    waiter = std::make_shared<Waiter>();
    waiter->ticket = ticket;
    waiters_.push_back(waiter);
  }
  std::unique_lock<std::mutex> lock(waiter->mutex);
  waiter->woken.wait(lock, [&] { return waiter->ready; });
  if (!waiter->error.empty()) throw unrecorded(options_.dir, waiter->error);
}

void StateDb::writer() {
  for (;;) {
    std::deque<std::function<void()>> batch;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, everything committed
      batch.swap(queue_);
    }
    // One transaction per batch: every write in it commits, or none does.
    std::string error;
    try {
      exec("BEGIN IMMEDIATE");
      for (auto& apply : batch) apply();
      exec("COMMIT");
    } catch (const std::exception& e) {
      error = e.what();
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);  // may say no transaction is active: SQLite rolled back already
    }
    // Tickets are handed out in queue order, so this batch holds the next ones.
    const Ticket first = done_ + 1, last = done_ + batch.size();  // done_ is written by this thread alone
    std::vector<std::shared_ptr<Waiter>> woken;
    {
      std::lock_guard<std::mutex> lock(commit_mutex_);
      if (!error.empty()) {
        failed_.push_back({first, last, error});
        // Waiters read their batch's outcome at once; a long outage must not grow this without bound.
        if (failed_.size() > 4096) failed_.erase(failed_.begin(), failed_.begin() + 2048);
      }
      done_ = last;
      for (size_t i = 0; i < waiters_.size();) {
        if (waiters_[i]->ticket <= last) {
          woken.push_back(std::move(waiters_[i]));
          waiters_[i] = std::move(waiters_.back());
          waiters_.pop_back();
        } else {
          ++i;
        }
      }
    }
    // A waiter's ticket is at most `last` and above the previous batch's (or it would not have waited): this batch's.
    for (const auto& w : woken) {
      {
        std::lock_guard<std::mutex> lock(w->mutex);
        w->error = error;  // before ready: a copy that throws must not wake it as committed
        w->ready = true;
      }
      w->woken.notify_one();
    }
  }
}

}  // namespace areal::recorder
