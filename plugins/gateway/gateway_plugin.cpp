// The built-in gateway: agents' HTTP front door. It is linked into
// areal-host but registers through the same C ABI as any plugin .so
// (AREAL_DEFINE_BUILTIN), so it passes the same conformance suite.
//
// Served now: GET /health, GET /v1/models (and /models), GET /metrics, and
// the session endpoints (session_routes.cpp). Anything else answers an
// OpenAI-style JSON error (404 or 405).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <thread>
#include <memory>
#include <mutex>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>
#include <exception>
#include <fstream>

#include <sys/resource.h>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "gateway_builtin.h"
#include "http_error.hpp"
#include "request.hpp"
#include "anthropic_routes.hpp"
#include "api_call.hpp"
#include "chat_routes.hpp"
#include "generate_route.hpp"
#include "responses_routes.hpp"
#include "session_control.hpp"
#include "session_routes.hpp"
#include "worker_router.hpp"
#include "server/http_server.hpp"
#include "core/recorder/state_db.hpp"

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;
namespace server = areal::gateway::server;
using Poco::Net::HTTPServerRequest;
using Poco::Net::HTTPServerResponse;

constexpr const char* kGatewayVersion = "0.1.0";

struct GatewayState {
  std::unique_ptr<areal::recorder::StateDb> state_db;  // durable state (gateway.state_dir); outlives the sessions below
  size_t max_request_bytes = 32u << 20;
  const areal_inference_ref* inference = nullptr;  // may be NULL
  std::string model_name = "default";
  std::atomic<uint64_t> requests{0};
  std::unique_ptr<areal::proxy::SessionStore> sessions;
  std::unique_ptr<areal::gateway::SessionRoutes> session_routes;
  std::unique_ptr<areal::gateway::SessionControl> control;
  std::unique_ptr<areal::gateway::ChatRoutes> chat_routes;
  std::unique_ptr<areal::gateway::AnthropicRoutes> anthropic_routes;
  std::unique_ptr<areal::gateway::ResponsesRoutes> responses_routes;
  std::unique_ptr<areal::gateway::GenerateRoute> generate_route;
  std::unique_ptr<areal::gateway::WorkerRouter> router;  // router mode (gateway.workers) only
  std::shared_ptr<areal::proxy::ChatService> chat;       // may be NULL (no tokenizer)
};

constexpr const char* kDefaultAdminKey = "areal-admin-key";

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The route a request is logged under: the path without its query, and a
// session-scoped URL's first segment (a session id, or a key) as {session}.
std::string logged_route(const std::string& target) {
  std::string path = target.substr(0, target.find('?'));
  std::string head, rest;
  if (areal::gateway::split_session_path(path, head, rest)) {
    path = "/{session}" + rest;
  } else if (path.size() > 1 && !areal::gateway::known_top_segment(path)) {
    // An unknown first segment may be a session key in a key-form URL to an
    // unknown route (/KEY/typo): never log it.
    const size_t slash = path.find('/', 1);
    if (slash != std::string::npos) path = "/{segment}" + path.substr(slash);
    else if (path.size() > 17) path = "/{segment}";
  }
  if (path.size() > 160) path = path.substr(0, 160) + "...";
  return path;
}

// Anthropic's routes answer errors in Anthropic's body shape.
bool anthropic_route(std::string route) {
  if (route.rfind("/{session}", 0) == 0) route.erase(0, 10);
  return route == "/v1/messages" || route == "/v1/messages/count_tokens" || route == "/messages" || route == "/messages/count_tokens";
}

std::string error_body_for(const std::string& route, int status, const std::string& message, const std::string& code = "") {
  if (anthropic_route(route)) return areal::gateway::AnthropicRoutes::error_body(status, message);
  return areal::gateway::openai_error_body(message, areal::gateway::error_type_for(status),
                                           code.empty() ? areal::gateway::error_code_for(status) : code);
}

// One line per refused request: status, route and reason, never a credential
// (keys travel in headers, and a key in a session URL is logged as {session}).
void log_refused(int status, const std::string& method, const std::string& route, const std::string& client, std::string reason) {
  for (char& ch : reason) if (static_cast<unsigned char>(ch) < 0x20) ch = ' ';
  if (reason.size() > 300) reason = reason.substr(0, 300) + "...";
  sdk::host().metric_add(sdk::str("areal_gateway_error_responses_total{status=\"" + std::to_string(status) + "\"}"), 1.0);
  // 429 is capacity backpressure: online-mode agents poll /rl/start_session
  // through it by design (thousands per run), so it stays out of the console.
  const areal_log_level level = status >= 500 ? AREAL_LOG_ERROR : status == 429 ? AREAL_LOG_DEBUG : AREAL_LOG_WARN;
  sdk::log(level, "gateway",
           std::to_string(status) + " " + method + " " + route + (client.empty() ? "" : " from " + client) + ": " + reason);
}

