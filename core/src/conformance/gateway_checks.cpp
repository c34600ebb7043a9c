// Behavioural checks for gateway plugins: start on a free port, answer
// /health, answer unknown paths with a JSON error, stop idempotently.
#include <regex>
#include <sstream>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>

#include "areal/core/plugin_instance.hpp"
#include "checker.hpp"

namespace areal::conformance {
namespace {

struct HttpReply {
  int status = 0;
  std::string body;
};

HttpReply http_get(const std::string& base_url, const std::string& path) {
  Poco::URI uri(base_url);
  Poco::Net::HTTPClientSession session(uri.getHost(), uri.getPort());
  session.setTimeout(Poco::Timespan(10, 0));
  Poco::Net::HTTPRequest req(Poco::Net::HTTPRequest::HTTP_GET, path, Poco::Net::HTTPMessage::HTTP_1_1);
  session.sendRequest(req);
  Poco::Net::HTTPResponse res;
  std::istream& in = session.receiveResponse(res);
  std::stringstream ss;
  ss << in.rdbuf();
  return {static_cast<int>(res.getStatus()), ss.str()};
}

}  // namespace

void check_gateway(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c) {
  const areal_gateway_vtable& vt = *p->gateway();
  std::string inference_name = "reference_inference", gateway_name = "conformance";
  std::shared_ptr<PluginInstance> inference;
  areal_inference_ref ref{};
  areal_services inf_services = make_services(inference_name);
  areal_services services = make_services(gateway_name);
  if (o.reference_inference) {
    inference = std::make_shared<PluginInstance>(o.reference_inference, effective_config(*o.reference_inference, "{}"), &inf_services);
    ref = {AREAL_OFFSET_OF_END(areal_inference_ref, self), o.reference_inference->inference(), inference->self()};
    services.inference = &ref;
  }
  // Port 0 so checks never collide with a running service.
  nlohmann::json cfg = nlohmann::json::parse(o.config_json);
  if (!cfg.contains("port")) cfg["port"] = 0;

  std::unique_ptr<PluginInstance> a, b;
  c.run("gateway: create with the given config (port 0)", [&] {
    a = std::make_unique<PluginInstance>(p, effective_config(*p, cfg.dump()), &services);
    b = std::make_unique<PluginInstance>(p, effective_config(*p, cfg.dump()), &services);
  });
  if (!a) return;
  std::string url_a, url_b;
  c.run("gateway: start writes the bound base URL", [&] {
    StringCollector wa, wb;
    throw_if_status(vt.start(a->self(), wa.writer()), "start");
    throw_if_status(vt.start(b->self(), wb.writer()), "start (second instance)");
    url_a = wa.text, url_b = wb.text;
    static const std::regex kUrl("^http://[^/:]+:[0-9]+$");
    expect(std::regex_match(url_a, kUrl), "start wrote '" + url_a + "'");
    expect(url_a != url_b, "two instances with port 0 reported the same URL " + url_a);
  });
  if (url_a.empty()) return;
  c.run("gateway: GET /health answers 200 with a JSON object", [&] {
    auto r = http_get(url_a, "/health");
    expect(r.status == 200, "status " + std::to_string(r.status));
    expect(nlohmann::json::parse(r.body).is_object(), "body " + r.body);
  });
  c.run("gateway: an unknown path answers 404 with an OpenAI-style error body", [&] {
    auto r = http_get(url_a, "/no/such/endpoint");
    expect(r.status == 404, "status " + std::to_string(r.status));
    auto j = nlohmann::json::parse(r.body);
    expect(j.contains("error") && j["error"].contains("message") && j["error"]["message"].is_string(), "body " + r.body);
  });
  // ABI 1.1: the control slot, when the plugin's table is long enough to have one.
  const bool has_control = p->gateway()->control != nullptr;
  auto control = [&](const std::string& request, std::string* out) {
    StringCollector w;
    const int32_t code = code_of(vt.control(a->self(), areal_str{request.data(), request.size()}, w.writer()));
    if (out) *out = w.text;
    return code;
  };
  if (has_control) {
    c.run("gateway: control grant_capacity answers {\"capacity\": N}", [&] {
      std::string out;
      const int32_t code = control(R"({"op": "grant_capacity", "n": 2})", &out);
      expect(code == AREAL_CODE_OK, std::string("returned ") + code_name(code));
      expect(nlohmann::json::parse(out).contains("capacity"), "answered " + out);
    });
    c.run("gateway: control take_finished with nothing ended answers {\"session\": null}", [&] {
      std::string out;
      const int32_t code = control(R"({"op": "take_finished", "timeout_ms": 10})", &out);
      expect(code == AREAL_CODE_OK, std::string("returned ") + code_name(code));
      const auto j = nlohmann::json::parse(out);
      expect(j.contains("session") && j["session"].is_null(), "answered " + out);
    });
    c.run("gateway: control with an unknown op is UNSUPPORTED, bad JSON INVALID_ARGUMENT", [&] {
      int32_t code = control(R"({"op": "no_such_op"})", nullptr);
      expect(code == AREAL_CODE_UNSUPPORTED, std::string("unknown op returned ") + code_name(code));
      code = control("{not json", nullptr);
      expect(code == AREAL_CODE_INVALID_ARGUMENT, std::string("bad JSON returned ") + code_name(code));
    });
  }
  c.run("gateway: starting twice is FAILED_PRECONDITION", [&] {
    StringCollector w;
    int32_t code = code_of(vt.start(a->self(), w.writer()));
    expect(code == AREAL_CODE_FAILED_PRECONDITION, std::string("second start returned ") + code_name(code));
  });
  c.run("gateway: stop is idempotent and closes the port", [&] {
    throw_if_status(vt.stop(a->self()), "stop");
    throw_if_status(vt.stop(a->self()), "second stop");
    bool refused = false;
    try {
      http_get(url_a, "/health");
    } catch (const std::exception&) {
      refused = true;
    }
    expect(refused, "the gateway still answered after stop");
  });
  c.run("gateway: destroy while running stops it", [&] { b.reset(); });
}

}  // namespace areal::conformance
