#include "plugins/gateway/proxy/session_store.hpp"

#include <algorithm>

#include "core/plugin_host/error.hpp"
#include "core/text/random_text.hpp"

namespace areal::proxy {

bool Session::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return finished_;
}
std::string Session::end_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return end_reason_;
}
void Session::touch() {
  std::lock_guard<std::mutex> lock(mutex_);
  last_access_ = std::chrono::steady_clock::now();
}
std::chrono::steady_clock::time_point Session::last_access() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_access_;
}

std::string mint_session_key() {
  return "sk-sess-" + text::random_text(43, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
}

SessionStore::SessionStore(SessionStoreConfig config) : config_(std::move(config)), capacity_(config_.capacity) {
  if (config_.admin_key.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "the admin key must not be empty");
}

recorder::SessionRecord Session::journal_record(const std::string& state) const {
  return recorder::SessionRecord{id, task_id, group_id, api_key, state, end_reason_};
}

void SessionStore::journal_to(recorder::Journal* journal) {
  std::lock_guard<std::mutex> lock(mutex_);
  journal_ = journal;
}

void SessionStore::wait(recorder::Journal::Ticket ticket) const {
  if (journal_ != nullptr && ticket != 0) journal_->wait(ticket);
}

RecoverySummary SessionStore::recover(recorder::RecoveredState state) {
  std::lock_guard<std::mutex> lock(mutex_);
  RecoverySummary out;
  out.failed_in_flight = state.failed_in_flight;
  const auto now = std::chrono::steady_clock::now();
  std::deque<std::string> taken_before;  // handed out before the restart: back to the trainer first (they hold the oldest versions)
  for (auto& r : state.sessions) {
    auto s = std::make_shared<Session>();
    s->id = r.session.id;
    s->task_id = r.session.task_id;
    s->group_id = r.session.group_id;
    s->api_key = r.session.api_key;
    s->created = s->last_access_ = now;  // idle time restarts: the agent may have waited out the restart
    s->finished_ = r.session.state != "active";
    s->end_reason_ = r.session.end_reason;
    s->record.restore(std::move(r.calls));
    s->record.journal_to(journal_, s->id);
    if (r.session.state == "trained") {  // waits for the trainer's commit_checkpoint()
      ++out.trained;
      recovered_trained_[s->id] = {s, r.session.trained_step};
      continue;
    }
    ++(s->finished_ ? out.ended : out.active);
    if (s->finished_) (r.was_taken ? taken_before : finished_order_).push_back(s->id);
    // As before the restart: an ended session's key still answers 410 until
    // it is exported; in start order, so a refreshed key maps to its newest session.
    key_to_session_[s->api_key] = s->id;
    sessions_[s->id] = std::move(s);
  }
  finished_order_.insert(finished_order_.begin(), taken_before.begin(), taken_before.end());
  if (config_.capacity == 0) {
    owed_grants_ = static_cast<int64_t>(out.active + out.ended);
  } else if (state.capacity) {
    capacity_ = *state.capacity;
  }
  out.capacity = capacity_;
  out.owed_grants = owed_grants_;
  if (!state.sessions.empty()) finished_cv_.notify_all();
  return out;
}

bool keys_equal(const std::string& key, const std::string& token) {
  // Compare every byte whatever the content, so timing reveals nothing but length.
  unsigned char diff = static_cast<unsigned char>(key.size() != token.size());
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(key[i] ^ (i < token.size() ? token[i] : 0));
  return diff == 0;
}

bool SessionStore::is_admin(const std::string& token) const { return keys_equal(config_.admin_key, token); }

StartedSession SessionStore::start(const std::string& task_id, const std::string& api_key, const std::string& group_id) {
  if (task_id.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "task_id is required");
  if (!api_key.empty()) {
    if (is_admin(api_key)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "Cannot use the admin API key as a session key.");
    if (api_key.size() < 8) throw Error(AREAL_CODE_INVALID_ARGUMENT, "a session api_key must be at least 8 characters");
  }
  StartedSession out;
  std::shared_ptr<Session> refreshed;  // the key's previous session, ended by this start
  recorder::Journal::Ticket ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<recorder::SessionRecord> journaled;
    std::string key = api_key;
    if (!key.empty()) {
      auto it = key_to_session_.find(key);
      if (it != key_to_session_.end()) {
        auto old = sessions_.find(it->second);
        if (old != sessions_.end()) {
          std::lock_guard<std::mutex> slock(old->second->mutex_);
          if (!old->second->finished_ && !old->second->ending_) {  // refresh: end the old one, keep it for export
            old->second->finished_ = true;
            old->second->end_reason_ = "refreshed";
            out.ended_session_id = old->first;
            refreshed = old->second;
            journaled.push_back(refreshed->journal_record("ended"));
          }
        }
        key_to_session_.erase(it);
      }
    } else {
      do key = mint_session_key();
      while (key_to_session_.count(key));
    }
    // Checked after a refresh has ended the key's old session (as AReaL does):
    // that session can then be exported and trained, which is what frees the
    // capacity this start waits for; checked first, the two would wait on
    // each other.
    if (capacity_ == 0) {  // (0 too while grants are owed to recovered sessions)
      if (refreshed && journal_) {
        ticket = journal_->write_sessions(std::move(journaled), std::nullopt);  // the 429 follows once the end is committed
      } else {
        if (refreshed) {  // memory only: ended now, handed out now
          finished_order_.push_back(refreshed->id);
          finished_cv_.notify_one();
        }
        throw Error(AREAL_CODE_RESOURCE_EXHAUSTED, "No available capacity to start a new session");
      }
    } else {
      size_t& n = next_index_[task_id];
      auto in_use = [&](const std::string& id) { return sessions_.count(id) || taken_.count(id) || recovered_trained_.count(id); };
      while (in_use(task_id + "-" + std::to_string(n))) ++n;
      const size_t index = n++;
      auto s = std::make_shared<Session>();
      s->id = task_id + "-" + std::to_string(index);
      s->task_id = task_id;
      s->group_id = group_id.empty() ? task_id : group_id;
      s->api_key = key;
      s->created = s->last_access_ = std::chrono::steady_clock::now();
      s->record.journal_to(journal_, s->id);
      sessions_[s->id] = s;
      key_to_session_[key] = s->id;
      if (capacity_ > 0) --capacity_;
      out.session = s;
      journaled.push_back(s->journal_record("active"));
      if (journal_) ticket = journal_->write_sessions(std::move(journaled), capacity_ >= 0 ? std::optional<int64_t>(capacity_) : std::nullopt);
    }
  }
  try {
    wait(ticket);  // the key reaches the client only once the session is committed
  } catch (const recorder::StateUnavailable&) {
    // Undone in memory as it was undone on disk: the old session active again under its key.
    std::lock_guard<std::mutex> lock(mutex_);
    if (out.session) {
      sessions_.erase(out.session->id);
      key_to_session_.erase(out.session->api_key);
      if (capacity_ >= 0) ++capacity_;
    }
    if (refreshed) {
      std::lock_guard<std::mutex> slock(refreshed->mutex_);
      refreshed->finished_ = false;
      refreshed->end_reason_.clear();
      key_to_session_[refreshed->api_key] = refreshed->id;
    }
    throw;
  }
  if (refreshed) {  // handed out only once its end is committed
    std::lock_guard<std::mutex> lock(mutex_);
    finished_order_.push_back(refreshed->id);
    finished_cv_.notify_one();
  }
  if (!out.session) throw Error(AREAL_CODE_RESOURCE_EXHAUSTED, "No available capacity to start a new session");
  return out;
}

