#include "dashboard_server.hpp"

#include <atomic>
#include <filesystem>
#include <cstdint>
#include <algorithm>
#include <exception>

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/URI.h>
#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "dashboard_assets.hpp"
#include "run_data.hpp"

namespace areal::host::dashboard {

namespace fs = std::filesystem;
using nlohmann::json;

struct DashboardServer::State {
  ServerOptions options;
  std::atomic<bool> live{false};
};

namespace {

void send(Poco::Net::HTTPServerResponse& res, Poco::Net::HTTPResponse::HTTPStatus status, const std::string& type,
          const std::string& body) {
  res.setStatus(status);
  res.setContentType(type);
  res.set("Cache-Control", "no-store");
  res.setContentLength(static_cast<std::streamsize>(body.size()));
  res.send() << body;
}

uint64_t query_number(const Poco::URI& uri, const std::string& key, uint64_t fallback) {
  for (const auto& [k, v] : uri.getQueryParameters())
    if (k == key) {
      try {
        return std::stoull(v);
      } catch (const std::exception&) {
        throw Error(AREAL_CODE_INVALID_ARGUMENT, "'" + key + "' must be a non-negative integer, got '" + v + "'");
      }
    }
  return fallback;
}

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(std::shared_ptr<DashboardServer::State> s) : s_(std::move(s)) {}

  void handleRequest(Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& res) override {
    using S = Poco::Net::HTTPResponse;
    const Poco::URI uri(req.getURI());
    const std::string path = uri.getPath();
    const std::string js = "application/json";
    try {
      if (req.getMethod() != "GET" && req.getMethod() != "HEAD")
        return send(res, S::HTTP_METHOD_NOT_ALLOWED, js, json{{"error", "the dashboard is read-only: GET only"}}.dump());
      const auto& o = s_->options;
      if (path == "/" || path == "/index.html") return send(res, S::HTTP_OK, "text/html; charset=utf-8", kIndexHtml);
      if (path == "/dashboard.js") return send(res, S::HTTP_OK, "text/javascript; charset=utf-8", kDashboardJs);
      if (path == "/dashboard.css") return send(res, S::HTTP_OK, "text/css; charset=utf-8", kDashboardCss);
      if (path == "/api/run") {
        const fs::path dir(o.run_dir);
        return send(res, S::HTTP_OK, js,
                    json{{"run_dir", o.run_dir},
                         {"name", dir.parent_path().filename().string() + " / " + dir.filename().string()},
                         {"live", s_->live.load()}}.dump());
      }
      if (path == "/api/metrics") {
        json body = metrics_since(o.run_dir, query_number(uri, "offset", 0));
        body["live"] = s_->live.load();
        return send(res, S::HTTP_OK, js, body.dump(-1, ' ', false, json::error_handler_t::replace));
      }
      if (path == "/api/sessions") {
        const size_t limit = static_cast<size_t>(std::min<uint64_t>(query_number(uri, "limit", 12), 200));
        return send(res, S::HTTP_OK, js,
                    latest_sessions(o.run_dir, limit, o.tokenizer.get()).dump(-1, ' ', false, json::error_handler_t::replace));
      }
      send(res, S::HTTP_NOT_FOUND, js, json{{"error", "no such page: " + path}}.dump(-1, ' ', false, json::error_handler_t::replace));
    } catch (const Error& e) {
      send(res, S::HTTP_BAD_REQUEST, js, json{{"error", e.what()}}.dump(-1, ' ', false, json::error_handler_t::replace));
    } catch (const std::exception& e) {
      send(res, S::HTTP_INTERNAL_SERVER_ERROR, js, json{{"error", e.what()}}.dump(-1, ' ', false, json::error_handler_t::replace));
    }
  }

 private:
  std::shared_ptr<DashboardServer::State> s_;
};

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(std::shared_ptr<DashboardServer::State> s) : s_(std::move(s)) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(const Poco::Net::HTTPServerRequest&) override { return new Handler(s_); }

 private:
  std::shared_ptr<DashboardServer::State> s_;
};

}  // namespace

struct DashboardServer::Running {
  Poco::ThreadPool pool{1, 4};
  std::unique_ptr<Poco::Net::HTTPServer> server;
};

DashboardServer::DashboardServer(ServerOptions options) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  state_->live = state_->options.live;
}

DashboardServer::~DashboardServer() { stop(); }

std::string DashboardServer::start() {
  const auto& o = state_->options;
  Poco::Net::ServerSocket socket;
  try {
    socket.bind(Poco::Net::SocketAddress(o.host, static_cast<Poco::UInt16>(o.port)), true);
    socket.listen(16);
  } catch (const Poco::Exception& e) {
    throw Error(AREAL_CODE_UNAVAILABLE, "dashboard: cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + e.displayText());
  }
  auto params = new Poco::Net::HTTPServerParams();  // owned by the server
  params->setMaxThreads(4);
  params->setKeepAlive(true);
  running_ = std::make_unique<Running>();
  running_->server = std::make_unique<Poco::Net::HTTPServer>(new Factory(state_), running_->pool, socket, params);
  running_->server->start();
  return "http://" + o.host + ":" + std::to_string(socket.address().port());
}

void DashboardServer::stop() {
  if (!running_) return;
  running_->server->stopAll(true);
  running_.reset();
}

void DashboardServer::set_live(bool live) { state_->live = live; }

}  // namespace areal::host::dashboard
