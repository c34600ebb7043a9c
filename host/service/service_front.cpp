#include "service_front.hpp"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <exception>
#include <cstdint>
#include <vector>
#include <optional>
#include <cstdlib>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>
#include <Poco/URI.h>

#include "../dashboard/dashboard_pages.hpp"
#include "../dashboard/run_data.hpp"
#include "anthropic_routes.hpp"
#include "core/plugin_host/error.hpp"
#include "core/telemetry/logging.hpp"
#include "core/telemetry/metrics.hpp"
#include "core/text/random_text.hpp"
#include "http_error.hpp"
#include "proxy/session_store.hpp"
#include "request.hpp"
#include "server/http_server.hpp"
#include "upstream.hpp"

namespace areal::host::service {
namespace {

namespace fs = std::filesystem;
using gateway::HttpError;
using nlohmann::json;
using Poco::Net::HTTPServerRequest;
using Poco::Net::HTTPServerResponse;
using tenants::JobState;

constexpr size_t kMaxBody = 32u << 20;
constexpr int64_t kDashboardLinkHours = 12;

bool anthropic_path(const std::string& p) { return p == "/v1/messages" || p == "/messages" || p == "/v1/messages/count_tokens" || p == "/messages/count_tokens"; }

// The routes a model call arrives on (Phase 3 finds the job by its `model`;
// SGLang's /generate takes it as an extra field).
bool model_call_path(const std::string& p) {
  return p == "/v1/chat/completions" || p == "/chat/completions" || p == "/v1/responses" || p == "/responses" || p == "/generate" ||
         anthropic_path(p);
}

bool start_session_path(const std::string& p) { return p == "/rl/start_session" || p == "/rl/v1/start_session"; }

// Whether an error is answered in Anthropic's shape: the route's tail
// decides, behind a job's base URL (/jobs/{id}), a session key's
// (/{key}/v1/messages) and a query (Claude Code's ?beta=true) alike.
bool anthropic_error_path(const std::string& target) {
  const std::string p = target.substr(0, target.find('?'));
  for (const char* tail : {"/messages", "/messages/count_tokens"})
    if (p.size() >= std::char_traits<char>::length(tail) && p.compare(p.size() - std::char_traits<char>::length(tail), std::string::npos, tail) == 0)
      return true;
  return false;
}

std::string error_body(const std::string& path, int status, const std::string& message, const std::string& code = "") {
  if (anthropic_error_path(path)) return gateway::AnthropicRoutes::error_body(status, message);
  return gateway::openai_error_body(message, gateway::error_type_for(status), code.empty() ? gateway::error_code_for(status) : code);
}

// "/a/b/c" -> {"a", "b", "c"}
std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  for (std::string part; std::getline(ss, part, '/');)
    if (!part.empty()) out.push_back(part);
  return out;
}

void require_method(HTTPServerRequest& req, HTTPServerResponse& res, const char* method) {
  if (req.getMethod() == method || (std::string(method) == "GET" && req.getMethod() == "HEAD")) return;
  res.set("Allow", method);
  throw HttpError(405, "Method " + req.getMethod() + " is not allowed here; use " + method);
}

std::string default_trial() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d-%H%M%S", &tm);
  return buf;
}

// A path as logged: a segment that may be a credential (a session key in a
// session-scoped URL, a dashboard link's token) is written {credential}.
std::string redacted(const std::string& path) {
  auto seg = segments(path.substr(0, path.find('?')));
  auto known = [](const std::string& s) {
    for (const char* k : {"v1", "rl", "chat", "responses", "messages", "models", "health", "metrics", "generate", "admin", "jobs",
                          "dashboard", "grant_capacity", "export_trajectories", "completions", "count_tokens", "start_session",
                          "set_reward", "end_session", "finalize"})
      if (s == k) return true;
    return false;
  };
  size_t first = 0;
  if (!seg.empty() && seg[0] == "jobs") first = 2;       // /jobs/{id}/{maybe a session key}/...
  if (!seg.empty() && seg[0] == "dashboard") first = 1;  // /dashboard/{token}/...
  if (seg.size() > first && (seg[0] == "dashboard" || !known(seg[first]))) seg[first] = "{credential}";
  std::string out;
  for (const auto& x : seg) out += "/" + x;
  return out.empty() ? "/" : out.substr(0, 200);
}

// The request's key (Authorization: Bearer or x-api-key), or "" without one.
std::string optional_key(const HTTPServerRequest& req) {
  try {
    return gateway::bearer_token(req);
  } catch (const HttpError&) {
    return "";
  }
}

