// The managed service's tenants store (core/tenants) and its settings file
// (host/service/service_settings): keys hashed at rest and revocable, jobs
// per user, everything durable across a reopen.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "core/plugin_host/error.hpp"
#include "core/tenants/tenant_store.hpp"
#include "service/service_settings.hpp"
#include "service/token_meter.hpp"

namespace fs = std::filesystem;
using areal::tenants::Job;
using areal::tenants::JobState;
using areal::tenants::TenantStore;

namespace {

std::string fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("areal-tenants-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d.string();
}

int32_t code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const areal::Error& e) {
    return e.code();
  }
  return AREAL_CODE_OK;
}

// Every value of every column of the file, as text: what a stolen copy shows.
std::string dump_file(const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  std::string out;
  sqlite3_exec(db, "SELECT * FROM api_keys", [](void* o, int n, char** v, char**) {
    for (int i = 0; i < n; ++i) *static_cast<std::string*>(o) += std::string(v[i] ? v[i] : "") + "|";
    return 0;
  }, &out, nullptr);
  sqlite3_close(db);
  return out;
}

}  // namespace

TEST(TenantStore, KeysAreHashedAtRestAndRevocable) {
  const std::string dir = fresh_dir("keys");
  std::string secret, key_id;
  {
    TenantStore s(dir);
    s.add_user("alice");
    auto [k, sk] = s.create_key("alice");
    secret = sk, key_id = k.id;
    EXPECT_EQ(secret.rfind("sk-areal-", 0), 0u);
    EXPECT_EQ(s.user_of_key(secret), "alice");
    EXPECT_FALSE(s.user_of_key(secret + "x"));
    EXPECT_FALSE(s.user_of_key("sk-areal-" + std::string(48, '0')));
  }
  const std::string file = dump_file(dir + "/tenants.sqlite3");
  EXPECT_EQ(file.find(secret), std::string::npos) << "the secret is stored in clear";
  EXPECT_EQ(file.find(secret.substr(9)), std::string::npos);
  EXPECT_NE(file.find(TenantStore::hash(secret)), std::string::npos);
  TenantStore again(dir);  // durable across a reopen
  EXPECT_EQ(again.user_of_key(secret), "alice");
  EXPECT_TRUE(again.revoke_key(key_id).revoked);
  EXPECT_FALSE(again.user_of_key(secret));
  EXPECT_EQ(code_of([&] { again.revoke_key("key-nope"); }), AREAL_CODE_NOT_FOUND);
  fs::remove_all(dir);
}

TEST(TenantStore, UsersAndJobsBelongToTheirOwner) {
  const std::string dir = fresh_dir("jobs");
  TenantStore s(dir);
  s.add_user("alice");
  s.add_user("bob");
  EXPECT_EQ(code_of([&] { s.add_user("alice"); }), AREAL_CODE_ALREADY_EXISTS);
  EXPECT_EQ(code_of([&] { s.add_user("Alice!"); }), AREAL_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of([&] { s.create_key("carol"); }), AREAL_CODE_NOT_FOUND);
  Job j;
  j.user = "alice", j.experiment = "after", j.trial = "t1", j.base_model = "digits";
  j.spec = {{"hyperparameters", {{"train.lr", 0.005}}}};
  const Job a = s.add_job(j);
  EXPECT_EQ(a.id.rfind("job-", 0), 0u);
  EXPECT_EQ(a.state, JobState::kQueued);
  EXPECT_EQ(code_of([&] { s.add_job(j); }), AREAL_CODE_ALREADY_EXISTS);  // one job per experiment/trial and user
  j.user = "bob";
  const Job b = s.add_job(j);  // bob may use the same names
  EXPECT_NE(a.id, b.id);
  s.set_job_state(a.id, JobState::kFailed, "why");
  ASSERT_EQ(s.jobs("alice").size(), 1u);
  EXPECT_EQ(s.jobs("alice")[0].state, JobState::kFailed);
  EXPECT_EQ(s.jobs("alice")[0].message, "why");
  EXPECT_EQ(s.jobs("alice")[0].spec["hyperparameters"]["train.lr"], 0.005);
  EXPECT_EQ(s.jobs().size(), 2u);
  EXPECT_EQ(s.job_by_name("bob", "after", "t1")->id, b.id);
  EXPECT_FALSE(s.job_by_name("bob", "after", "t2"));
  bool newly = false;
  EXPECT_TRUE(s.claim_session("sk-sess-abc", a.id, &newly));
  EXPECT_TRUE(newly);
  EXPECT_TRUE(s.claim_session("sk-sess-abc", a.id, &newly));   // its own job again: fine
  EXPECT_FALSE(newly);
  EXPECT_FALSE(s.claim_session("sk-sess-abc", b.id));  // another job's: refused, the route stays
  EXPECT_EQ(s.job_of_session("sk-sess-abc"), a.id);
  EXPECT_FALSE(s.job_of_session("sk-sess-abd"));
  // A claim for a session that did not start is released, by its job only.
  s.release_session("sk-sess-abc", b.id);
  EXPECT_EQ(s.job_of_session("sk-sess-abc"), a.id);
  s.release_session("sk-sess-abc", a.id);
  EXPECT_FALSE(s.job_of_session("sk-sess-abc"));
  EXPECT_TRUE(areal::tenants::job_state_active(JobState::kPaused));
  EXPECT_FALSE(areal::tenants::job_state_active(JobState::kFinished));
  EXPECT_FALSE(areal::tenants::valid_run_name(".."));
  EXPECT_FALSE(areal::tenants::valid_run_name("a/b"));
  fs::remove_all(dir);
}

