#include "core/tenants/tenant_store.hpp"

#include <chrono>
#include <filesystem>

#include <Poco/DigestEngine.h>
#include <Poco/SHA2Engine.h>
#include <sqlite3.h>

#include "core/plugin_host/error.hpp"
#include "core/text/random_text.hpp"

namespace areal::tenants {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS users(name TEXT PRIMARY KEY, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS api_keys(
  id TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name), hash TEXT NOT NULL UNIQUE,
  prefix TEXT NOT NULL, created INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS jobs(
  id TEXT PRIMARY KEY, user TEXT NOT NULL REFERENCES users(name), experiment TEXT NOT NULL, trial TEXT NOT NULL,
  base_model TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,
  created INTEGER NOT NULL, updated INTEGER NOT NULL, UNIQUE(user, experiment, trial));
CREATE TABLE IF NOT EXISTS session_routes(key_hash TEXT PRIMARY KEY, job_id TEXT NOT NULL) WITHOUT ROWID;
)sql";

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One prepared statement, finalized on every path.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK)
      throw Error(AREAL_CODE_INTERNAL, std::string("tenants: ") + sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(s_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& bind(int col, const std::string& v) {
    sqlite3_bind_text64(s_, col, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
    return *this;
  }
  Statement& bind(int col, int64_t v) {
    sqlite3_bind_int64(s_, col, v);
    return *this;
  }
  // true: a row is ready; false: done. A constraint violation is ALREADY_EXISTS.
  bool step() {
    const int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    if ((rc & 0xff) == SQLITE_CONSTRAINT) throw Error(AREAL_CODE_ALREADY_EXISTS, std::string("tenants: ") + sqlite3_errmsg(db_));
    throw Error(AREAL_CODE_UNAVAILABLE, std::string("tenants: ") + sqlite3_errmsg(db_));
  }
  std::string text(int col) const {
    const unsigned char* p = sqlite3_column_text(s_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, col))) : std::string();
  }
  int64_t integer(int col) const { return sqlite3_column_int64(s_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

constexpr const char* kJobColumns = "SELECT id, user, experiment, trial, base_model, spec, state, message, created, updated FROM jobs";

Job job_of(const Statement& s) {
  Job j;
  j.id = s.text(0), j.user = s.text(1), j.experiment = s.text(2), j.trial = s.text(3), j.base_model = s.text(4);
  j.spec = nlohmann::json::parse(s.text(5), nullptr, false);
  if (j.spec.is_discarded()) j.spec = nlohmann::json::object();
  j.state = job_state_from(s.text(6));
  j.message = s.text(7);
  j.created = s.integer(8), j.updated = s.integer(9);
  return j;
}

}  // namespace

const char* job_state_name(JobState s) {
  switch (s) {
    case JobState::kQueued: return "queued";
    case JobState::kRunning: return "running";
    case JobState::kPaused: return "paused";
    case JobState::kFinished: return "finished";
    case JobState::kCancelled: return "cancelled";
    case JobState::kFailed: return "failed";
  }
  return "failed";
}

JobState job_state_from(const std::string& name) {
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kPaused, JobState::kFinished, JobState::kCancelled, JobState::kFailed})
    if (name == job_state_name(s)) return s;
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "unknown job state '" + name + "'");
}

bool job_state_active(JobState s) { return s == JobState::kQueued || s == JobState::kRunning || s == JobState::kPaused; }

nlohmann::json Job::to_json() const {
  return {{"id", id},         {"user", user},   {"experiment", experiment},      {"trial", trial},
          {"model", experiment + "/" + trial},  {"base_model", base_model},      {"spec", spec},
          {"state", job_state_name(state)},     {"message", message},            {"created", created}, {"updated", updated}};
}

bool valid_user_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '-' || name[0] == '_') return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

bool valid_run_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name == "." || name == "..") return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