// GET url (a job's gateway, loopback) as JSON; null when unreachable.
json get_json(const std::string& base, const std::string& path) {
  try {
    Poco::URI uri(base);
    Poco::Net::HTTPClientSession s(uri.getHost(), uri.getPort());
    s.setTimeout(Poco::Timespan(5, 0));
    Poco::Net::HTTPRequest rq("GET", path, Poco::Net::HTTPMessage::HTTP_1_1);
    s.sendRequest(rq);
    Poco::Net::HTTPResponse rs;
    std::string text;
    Poco::StreamCopier::copyToString(s.receiveResponse(rs), text);
    return json::parse(text, nullptr, false);
  } catch (const std::exception&) {
    return nullptr;
  }
}

}  // namespace

ServiceFront::ServiceFront(ServiceSettings settings, tenants::TenantStore& store, Engines engines)
    : settings_(std::move(settings)), store_(store), engines_(std::move(engines)) {}

ServiceFront::~ServiceFront() {
  stop();
  std::lock_guard<std::mutex> lock(slots_mutex_);
  slots_.clear();  // each runner ends its training and its gateway
}

std::string ServiceFront::start() {
  for (const auto& job : store_.jobs()) {
    if (job.state == JobState::kCancelled || job.state == JobState::kFailed) continue;  // nothing to serve or train
    try {
      launch_slot(job);
    } catch (const std::exception& e) {
      // Its recorded state stays: the next start (with the cause fixed) takes
      // it up again. Its owner sees why, and may cancel it meanwhile.
      logging::get("service")->error("job {} could not start now (it stays {}; the next start tries again): {}", job.id,
                                     tenants::job_state_name(job.state), e.what());
      store_.set_job_state(job.id, job.state, std::string("not running: it could not start when the service started (") + e.what() +
                                                  "); the next start tries again, or cancel it");
    }
  }
  gateway::server::ServerOptions o;
  o.host = settings_.host;
  o.port = settings_.port;
  o.limits.max_body_bytes = kMaxBody;
  server_ = std::make_unique<gateway::server::HttpServer>(
      o, [this](HTTPServerRequest& req, HTTPServerResponse& res) { handle(req, res); },
      [](const gateway::server::Refusal& r) { return error_body(r.target, r.status, r.message); },
      [](const gateway::server::Refusal& r) { logging::get("service")->warn("{} {} {}: {}", r.status, r.method, redacted(r.target), r.message); });
  const uint16_t port = server_->start();
  return "http://" + settings_.host + ":" + std::to_string(port);
}

void ServiceFront::stop() {
  if (server_) server_->stop();
  server_.reset();
}

std::shared_ptr<ServiceFront::JobSlot> ServiceFront::launch_slot(tenants::Job job) {
  auto model = settings_.models.find(job.base_model);
  if (model == settings_.models.end())
    throw Error(AREAL_CODE_NOT_FOUND, "base model '" + job.base_model + "' is no longer in service.models");
  JobPlan plan;
  plan.job = job;
  plan.template_path = model->second;
  plan.settings = job.spec.value("settings", json::object());
  plan.output_dir = (fs::path(settings_.state_dir) / "users" / job.user).string();
  plan.engine = engines_.at(job.base_model);
  auto slot = std::make_shared<JobSlot>();
  slot->runner = std::make_unique<JobRunner>(std::move(plan), [this](const std::string& id, JobState s, const std::string& message) {
    store_.set_job_state(id, s, message);
    logging::get("service")->info("job {} is {}{}", id, tenants::job_state_name(s), message.empty() ? "" : ": " + message);
  });
  slot->runner->start();
  slot->upstream = std::make_unique<gateway::Upstream>(slot->runner->gateway_url(), 3600);
  std::lock_guard<std::mutex> lock(slots_mutex_);  // listed once whole
  slots_[job.id] = slot;
  return slot;
}

std::shared_ptr<ServiceFront::JobSlot> ServiceFront::find_slot(const std::string& id) {
  std::lock_guard<std::mutex> lock(slots_mutex_);
  auto it = slots_.find(id);
  return it == slots_.end() ? nullptr : it->second;
}

std::optional<std::string> ServiceFront::scoped_session_job(const std::string& path) {
  const auto seg = segments(path);
  // The gateway's own routes and the service's are never a session key
  // (start_session refuses such keys too, so no client can shadow a route).
  if (seg.size() < 2 || gateway::known_top_segment(path) || seg[0] == "jobs" || seg[0] == "dashboard") return std::nullopt;
  return store_.job_of_session(seg[0]);
}

std::string ServiceFront::session_job(const std::string& token) {
  const auto job_id = token.empty() ? std::nullopt : store_.job_of_session(token);
  if (job_id) return *job_id;
  if (token.empty()) throw HttpError(401, "No API key: send your API key or a session's key (Authorization: Bearer or x-api-key)");
  throw HttpError(401, "Invalid API key", "invalid_api_key");
}

ServiceFront::JobSlot& ServiceFront::session_slot(const std::string& job_id) {
  const std::shared_ptr<JobSlot> slot = find_slot(job_id);
  const JobState state = slot ? slot->runner->state() : JobState::kCancelled;
  if (!slot || !(tenants::job_state_active(state) || state == JobState::kFinished))
    throw HttpError(409, "job " + job_id + " is over: its sessions take no more calls");
  return *slot;  // slots are never removed while the service runs
}