std::shared_ptr<Session> SessionStore::authorize(const std::string& api_key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = key_to_session_.find(api_key);
  if (it == key_to_session_.end()) throw Error(AREAL_CODE_UNAUTHENTICATED, "Invalid or expired session API key.");
  auto s = sessions_.find(it->second);
  if (s == sessions_.end()) throw Error(AREAL_CODE_UNAUTHENTICATED, "Invalid or expired session API key.");
  if (s->second->finished())
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "Session " + s->first + " already ended (" + s->second->end_reason() + ")");
  return s->second;
}

std::shared_ptr<Session> SessionStore::find(const std::string& session_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) throw Error(AREAL_CODE_NOT_FOUND, "Session " + session_id + " not found");
  return it->second;
}

size_t SessionStore::end(const std::shared_ptr<Session>& s, const std::string& reason) {
  recorder::Journal::Ticket ticket = 0;
  {
    std::lock_guard<std::mutex> lock(s->mutex_);
    if (s->finished_ || s->ending_) throw Error(AREAL_CODE_FAILED_PRECONDITION, "Session already ended or expired");
    s->ending_ = true;  // a second end (or finalize) racing this one gets 410, journal or not
    if (journal_) {
      recorder::SessionRecord r = s->journal_record("ended");
      r.end_reason = reason;
      ticket = journal_->write_sessions({std::move(r)}, std::nullopt);
    }
  }
  if (ticket != 0) {
    // Committed before the session counts as ended (and before the client hears so).
    try {
      journal_->wait(ticket);
    } catch (...) {
      std::lock_guard<std::mutex> lock(s->mutex_);
      s->ending_ = false;
      throw;
    }
  }
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(s->mutex_);
    s->ending_ = false;
    s->finished_ = true;
    s->end_reason_ = reason;
    n = s->record.completed();  // what the export will hold: failed and refused calls are no rows
  }
  // The store lock after the session's (never both in the other order than start() takes them).
  std::lock_guard<std::mutex> lock(mutex_);
  finished_order_.push_back(s->id);
  finished_cv_.notify_one();
  return n;
}