std::string TenantStore::hash(const std::string& secret) {
  Poco::SHA2Engine sha(Poco::SHA2Engine::SHA_256);
  sha.update(secret);
  return Poco::DigestEngine::digestToHex(sha.digest());
}

TenantStore::TenantStore(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(AREAL_CODE_FAILED_PRECONDITION, "service state_dir '" + dir + "': cannot create it: " + ec.message());
  path_ = (fs::path(dir) / kFileName).string();
  if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(AREAL_CODE_FAILED_PRECONDITION, "cannot open " + path_ + ": " + why);
  }
  sqlite3_busy_timeout(db_, 10000);  // the CLI and the service may write at once
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  exec("PRAGMA foreign_keys=ON");
  exec(kSchema);
}

TenantStore::~TenantStore() { sqlite3_close(db_); }

void TenantStore::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    throw Error(AREAL_CODE_FAILED_PRECONDITION, path_ + ": " + why);
  }
}

User TenantStore::add_user(const std::string& name) {
  if (!valid_user_name(name))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "user name '" + name + "' is not 1-64 of a-z, 0-9, '_' and '-' starting with a letter or digit");
  std::lock_guard<std::mutex> lock(mutex_);
  User u{name, now_seconds()};
  try {
    Statement(db_, "INSERT INTO users(name, created) VALUES(?, ?)").bind(1, u.name).bind(2, u.created).step();
  } catch (const Error& e) {
    if (e.code() == AREAL_CODE_ALREADY_EXISTS) throw Error(AREAL_CODE_ALREADY_EXISTS, "user '" + name + "' already exists");
    throw;
  }
  return u;
}

std::vector<User> TenantStore::users() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<User> out;
  Statement s(db_, "SELECT name, created FROM users ORDER BY name");
  while (s.step()) out.push_back({s.text(0), s.integer(1)});
  return out;
}

bool TenantStore::has_user(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_, "SELECT 1 FROM users WHERE name = ?");
  s.bind(1, name);
  return s.step();
}

std::pair<ApiKey, std::string> TenantStore::create_key(const std::string& user) {
  if (!has_user(user)) throw Error(AREAL_CODE_NOT_FOUND, "no user '" + user + "' (add it first: areal-host tenants add-user)");
  const std::string secret = "sk-areal-" + text::random_hex(48);
  ApiKey k{"key-" + text::random_hex(12), user, secret.substr(0, 13), now_seconds(), false};
  std::lock_guard<std::mutex> lock(mutex_);
  Statement(db_, "INSERT INTO api_keys(id, user, hash, prefix, created) VALUES(?, ?, ?, ?, ?)")
      .bind(1, k.id).bind(2, k.user).bind(3, hash(secret)).bind(4, k.prefix).bind(5, k.created).step();
  return {k, secret};
}

ApiKey TenantStore::revoke_key(const std::string& key_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement(db_, "UPDATE api_keys SET revoked = 1 WHERE id = ?").bind(1, key_id).step();
  Statement s(db_, "SELECT id, user, prefix, created, revoked FROM api_keys WHERE id = ?");
  s.bind(1, key_id);
  if (!s.step()) throw Error(AREAL_CODE_NOT_FOUND, "no API key '" + key_id + "'");
  return {s.text(0), s.text(1), s.text(2), s.integer(3), s.integer(4) != 0};
}

std::vector<ApiKey> TenantStore::keys(const std::string& user) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ApiKey> out;
  Statement s(db_, "SELECT id, user, prefix, created, revoked FROM api_keys WHERE ? = '' OR user = ? ORDER BY created, id");
  s.bind(1, user).bind(2, user);
  while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2), s.integer(3), s.integer(4) != 0});
  return out;
}

std::optional<std::string> TenantStore::lookup_hashed(const char* sql, const std::string& secret) {
  const std::string h = hash(secret);
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_, sql);
  s.bind(1, h);
  if (!s.step()) return std::nullopt;
  return s.text(0);
}

