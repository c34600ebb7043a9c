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

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/Net/TCPServer.h>
#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "gateway_builtin.h"
#include "http_error.hpp"
#include "request.hpp"
#include "anthropic_routes.hpp"
#include "api_call.hpp"
#include "chat_routes.hpp"
#include "responses_routes.hpp"
#include "session_control.hpp"
#include "session_routes.hpp"
#include "worker_router.hpp"
#include "core/recorder/state_db.hpp"

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;
using Poco::Net::HTTPRequestHandler;
using Poco::Net::HTTPServerRequest;
using Poco::Net::HTTPServerResponse;

constexpr const char* kGatewayVersion = "0.1.0";

struct GatewayState {
  std::unique_ptr<areal::recorder::StateDb> state_db;  // durable state (gateway.state_dir); outlives the sessions below
  size_t max_request_bytes = 32u << 20;
  std::chrono::duration<double> client_timeout{60.0};  // gateway.client_timeout_s
  const areal_inference_ref* inference = nullptr;  // may be NULL
  std::string model_name = "default";
  std::atomic<uint64_t> requests{0};
  std::unique_ptr<areal::proxy::SessionStore> sessions;
  std::unique_ptr<areal::gateway::SessionRoutes> session_routes;
  std::unique_ptr<areal::gateway::SessionControl> control;
  std::unique_ptr<areal::gateway::ChatRoutes> chat_routes;
  std::unique_ptr<areal::gateway::AnthropicRoutes> anthropic_routes;
  std::unique_ptr<areal::gateway::ResponsesRoutes> responses_routes;
  std::unique_ptr<areal::gateway::WorkerRouter> router;  // router mode (gateway.workers) only
};

constexpr const char* kDefaultAdminKey = "areal-admin-key";

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

class Handler : public HTTPRequestHandler {
 public:
  explicit Handler(std::shared_ptr<GatewayState> state) : state_(std::move(state)) {}

  void handleRequest(HTTPServerRequest& req, HTTPServerResponse& res) override {
    state_->requests++;
    std::string path = req.getURI();
    if (auto q = path.find('?'); q != std::string::npos) path.resize(q);  // e.g. Claude Code's ?beta=true
    // Agents get the OpenAI base URL (".../v1"); their SDK resolves /rl/* under it.
    if (path.rfind("/v1/rl/", 0) == 0) path.erase(0, 3);
    bool anthropic = path == "/v1/messages" || path == "/v1/messages/count_tokens";  // errors in Anthropic's body shape
    sdk::host().metric_add(sdk::str("areal_gateway_requests_total"), 1.0);
    try {
      // Every body is read before anything is answered, errors included: a
      // keep-alive connection must not carry unread bytes into the next request.
      const std::string body = areal::gateway::read_body(req, state_->max_request_bytes, state_->client_timeout);
      if (!state_->router && scoped_to_session(req, path)) anthropic = path == "/v1/messages" || path == "/v1/messages/count_tokens";
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
      areal::gateway::send_error(res, 404, "Unknown endpoint " + req.getMethod() + " " + path + " (see docs/http-api.md)",
                                 "invalid_request_error", "not_found");
    } catch (const areal::gateway::HttpError& e) {
      if (e.status == 413 || e.status == 408) res.setKeepAlive(false);  // the body was not read whole: do not reuse the connection
      if (anthropic) return areal::gateway::send_json(res, e.status, areal::gateway::AnthropicRoutes::error_body(e.status, e.what()));
      areal::gateway::send_error(res, e.status, e.what(), areal::gateway::error_type_for(e.status),
                                 e.code.empty() ? areal::gateway::error_code_for(e.status) : e.code);
    } catch (const sdk::Error& e) {
      const int status = areal::gateway::http_status_of(e);
      if (status == 503) res.set("Retry-After", "1");  // the state dir refused a write; nothing changed
      if (anthropic) return areal::gateway::send_json(res, status, areal::gateway::AnthropicRoutes::error_body(status, e.what()));
      areal::gateway::send_error(res, status, e.what(), areal::gateway::error_type_for(status),
                                 areal::gateway::error_code_for(status));
    } catch (const std::exception& e) {
      const std::string message = std::string("internal error: ") + e.what();
      if (anthropic) return areal::gateway::send_json(res, 500, areal::gateway::AnthropicRoutes::error_body(500, message));
      areal::gateway::send_error(res, 500, message, "server_error", "internal_error");
    }
  }

