#include "dashboard_pages.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "dashboard_assets.hpp"
#include "run_data.hpp"

namespace areal::host::dashboard {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using S = Poco::Net::HTTPResponse;

void send(Poco::Net::HTTPServerResponse& res, S::HTTPStatus status, const std::string& type, const std::string& body) {
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

}  // namespace

bool answer_page(const std::string& path, const Poco::URI& uri, const RunView& view, Poco::Net::HTTPServerResponse& res) {
  const std::string js = "application/json";
  if (path == "/" || path == "/index.html") return send(res, S::HTTP_OK, "text/html; charset=utf-8", kIndexHtml), true;
  if (path == "/dashboard.js") return send(res, S::HTTP_OK, "text/javascript; charset=utf-8", kDashboardJs), true;
  if (path == "/dashboard.css") return send(res, S::HTTP_OK, "text/css; charset=utf-8", kDashboardCss), true;
  if (path == "/api/run") {
    const fs::path dir(view.run_dir);
    send(res, S::HTTP_OK, js,
         json{{"run_dir", view.run_dir}, {"name", dir.parent_path().filename().string() + " / " + dir.filename().string()}, {"live", view.live}}.dump());
    return true;
  }
  if (path == "/api/metrics") {
    json body = metrics_since(view.run_dir, query_number(uri, "offset", 0));
    body["live"] = view.live;
    send(res, S::HTTP_OK, js, body.dump(-1, ' ', false, json::error_handler_t::replace));
    return true;
  }
  if (path == "/api/sessions") {
    const size_t limit = static_cast<size_t>(std::min<uint64_t>(query_number(uri, "limit", 12), 200));
    send(res, S::HTTP_OK, js, latest_sessions(view.run_dir, limit, view.tokenizer).dump(-1, ' ', false, json::error_handler_t::replace));
    return true;
  }
  return false;
}

}  // namespace areal::host::dashboard
