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
#include "dashboard_pages.hpp"

namespace areal::host::dashboard {

namespace fs = std::filesystem;
using nlohmann::json;

struct DashboardServer::State {
  ServerOptions options;
  std::atomic<bool> live{false};
};

namespace {

void send_json(Poco::Net::HTTPServerResponse& res, Poco::Net::HTTPResponse::HTTPStatus status, const std::string& body) {
  res.setStatus(status);
  res.setContentType("application/json");
  res.set("Cache-Control", "no-store");
  res.setContentLength(static_cast<std::streamsize>(body.size()));
  res.send() << body;
}

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(std::shared_ptr<DashboardServer::State> s) : s_(std::move(s)) {}

  void handleRequest(Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& res) override {
    using S = Poco::Net::HTTPResponse;
    const Poco::URI uri(req.getURI());
    const std::string path = uri.getPath();
    try {
      if (req.getMethod() != "GET" && req.getMethod() != "HEAD")
        return send_json(res, S::HTTP_METHOD_NOT_ALLOWED, json{{"error", "the dashboard is read-only: GET only"}}.dump());
      const auto& o = s_->options;
      if (answer_page(path, uri, RunView{o.run_dir, s_->live.load(), o.tokenizer.get()}, res)) return;
      send_json(res, S::HTTP_NOT_FOUND, json{{"error", "no such page: " + path}}.dump(-1, ' ', false, json::error_handler_t::replace));
    } catch (const Error& e) {
      send_json(res, S::HTTP_BAD_REQUEST, json{{"error", e.what()}}.dump(-1, ' ', false, json::error_handler_t::replace));
    } catch (const std::exception& e) {
      send_json(res, S::HTTP_INTERNAL_SERVER_ERROR, json{{"error", e.what()}}.dump(-1, ' ', false, json::error_handler_t::replace));
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