class Handler {
 public:
  explicit Handler(std::shared_ptr<GatewayState> state) : state_(std::move(state)) {}

  void handleRequest(HTTPServerRequest& req, HTTPServerResponse& res) {
    state_->requests++;
    std::string path = req.getURI();
    if (auto q = path.find('?'); q != std::string::npos) path.resize(q);  // e.g. Claude Code's ?beta=true
    // Agents get the OpenAI base URL (".../v1"); their SDK resolves /rl/* under it.
    if (path.rfind("/v1/rl/", 0) == 0) path.erase(0, 3);
    const std::string route = logged_route(path);
    sdk::host().metric_add(sdk::str("areal_gateway_requests_total"), 1.0);
    auto fail = [&](int status, const std::string& message, const std::string& code) {
      if (status == 413) res.setKeepAlive(false);  // the body was not taken whole: do not reuse the connection
      log_refused(status, req.getMethod(), route, req.clientAddress().host().toString(), message);
      // A stream that already sent its status line carries the error in-band.
      if (!res.sent()) areal::gateway::send_json(res, status, error_body_for(route, status, message, code));
    };
    try {
      // Every body is read before anything is answered, errors included: a
      // keep-alive connection must not carry unread bytes into the next request.
      const std::string body = areal::gateway::read_body(req, state_->max_request_bytes);
      if (!state_->router) scoped_to_session(req, path);
      // Anthropic clients given the base URL with /v1 (opencode's provider) post to /messages,
      // as OpenAI clients post to /chat/completions and /responses: all three work without /v1.
      if (path == "/messages" || path == "/messages/count_tokens") path = "/v1" + path;
      if (path == "/health") return get_only(req, res, [&] { health(res); });
      if (path == "/metrics") return get_only(req, res, [&] { metrics(res); });
      if (state_->router) return state_->router->handle(path, req, body, res);
      if (path == "/v1/models" || path == "/models") return get_only(req, res, [&] { models(res); });
      if (path.rfind("/v1/models/", 0) == 0 || path.rfind("/models/", 0) == 0)
        return get_only(req, res, [&] { model(res, path.substr(path.rfind("/models/") + 8)); });
      if (state_->session_routes->handle(path, req, body, res)) return;
      if (state_->chat_routes->handle(path, req, body, res)) return;
      if (state_->anthropic_routes->handle(path, req, body, res)) return;
      if (state_->responses_routes->handle(path, req, body, res)) return;
      if (state_->generate_route->handle(path, req, body, res)) return;
      throw areal::gateway::HttpError(404, "Unknown endpoint " + req.getMethod() + " " + route + " (see docs/http-api.md)", "not_found");
    } catch (const areal::gateway::HttpError& e) {
      fail(e.status, e.what(), e.code);
    } catch (const areal::gateway::StreamedError& e) {
      fail(e.status, e.what(), "");
    } catch (const sdk::Error& e) {
      const int status = areal::gateway::http_status_of(e);
      if (status == 503) res.set("Retry-After", "1");  // the state dir refused a write; nothing changed
      fail(status, e.what(), "");
    } catch (const std::exception& e) {
      fail(500, std::string("internal error: ") + e.what(), "internal_error");
    }
  }

 private:
  template <class F>
  void get_only(HTTPServerRequest& req, HTTPServerResponse& res, F&& f) {
    if (req.getMethod() != "GET" && req.getMethod() != "HEAD") {
      res.set("Allow", "GET");
      throw areal::gateway::HttpError(405, "Method " + req.getMethod() + " is not allowed on " + logged_route(req.getURI()), "method_not_allowed");
    }
    f();
  }

  void health(HTTPServerResponse& res) {
    if (state_->router) return areal::gateway::send_json(res, 200, state_->router->health().dump());
    json body{{"status", "ok"}, {"version", kGatewayVersion}};
    body["sessions_active"] = state_->sessions->active_count();  // what the managed service counts against a user's quota
    if (state_->inference != nullptr) {
      sdk::InferenceClient client(state_->inference);
      body["policy_version"] = client.version();
    }
    areal::gateway::send_json(res, 200, body.dump());
  }

