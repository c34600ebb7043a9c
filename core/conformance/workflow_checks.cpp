// Behavioural checks for workflow plugins, run against a reference
// inference backend (the mock by default).
#include <atomic>
#include <thread>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <exception>

#include "core/recorder/episode_recorder.hpp"
#include "core/plugin_host/gateway_sessions.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "checker.hpp"
#include "core/telemetry/guarded_thread.hpp"

namespace areal::conformance {

void check_workflow(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c) {
  const areal_workflow_vtable& vt = *p->workflow();
  if (!o.reference_inference) {
    c.run("workflow: episodes against the reference inference backend", [] {
      throw CheckSkipped("no reference inference plugin (mock_inference) was found");
    });
    return;
  }
  std::string inference_name = "reference_inference", workflow_name = "conformance";
  areal_services inf_services = make_services(inference_name);
  auto inference = std::make_shared<PluginInstance>(o.reference_inference, effective_config(*o.reference_inference, "{}"), &inf_services);
  areal_inference_ref ref{AREAL_OFFSET_OF_END(areal_inference_ref, self), o.reference_inference->inference(), inference->self()};
  areal_services services = make_services(workflow_name);
  services.inference = &ref;

  // Gateway sessions for the episodes (in-process chat and per-episode keys), when available.
  std::string gateway_name = "reference_gateway";
  areal_services gw_services = make_services(gateway_name);
  gw_services.inference = &ref;
  std::unique_ptr<PluginInstance> gateway;  // started: HTTP agents (subproc) reach it too
  std::unique_ptr<GatewaySessions> sessions;
  std::string base_url;
  std::shared_ptr<PluginInstance> session_inference;
  areal_inference_ref session_ref{};
  const areal_gateway_vtable* gvt = o.reference_gateway ? o.reference_gateway->gateway() : nullptr;
  if (GatewaySessions::supported(gvt) && !o.reference_tokenizer_dir.empty()) {
    // The mock with the tokenizer's vocabulary, so sampled ids decode.
    session_inference = std::make_shared<PluginInstance>(o.reference_inference, effective_config(*o.reference_inference, R"({"vocab_size": 320})"), &inf_services);
    session_ref = {AREAL_OFFSET_OF_END(areal_inference_ref, self), o.reference_inference->inference(), session_inference->self()};
    gw_services.inference = &session_ref;
    nlohmann::json gcfg = {{"port", 0}, {"tokenizer", o.reference_tokenizer_dir}};
    try {
      gateway = std::make_unique<PluginInstance>(o.reference_gateway, effective_config(*o.reference_gateway, gcfg.dump()), &gw_services);
      StringCollector url;
      throw_if_status(gvt->start(gateway->self(), url.writer()), "gateway start");
      base_url = url.text + "/v1";
      sessions = std::make_unique<GatewaySessions>(gvt, gateway->self());
    } catch (const std::exception&) {
      gateway.reset();  // episodes then run without sessions
    }
  }

  std::unique_ptr<PluginInstance> inst;
  c.run("workflow: create with the given config", [&] {
    inst = std::make_unique<PluginInstance>(p, effective_config(*p, o.config_json), &services);
  });
  if (!inst) return;

  // Runs one episode; with a gateway, inside its own session, whose exported
  // row count lands in *session_rows.
  auto run_episode = [&](const std::string& id, const std::string& data, EpisodeRecorder& rec, StringCollector& out,
                         size_t* session_rows = nullptr) {
    GatewaySessions::Started session;
    if (sessions) {
      session = sessions->start(id, id);
      rec.attach_session(sessions.get(), session.session_id);
    }
    areal_episode ep{};
    ep.struct_size = AREAL_OFFSET_OF_END(areal_episode, api);
    ep.episode_id = areal_str{id.data(), id.size()};
    ep.data_json = areal_str{data.data(), data.size()};
    ep.api_key = areal_str{session.api_key.data(), session.api_key.size()};
    ep.base_url = areal_str{base_url.data(), base_url.size()};
    ep.api = rec.api();
    areal_status* st = vt.run_episode(inst->self(), &ep, out.writer());
    if (sessions) {
      try {
        sessions->end(session.session_id);
      } catch (const std::exception&) {
        // already ended by the workflow
      }
      const auto exported = sessions->export_session(session.session_id, 1.0);
      if (session_rows) *session_rows = exported.rows.size();
    }
    return st;
  };

  c.run("workflow: malformed data gives a status or a JSON object, never a crash", [&] {
    EpisodeRecorder rec("bad", ref.vtable, ref.self, 1);
    StringCollector out;
    areal_status* st = run_episode("bad", "[\"not an object\"]", rec, out);
    if (st != nullptr) return free_status(st);
    auto j = nlohmann::json::parse(out.text);
    expect(j.is_object(), "result is not a JSON object: " + out.text);
  });

  std::string sample = o.sample_data_json;
  if (sample.empty() && p->info().get_proc_address != nullptr) {
    if (auto fn = reinterpret_cast<areal_workflow_sample_data_fn>(p->info().get_proc_address(AREAL_WORKFLOW_SAMPLE_DATA_PROC)))
      sample = fn();
  }
  c.run("workflow: an episode on sample data succeeds with a JSON object result", [&] {
    if (sample.empty()) throw CheckSkipped("no sample data: pass --data or export " AREAL_WORKFLOW_SAMPLE_DATA_PROC);
    EpisodeRecorder rec("sample", ref.vtable, ref.self, 1);
    StringCollector out;
    size_t session_rows = 0;
    throw_if_status(run_episode("sample", sample, rec, out, &session_rows), "run_episode");
    auto j = nlohmann::json::parse(out.text);
    expect(j.is_object(), "result is not a JSON object: " + out.text);
    rec.apply_result(j, session_rows > 0);
    expect(rec.record().size() > 0 || session_rows > 0, "the episode made no completion through the host or its gateway session");
  });
  c.run("workflow: 8 concurrent episodes all succeed", [&] {
    if (sample.empty()) throw CheckSkipped("no sample data");
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i)
      threads.push_back(guarded_thread("conformance", [&, i] {  // a throw is a failed episode, counted by ok
        const std::string id = "episode-" + std::to_string(i);
        EpisodeRecorder rec(id, ref.vtable, ref.self, static_cast<uint64_t>(i));
        StringCollector out;
        areal_status* st = run_episode(id, sample, rec, out);
        if (st == nullptr) ok++;
        free_status(st);
      }));
    for (auto& t : threads) t.join();
    expect(ok == 8, std::to_string(ok.load()) + "/8 episodes succeeded");
  });
}

}  // namespace areal::conformance