int64_t SessionStore::grant_capacity(int64_t n) {
  recorder::Journal::Ticket ticket = 0;
  int64_t now = 0, paid = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capacity_ < 0) return capacity_;  // unlimited stays unlimited
    paid = std::min(n, owed_grants_);  // recovered sessions hold these slots already
    owed_grants_ -= paid;
    capacity_ += n - paid;
    now = capacity_;
    if (journal_) ticket = journal_->write_capacity(capacity_);
  }
  try {
    wait(ticket);
  } catch (const recorder::StateUnavailable&) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ -= n - paid;
    owed_grants_ += paid;
    throw;
  }
  return now;
}

int64_t SessionStore::capacity() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_;
}

std::vector<std::string> SessionStore::expire_idle(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> expired;
  std::vector<recorder::SessionRecord> journaled;
  const auto timeout = std::chrono::duration<double>(config_.session_timeout_s);
  for (auto& [id, s] : sessions_) {
    std::lock_guard<std::mutex> slock(s->mutex_);
    if (s->finished_ || s->ending_) continue;
    // A session waiting on its own call is not idle: its agent is waiting
    // for the reply. Every sweep during the call restarts its idle time, so
    // it counts from the last sweep before the call answered.
    if (s->record.in_flight() > 0) {
      s->last_access_ = std::max(s->last_access_, now);
      continue;
    }
    if (now - s->last_access_ <= timeout) continue;
    s->finished_ = true;
    s->end_reason_ = "expired";
    expired.push_back(id);
    finished_order_.push_back(id);
    if (journal_) journaled.push_back(s->journal_record("ended"));
  }
  if (!expired.empty()) finished_cv_.notify_all();
  // Not waited for: no client is answered. Lost in a crash, the session is
  // active after the restart and expires again.
  if (!journaled.empty()) journal_->write_sessions(std::move(journaled), std::nullopt);
  return expired;
}

recorder::SessionTrajectory SessionStore::export_detached(Session& s, double discount, recorder::ExportStyle style) {
  recorder::SessionTrajectory out{s.id, s.task_id, s.group_id, s.end_reason(), style, discount, 0, {}};
  s.record.close();  // a call or reward let in before the session left the store, and arriving now, gets 410, not a 200 nobody delivers
  out.rows = s.record.export_rows(style, discount, &out.skipped_incomplete);
  return out;
}

void SessionStore::detach_locked(const std::shared_ptr<Session>& s) {
  sessions_.erase(s->id);
  // Exported over HTTP (serve never takes sessions): its id leaves the queue
  // too, which would otherwise grow by one id a session for the process's life.
  finished_order_.erase(std::remove(finished_order_.begin(), finished_order_.end(), s->id), finished_order_.end());
  auto k = key_to_session_.find(s->api_key);
  if (k != key_to_session_.end() && k->second == s->id) key_to_session_.erase(k);
}