ServiceFront::JobSlot& ServiceFront::job_of(const std::string& user, const std::string& id) {
  const std::shared_ptr<JobSlot> slot = find_slot(id);
  if (!slot || slot->runner->job().user != user || !tenants::job_state_active(slot->runner->state()) && slot->runner->state() != JobState::kFinished) {
    const auto job = store_.job(id);
    if (job && job->user == user)
      throw HttpError(409, "job " + id + " is " + tenants::job_state_name(job->state) + (job->message.empty() ? "" : " (" + job->message + ")") +
                               ": it neither trains nor serves");
    throw HttpError(404, "No job '" + id + "' (GET /v1/jobs lists yours)", "not_found");
  }
  return *slot;  // slots are never removed while the service runs
}

void ServiceFront::handle(HTTPServerRequest& req, HTTPServerResponse& res) {
  std::string path = req.getURI();
  const std::string query = path.find('?') == std::string::npos ? "" : path.substr(path.find('?'));
  path = path.substr(0, path.size() - query.size());
  try {
    const std::string body = gateway::read_body(req, kMaxBody);
    if (path == "/health") {
      require_method(req, res, "GET");
      std::lock_guard<std::mutex> lock(slots_mutex_);
      return gateway::send_json(res, 200, json{{"status", "ok"}, {"mode", "service"}, {"jobs", slots_.size()}}.dump());
    }
    if (path.rfind("/admin/", 0) == 0 || path == "/metrics") {
      if (!proxy::keys_equal(settings_.admin_api_key, gateway::bearer_token(req))) throw HttpError(403, "Invalid admin API key.");
      if (path == "/metrics") {
        const std::string text = Metrics::global().render_prometheus();
        res.setContentType("text/plain; version=0.0.4");
        res.setContentLength(static_cast<std::streamsize>(text.size()));
        res.send() << text;
        return;
      }
      return admin_route(path, req, body, res);
    }
    if (path.rfind("/jobs/", 0) == 0) return job_base_url(path + query, req, body, res);
    if (path.rfind("/dashboard/", 0) == 0) return dashboard_page(path + query, req, res);
    const std::string token = optional_key(req);
    const auto user = token.empty() ? std::nullopt : store_.user_of_key(token);
    if (user && (path == "/v1/models" || path == "/models")) {
      require_method(req, res, "GET");
      return models(*user, res);
    }
    if (user && (path == "/v1/jobs" || path.rfind("/v1/jobs/", 0) == 0)) return jobs_route(*user, path, req, body, res);
    return agent_call(path + query, req, body, res);
  } catch (const HttpError& e) {
    if (e.status >= 500) logging::get("service")->error("{} {} {}: {}", e.status, req.getMethod(), redacted(path), e.what());
    if (!res.sent()) gateway::send_json(res, e.status, error_body(path, e.status, e.what(), e.code));
  } catch (const Error& e) {
    // UNAVAILABLE here is the service's own state (SQLite busy, a disk): retry.
    const int status = e.code() == AREAL_CODE_UNAVAILABLE ? 503 : gateway::http_status_for(e.code());
    if (status >= 500) logging::get("service")->error("{} {} {}: {}", status, req.getMethod(), redacted(path), e.what());
    if (status == 503) res.set("Retry-After", "1");
    if (!res.sent()) gateway::send_json(res, status, error_body(path, status, e.what()));
  } catch (const std::exception& e) {
    logging::get("service")->error("500 {} {}: {}", req.getMethod(), redacted(path), e.what());
    if (!res.sent()) gateway::send_json(res, 500, error_body(path, 500, std::string("internal error: ") + e.what()));
  }
}

