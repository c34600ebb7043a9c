// Behavioural checks for gateway plugins: start on a free port, answer
// /health, answer unknown paths with a JSON error, stop idempotently.
#include <chrono>
#include <regex>
#include <sstream>
#include <cstdint>
#include <string>
#include <memory>
#include <exception>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/URI.h>

#include "core/plugin_host/plugin_instance.hpp"
#include "core/plugin_host/gateway_sessions.hpp"
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
  // ABI 1.4: the session slots, when the plugin's table has them.
  if (GatewaySessions::supported(p->gateway())) {
    GatewaySessions sessions(p->gateway(), a->self());
    c.run("gateway: grant_capacity answers the capacity", [&] {
      const int64_t n = sessions.grant_capacity(2);
      expect(n == -1 || n >= 2, "capacity " + std::to_string(n) + " after granting 2");
    });
    c.run("gateway: take_finished with nothing ended returns without a session", [&] {
      expect(!sessions.take_finished(std::chrono::milliseconds(10)).has_value(), "a session arrived though none was started");
    });
    c.run("gateway: a started, ended session exports once and is then gone", [&] {
      const auto s = sessions.start("conformance-task", "");
      expect(!s.session_id.empty() && !s.api_key.empty(), "start_session wrote no id or key");
      sessions.end(s.session_id);
      int32_t code = AREAL_CODE_OK;
      try {
        sessions.end(s.session_id);
      } catch (const Error& e) {
        code = e.code();
      }
      expect(code == AREAL_CODE_FAILED_PRECONDITION, std::string("ending twice returned ") + code_name(code));
      const auto t = sessions.export_session(s.session_id, 1.0);
      expect(t.session_id == s.session_id && t.rows.empty(), "exported session '" + t.session_id + "' with " + std::to_string(t.rows.size()) + " rows");
      code = AREAL_CODE_OK;
      try {
        sessions.export_session(s.session_id, 1.0);
      } catch (const Error& e) {
        code = e.code();
      }
      expect(code == AREAL_CODE_NOT_FOUND, std::string("exporting twice returned ") + code_name(code));
    });
    c.run("gateway: session slots refuse bad arguments with INVALID_ARGUMENT", [&] {
      int64_t capacity = 0;
      int32_t code = code_of(vt.grant_capacity(a->self(), 0, &capacity));
      expect(code == AREAL_CODE_INVALID_ARGUMENT, std::string("grant_capacity(0) returned ") + code_name(code));
      code = code_of(vt.take_finished(a->self(), 0, nullptr));
      expect(code == AREAL_CODE_INVALID_ARGUMENT, std::string("take_finished without a sink returned ") + code_name(code));
    });
    // ABI 1.5: the checkpoint pair, when the table has it.
    if (sessions.keeps_sessions_across_restarts())
      c.run("gateway: mark_sessions_trained and commit_checkpoint take taken and unknown ids alike", [&] {
        const auto s = sessions.start("conformance-ckpt", "");
        sessions.end(s.session_id);
        const auto t = sessions.take_finished(std::chrono::milliseconds(1000));
        expect(t.has_value() && t->session_id == s.session_id, "the ended session was not taken");
        sessions.mark_trained({s.session_id, "no-such-session"}, 7);
        sessions.commit_checkpoint(7);
        expect(!sessions.take_finished(std::chrono::milliseconds(10)).has_value(), "a committed session came back");
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