void SessionStore::reattach(const std::shared_ptr<Session>& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  sessions_[s->id] = s;
  finished_order_.push_front(s->id);  // first in line again
  finished_cv_.notify_one();
}

recorder::SessionTrajectory SessionStore::export_session(const std::string& session_id, double discount, recorder::ExportStyle style) {
  // Checked before the session is removed: a bad argument must not lose it.
  if (!(discount >= 0.0 && discount <= 1.0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "discount must be in [0, 1]");
  std::shared_ptr<Session> s;
  recorder::Journal::Ticket ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) throw Error(AREAL_CODE_NOT_FOUND, "Session " + session_id + " not found");
    if (!it->second->finished())
      throw Error(AREAL_CODE_FAILED_PRECONDITION, "Session " + session_id + " is still active; end it before exporting");
    s = it->second;
    detach_locked(s);
    if (journal_) ticket = journal_->delete_sessions({session_id});
  }
  try {
    wait(ticket);  // an export is a committed removal: answered once, never again
  } catch (const recorder::StateUnavailable&) {
    reattach(s);
    throw;
  }
  return export_detached(*s, discount, style);
}

std::optional<recorder::SessionTrajectory> SessionStore::take_finished(std::chrono::milliseconds timeout, double discount, recorder::ExportStyle style) {
  if (!(discount >= 0.0 && discount <= 1.0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "discount must be in [0, 1]");
  std::shared_ptr<Session> s;
  recorder::Journal::Ticket ticket = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    auto first_finished = [&] {
      while (!finished_order_.empty()) {  // skips ids exported over HTTP meanwhile
        auto it = sessions_.find(finished_order_.front());
        finished_order_.pop_front();
        if (it != sessions_.end() && it->second->finished()) return it;
      }
      return sessions_.end();
    };
    auto it = first_finished();
    if (it == sessions_.end()) {
      finished_cv_.wait_for(lock, timeout, [&] { return (it = first_finished()) != sessions_.end(); });
      if (it == sessions_.end()) return std::nullopt;
    }
    s = it->second;
    detach_locked(s);
    if (journal_) {
      std::lock_guard<std::mutex> slock(s->mutex_);
      ticket = journal_->write_sessions({s->journal_record("taken")}, std::nullopt);
      taken_[s->id] = -1;
    }
  }
  try {
    wait(ticket);  // journaled as taken: a restart before its checkpoint is committed delivers it again
  } catch (const recorder::StateUnavailable&) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      taken_.erase(s->id);
    }
    reattach(s);
    throw;
  }
  return export_detached(*s, discount, style);
}

void SessionStore::mark_trained(const std::vector<std::string>& session_ids, int64_t checkpoint_step) {
  recorder::Journal::Ticket ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (journal_ == nullptr || session_ids.empty()) return;
    ticket = journal_->mark_trained(session_ids, checkpoint_step);
    for (const auto& id : session_ids)
      if (auto it = taken_.find(id); it != taken_.end()) it->second = checkpoint_step;
  }
  wait(ticket);
}

size_t SessionStore::commit_checkpoint(int64_t step) {
  recorder::Journal::Ticket ticket = 0;
  size_t returned = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (journal_ == nullptr) return 0;
    ticket = journal_->commit_checkpoint(step);
    for (auto it = taken_.begin(); it != taken_.end();)
      it = it->second >= 0 && it->second <= step ? taken_.erase(it) : std::next(it);
    for (auto& [id, held] : recovered_trained_) {
      if (held.second <= step) continue;
      // Trained in steps the resumed run does not have: ended again, first in line.
      Session& s = *held.first;
      s.finished_ = true;
      sessions_[id] = held.first;
      key_to_session_.emplace(s.api_key, id);
      finished_order_.push_front(id);
      ++returned;
    }
    recovered_trained_.clear();
    if (config_.capacity == 0) owed_grants_ += static_cast<int64_t>(returned);
    if (returned) finished_cv_.notify_all();
  }
  wait(ticket);
  return returned;
}

std::vector<std::string> SessionStore::finished_session_ids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> ids;
  for (const auto& [id, s] : sessions_)
    if (s->finished()) ids.push_back(id);
  return ids;
}

size_t SessionStore::active_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& [id, s] : sessions_) n += !s->finished();
  return n;
}

}  // namespace areal::proxy