void ServiceFront::admin_route(const std::string& path, HTTPServerRequest& req, const std::string& body, HTTPServerResponse& res) {
  const auto seg = segments(path);  // admin, ...
  if (seg.size() == 2 && seg[1] == "users") {
    if (req.getMethod() == "GET") {
      json data = json::array();
      for (const auto& u : store_.users()) data.push_back({{"name", u.name}, {"created", u.created}});
      return gateway::send_json(res, 200, json{{"object", "list"}, {"data", data}}.dump());
    }
    require_method(req, res, "POST");
    const auto b = gateway::parse_json_object(body, req.getContentType());
    if (!b.contains("name") || !b["name"].is_string()) throw HttpError(400, "'name' (a string) is required");
    const auto u = store_.add_user(b["name"].get<std::string>());
    return gateway::send_json(res, 201, json{{"name", u.name}, {"created", u.created}}.dump());
  }
  if (seg.size() == 4 && seg[1] == "users" && seg[3] == "keys") {
    if (req.getMethod() == "GET") {
      if (!store_.has_user(seg[2])) throw HttpError(404, "No user '" + seg[2] + "'");
      json data = json::array();
      for (const auto& k : store_.keys(seg[2]))
        data.push_back({{"id", k.id}, {"user", k.user}, {"prefix", k.prefix}, {"created", k.created}, {"revoked", k.revoked}});
      return gateway::send_json(res, 200, json{{"object", "list"}, {"data", data}}.dump());
    }
    require_method(req, res, "POST");
    const auto [k, secret] = store_.create_key(seg[2]);
    return gateway::send_json(res, 201, json{{"id", k.id}, {"user", k.user}, {"prefix", k.prefix}, {"created", k.created}, {"key", secret}}.dump());
  }
  if (seg.size() == 3 && seg[1] == "keys") {
    require_method(req, res, "DELETE");
    const auto k = store_.revoke_key(seg[2]);
    return gateway::send_json(res, 200, json{{"id", k.id}, {"user", k.user}, {"revoked", k.revoked}}.dump());
  }
  if (seg.size() == 2 && seg[1] == "jobs") {
    require_method(req, res, "GET");
    json data = json::array();
    for (const auto& j : store_.jobs()) data.push_back(j.to_json());
    return gateway::send_json(res, 200, json{{"object", "list"}, {"data", data}}.dump());
  }
  throw HttpError(404, "Unknown admin route " + req.getMethod() + " " + path + " (see docs/service.md)");
}

void ServiceFront::models(const std::string& user, HTTPServerResponse& res) {
  json data = json::array();
  for (const auto& [name, _] : settings_.models) data.push_back({{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "areal"}});
  for (const auto& j : store_.jobs(user))
    if (j.state != JobState::kCancelled && j.state != JobState::kFailed)
      data.push_back({{"id", j.experiment + "/" + j.trial}, {"object", "model"}, {"created", j.created}, {"owned_by", user},
                      {"parent", j.base_model}, {"root", j.base_model}});
  gateway::send_json(res, 200, json{{"object", "list"}, {"data", data}}.dump());
}

json ServiceFront::create_job(const std::string& user, const json& r) {
  for (const auto& [k, v] : r.items())
    if (k != "base_model" && k != "experiment" && k != "trial" && k != "hyperparameters" && k != "evaluation")
      throw HttpError(400, "Unknown field '" + k + "' (a job takes base_model, experiment, trial, hyperparameters, evaluation)");
  auto string_field = [&](const char* key, bool required) -> std::string {
    if (!r.contains(key) || r[key].is_null()) {
      if (required) throw HttpError(400, std::string("'") + key + "' (a string) is required");
      return "";
    }
    if (!r[key].is_string()) throw HttpError(400, std::string("'") + key + "' must be a string");
    return r[key].get<std::string>();
  };
  tenants::Job job;
  job.user = user;
  job.base_model = string_field("base_model", true);
  if (!settings_.models.count(job.base_model)) {
    std::string names;
    for (const auto& [n, _] : settings_.models) names += (names.empty() ? "" : ", ") + n;
    throw HttpError(400, "'base_model' must be one of the service's models (" + names + "), got '" + job.base_model + "'");
  }
  job.experiment = string_field("experiment", true);
  job.trial = string_field("trial", false);
  if (job.trial.empty()) job.trial = default_trial();
  for (const auto* name : {&job.experiment, &job.trial})
    if (!tenants::valid_run_name(*name)) throw HttpError(400, "experiment and trial names are 1-128 of A-Z, a-z, 0-9, '.', '_' and '-'; got '" + *name + "'");
  json settings = json::object();
  if (r.contains("hyperparameters") && !r["hyperparameters"].is_null()) {
    if (!r["hyperparameters"].is_object()) throw HttpError(400, "'hyperparameters' must map dotted config keys to values");
    for (const auto& [k, v] : r["hyperparameters"].items()) {
      auto lim = settings_.hyperparameters.find(k);
      if (lim == settings_.hyperparameters.end()) {
        std::string keys;
        for (const auto& [n, _] : settings_.hyperparameters) keys += (keys.empty() ? "" : ", ") + n;
        throw HttpError(400, "hyperparameter '" + k + "' is not one this service lets jobs set (allowed: " + (keys.empty() ? "none" : keys) + ")");
      }
      if (std::string why = lim->second.refusal(k, v); !why.empty()) throw HttpError(400, why);
      settings[k] = v;
    }
  }
  const std::string evaluation = string_field("evaluation", false);
  if (!evaluation.empty()) {
    auto e = settings_.evaluations.find(evaluation);
    if (e == settings_.evaluations.end()) throw HttpError(400, "'evaluation' must name one of service.evaluations, got '" + evaluation + "'");
    for (const auto& [k, v] : e->second.items()) settings["evaluation." + k] = v;
  } else {
    settings["evaluation.agent_command"] = "";
  }
  settings["trainer.checkpoint_every"] = settings_.checkpoint_every;
  job.spec = {{"hyperparameters", r.value("hyperparameters", json::object())}, {"evaluation", evaluation}, {"settings", settings}};

  std::lock_guard<std::mutex> lock(create_mutex_);
  int64_t active = 0;
  for (const auto& j : store_.jobs(user)) active += tenants::job_state_active(j.state) ? 1 : 0;
  if (active >= settings_.max_active_jobs)
    throw HttpError(429, "Job quota reached: " + std::to_string(active) + " of your jobs are queued, running or paused, and this service allows " +
                             std::to_string(settings_.max_active_jobs) + " at once; cancel one or wait for one to finish", "quota_exceeded");
  check_token_quota(user);
  if (store_.job_by_name(user, job.experiment, job.trial))
    throw HttpError(409, "You already have a job of experiment '" + job.experiment + "' and trial '" + job.trial + "'");
  // The job's config must resolve before it is accepted (the user learns why not, nothing is kept).
  JobPlan check;
  check.job = job;
  check.job.id = "job-check";
  check.template_path = settings_.models.at(job.base_model);
  check.settings = settings;
  check.output_dir = (fs::path(settings_.state_dir) / "users" / user).string();
  try {
    JobRunner::resolve(check, "sk-job-check", false);
  } catch (const Error& e) {
    throw HttpError(400, std::string("the job's configuration is not valid: ") + e.what());
  }
  job = store_.add_job(job);
  std::shared_ptr<JobSlot> slot;
  try {
    slot = launch_slot(job);
  } catch (const std::exception& e) {
    // The service's failure, not the user's: nothing is kept (the name stays free) and they may retry.
    store_.delete_job(job.id);
    logging::get("service")->error("job {} of {} could not start: {}", job.id, user, e.what());
    throw HttpError(503, std::string("the job could not start: ") + e.what());
  }
  logging::get("service")->info("user {} started job {} ({}/{} on {})", user, job.id, job.experiment, job.trial, job.base_model);
  return job_view(*slot);
}