std::optional<std::string> TenantStore::user_of_key(const std::string& secret) {
  if (secret.rfind("sk-areal-", 0) != 0) return std::nullopt;
  return lookup_hashed("SELECT user FROM api_keys WHERE hash = ? AND revoked = 0", secret);
}

Job TenantStore::add_job(Job job) {
  job.id = "job-" + text::random_hex(16);
  job.state = JobState::kQueued;
  job.created = job.updated = now_seconds();
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    Statement(db_, "INSERT INTO jobs(id, user, experiment, trial, base_model, spec, state, message, created, updated) VALUES(?,?,?,?,?,?,?,?,?,?)")
        .bind(1, job.id).bind(2, job.user).bind(3, job.experiment).bind(4, job.trial).bind(5, job.base_model)
        .bind(6, job.spec.dump()).bind(7, std::string(job_state_name(job.state))).bind(8, job.message)
        .bind(9, job.created).bind(10, job.updated).step();
  } catch (const Error& e) {
    if (e.code() == AREAL_CODE_ALREADY_EXISTS)
      throw Error(AREAL_CODE_ALREADY_EXISTS, "you already have a job of experiment '" + job.experiment + "' and trial '" + job.trial + "'");
    throw;
  }
  return job;
}

void TenantStore::set_job_state(const std::string& id, JobState state, const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement(db_, "UPDATE jobs SET state = ?, message = ?, updated = ? WHERE id = ?")
      .bind(1, std::string(job_state_name(state))).bind(2, message).bind(3, now_seconds()).bind(4, id).step();
}

void TenantStore::delete_job(const std::string& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement(db_, "DELETE FROM jobs WHERE id = ?").bind(1, id).step();
}

std::vector<Job> TenantStore::query_jobs(const char* where, const std::vector<std::string>& args) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement s(db_, (std::string(kJobColumns) + " " + where + " ORDER BY created, id").c_str());
  for (size_t i = 0; i < args.size(); ++i) s.bind(static_cast<int>(i + 1), args[i]);
  std::vector<Job> out;
  while (s.step()) out.push_back(job_of(s));
  return out;
}

std::optional<Job> TenantStore::one_job(const char* where, const std::vector<std::string>& args) {
  auto found = query_jobs(where, args);
  if (found.empty()) return std::nullopt;
  return found.front();
}

std::optional<Job> TenantStore::job(const std::string& id) { return one_job("WHERE id = ?", {id}); }

std::optional<Job> TenantStore::job_by_name(const std::string& user, const std::string& experiment, const std::string& trial) {
  return one_job("WHERE user = ? AND experiment = ? AND trial = ?", {user, experiment, trial});
}

std::vector<Job> TenantStore::jobs(const std::string& user) {
  return user.empty() ? query_jobs("", {}) : query_jobs("WHERE user = ?", {user});
}

bool TenantStore::claim_session(const std::string& session_key, const std::string& job_id, bool* newly) {
  const std::string h = hash(session_key);
  std::lock_guard<std::mutex> lock(mutex_);
  Statement(db_, "INSERT OR IGNORE INTO session_routes(key_hash, job_id) VALUES(?, ?)").bind(1, h).bind(2, job_id).step();
  if (newly != nullptr) *newly = sqlite3_changes(db_) > 0;
  Statement s(db_, "SELECT job_id FROM session_routes WHERE key_hash = ?");
  s.bind(1, h);
  return s.step() && s.text(0) == job_id;
}

void TenantStore::release_session(const std::string& session_key, const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Statement(db_, "DELETE FROM session_routes WHERE key_hash = ? AND job_id = ?").bind(1, hash(session_key)).bind(2, job_id).step();
}

std::optional<std::string> TenantStore::job_of_session(const std::string& session_key) {
  return lookup_hashed("SELECT job_id FROM session_routes WHERE key_hash = ?", session_key);
}

}  // namespace areal::tenants