  // The gateway serves one model under any name a client asks for (requests
  // echo their `model`), so every id resolves; the list names the real one,
  // then the LoRA adapters it serves (each with the base as "parent", as vLLM lists them).
  static json model_object(const std::string& id) {
    return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "areal"},
            {"type", "model"}, {"display_name", id}, {"created_at", "1970-01-01T00:00:00Z"}};  // Anthropic's fields too
  }

  void models(HTTPServerResponse& res) {
    json data = json::array({model_object(state_->model_name)});
    if (state_->chat && state_->chat->config().adapter.empty())  // one adapter only: the others are not this gateway's to list
      for (const auto& name : state_->chat->adapters().loaded()) {
        json m = model_object(name);
        m["parent"] = state_->model_name;
        m["root"] = state_->model_name;
        data.push_back(std::move(m));
      }
    areal::gateway::send_json(res, 200, json{{"object", "list"}, {"data", data}, {"has_more", false},
                                             {"first_id", data.front()["id"]}, {"last_id", data.back()["id"]}}.dump());
  }

  void model(HTTPServerResponse& res, const std::string& id) {
    if (id.empty()) throw areal::gateway::HttpError(404, "No model id in the path");
    areal::gateway::send_json(res, 200, model_object(id).dump());
  }

  // Session-scoped base URLs (the agent-workflow seed): /{session}/v1/...,
  // /{session}/chat/completions, /{session}/rl/... for agents that can set a
  // base URL but no key. {session} is the session's api_key (the URL is the
  // credential: 256 random bits), or its id together with that key (or the
  // admin key) in the request: ids are predictable (<task_id>-<n>), so an id
  // alone never acts for a session. The path is rewritten and the session's
  // key stands in for the request's credential.
  void scoped_to_session(HTTPServerRequest& req, std::string& path) {
    std::string head, rest;
    if (!areal::gateway::split_session_path(path, head, rest)) return;
    auto& sessions = *state_->sessions;
    std::shared_ptr<areal::proxy::Session> session;
    try {
      session = sessions.authorize(head);
    } catch (const sdk::Error& e) {
      if (e.code() == AREAL_CODE_FAILED_PRECONDITION) throw areal::gateway::HttpError(410, e.what());
    }
    if (!session) {
      try {
        session = sessions.find(head);
      } catch (const sdk::Error&) {
      }
      if (!session) throw areal::gateway::HttpError(404, "Unknown session in the URL (neither a session's api_key nor its id): start one with /rl/start_session");
      const std::string hint = "the URL names session " + session->id +
                               " by its id, which is not a credential: send the session's api_key (Authorization: Bearer or x-api-key), "
                               "or make the session's api_key the URL's first segment instead (/{api_key}/v1)";
      std::string token;
      try {
        token = areal::gateway::bearer_token(req);
      } catch (const areal::gateway::HttpError&) {
        throw areal::gateway::HttpError(401, "No API key: " + hint);
      }
      // Its own key (even once ended: its owner then learns it ended) or the admin's.
      if (!areal::proxy::keys_equal(session->api_key, token) && !sessions.is_admin(token))
        throw areal::gateway::HttpError(401, "The API key sent is not this session's: " + hint);
    }
    // An ended session's key may already belong to its successor (a refresh): the old id must not reach it.
    if (session->finished()) throw areal::gateway::HttpError(410, "Session " + session->id + " has ended (" + session->end_reason() + ")");
    path = rest;
    if (path.rfind("/v1/rl/", 0) == 0) path.erase(0, 3);
    if (path == "/models") path = "/v1/models";
    req.set("Authorization", "Bearer " + session->api_key);
    req.erase("x-api-key");
  }

  void metrics(HTTPServerResponse& res) {
    sdk::StringWriter w;
    sdk::throw_if_error(sdk::host().metrics_render(w.get()));
    res.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
    res.setContentType("text/plain; version=0.0.4");
    res.setContentLength(static_cast<std::streamsize>(w.text().size()));
    res.send() << w.text();
  }

  std::shared_ptr<GatewayState> state_;
};