json ServiceFront::job_view(const JobSlot& slot) {
  const JobRunner& r = *slot.runner;
  auto stored = store_.job(r.job().id);
  json j = (stored ? *stored : r.job_snapshot()).to_json();
  j["state"] = tenants::job_state_name(r.state());
  j["base_url"] = "/jobs/" + r.job().id;  // relative to the service: the agent's AREAL_GATEWAY_URL / OpenAI base URL (+ /v1)
  json last_step, last_eval;
  for (const auto& row : dashboard::metrics_since(r.run_dir(), 0).value("rows", json::array())) {
    if (row.value("eval", false)) last_eval = row;
    else last_step = row;
  }
  if (!last_step.is_null())
    j["progress"] = {{"step", last_step.value("step", 0)}, {"policy_version", last_step.value("policy_version", 0)},
                     {"reward_mean", last_step.value("reward_mean", 0.0)}, {"total_steps", j["spec"]["settings"].value("trainer.total_steps", json())}};
  if (!last_eval.is_null()) j["last_evaluation"] = last_eval;
  return j;
}

void ServiceFront::jobs_route(const std::string& user, const std::string& path, HTTPServerRequest& req, const std::string& body,
                              HTTPServerResponse& res) {
  const auto seg = segments(path);  // v1, jobs, [id, [action]]
  if (seg.size() == 2) {
    if (req.getMethod() == "GET") {
      json data = json::array();
      for (const auto& j : store_.jobs(user)) {
        const std::shared_ptr<JobSlot> slot = find_slot(j.id);
        data.push_back(slot ? job_view(*slot) : j.to_json());
      }
      return gateway::send_json(res, 200, json{{"object", "list"}, {"data", data}}.dump());
    }
    require_method(req, res, "POST");
    return gateway::send_json(res, 201, create_job(user, gateway::parse_json_object(body, req.getContentType())).dump());
  }
  const std::string& id = seg[2];
  if (seg.size() == 3) {
    require_method(req, res, "GET");
    // A cancelled or failed job is still listed (no slot): its record; so is
    // one that could not start in this service process.
    if (auto j = store_.job(id); j && j->user == user && ((!tenants::job_state_active(j->state) && j->state != JobState::kFinished) || !find_slot(id)))
      return gateway::send_json(res, 200, j->to_json().dump());
    return gateway::send_json(res, 200, job_view(job_of(user, id)).dump());
  }
  const std::string action = seg.size() == 4 ? seg[3] : "";
  if (action == "dashboard") {
    // A link to the dashboard page of this job for a browser (which sends no
    // key): the link is the credential, for `kDashboardLinkHours`.
    require_method(req, res, "POST");
    auto j = store_.job(id);
    if (!j || j->user != user) throw HttpError(404, "No job '" + id + "' (GET /v1/jobs lists yours)", "not_found");
    std::string token = text::random_hex(64);
    {
      std::lock_guard<std::mutex> lock(links_mutex_);
      const auto now = std::chrono::steady_clock::now();
      for (auto it = links_.begin(); it != links_.end();) it = it->second.expires < now ? links_.erase(it) : std::next(it);
      links_[tenants::TenantStore::hash(token)] = {id, now + std::chrono::hours(kDashboardLinkHours)};  // kept hashed: looked up by digest
    }
    return gateway::send_json(res, 201, json{{"url", "/dashboard/" + token + "/"}, {"expires_in", kDashboardLinkHours * 3600}}.dump());
  }
  if (action == "metrics" || action == "reward_curve.svg" || action == "sessions") {
    require_method(req, res, "GET");
    auto j = store_.job(id);
    if (!j || j->user != user) throw HttpError(404, "No job '" + id + "' (GET /v1/jobs lists yours)", "not_found");
    const std::string run_dir = (fs::path(settings_.state_dir) / "users" / user / j->experiment / j->trial).string();
    if (action == "metrics") {
      uint64_t offset = 0;
      const std::string uri = req.getURI();
      if (auto at = uri.find("offset="); at != std::string::npos) offset = std::strtoull(uri.c_str() + at + 7, nullptr, 10);
      return gateway::send_json(res, 200, dashboard::metrics_since(run_dir, offset).dump());
    }
    if (action == "sessions") return gateway::send_json(res, 200, dashboard::latest_sessions(run_dir, 100, nullptr).dump());
    std::ifstream in(fs::path(run_dir) / "reward_curve.svg");
    if (!in) throw HttpError(404, "job " + id + " has no reward curve yet (it is drawn when training ends; GET .../metrics has every step)");
    std::stringstream svg;
    svg << in.rdbuf();
    res.setContentType("image/svg+xml");
    res.setContentLength(static_cast<std::streamsize>(svg.str().size()));
    res.send() << svg.str();
    return;
  }
  if (action == "cancel" && !find_slot(id)) {
    // A job that could not start in this process (its model left
    // service.models, a broken template) is cancelled on its record, so it
    // stops counting against the owner's quota.
    require_method(req, res, "POST");
    auto j = store_.job(id);
    if (j && j->user == user && tenants::job_state_active(j->state)) {
      store_.set_job_state(id, JobState::kCancelled, "cancelled while it was not running");
      return gateway::send_json(res, 200, store_.job(id)->to_json().dump());
    }
  }
  JobSlot& slot = job_of(user, id);
  if (action == "export_trajectories") {
    require_method(req, res, "POST");
    return forward(slot, "/export_trajectories", req, body, res, /*as_admin=*/true);
  }
  if (action == "pause" || action == "resume" || action == "cancel") {
    require_method(req, res, "POST");
    if (action == "pause") slot.runner->pause();
    else if (action == "resume") slot.runner->resume();
    else slot.runner->cancel();
    return gateway::send_json(res, 200, job_view(slot).dump());
  }
  throw HttpError(404, "Unknown job route " + req.getMethod() + " " + path + " (see docs/service.md)");
}

