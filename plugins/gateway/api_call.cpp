#include "api_call.hpp"

#include <chrono>
#include <mutex>
#include <set>

#include "areal/sdk.hpp"

#include "http_error.hpp"
#include "request.hpp"

namespace areal::gateway {

void require_post(const std::string& path, Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& res) {
  if (req.getMethod() == "POST") return;
  res.set("Allow", "POST");
  throw HttpError(405, "Method " + req.getMethod() + " is not allowed on " + path);
}

std::shared_ptr<proxy::Session> calling_session(const Poco::Net::HTTPServerRequest& req, SessionRoutes& sessions,
                                                const proxy::SessionStore& store) {
  if (store.is_admin(bearer_token(req))) return nullptr;
  return sessions.session_of(req);
}

void require_chat(const std::shared_ptr<proxy::ChatService>& chat, const std::string& what) {
  if (!chat) throw HttpError(503, "This gateway has no tokenizer configured (gateway.tokenizer): it cannot serve " + what);
}

std::ostream& start_event_stream(Poco::Net::HTTPServerResponse& res) {
  res.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
  res.setContentType("text/event-stream");
  res.set("Cache-Control", "no-cache");
  res.set("X-Accel-Buffering", "no");  // tell reverse proxies not to buffer the stream
  res.setChunkedTransferEncoding(true);
  return res.send();
}

namespace {

// A field name as a Prometheus label value: printable ASCII without quotes
// or backslashes, at most 64 characters.
std::string label_safe(const std::string& field) {
  std::string out;
  for (char ch : field.substr(0, 64)) out.push_back(ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? ch : '?');
  return out;
}

}  // namespace

void count_fields(const proxy::FieldNotes& notes, const char* api) {
  // Field names can carry client-chosen text (unknown keys, tool and part
  // types): past this many distinct names per process the rest are counted
  // under "_other", so a client cannot grow /metrics without bound.
  constexpr size_t kMaxNames = 512;
  static std::mutex mutex;
  static std::set<std::string> seen;
  auto admit = [&](const std::string& kind, const std::string& field, bool* first) {
    std::string name = label_safe(field);
    std::lock_guard<std::mutex> lock(mutex);
    const std::string key = kind + "/" + api + "/" + name;
    if (seen.count(key)) return name;
    if (seen.size() >= kMaxNames) return std::string("_other");
    seen.insert(key);
    *first = true;
    return name;
  };
  auto series = [&](const char* metric, const std::string& name) {
    return std::string(metric) + "{api=\"" + api + "\",field=\"" + name + "\"}";
  };
  for (const auto& f : notes.ignored) {
    bool first = false;
    areal::sdk::host().metric_add(areal::sdk::str(series("areal_gateway_ignored_fields_total", admit("ignored", f, &first))), 1.0);
  }
  for (const auto& f : notes.unknown) {
    bool first = false;
    const std::string name = admit("unknown", f, &first);
    if (first)
      areal::sdk::log(AREAL_LOG_INFO, "gateway", "accepting unknown field '" + name + "' in " + api + " requests (ignored; counted on /metrics)");
    areal::sdk::host().metric_add(areal::sdk::str(series("areal_gateway_unknown_fields_total", name)), 1.0);
  }
}

void note_request(const proxy::ChatRequest& r, const char* api) {
  areal::sdk::host().metric_add(areal::sdk::str("areal_gateway_model_requests_total{api=\"" + std::string(api) + "\"}"), 1.0);
  count_fields(r.fields, api);
}

void count_unreadable_tool_calls(const std::string& parser, size_t count) {
  areal::sdk::host().metric_add(
      areal::sdk::str("areal_gateway_unreadable_tool_calls_total{parser=\"" + label_safe(parser) + "\"}"), static_cast<double>(count));
}

void count_unrouted_call() { areal::sdk::host().metric_add(areal::sdk::str("areal_gateway_unrouted_calls_total"), 1.0); }

void count_template_rewrite(const std::string& kind) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    first = seen.insert(kind).second;
  }
  if (first) {
    const char* what = kind == "inline_system_folded"
                           ? "system messages after the first folded into one at the start: the chat template refuses them in place"
                           : "a tool call's arguments that are not a JSON object rendered as {}";
    areal::sdk::log(AREAL_LOG_WARN, "gateway", std::string(what) + " (counted on /metrics as areal_gateway_template_rewrites_total{kind=\"" + kind + "\"})");
  }
  areal::sdk::host().metric_add(areal::sdk::str("areal_gateway_template_rewrites_total{kind=\"" + label_safe(kind) + "\"}"), 1.0);
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace areal::gateway