class Gateway {
 public:
  static constexpr const char* kName = "gateway";
  static constexpr const char* kVersion = kGatewayVersion;
  static constexpr const char* kDescription = "Built-in OpenAI/Anthropic-compatible HTTP gateway (Poco).";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "host": {"type": "string", "default": "127.0.0.1", "doc": "Address to bind; 0.0.0.0 for all interfaces."},
    "port": {"type": "integer", "default": 8080, "minimum": 0, "maximum": 65535, "doc": "TCP port; 0 picks a free one (the log line shows which)."},
    "max_threads": {"type": "integer", "default": 256, "minimum": 1, "maximum": 65536, "doc": "Requests served at once (a streaming response holds a thread for its duration). Connections that are idle or still sending their request hold no thread: one event loop reads them."},
    "max_queued": {"type": "integer", "default": 1024, "minimum": 1, "doc": "Whole requests waiting for a thread; beyond that a request is answered 503 (Retry-After: 1) and its connection closed."},
    "client_timeout_s": {"type": "number", "default": 60, "minimum": 0.1, "doc": "Total deadlines: a request's line and headers must arrive within this long of its first byte, and its body within this long of the headers' end, however the bytes trickle; else 408 and the connection is closed. Also the send timeout: a client that takes nothing of a response for this long is dropped."},
    "idle_timeout_s": {"type": "number", "default": 60, "minimum": 0.1, "doc": "A connection with no byte of a (next) request for this long is closed: new connections that send nothing and idle keep-alive ones alike."},
    "max_connections": {"type": "integer", "default": 10000, "minimum": 1, "doc": "Open connections at once, in every state; beyond that a new one is answered 503 (Retry-After: 1) and closed. Lowered to what the process's file-descriptor limit allows (raised to its hard limit at start)."},
    "max_connections_per_client": {"type": "integer", "default": 1024, "minimum": 1, "doc": "Open connections at once from one client address; beyond that a new one is answered 503 (Retry-After: 1) and closed."},
    "admin_api_key": {"type": "string", "default": "areal-admin-key", "doc": "Key for admin endpoints (start_session, grant_capacity, export). The default is refused on a non-loopback host."},
    "capacity": {"type": "integer", "default": -1, "minimum": -1, "doc": "Sessions that may start before /grant_capacity adds more (HTTP 429 at 0); -1 = unlimited. The trainer sets this from its staleness budget."},
    "session_timeout_seconds": {"type": "number", "default": 3600, "minimum": 1, "doc": "Idle sessions are ended (and kept for export) after this long; a session waiting on its own call (generating, or queued) is not idle, and its idle time starts again when the call answers."},
    "turn_discount": {"type": "number", "default": 1.0, "minimum": 0, "maximum": 1, "doc": "Default reward discount along a conversation for /export_trajectories."},
    "export_style": {"type": "string", "enum": ["individual", "concat"], "default": "individual", "doc": "Default export style: a row per call, or a row per conversation."},
    "export_format": {"type": "string", "enum": ["rows", "areal", "both"], "default": "both", "doc": "What /export_trajectories answers by default: rows (our token arrays), areal (AReaL's base64 tensor dicts under interactions, which AReaL's OpenAIProxyClient.export_interactions reads) or both. A request's own format field overrides it."},
    "trajectories_jsonl": {"type": "string", "default": "", "doc": "Append every exported session to this JSONL file (empty: off). Opened at start (a path that cannot be opened is refused then); a later write that fails (a full disk) is logged and counted in areal_gateway_trajectories_jsonl_errors_total, and the session still goes to whoever exported it."},
    "max_request_bytes": {"type": "integer", "default": 33554432, "minimum": 1024, "doc": "Larger request bodies are refused with 413."},
    "tokenizer": {"type": "string", "format": "path", "default": "", "doc": "Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json with its chat_template); required for chat completions."},
    "prompt_mode": {"type": "string", "enum": ["hf", "concat"], "default": "hf", "doc": "hf: re-render the conversation each call; concat: extend the previous call's exact tokens (needed for concat export)."},
    "record_routing": {"type": "boolean", "default": false, "doc": "Mixture-of-experts models: ask the inference backend for the experts each call's positions were routed to and keep them with the call (durable, exported as routed_experts), for routing replay in training (train.moe.routing_replay: rollout). Needs a backend whose info says \"routing\": true (the local engine serving a MoE model); refused otherwise. Off: no cost (recording turns CUDA graphs off for the steps of requests that ask)."},
    "default_max_tokens": {"type": "integer", "default": 1024, "minimum": 1, "doc": "Completion budget when a request gives neither max_tokens nor max_completion_tokens."},
    "max_completion_tokens": {"type": "integer", "default": 0, "minimum": 0, "doc": "Caps every request's completion budget (agents ask for up to 32000); 0: only the context limits it."},
    "reasoning_parser": {"type": "string", "enum": ["auto", "qwen3", "deepseek_r1", "none"], "default": "auto", "doc": "Splits <think>...</think> into reasoning_content. qwen3: the output opens <think> itself (text before a lone </think> is reasoning too); deepseek_r1: the prompt opened <think>, so everything up to </think> is reasoning. auto: none if the chat template never mentions <think>, deepseek_r1 if its generation prompt ends with <think>, else qwen3; decided again for the generation prompt with enable_thinking false, which requests turning thinking off get (a template that opens <think> by default may close it then, as Qwen3.5's does)."},
    "tool_call_parser": {"type": "string", "enum": ["auto", "qwen", "hermes", "qwen3_coder", "llama3", "mistral", "deepseek_v3", "none"], "default": "auto", "doc": "Parses the model's tool-call markup into tool_calls: qwen/hermes <tool_call>{json}</tool_call>; qwen3_coder <tool_call><function=NAME><parameter=P>...; llama3 {\"name\", \"parameters\"} JSON, optionally after the python_tag token; mistral [TOOL_CALLS]; deepseek_v3 <｜tool▁calls▁begin｜>. auto: from the chat template (<function= and <parameter= -> qwen3_coder, <tool_call> -> qwen, <｜tool▁calls▁begin｜> -> deepseek_v3, [TOOL_CALLS] -> mistral, the python_tag token or a Llama 3 \"parameters\" tool prompt -> llama3, else none). A call that cannot be read stays text and is counted (areal_gateway_unreadable_tool_calls_total)."},
    "model": {"type": "string", "default": "", "doc": "Model name reported to clients; empty: the inference backend's."},
    "adapter": {"type": "string", "default": "", "doc": "Generate every request with this LoRA adapter of the inference backend, whatever the request's `model` names (empty: `model` may name any loaded adapter, else the base serves). The managed service gives each job's gateway its job's adapter (docs/service.md)."},
    "workers": {"type": "array", "items": {"type": "string"}, "default": [], "doc": "Router mode: base URLs of worker gateways (areal-host serve processes). Sessions are spread over them and every request of a session goes to its worker; this gateway then serves no model itself (docs/http-api.md)."},
    "state_dir": {"type": "string", "default": "auto", "doc": "Where sessions, calls (token ids, log-probs, versions), rewards, ends and capacity are committed (SQLite in WAL mode) before a client is answered, so that a crash or restart loses none of them (docs/durability.md). auto: <output_dir>/<name>/<trial>/gateway_state for areal-host serve and online training, memory only for inline training (its episodes are re-run on resume) and router mode; none: memory only."},
    "state_sync": {"type": "string", "enum": ["full", "normal"], "default": "full", "doc": "full: every commit is fsynced (survives power loss); normal: committed state survives a crash of the process, the last commits may be lost when the machine loses power."},
    "worker_idle_timeout_s": {"type": "number", "default": 3600, "minimum": 1, "doc": "Router mode: longest silence from a worker within one answer (no total timeout)."}
  }})";

  explicit Gateway(const sdk::CreateContext& ctx) : state_(std::make_shared<GatewayState>()) {
    const json c = sdk::parse_object(ctx.config_json(), "gateway: config");
    host_ = c.value("host", "127.0.0.1");
    port_ = c.value("port", 8080);
    server_options_.max_threads = c.value("max_threads", 256);
    server_options_.max_queued = c.value("max_queued", size_t{1024});
    const std::chrono::duration<double> client_timeout(c.value("client_timeout_s", 60.0));
    server_options_.head_timeout = server_options_.body_timeout = server_options_.send_timeout = client_timeout;
    server_options_.idle_timeout = std::chrono::duration<double>(c.value("idle_timeout_s", 60.0));
    server_options_.max_connections = c.value("max_connections", size_t{10000});
    server_options_.max_connections_per_client = c.value("max_connections_per_client", size_t{1024});
    if (port_ < 0 || port_ > 65535) throw sdk::invalid_argument("gateway: port must be in [0, 65535]");
    const std::string admin_key = c.value("admin_api_key", std::string(kDefaultAdminKey));
    if (admin_key.empty()) throw sdk::invalid_argument("gateway: admin_api_key must not be empty");
    if (admin_key == kDefaultAdminKey && !is_loopback(host_))
      throw sdk::invalid_argument("gateway: the default admin_api_key is refused on a non-loopback host (" + host_ +
                                  "); set gateway.admin_api_key to a secret");
    state_->sessions = std::make_unique<areal::proxy::SessionStore>(
        areal::proxy::SessionStoreConfig{admin_key, c.value("capacity", int64_t{-1}), c.value("session_timeout_seconds", 3600.0)});
    open_state(c);
    areal::gateway::SessionSettings settings;
    settings.turn_discount = c.value("turn_discount", 1.0);
    settings.export_style = c.value("export_style", std::string("individual"));
    settings.export_format = c.value("export_format", std::string("both"));
    settings.trajectories_jsonl = c.value("trajectories_jsonl", std::string());
    if (!settings.trajectories_jsonl.empty() && !std::ofstream(settings.trajectories_jsonl, std::ios::app))
      throw sdk::invalid_argument("gateway: trajectories_jsonl '" + settings.trajectories_jsonl + "' cannot be opened for appending");
    settings.max_request_bytes = c.value("max_request_bytes", size_t{32u << 20});
    state_->max_request_bytes = settings.max_request_bytes;
    server_options_.limits.max_body_bytes = settings.max_request_bytes;
    state_->session_routes = std::make_unique<areal::gateway::SessionRoutes>(*state_->sessions, settings);
    if (c.contains("workers") && c["workers"].is_array() && !c["workers"].empty()) {
      if (!c.value("tokenizer", std::string()).empty())
        throw sdk::invalid_argument("gateway: router mode (workers) serves no model itself; drop 'tokenizer' (each worker has its own)");
      try {
        state_->router = std::make_unique<areal::gateway::WorkerRouter>(c["workers"].get<std::vector<std::string>>(),
                                                                         c.value("worker_idle_timeout_s", 3600.0),
                                                                         [sessions = state_->sessions.get()](const std::string& t) { return sessions->is_admin(t); });
      } catch (const std::exception& e) {
        throw sdk::invalid_argument(e.what());
      }
    }
    std::shared_ptr<areal::proxy::ChatService> chat;
    const std::string tokenizer_dir = c.value("tokenizer", std::string());
    if (!tokenizer_dir.empty()) {
      if (!ctx.has_inference()) throw sdk::invalid_argument("gateway: 'tokenizer' is set but no inference backend is configured");
      auto tok = areal::tokenizer::Tokenizer::from_dir(tokenizer_dir);
      auto tmpl = std::make_shared<areal::jinja::ChatTemplate>(areal::jinja::ChatTemplate::from_tokenizer_config(tok->config()));
      areal::proxy::ChatServiceConfig cc;
      cc.prompt_mode = c.value("prompt_mode", std::string("hf"));
      cc.default_max_tokens = c.value("default_max_tokens", int64_t{1024});
      cc.max_completion_tokens = c.value("max_completion_tokens", int64_t{0});
      cc.parsers.reasoning_parser = c.value("reasoning_parser", std::string("auto"));
      cc.parsers.tool_call_parser = c.value("tool_call_parser", std::string("auto"));
      cc.parsers.on_unreadable_tool_calls = areal::gateway::count_unreadable_tool_calls;
      const json info = json::parse(ctx.inference().info());
      cc.max_context = info.value("max_context", int64_t{32768});
      cc.model_name = c.value("model", std::string()).empty() ? info.value("model", std::string("default")) : c.value("model", std::string());
      cc.adapter = c.value("adapter", std::string());
      cc.record_routing = c.value("record_routing", false);
      cc.on_unrouted_call = areal::gateway::count_unrouted_call;
      cc.on_template_rewrite = areal::gateway::count_template_rewrite;
      if (cc.record_routing && !info.value("routing", false))
        throw sdk::invalid_argument("gateway: 'record_routing' is on but the inference backend does not report expert routing (its info has no "
                                    "\"routing\": true): the local engine reports it for mixture-of-experts models; vLLM and SGLang do not through areal "
                                    "(docs/backends.md)");
      if (info.contains("vocab_size") && info["vocab_size"].get<size_t>() < tok->vocab_size())
        throw sdk::invalid_argument("gateway: the tokenizer has " + std::to_string(tok->vocab_size()) + " tokens but the inference backend's vocabulary has " +
                                    std::to_string(info["vocab_size"].get<size_t>()));
      chat = std::make_shared<areal::proxy::ChatService>(tok, tmpl, ctx.services()->inference, cc);
      const auto& chosen = chat->config().parsers;
      sdk::log(AREAL_LOG_INFO, "gateway", "output parsers: reasoning_parser " + chosen.reasoning_parser +
                                              (chosen.reasoning_parser_thinking_off.empty() || chosen.reasoning_parser_thinking_off == chosen.reasoning_parser
                                                   ? ""
                                                   : " (" + chosen.reasoning_parser_thinking_off + " with enable_thinking false)") +
                                              ", tool_call_parser " + chosen.tool_call_parser +
                                              (cc.parsers.reasoning_parser == "auto" || cc.parsers.tool_call_parser == "auto" ? " (auto: chosen from the chat template)" : ""));
      state_->model_name = cc.model_name;
      state_->chat = chat;
    }
    state_->control = std::make_unique<areal::gateway::SessionControl>(*state_->sessions, *state_->session_routes, chat);
    state_->chat_routes = std::make_unique<areal::gateway::ChatRoutes>(chat, *state_->session_routes, *state_->sessions, settings.max_request_bytes);
    state_->anthropic_routes =
        std::make_unique<areal::gateway::AnthropicRoutes>(chat, *state_->session_routes, *state_->sessions, settings.max_request_bytes);
    state_->responses_routes = std::make_unique<areal::gateway::ResponsesRoutes>(chat, *state_->session_routes, *state_->sessions);
    state_->generate_route = std::make_unique<areal::gateway::GenerateRoute>(chat, *state_->session_routes, *state_->sessions);
    // Idle sessions end on a timer too, not only when someone starts or exports one.
    const double timeout = c.value("session_timeout_seconds", 3600.0);
    const auto period = std::chrono::milliseconds(static_cast<int64_t>(std::clamp(timeout * 1000.0 / 4.0, 50.0, 30000.0)));
    sweeper_ = sdk::guarded_thread("gateway.sweeper", [this, period, timeout] {
      std::unique_lock<std::mutex> lock(sweep_mutex_);
      while (!sweep_cv_.wait_for(lock, period, [&] { return !sweeping_; })) {
        sdk::contain("gateway.sweeper", [&] {  // one failed sweep; the next one runs
          for (const auto& id : state_->sessions->expire_idle())
            sdk::log(AREAL_LOG_INFO, "gateway", "session " + id + " expired after " + std::to_string(static_cast<int64_t>(timeout)) +
                                                    " s idle; kept for export");
        });
      }
    });
    if (ctx.has_inference()) {
      state_->inference = ctx.services()->inference;
      try {
        json info = json::parse(ctx.inference().info());
        const std::string configured = c.value("model", std::string());
        state_->model_name = configured.empty() ? info.value("model", "default") : configured;
      } catch (const json::exception&) {
        // info() is validated by conformance; a bad one only costs the model name.
      }
    }
  }

  ~Gateway() {
    stop();
    {
      std::lock_guard<std::mutex> lock(sweep_mutex_);
      sweeping_ = false;
    }
    sweep_cv_.notify_all();
    if (sweeper_.joinable()) sweeper_.join();
  }

  std::string start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (server_) throw sdk::Error(AREAL_CODE_FAILED_PRECONDITION, "gateway is already running");
    server::ServerOptions options = server_options_;
    options.host = host_;
    options.port = port_;
    options.max_connections = std::min(options.max_connections, descriptor_budget());
    auto state = state_;
    server_ = std::make_unique<server::HttpServer>(
        options, [state](HTTPServerRequest& req, HTTPServerResponse& res) { Handler(state).handleRequest(req, res); },
        [](const server::Refusal& r) { return error_body_for(logged_route(r.target), r.status, r.message); },
        [](const server::Refusal& r) {
          log_refused(r.status, r.method.empty() ? "-" : r.method, r.target.empty() ? "-" : logged_route(r.target), r.client, r.message);
        });
    uint16_t port = 0;
    try {
      port = server_->start();
    } catch (const std::exception& e) {
      server_.reset();
      throw sdk::unavailable(std::string("gateway: ") + e.what());
    }
    url_ = "http://" + host_ + ":" + std::to_string(port);
    return url_;
  }

  // The session slots (ABI 1.4), for the trainer in this process.
  int64_t grant_capacity(int64_t n) { return state_->control->grant_capacity(n); }
  std::pair<std::string, std::string> start_session(std::string_view task_id, std::string_view group_id) {
    return state_->control->start_session(task_id, group_id);
  }
  void set_session_reward(std::string_view session_id, std::string_view interaction_id, double reward) {
    state_->control->set_session_reward(session_id, interaction_id, reward);
  }
  void end_session(std::string_view session_id) { state_->control->end_session(session_id); }
  void take_finished(int64_t timeout_ms, const areal_trajectory_sink& sink) { state_->control->take_finished(timeout_ms, sink); }
  void export_session(std::string_view session_id, double discount, const areal_trajectory_sink& sink) {
    state_->control->export_session(session_id, discount, sink);
  }
  std::string session_chat(std::string_view session_id, std::string_view request_json) {
    return state_->control->session_chat(session_id, request_json);
  }
  void mark_sessions_trained(const std::vector<std::string>& session_ids, int64_t checkpoint_step) {
    state_->sessions->mark_trained(session_ids, checkpoint_step);
  }
  void commit_checkpoint(int64_t step) {
    if (const size_t back = state_->sessions->commit_checkpoint(step))
      sdk::log(AREAL_LOG_INFO, "gateway", std::to_string(back) + " sessions trained after checkpoint " + std::to_string(step) +
                                              " (lost with the previous process) are handed out again");
  }

  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!server_) return;
    server_->stop();  // also closes open keep-alive connections
    server_.reset();
  }

 private:
  // Connections the process can hold: its descriptor limit, raised to the hard
  // limit first, less a reserve for the state dir, plugins and logs.
  static size_t descriptor_budget() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
    if (limit.rlim_cur < limit.rlim_max) {
      limit.rlim_cur = limit.rlim_max;
      setrlimit(RLIMIT_NOFILE, &limit);
      getrlimit(RLIMIT_NOFILE, &limit);
    }
    return limit.rlim_cur > 512 ? static_cast<size_t>(limit.rlim_cur) - 256 : 256;
  }

  // Opens gateway.state_dir (unless none) and takes back what the previous
  // process left there. "auto" is resolved by areal-host; a gateway created
  // elsewhere with it keeps memory only.
  void open_state(const json& c) {
    const std::string dir = c.value("state_dir", std::string("none"));
    if (dir.empty() || dir == "none" || dir == "auto") return;
    if (c.contains("workers") && c["workers"].is_array() && !c["workers"].empty())
      throw sdk::invalid_argument("gateway: router mode (workers) records no sessions itself; set state_dir on the workers, not here");
    try {
      state_->state_db = std::make_unique<areal::recorder::StateDb>(areal::recorder::StateDbOptions{dir, c.value("state_sync", std::string("full")) != "normal"});
    } catch (const sdk::Error& e) {
      throw sdk::Error(e.code(), std::string("gateway: ") + e.what());
    }
    state_->sessions->journal_to(state_->state_db.get());  // first: recovered sessions journal their next changes
    const auto summary = state_->sessions->recover(state_->state_db->take_recovered());
    sdk::log(AREAL_LOG_INFO, "gateway",
             "state in " + state_->state_db->path() + ": recovered " + std::to_string(summary.active) + " active and " +
                 std::to_string(summary.ended) + " ended sessions" +
                 (summary.trained ? ", " + std::to_string(summary.trained) + " trained ones awaiting the trainer's checkpoint" : std::string()) +
                 (summary.failed_in_flight ? ", " + std::to_string(summary.failed_in_flight) + " calls in flight at the crash marked failed" : std::string()) +
                 (summary.owed_grants ? "; the next " + std::to_string(summary.owed_grants) + " capacity grants go to them" : std::string()));
  }

  std::shared_ptr<GatewayState> state_;
  std::string host_;
  int port_ = 8080;
  server::ServerOptions server_options_;
  std::mutex mutex_;
  std::unique_ptr<server::HttpServer> server_;
  std::string url_;
  std::mutex sweep_mutex_;
  std::condition_variable sweep_cv_;
  bool sweeping_ = true;
  std::thread sweeper_;
};

}  // namespace

extern "C" AREAL_DEFINE_BUILTIN(Gateway, AREAL_KIND_GATEWAY, GatewayAdapter, areal_builtin_gateway_init)