void ServiceFront::dashboard_page(const std::string& target, HTTPServerRequest& req, HTTPServerResponse& res) {
  require_method(req, res, "GET");
  Poco::URI uri;
  try {
    uri = Poco::URI(target);
  } catch (const Poco::Exception&) {
    throw HttpError(400, "malformed percent-escape in the URL");
  }
  const std::string path = uri.getPath();  // /dashboard/<token>/<page>
  const size_t slash = path.find('/', 11);
  const std::string token = path.substr(11, slash == std::string::npos ? std::string::npos : slash - 11);
  std::string job_id;
  {
    std::lock_guard<std::mutex> lock(links_mutex_);
    auto it = links_.find(tenants::TenantStore::hash(token));
    if (it != links_.end() && it->second.expires > std::chrono::steady_clock::now()) job_id = it->second.job_id;
  }
  if (job_id.empty()) throw HttpError(404, "No such dashboard link (links last " + std::to_string(kDashboardLinkHours) + " hours and end with a restart; POST /v1/jobs/{id}/dashboard makes one)", "not_found");
  if (slash == std::string::npos) {  // the page loads its parts relative to a URL ending in '/'
    res.set("Location", path + "/");
    res.setStatus(Poco::Net::HTTPResponse::HTTP_FOUND);
    res.setContentLength(0);
    res.send();
    return;
  }
  const auto job = store_.job(job_id);
  if (!job) throw HttpError(404, "the job of this link is gone");
  const std::string run_dir = (fs::path(settings_.state_dir) / "users" / job->user / job->experiment / job->trial).string();
  if (!dashboard::answer_page(path.substr(slash), uri, dashboard::RunView{run_dir, job->state == JobState::kRunning, nullptr}, res))
    throw HttpError(404, "No such dashboard page: " + path.substr(slash));
}

