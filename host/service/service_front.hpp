// The managed service's HTTP front door (docs/service.md): the operator's
// admin routes (users, keys, every job), the user's job routes, and the
// agents' and Phase 3 traffic, which it forwards to the job's own gateway.
//
// Who may do what is decided here, once, for every route:
//   operator key   /admin/*, /health, /metrics
//   user key       their jobs (/v1/jobs...), their jobs' base URLs
//                  (/jobs/{id}/...: sessions start there; other calls are
//                  served without recording), and Phase 3 (`model` =
//                  "experiment/trial" on the OpenAI/Anthropic routes)
//   session key    the calls of that session, wherever they arrive
// Anything of another user's is answered 404, as if it did not exist.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <cstdint>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <nlohmann/json.hpp>

#include "core/tenants/tenant_store.hpp"
#include "job_runner.hpp"
#include "service_settings.hpp"
#include "token_meter.hpp"

namespace areal::gateway {
class Upstream;
namespace server {
class HttpServer;
}
}  // namespace areal::gateway

namespace areal::host::service {

// The base models' shared engines, by model name.
using Engines = std::map<std::string, const areal_inference_ref*>;

class ServiceFront {
 public:
  ServiceFront(ServiceSettings settings, tenants::TenantStore& store, Engines engines);
  ~ServiceFront();  // stops serving, then every job (their recorded states stay)

  // Starts every job the store holds (running ones resume from their newest
  // checkpoint), then listens. Returns the URL.
  std::string start();
  void stop();

  void handle(Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& res);

 private:
  struct JobSlot {
    std::unique_ptr<JobRunner> runner;
    std::unique_ptr<gateway::Upstream> upstream;
  };

  // Routes, each after its credential check.
  void admin_route(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);
  void jobs_route(const std::string& user, const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body,
                  Poco::Net::HTTPServerResponse& res);
  void job_base_url(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);
  void agent_call(const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body, Poco::Net::HTTPServerResponse& res);
  void models(const std::string& user, Poco::Net::HTTPServerResponse& res);

  nlohmann::json create_job(const std::string& user, const nlohmann::json& request);
  nlohmann::json job_view(const JobSlot& slot);
  std::shared_ptr<JobSlot> find_slot(const std::string& id);
  // The job of the session whose key is the header's `token`; 401 when it
  // is no session's.
  std::string session_job(const std::string& token);
  // The job of a session-scoped `path` (/{session key}/v1/...), if its first
  // segment is a session's key.
  std::optional<std::string> scoped_session_job(const std::string& path);
  JobSlot& session_slot(const std::string& job_id);  // 409 once the job is over
  // The user's job `id`, or 404 (also for another user's).
  JobSlot& job_of(const std::string& user, const std::string& id);
  // Starts a job's runner (gateway, then training when due) and lists it.
  std::shared_ptr<JobSlot> launch_slot(tenants::Job job);
  // Forwards to the job's gateway as its admin (the user's own calls) or
  // as sent (a session's calls).
  void forward(JobSlot& slot, const std::string& path, Poco::Net::HTTPServerRequest& req, const std::string& body,
               Poco::Net::HTTPServerResponse& res, bool as_admin);
  void start_session(const std::string& user, JobSlot& slot, const std::string& path, Poco::Net::HTTPServerRequest& req,
                     const std::string& body, Poco::Net::HTTPServerResponse& res);
  int64_t open_sessions(const std::string& user);
  // Tokens trained over every job of the user's (finished ones too).
  int64_t tokens_trained(const std::string& user);
  // 429 when a quota leaves the user no room for another session (or job).
  void check_token_quota(const std::string& user);

  ServiceSettings settings_;
  tenants::TenantStore& store_;
  Engines engines_;
  std::mutex slots_mutex_;
  std::map<std::string, std::shared_ptr<JobSlot>> slots_;  // by job id
  std::mutex meters_mutex_;
  std::map<std::string, TokenMeter> meters_;  // by job id
  // Dashboard links: an unguessable token -> the job it shows, until when.
  struct DashboardLink {
    std::string job_id;
    std::chrono::steady_clock::time_point expires;
  };
  std::mutex links_mutex_;
  std::map<std::string, DashboardLink> links_;
  void dashboard_page(const std::string& path, Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& res);
  std::mutex create_mutex_;  // quota check and insert of one job at a time
  // A user's session starts one at a time: the open-session count and the
  // start it allows are one step (concurrent starts each saw room).
  std::mutex session_start_locks_mutex_;
  std::map<std::string, std::shared_ptr<std::mutex>> session_start_locks_;  // by user
  std::shared_ptr<std::mutex> session_start_lock(const std::string& user);
  std::unique_ptr<gateway::server::HttpServer> server_;
};

}  // namespace areal::host::service