 private:
  template <class F>
  void get_only(HTTPServerRequest& req, HTTPServerResponse& res, F&& f) {
    if (req.getMethod() != "GET" && req.getMethod() != "HEAD") {
      res.set("Allow", "GET");
      return areal::gateway::send_error(res, 405, "Method " + req.getMethod() + " is not allowed on " + req.getURI(),
                                        "invalid_request_error", "method_not_allowed");
    }
    f();
  }

  void health(HTTPServerResponse& res) {
    if (state_->router) return areal::gateway::send_json(res, 200, state_->router->health().dump());
    json body{{"status", "ok"}, {"version", kGatewayVersion}};
    if (state_->inference != nullptr) {
      sdk::InferenceClient client(state_->inference);
      body["policy_version"] = client.version();
    }
    areal::gateway::send_json(res, 200, body.dump());
  }

  // The gateway serves one model under any name a client asks for (requests
  // echo their `model`), so every id resolves; the list names the real one.
  static json model_object(const std::string& id) {
    return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "areal"},
            {"type", "model"}, {"display_name", id}, {"created_at", "1970-01-01T00:00:00Z"}};  // Anthropic's fields too
  }

  void models(HTTPServerResponse& res) {
    const json data = json::array({model_object(state_->model_name)});
    areal::gateway::send_json(res, 200, json{{"object", "list"}, {"data", data}, {"has_more", false},
                                             {"first_id", state_->model_name}, {"last_id", state_->model_name}}.dump());
  }

  void model(HTTPServerResponse& res, const std::string& id) {
    if (id.empty()) throw areal::gateway::HttpError(404, "No model id in the path");
    areal::gateway::send_json(res, 200, model_object(id).dump());
  }

  // Session-scoped base URLs (the agent-workflow seed): /{session}/v1/...,
  // /{session}/chat/completions, /{session}/rl/... where {session} is a
  // session id or a session key, for agents that can set a base URL but no
  // key. The path is rewritten and the session's key stands in for whatever
  // credential the request carried. Returns whether the path was scoped.
  bool scoped_to_session(HTTPServerRequest& req, std::string& path) {
    std::string head, rest;
    if (!areal::gateway::split_session_path(path, head, rest)) return false;
    std::shared_ptr<areal::proxy::Session> session;
    try {
      session = state_->sessions->find(head);
    } catch (const sdk::Error&) {
    }
    if (!session) {
      try {
        session = state_->sessions->authorize(head);
      } catch (const sdk::Error& e) {
        if (e.code() == AREAL_CODE_FAILED_PRECONDITION) throw areal::gateway::HttpError(410, e.what());
      }
    }
    if (!session) throw areal::gateway::HttpError(404, "Unknown session '" + head + "' in the URL: start one with /rl/start_session");
    // An ended session's key may already belong to its successor (a refresh): the old id must not reach it.
    if (session->finished()) throw areal::gateway::HttpError(410, "Session " + session->id + " has ended (" + session->end_reason() + ")");
    path = rest;
    if (path.rfind("/v1/rl/", 0) == 0) path.erase(0, 3);
    if (path == "/messages") path = "/v1/messages";
    if (path == "/models") path = "/v1/models";
    req.set("Authorization", "Bearer " + session->api_key);
    req.erase("x-api-key");
    return true;
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

// Too many connections: once max_queued wait for a thread, a new one gets
// 503 with an error body and is closed at once, where Poco would close it
// without a word (and a client would see a reset, or wait on a backlog).
class RefuseWhenFull : public Poco::Net::TCPServerConnectionFilter {
 public:
  RefuseWhenFull(const Poco::Net::TCPServer& server, int max_queued) : server_(server), max_queued_(max_queued) {}
  bool accept(const Poco::Net::StreamSocket& socket) override {
    if (server_.queuedConnections() < max_queued_) return true;
    sdk::host().metric_add(sdk::str("areal_gateway_connections_refused_total"), 1.0);
    const std::string body = areal::gateway::openai_error_body(
        "Too many connections: " + std::to_string(server_.currentConnections()) + " being served and " + std::to_string(max_queued_) +
            " waiting (gateway.max_threads, gateway.max_queued); retry shortly",
        "server_error", "unavailable");
    const std::string response = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body;
    try {
      Poco::Net::StreamSocket s(socket);
      s.setSendTimeout(Poco::Timespan(1, 0));  // never let a stuck client block the accept loop
      s.sendBytes(response.data(), static_cast<int>(response.size()));
      s.shutdownSend();
    } catch (const Poco::Exception&) {
      // The client is gone already: nothing to tell it.
    }
    return false;
  }

 private:
  const Poco::Net::TCPServer& server_;
  const int max_queued_;
};

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(std::shared_ptr<GatewayState> state) : state_(std::move(state)) {}
  HTTPRequestHandler* createRequestHandler(const HTTPServerRequest&) override { return new Handler(state_); }

 private:
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
    "max_threads": {"type": "integer", "default": 256, "minimum": 1, "maximum": 65536, "doc": "Request threads; each streaming response holds one for its duration."},
    "max_queued": {"type": "integer", "default": 1024, "minimum": 1, "doc": "Accepted connections waiting for a thread; beyond that a new connection is answered 503 (Retry-After: 1) and closed at once."},
    "client_timeout_s": {"type": "number", "default": 60, "minimum": 0.1, "doc": "A client must send its request line and headers, each read, within this long, and its whole body within this long again; else 408 and the connection is closed. Also how long an idle keep-alive connection is kept."},
    "admin_api_key": {"type": "string", "default": "areal-admin-key", "doc": "Key for admin endpoints (start_session, grant_capacity, export). The default is refused on a non-loopback host."},
    "capacity": {"type": "integer", "default": -1, "minimum": -1, "doc": "Sessions that may start before /grant_capacity adds more (HTTP 429 at 0); -1 = unlimited. The trainer sets this from its staleness budget."},
    "session_timeout_seconds": {"type": "number", "default": 3600, "minimum": 1, "doc": "Idle sessions are ended (and kept for export) after this long."},
    "turn_discount": {"type": "number", "default": 1.0, "minimum": 0, "maximum": 1, "doc": "Default reward discount along a conversation for /export_trajectories."},
    "export_style": {"type": "string", "enum": ["individual", "concat"], "default": "individual", "doc": "Default export style: a row per call, or a row per conversation."},
    "trajectories_jsonl": {"type": "string", "default": "", "doc": "Append every exported session to this JSONL file (empty: off)."},
    "max_request_bytes": {"type": "integer", "default": 33554432, "minimum": 1024, "doc": "Larger request bodies are refused with 413."},
    "tokenizer": {"type": "string", "format": "path", "default": "", "doc": "Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json with its chat_template); required for chat completions."},
    "prompt_mode": {"type": "string", "enum": ["hf", "concat"], "default": "hf", "doc": "hf: re-render the conversation each call; concat: extend the previous call's exact tokens (needed for concat export)."},
    "default_max_tokens": {"type": "integer", "default": 1024, "minimum": 1, "doc": "Completion budget when a request gives neither max_tokens nor max_completion_tokens."},
    "max_completion_tokens": {"type": "integer", "default": 0, "minimum": 0, "doc": "Caps every request's completion budget (agents ask for up to 32000); 0: only the context limits it."},
    "reasoning_parser": {"type": "string", "enum": ["auto", "qwen3", "deepseek_r1", "none"], "default": "auto", "doc": "Splits <think>...</think> into reasoning_content. qwen3: the output opens <think> itself (text before a lone </think> is reasoning too); deepseek_r1: the prompt opened <think>, so everything up to </think> is reasoning. auto: none if the chat template never mentions <think>, deepseek_r1 if its generation prompt ends with <think>, else qwen3."},
    "tool_call_parser": {"type": "string", "enum": ["auto", "qwen", "hermes", "qwen3_coder", "llama3", "mistral", "deepseek_v3", "none"], "default": "auto", "doc": "Parses the model's tool-call markup into tool_calls: qwen/hermes <tool_call>{json}</tool_call>; qwen3_coder <tool_call><function=NAME><parameter=P>...; llama3 {\"name\", \"parameters\"} JSON, optionally after the python_tag token; mistral [TOOL_CALLS]; deepseek_v3 <｜tool▁calls▁begin｜>. auto: from the chat template (<function= and <parameter= -> qwen3_coder, <tool_call> -> qwen, <｜tool▁calls▁begin｜> -> deepseek_v3, [TOOL_CALLS] -> mistral, the python_tag token or a Llama 3 \"parameters\" tool prompt -> llama3, else none). A call that cannot be read stays text and is counted (areal_gateway_unreadable_tool_calls_total)."},
    "model": {"type": "string", "default": "", "doc": "Model name reported to clients; empty: the inference backend's."},
    "workers": {"type": "array", "items": {"type": "string"}, "default": [], "doc": "Router mode: base URLs of worker gateways (areal-host serve processes). Sessions are spread over them and every request of a session goes to its worker; this gateway then serves no model itself (docs/http-api.md)."},
    "state_dir": {"type": "string", "default": "auto", "doc": "Where sessions, calls (token ids, log-probs, versions), rewards, ends and capacity are committed (SQLite in WAL mode) before a client is answered, so that a crash or restart loses none of them (docs/durability.md). auto: <output_dir>/<name>/<trial>/gateway_state for areal-host serve and online training, memory only for inline training (its episodes are re-run on resume) and router mode; none: memory only."},
    "state_sync": {"type": "string", "enum": ["full", "normal"], "default": "full", "doc": "full: every commit is fsynced (survives power loss); normal: committed state survives a crash of the process, the last commits may be lost when the machine loses power."},
    "worker_idle_timeout_s": {"type": "number", "default": 3600, "minimum": 1, "doc": "Router mode: longest silence from a worker within one answer (no total timeout)."}
  }})";

  explicit Gateway(const sdk::CreateContext& ctx) : state_(std::make_shared<GatewayState>()) {
    const json c = sdk::parse_object(ctx.config_json(), "gateway: config");
    host_ = c.value("host", "127.0.0.1");
    port_ = c.value("port", 8080);
    max_threads_ = c.value("max_threads", 256);
    max_queued_ = c.value("max_queued", 1024);
    state_->client_timeout = std::chrono::duration<double>(c.value("client_timeout_s", 60.0));
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
    settings.trajectories_jsonl = c.value("trajectories_jsonl", std::string());
    settings.max_request_bytes = c.value("max_request_bytes", size_t{32u << 20});
    state_->max_request_bytes = settings.max_request_bytes;
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
      if (info.contains("vocab_size") && info["vocab_size"].get<size_t>() < tok->vocab_size())
        throw sdk::invalid_argument("gateway: the tokenizer has " + std::to_string(tok->vocab_size()) + " tokens but the inference backend's vocabulary has " +
                                    std::to_string(info["vocab_size"].get<size_t>()));
      chat = std::make_shared<areal::proxy::ChatService>(tok, tmpl, ctx.services()->inference, cc);
      sdk::log(AREAL_LOG_INFO, "gateway", "output parsers: reasoning_parser " + chat->config().parsers.reasoning_parser + ", tool_call_parser " +
                                              chat->config().parsers.tool_call_parser +
                                              (cc.parsers.reasoning_parser == "auto" || cc.parsers.tool_call_parser == "auto" ? " (auto: chosen from the chat template)" : ""));
      state_->model_name = cc.model_name;
    }
    state_->control = std::make_unique<areal::gateway::SessionControl>(*state_->sessions, *state_->session_routes, chat);
    state_->chat_routes = std::make_unique<areal::gateway::ChatRoutes>(chat, *state_->session_routes, *state_->sessions, settings.max_request_bytes);
    state_->anthropic_routes =
        std::make_unique<areal::gateway::AnthropicRoutes>(chat, *state_->session_routes, *state_->sessions, settings.max_request_bytes);
    state_->responses_routes = std::make_unique<areal::gateway::ResponsesRoutes>(chat, *state_->session_routes, *state_->sessions);
    // Idle sessions end on a timer too, not only when someone starts or exports one.
    const double timeout = c.value("session_timeout_seconds", 3600.0);
    const auto period = std::chrono::milliseconds(static_cast<int64_t>(std::clamp(timeout * 1000.0 / 4.0, 50.0, 30000.0)));
    sweeper_ = std::thread([this, period, timeout] {
      std::unique_lock<std::mutex> lock(sweep_mutex_);
      while (!sweep_cv_.wait_for(lock, period, [&] { return !sweeping_; })) {
        for (const auto& id : state_->sessions->expire_idle())
          sdk::log(AREAL_LOG_INFO, "gateway", "session " + id + " expired after " + std::to_string(static_cast<int64_t>(timeout)) +
                                                  " s idle; kept for export");
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
    Poco::Net::ServerSocket socket;
    try {
      socket.bind(Poco::Net::SocketAddress(host_, static_cast<Poco::UInt16>(port_)), true);
      socket.listen(max_queued_);
    } catch (const Poco::Exception& e) {
      throw sdk::unavailable("gateway: cannot listen on " + host_ + ":" + std::to_string(port_) + ": " + e.displayText());
    }
    auto params = new Poco::Net::HTTPServerParams();  // owned by the server (Poco AutoPtr)
    params->setMaxThreads(max_threads_);
    params->setMaxQueued(max_queued_);
    params->setKeepAlive(true);
    const auto timeout = Poco::Timespan(static_cast<Poco::Timespan::TimeDiff>(state_->client_timeout.count() * 1e6));
    params->setTimeout(timeout);
    params->setKeepAliveTimeout(timeout);
    pool_ = std::make_unique<Poco::ThreadPool>(2, max_threads_);
    server_ = std::make_unique<Poco::Net::HTTPServer>(new Factory(state_), *pool_, socket, params);
    server_->setConnectionFilter(new RefuseWhenFull(*server_, max_queued_));
    server_->start();
    const auto bound = socket.address();
    url_ = "http://" + host_ + ":" + std::to_string(bound.port());
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
    server_->stopAll(true);  // also aborts open keep-alive connections
    server_.reset();
    pool_->joinAll();
    pool_.reset();
  }

 private:
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
  int max_threads_ = 256;
  int max_queued_ = 1024;
  std::mutex mutex_;
  std::unique_ptr<Poco::ThreadPool> pool_;
  std::unique_ptr<Poco::Net::HTTPServer> server_;
  std::string url_;
  std::mutex sweep_mutex_;
  std::condition_variable sweep_cv_;
  bool sweeping_ = true;
  std::thread sweeper_;
};

}  // namespace

extern "C" AREAL_DEFINE_BUILTIN(Gateway, AREAL_KIND_GATEWAY, GatewayAdapter, areal_builtin_gateway_init)