void ServiceFront::forward(JobSlot& slot, const std::string& path, HTTPServerRequest& req, const std::string& body, HTTPServerResponse& res,
                           bool as_admin) {
  req.setURI(path);
  if (as_admin) {
    req.set("Authorization", "Bearer " + slot.runner->admin_key());
    req.erase("x-api-key");
  }
  gateway::Upstream::Answer answer;
  if (!slot.upstream->forward(req, body, res, false, answer))
    throw HttpError(502, "the gateway of job " + slot.runner->job().id + " is unreachable", "backend_unavailable");
}

int64_t ServiceFront::open_sessions(const std::string& user) {
  std::vector<std::string> urls;
  {
    std::lock_guard<std::mutex> lock(slots_mutex_);
    for (const auto& [id, slot] : slots_)
      if (slot->runner->job().user == user) urls.push_back(slot->runner->gateway_url());
  }
  int64_t open = 0;
  for (const auto& url : urls) {
    const json h = get_json(url, "/health");
    if (h.is_object()) open += h.value("sessions_active", int64_t{0});
  }
  return open;
}

int64_t ServiceFront::tokens_trained(const std::string& user) {
  int64_t total = 0;
  for (const auto& j : store_.jobs(user)) {
    std::lock_guard<std::mutex> lock(meters_mutex_);
    auto it = meters_.find(j.id);
    if (it == meters_.end())
      it = meters_.emplace(j.id, TokenMeter((fs::path(settings_.state_dir) / "users" / user / j.experiment / j.trial).string())).first;
    total += it->second.total();
  }
  return total;
}

void ServiceFront::check_token_quota(const std::string& user) {
  if (settings_.max_tokens <= 0) return;
  if (const int64_t used = tokens_trained(user); used >= settings_.max_tokens)
    throw HttpError(429, "Token quota used: your jobs have trained on " + std::to_string(used) + " tokens and this service allows " +
                             std::to_string(settings_.max_tokens) + "; ask the operator for more",
                    "quota_exceeded");
}

void ServiceFront::start_session(const std::string& user, JobSlot& slot, const std::string& path, HTTPServerRequest& req,
                                 const std::string& body, HTTPServerResponse& res) {
  const JobState s = slot.runner->state();
  if (s == JobState::kFinished || !tenants::job_state_active(s))
    throw HttpError(409, "job " + slot.runner->job().id + " is " + tenants::job_state_name(s) + ": it takes no more sessions (its model still "
                         "answers as '" + slot.runner->job().experiment + "/" + slot.runner->job().trial + "')");
  const auto b = gateway::parse_json_object(body, req.getContentType());
  const std::string& job_id = slot.runner->job().id;
  std::string claimed;  // a key this call routed to the job: released unless the session starts
  if (b.contains("api_key") && b["api_key"].is_string()) {
    // A key the client chose is claimed for this job before its gateway
    // sees it: two jobs can never both route one key. It is also a URL path
    // segment (/{key}/v1/...), so it may not name a route.
    const std::string chosen = b["api_key"].get<std::string>();
    if (chosen.size() < 8) throw HttpError(400, "'api_key': a session key must be at least 8 characters");
    if (chosen.find_first_of("/?#% ") != std::string::npos || gateway::known_top_segment("/" + chosen) || chosen == "jobs" || chosen == "dashboard")
      throw HttpError(400, "'api_key': a session key is also a URL segment; it must not contain / ? # % or spaces, nor name a route");
    if (store_.user_of_key(chosen)) throw HttpError(400, "'api_key' must not be a user's API key");
    bool newly = false;
    if (!store_.claim_session(chosen, job_id, &newly)) throw HttpError(409, "'api_key' is the key of a session of another job; choose another");
    if (newly) claimed = chosen;
  }
  gateway::Upstream::Answer answer;
  const std::shared_ptr<std::mutex> one_at_a_time = session_start_lock(user);
  std::lock_guard<std::mutex> start_lock(*one_at_a_time);
  try {
    check_token_quota(user);
    if (const int64_t open = open_sessions(user); open >= settings_.max_open_sessions)
      throw HttpError(429, "Session quota reached: your agents hold " + std::to_string(open) + " sessions open and this service allows " +
                               std::to_string(settings_.max_open_sessions) + "; end some first", "quota_exceeded");
    req.setURI(path);
    req.set("Authorization", "Bearer " + slot.runner->admin_key());
    req.erase("x-api-key");
    if (!slot.upstream->forward(req, body, res, /*capture=*/true, answer, /*send_to_client=*/false))
      throw HttpError(502, "the gateway of job " + job_id + " is unreachable", "backend_unavailable");
  } catch (...) {
    if (!claimed.empty()) store_.release_session(claimed, job_id);
    throw;
  }
  if (answer.status != 200 && !claimed.empty()) store_.release_session(claimed, job_id);
  if (answer.status == 200) {
    const json started = json::parse(answer.body, nullptr, false);
    // Routed before the agent learns the key: its first call finds the job.
    if (started.is_object() && started.contains("api_key") && !store_.claim_session(started["api_key"].get<std::string>(), job_id))
      throw HttpError(500, "a new session's key is already routed to another job");  // 256 random bits: never
  }
  gateway::send_json(res, answer.status, answer.body);
}

