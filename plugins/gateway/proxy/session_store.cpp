#include "plugins/gateway/proxy/session_store.hpp"

#include <random>

#include "core/plugin_host/error.hpp"

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
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::random_device rd;  // the OS CSPRNG on Linux
  std::string key = "sk-sess-";
  for (int i = 0; i < 43; ++i) key.push_back(kAlphabet[rd() % 64]);
  return key;
}

SessionStore::SessionStore(SessionStoreConfig config) : config_(std::move(config)), capacity_(config_.capacity) {
  if (config_.admin_key.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "the admin key must not be empty");
}

bool SessionStore::is_admin(const std::string& token) const {
  // Compare every byte whatever the content, so timing reveals nothing but length.
  const std::string& a = config_.admin_key;
  unsigned char diff = static_cast<unsigned char>(a.size() != token.size());
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < token.size() ? token[i] : 0));
  return diff == 0;
}

StartedSession SessionStore::start(const std::string& task_id, const std::string& api_key, const std::string& group_id) {
  if (task_id.empty()) throw Error(AREAL_CODE_INVALID_ARGUMENT, "task_id is required");
  if (!api_key.empty()) {
    if (is_admin(api_key)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "Cannot use the admin API key as a session key.");
    if (api_key.size() < 8) throw Error(AREAL_CODE_INVALID_ARGUMENT, "a session api_key must be at least 8 characters");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  StartedSession out;
  std::string key = api_key;
  if (!key.empty()) {
    auto it = key_to_session_.find(key);
    if (it != key_to_session_.end()) {
      auto old = sessions_.find(it->second);
      if (old != sessions_.end()) {
        std::lock_guard<std::mutex> slock(old->second->mutex_);
        if (!old->second->finished_) {  // refresh: end the old one, keep it for export
          old->second->finished_ = true;
          old->second->end_reason_ = "refreshed";
          out.ended_session_id = old->first;
          finished_cv_.notify_all();
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
  if (capacity_ == 0) throw Error(AREAL_CODE_RESOURCE_EXHAUSTED, "No available capacity to start a new session");
  size_t n = 0;
  while (sessions_.count(task_id + "-" + std::to_string(n))) ++n;
  auto s = std::make_shared<Session>();
  s->id = task_id + "-" + std::to_string(n);
  s->task_id = task_id;
  s->group_id = group_id.empty() ? task_id : group_id;
  s->api_key = key;
  s->created = s->last_access_ = std::chrono::steady_clock::now();
  sessions_[s->id] = s;
  key_to_session_[key] = s->id;
  if (capacity_ > 0) --capacity_;
  out.session = s;
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
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(s->mutex_);
    if (s->finished_) throw Error(AREAL_CODE_FAILED_PRECONDITION, "Session already ended or expired");
    s->finished_ = true;
    s->end_reason_ = reason;
    n = s->record.size();
  }
  // The store lock after the session's (never both in the other order than start() takes them).
  std::lock_guard<std::mutex> lock(mutex_);
  finished_cv_.notify_all();
  return n;
}

int64_t SessionStore::grant_capacity(int64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capacity_ < 0) return capacity_;  // unlimited stays unlimited
  capacity_ += n;
  return capacity_;
}

int64_t SessionStore::capacity() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_;
}

std::vector<std::string> SessionStore::expire_idle(std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> expired;
  const auto timeout = std::chrono::duration<double>(config_.session_timeout_s);
  for (auto& [id, s] : sessions_) {
    std::lock_guard<std::mutex> slock(s->mutex_);
    if (!s->finished_ && now - s->last_access_ > timeout) {
      s->finished_ = true;
      s->end_reason_ = "expired";
      expired.push_back(id);
    }
  }
  if (!expired.empty()) finished_cv_.notify_all();
  return expired;
}

recorder::SessionTrajectory SessionStore::export_detached(Session& s, double discount, recorder::ExportStyle style) {
  recorder::SessionTrajectory out{s.id, s.task_id, s.group_id, s.end_reason(), style, discount, 0, {}};
  out.rows = s.record.export_rows(style, discount, &out.skipped_incomplete);
  return out;
}

recorder::SessionTrajectory SessionStore::export_session(const std::string& session_id, double discount, recorder::ExportStyle style) {
  // Checked before the session is removed: a bad argument must not lose it.
  if (!(discount >= 0.0 && discount <= 1.0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "discount must be in [0, 1]");
  std::shared_ptr<Session> s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) throw Error(AREAL_CODE_NOT_FOUND, "Session " + session_id + " not found");
    if (!it->second->finished())
      throw Error(AREAL_CODE_FAILED_PRECONDITION, "Session " + session_id + " is still active; end it before exporting");
    s = it->second;
    sessions_.erase(it);
    auto k = key_to_session_.find(s->api_key);
    if (k != key_to_session_.end() && k->second == session_id) key_to_session_.erase(k);
  }
  return export_detached(*s, discount, style);
}

std::optional<recorder::SessionTrajectory> SessionStore::take_finished(std::chrono::milliseconds timeout, double discount, recorder::ExportStyle style) {
  if (!(discount >= 0.0 && discount <= 1.0)) throw Error(AREAL_CODE_INVALID_ARGUMENT, "discount must be in [0, 1]");
  std::shared_ptr<Session> s;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    auto first_finished = [&] {
      for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
        if (it->second->finished()) return it;
      return sessions_.end();
    };
    auto it = first_finished();
    if (it == sessions_.end()) {
      finished_cv_.wait_for(lock, timeout, [&] { return (it = first_finished()) != sessions_.end(); });
      if (it == sessions_.end()) return std::nullopt;
    }
    s = it->second;
    sessions_.erase(it);
    auto k = key_to_session_.find(s->api_key);
    if (k != key_to_session_.end() && k->second == s->id) key_to_session_.erase(k);
  }
  return export_detached(*s, discount, style);
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
