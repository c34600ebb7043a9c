// The managed service's tenants (issue #37): users, their API keys and their
// jobs, kept in one SQLite file (<service state_dir>/tenants.sqlite3) so that
// a restart, or a kill -9, loses none of them.
//
// Keys are shown once, when created, and stored only as their SHA-256 hash:
// a copy of the database lets nobody call the service. A revoked key stops
// working at its next request. Every write is committed (synchronous=FULL)
// before the call returns; readers may run beside one writer (WAL), so the
// `areal-host tenants` command can add users while the service runs.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

struct sqlite3;

namespace areal::tenants {

struct User {
  std::string name;
  int64_t created = 0;  // unix seconds
};

struct ApiKey {
  std::string id;      // "key-<hex>": names the key in listings and revocation (not a secret)
  std::string user;
  std::string prefix;  // the secret's first characters, so a person can tell keys apart
  int64_t created = 0;
  bool revoked = false;
};

// A job's lifecycle. Active states hold a slot of the user's job quota.
enum class JobState { kQueued, kRunning, kPaused, kFinished, kCancelled, kFailed };
const char* job_state_name(JobState s);
JobState job_state_from(const std::string& name);  // INVALID_ARGUMENT for an unknown name
bool job_state_active(JobState s);                 // queued, running, paused

struct Job {
  std::string id;  // "job-<hex>"
  std::string user, experiment, trial, base_model;
  nlohmann::json spec = nlohmann::json::object();  // what the user asked for, as accepted
  JobState state = JobState::kQueued;
  std::string message;  // why it failed, or how it ended
  int64_t created = 0, updated = 0;
  nlohmann::json to_json() const;
};

class TenantStore {
 public:
  static constexpr const char* kFileName = "tenants.sqlite3";
  // Opens (or creates) DIR/tenants.sqlite3. Throws FAILED_PRECONDITION when
  // the directory cannot be created or the file opened.
  explicit TenantStore(const std::string& dir);
  ~TenantStore();
  TenantStore(const TenantStore&) = delete;
  TenantStore& operator=(const TenantStore&) = delete;

  const std::string& path() const { return path_; }

  // Names are 1-64 of [a-z0-9_-], starting with a letter or digit
  // (INVALID_ARGUMENT otherwise; ALREADY_EXISTS for a taken one).
  User add_user(const std::string& name);
  std::vector<User> users();
  bool has_user(const std::string& name);

  // A new key for `user` (NOT_FOUND for an unknown user): its record and the
  // secret, which is never stored or shown again.
  std::pair<ApiKey, std::string> create_key(const std::string& user);
  // NOT_FOUND for an unknown key id; revoking twice is fine.
  ApiKey revoke_key(const std::string& key_id);
  std::vector<ApiKey> keys(const std::string& user = "");
  // The user a live (not revoked) key belongs to.
  std::optional<std::string> user_of_key(const std::string& secret);

  // Adds a job in state queued with a fresh id. ALREADY_EXISTS when the
  // user has a job of that experiment and trial.
  Job add_job(Job job);
  void set_job_state(const std::string& id, JobState state, const std::string& message = "");
  void delete_job(const std::string& id);  // a job that never started
  std::optional<Job> job(const std::string& id);
  std::optional<Job> job_by_name(const std::string& user, const std::string& experiment, const std::string& trial);
  std::vector<Job> jobs(const std::string& user = "");  // every user's when empty; oldest first

  // Which job a gateway session key belongs to (stored hashed, like user
  // keys). A key is claimed once: false when it already belongs to another
  // job; `newly` says whether this call made the claim.
  bool claim_session(const std::string& session_key, const std::string& job_id, bool* newly = nullptr);
  // Undoes a claim this job made for a session that did not start.
  void release_session(const std::string& session_key, const std::string& job_id);
  std::optional<std::string> job_of_session(const std::string& session_key);

  // SHA-256 of a secret, as lowercase hex.
  static std::string hash(const std::string& secret);

 private:
  void exec(const char* sql);
  // The first column of `sql`'s first row, its one parameter the hash of `secret`.
  std::optional<std::string> lookup_hashed(const char* sql, const std::string& secret);
  std::optional<Job> one_job(const char* where, const std::vector<std::string>& args);
  std::vector<Job> query_jobs(const char* where, const std::vector<std::string>& args);

  std::string path_;
  sqlite3* db_ = nullptr;
  std::mutex mutex_;
};

// Whether `name` may name a user (1-64 of [a-z0-9_-], starting with a letter or digit).
bool valid_user_name(const std::string& name);
// Whether `name` may be an experiment or trial name (1-128 of [A-Za-z0-9._-], not "." or "..").
bool valid_run_name(const std::string& name);

}  // namespace areal::tenants