std::shared_ptr<std::mutex> ServiceFront::session_start_lock(const std::string& user) {
  std::lock_guard<std::mutex> lock(session_start_locks_mutex_);
  auto& m = session_start_locks_[user];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

void ServiceFront::job_base_url(const std::string& target, HTTPServerRequest& req, const std::string& body, HTTPServerResponse& res) {
  const std::string path = target.substr(0, target.find('?'));
  const std::string query = target.substr(path.size());
  const auto seg = segments(path);  // jobs, id, ...
  if (seg.size() < 2) throw HttpError(404, "A job's base URL is /jobs/{job id}");
  const std::string& id = seg[1];
  std::string rest = path.substr(std::string("/jobs/").size() + id.size());
  if (rest.empty()) rest = "/";
  if (rest.rfind("/v1/rl/", 0) == 0) rest.erase(0, 3);  // OpenAI base URLs end in /v1
  const std::string token = optional_key(req);
  // A session-scoped URL (/jobs/{id}/{session key}/v1/...): the URL is the
  // credential, whatever key the client's SDK sends beside it.
  if (const auto scoped = scoped_session_job(rest)) {
    if (*scoped != id) throw HttpError(404, "No job '" + id + "' for this session key", "not_found");
    return forward(session_slot(id), rest + query, req, body, res, /*as_admin=*/false);
  }
  if (const auto user = token.empty() ? std::nullopt : store_.user_of_key(token)) {
    JobSlot& slot = job_of(*user, id);
    if (start_session_path(rest)) return start_session(*user, slot, rest, req, body, res);
    if (rest == "/grant_capacity") throw HttpError(403, "Capacity is granted by the job's trainer, within its staleness bound");
    if (rest == "/metrics") throw HttpError(403, "/metrics is the operator's (it covers every job); GET /v1/jobs/{id}/metrics has your job's");
    return forward(slot, rest + query, req, body, res, /*as_admin=*/true);  // served, never recorded
  }
  if (session_job(token) != id) throw HttpError(404, "No job '" + id + "' for this session key", "not_found");
  forward(session_slot(id), rest + query, req, body, res, /*as_admin=*/false);
}

void ServiceFront::agent_call(const std::string& target, HTTPServerRequest& req, const std::string& body, HTTPServerResponse& res) {
  const std::string path = target.substr(0, target.find('?'));
  if (const auto scoped = scoped_session_job(path)) return forward(session_slot(*scoped), target, req, body, res, /*as_admin=*/false);
  const std::string token = optional_key(req);
  const auto user = token.empty() ? std::nullopt : store_.user_of_key(token);
  if (user) {
    const std::string route = path.rfind("/v1/rl/", 0) == 0 ? path.substr(3) : path;
    if (start_session_path(route)) {
      // Without a job's base URL: the job named in the body, or the user's only running one.
      const auto b = gateway::parse_json_object(body, req.getContentType());
      std::string id = b.contains("job") && b["job"].is_string() ? b["job"].get<std::string>() : "";
      if (id.empty()) {
        std::vector<std::string> running;
        for (const auto& j : store_.jobs(*user))
          if (j.state == JobState::kRunning || j.state == JobState::kQueued) running.push_back(j.id);
        if (running.size() != 1)
          throw HttpError(400, "Name the job: 'job' (its id) in the body, or start sessions at the job's base URL (/jobs/{id}); you have " +
                                   std::to_string(running.size()) + " running jobs");
        id = running.front();
      }
      JobSlot& slot = job_of(*user, id);
      json forwarded = b;
      forwarded.erase("job");
      return start_session(*user, slot, route, req, forwarded.dump(), res);
    }
    if (!model_call_path(path))
      throw HttpError(404, "Unknown endpoint " + req.getMethod() + " " + path + " for a user's key (see docs/service.md)", "not_found");
    // Phase 3: the model is "experiment/trial", one of this user's jobs.
    const auto b = gateway::parse_json_object(body, req.getContentType());
    const std::string model = b.contains("model") && b["model"].is_string() ? b["model"].get<std::string>() : "";
    const size_t slash = model.find('/');
    const auto job = slash == std::string::npos ? std::nullopt : store_.job_by_name(*user, model.substr(0, slash), model.substr(slash + 1));
    if (!job)
      throw HttpError(404, "The model '" + model + "' does not exist or you do not have access to it (your trained models are 'experiment/trial'; GET /v1/models lists them)",
                      "model_not_found");
    return forward(job_of(*user, job->id), target, req, body, res, /*as_admin=*/true);
  }
  forward(session_slot(session_job(token)), target, req, body, res, /*as_admin=*/false);
}

}  // namespace areal::host::service