TEST(ServiceSettings, ReadsTheShippedFileAndRefusesWhatBelongsToTheService) {
  const auto s = areal::host::service::load_service_settings(std::string(AREAL_TEST_SOURCE_DIR) + "/configs/service.yaml");
  EXPECT_EQ(s.models.count("quickstart-tiny"), 1u);
  EXPECT_TRUE(fs::exists(s.models.at("quickstart-tiny")));
  EXPECT_EQ(s.evaluations.count("digit_before"), 1u);
  const auto& steps = s.hyperparameters.at("trainer.total_steps");
  EXPECT_EQ(steps.refusal("trainer.total_steps", 100), "");
  EXPECT_NE(steps.refusal("trainer.total_steps", 5000), "");
  EXPECT_NE(steps.refusal("trainer.total_steps", "100"), "");
  EXPECT_NE(s.hyperparameters.at("train.lora.rank").refusal("train.lora.rank", 7), "");
  const std::string dir = fresh_dir("settings");
  fs::create_directories(dir);
  auto refused = [&](const std::string& yaml) {
    std::ofstream(dir + "/s.yaml") << yaml;
    return code_of([&] { areal::host::service::load_service_settings(dir + "/s.yaml"); });
  };
  const std::string base = "service:\n  state_dir: st\n  admin_api_key: 0123456789abcdef\n  models: {m: {config: " +
                           std::string(AREAL_TEST_SOURCE_DIR) + "/configs/service_job_quickstart.yaml}}\n";
  EXPECT_EQ(refused(base), AREAL_CODE_OK);
  EXPECT_EQ(refused(base + "  hyperparameters: {gateway.port: {min: 1}}\n"), AREAL_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(refused(base + "  hyperparameters: {trainer.resume: {one_of: [true]}}\n"), AREAL_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(refused(base + "  quotas: {max_jobs: 3}\n"), AREAL_CODE_INVALID_ARGUMENT);  // unknown key
  EXPECT_EQ(refused("service:\n  state_dir: st\n  admin_api_key: short\n"), AREAL_CODE_INVALID_ARGUMENT);
  fs::remove_all(dir);
}

TEST(TokenMeter, CountsStepRowsAsTheFileGrows) {
  const std::string dir = fresh_dir("meter");
  fs::create_directories(dir);
  areal::host::service::TokenMeter meter(dir);
  EXPECT_EQ(meter.total(), 0);  // no file yet
  {
    std::ofstream out(dir + "/metrics.jsonl");
    out << R"({"step": 1, "tokens": 100})" << "\n" << R"({"eval": true, "step": 1, "tokens": 999})" << "\n" << R"({"step": 2, "tok)";
  }
  EXPECT_EQ(meter.total(), 100);  // the evaluation row is no training; the last line is not whole yet
  {
    std::ofstream out(dir + "/metrics.jsonl", std::ios::app);
    out << R"(ens": 50})" << "\n";
  }
  EXPECT_EQ(meter.total(), 150);
  EXPECT_EQ(meter.total(), 150);  // read once
  fs::remove_all(dir);
}

TEST(TokenMeter, CountsAgainWhenARunRewritesItsMetrics) {
  const std::string dir = fresh_dir("meter-rewrite");
  fs::create_directories(dir);
  areal::host::service::TokenMeter meter(dir);
  std::ofstream(dir + "/metrics.jsonl") << R"({"step": 1, "tokens": 100})" << "\n" << R"({"step": 2, "tokens": 100})" << "\n";
  EXPECT_EQ(meter.total(), 200);
  // A resume from step 1 truncates to its rows and goes on: step 2 again, longer.
  std::ofstream(dir + "/metrics.jsonl") << R"({"step": 1, "tokens": 100})" << "\n" << R"({"step": 2, "tokens": 70, "x": 1})" << "\n";
  EXPECT_EQ(meter.total(), 170);
  fs::remove_all(dir);
}
