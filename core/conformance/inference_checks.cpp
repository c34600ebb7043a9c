// Behavioural checks for inference plugins: streaming contract, sampling
// controls, determinism, versions, abort, pause/resume, concurrency.
#include <algorithm>
#include <cmath>
#include <atomic>
#include <thread>
#include <cstdint>
#include <string>
#include <vector>
#include <memory>
#include <mutex>
#include <exception>

#include "core/plugin_host/generation.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "checker.hpp"
#include "core/telemetry/guarded_thread.hpp"

namespace areal::conformance {
namespace {

using namespace std::chrono_literals;

struct Request {
  std::vector<int32_t> input{1, 2, 3};
  std::vector<int32_t> stop_ids;
  areal_sampling_params sampling{};
  areal_gen_request req{};

  explicit Request(int32_t max_new, float temperature = 1.0f, uint64_t seed = 7) {
    sampling.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
    sampling.temperature = temperature;
    sampling.top_p = 1.0f;
    sampling.max_new_tokens = max_new;
    sampling.seed = seed;
    sampling.has_seed = 1;
    sampling.ignore_eos = 1;
  }
  const areal_gen_request& get() {
    sampling.stop_token_ids = stop_ids.empty() ? nullptr : stop_ids.data();
    sampling.stop_token_ids_count = stop_ids.size();
    req.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, sampling);
    req.request_id = next_request_id();
    req.input_ids = input.data();
    req.input_ids_count = input.size();
    req.sampling = &sampling;
    return req;
  }
};

// A sink for a request submitted directly. The plugin may call it until
// on_done, so it is only freed after on_done; if that never comes (a broken
// plugin), it is leaked rather than freed under the plugin's feet.
struct InFlight {
  std::unique_ptr<CollectingSink> sink = std::make_unique<CollectingSink>();
  bool submitted = false;
  void submit(const areal_inference_vtable& vt, void* self, const areal_gen_request& req) {
    throw_if_status(vt.submit(self, &req, sink->sink()), "submit");
    submitted = true;
  }
  ~InFlight() {
    if (submitted && !sink->wait(60s)) (void)sink.release();
  }
};

// Resumes the backend however the check ends.
struct ResumeOnExit {
  const areal_inference_vtable& vt;
  void* self;
  ~ResumeOnExit() { free_status(vt.resume(self)); }
};

GenerationResult run(const areal_inference_vtable& vt, void* self, Request& r) {
  return generate_blocking(vt, self, r.get(), 60s);
}

}  // namespace

void check_inference(const std::shared_ptr<LoadedPlugin>& p, const ConformanceOptions& o, Checker& c) {
  const areal_inference_vtable& vt = *p->inference();
  std::unique_ptr<PluginInstance> inst;
  const std::string name = "conformance";
  areal_services services = make_services(name);
  c.run("inference: create with the given config", [&] {
    inst = std::make_unique<PluginInstance>(p, effective_config(*p, o.config_json), &services);
  });
  if (!inst) return;
  void* self = inst->self();

  c.run("inference: info() is a JSON object with a string \"model\"", [&] {
    StringCollector w;
    throw_if_status(vt.info(self, w.writer()), "info");
    auto j = nlohmann::json::parse(w.text);
    expect(j.is_object() && j.contains("model") && j["model"].is_string(), "info was " + w.text);
  });
  c.run("inference: a request streams tokens and ends with exactly one on_done", [&] {
    Request r(8);
    InFlight f;
    f.submit(vt, self, r.get());
    expect(f.sink->wait(60s), "on_done was not called within 60 s");
    std::this_thread::sleep_for(50ms);  // a second on_done would arrive now
    auto res = f.sink->result();
    expect(res.on_done_calls == 1, "on_done was called " + std::to_string(res.on_done_calls) + " times");
    expect(res.finish_reason == AREAL_FINISH_LENGTH || res.finish_reason == AREAL_FINISH_STOP,
           "finish_reason " + std::to_string(res.finish_reason));
    expect(!res.output_ids.empty() && res.output_ids.size() <= 8, "got " + std::to_string(res.output_ids.size()) + " tokens for max_new_tokens 8");
    expect(res.logprobs.size() == res.output_ids.size() && res.versions.size() == res.output_ids.size(), "ids, logprobs and versions differ in length");
    for (float lp : res.logprobs) expect(std::isfinite(lp) && lp <= 0.0f, "logprob " + std::to_string(lp) + " is not a log-probability");
  });
  c.run("inference: max_new_tokens is honoured", [&] {
    Request r(3);
    r.sampling.ignore_eos = 1;
    auto res = run(vt, self, r);
    expect(res.output_ids.size() <= 3, "got " + std::to_string(res.output_ids.size()) + " tokens for max_new_tokens 3");
  });
  c.run("inference: the same seed gives the same tokens and logprobs", [&] {
    Request a(8), b(8);
    auto ra = run(vt, self, a), rb = run(vt, self, b);
    expect(ra.output_ids == rb.output_ids, "token ids differ between two runs with seed 7");
    for (size_t i = 0; i < ra.logprobs.size(); ++i)
      expect(std::fabs(ra.logprobs[i] - rb.logprobs[i]) < 1e-5f, "logprobs differ between two runs with seed 7");
  });
  c.run("inference: greedy decoding (temperature 0) is deterministic", [&] {
    Request a(6, 0.0f, 1), b(6, 0.0f, 2);
    expect(run(vt, self, a).output_ids == run(vt, self, b).output_ids, "greedy outputs differ between seeds");
  });
  c.run("inference: a stop token id ends generation with STOP and is kept", [&] {
    Request probe(6);
    auto ids = run(vt, self, probe).output_ids;
    if (ids.size() < 3) throw CheckSkipped("backend produced fewer than 3 tokens");
    Request r(6);
    r.stop_ids = {ids[1]};
    auto res = run(vt, self, r);
    auto first = std::find(ids.begin(), ids.end(), ids[1]) - ids.begin();
    expect(res.finish_reason == AREAL_FINISH_STOP, "finish_reason " + std::to_string(res.finish_reason) + ", expected STOP");
    expect(res.output_ids.size() == static_cast<size_t>(first + 1) && res.output_ids.back() == ids[1],
           "output does not end at the first stop id");
  });
  c.run("inference: versions follow set_version", [&] {
    int64_t before = 0;
    throw_if_status(vt.get_version(self, &before), "get_version");
    throw_if_status(vt.set_version(self, before + 5), "set_version");
    Request r(4);
    auto res = run(vt, self, r);
    int64_t now = 0;
    throw_if_status(vt.get_version(self, &now), "get_version");
    throw_if_status(vt.set_version(self, before), "set_version");
    expect(now == before + 5, "get_version did not return the value set");
    for (int64_t v : res.versions) expect(v == before + 5, "token stamped with version " + std::to_string(v));
  });
  c.run("inference: an empty prompt is INVALID_ARGUMENT and never reaches the sink", [&] {
    Request r(4);
    r.input.clear();
    InFlight f;  // a plugin that wrongly accepts may answer later: its sink outlives this check
    int32_t code = code_of(vt.submit(self, &r.get(), f.sink->sink()));
    f.submitted = code == AREAL_CODE_OK;
    expect(code == AREAL_CODE_INVALID_ARGUMENT, std::string("submit returned ") + code_name(code));
    expect(!f.sink->wait(100ms), "the sink was called for a rejected request");
  });
  c.run("inference: abort of an unknown request is NOT_FOUND", [&] {
    int32_t code = code_of(vt.abort(self, 0xFFFFFFFFFFFFull));
    expect(code == AREAL_CODE_NOT_FOUND, std::string("abort returned ") + code_name(code));
  });
  c.run("inference: a sink error aborts the request with one on_done(ABORT)", [&] {
    Request r(64);
    InFlight f;
    f.sink->fail_after_chunks(1);
    f.submit(vt, self, r.get());
    expect(f.sink->wait(60s), "on_done was not called");
    auto res = f.sink->result();
    expect(res.finish_reason == AREAL_FINISH_ABORT, "finish_reason " + std::to_string(res.finish_reason) + ", expected ABORT");
    expect(res.on_done_calls == 1, "on_done called " + std::to_string(res.on_done_calls) + " times");
  });
  c.run("inference: pause holds requests, abort while paused ends them, resume continues", [&] {
    Request held(4), dropped(4);
    InFlight held_f, dropped_f;  // declared before the guard: resume runs first on exit
    throw_if_status(vt.pause(self), "pause");
    ResumeOnExit guard{vt, self};
    held_f.submit(vt, self, held.get());
    dropped_f.submit(vt, self, dropped.get());
    bool finished_while_paused = held_f.sink->wait(300ms);
    throw_if_status(vt.abort(self, dropped.req.request_id), "abort while paused");
    bool dropped_done = dropped_f.sink->wait(10s);
    throw_if_status(vt.resume(self), "resume");
    expect(!finished_while_paused, "a request finished while the backend was paused");
    expect(dropped_done && dropped_f.sink->result().finish_reason == AREAL_FINISH_ABORT, "abort while paused did not end the request with ABORT");
    expect(held_f.sink->wait(60s), "the held request did not finish after resume");
    expect(!held_f.sink->result().output_ids.empty(), "the held request produced no tokens");
  });
  c.run("inference: 16 concurrent requests from 4 threads all complete", [&] {
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    std::string error;
    std::mutex error_mutex;
    for (int t = 0; t < 4; ++t)
      threads.push_back(guarded_thread("conformance", [&] {
        for (int i = 0; i < 4; ++i) {
          try {
            Request r(4);
            if (!run(vt, self, r).output_ids.empty()) ok++;
          } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lock(error_mutex);
            error = e.what();
          }
        }
      }));
    for (auto& t : threads) t.join();
    expect(ok == 16, std::to_string(ok.load()) + "/16 completed" + (error.empty() ? "" : ": " + error));
  });
  // ABI 1.7 routing: a plugin whose info says "routing": true reports each
  // position's experts once, before on_done; any other ignores the flag.
  c.run("inference: record_routing gets one on_routing covering every computed position, or is ignored", [&] {
    StringCollector w;
    throw_if_status(vt.info(self, w.writer()), "info");
    const auto j = nlohmann::json::parse(w.text);
    expect(!j.contains("routing") || j["routing"].is_boolean(), "info's \"routing\" must be a boolean, was " + w.text);
    const bool routes = j.value("routing", false);
    Request r(5);
    areal_gen_request req = r.get();
    req.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, record_routing);
    req.record_routing = 1;
    const GenerationResult out = generate_blocking(vt, self, req, 60s);
    if (!routes) {
      expect(out.on_routing_calls == 0, "on_routing was called by a plugin whose info does not say \"routing\": true");
      return;
    }
    expect(out.on_routing_calls == 1, "on_routing was called " + std::to_string(out.on_routing_calls) + " times, not once");
    const size_t want = r.input.size() + out.output_ids.size() - 1;
    expect(out.routing_positions == want, "on_routing covered " + std::to_string(out.routing_positions) + " positions, not prompt + output - 1 = " +
                                              std::to_string(want));
    expect(out.routing.size() == out.routing_positions * out.routing_layers * out.routing_top_k, "on_routing's experts do not fill its shape");
    for (uint16_t e : out.routing) expect(e < out.routing_experts, "an expert id is not below num_experts");
  });
  // ABI 1.6 adapters: what info says and the slots must agree, and every
  // refusal is the documented code. (Serving a real adapter needs one made
  // for the plugin's model: tests/torch/lora_serving_test.cpp does it for local.)
  c.run("inference: info's \"adapters\" agrees with the load_adapter/unload_adapter slots", [&] {
    StringCollector w;
    throw_if_status(vt.info(self, w.writer()), "info");
    const auto j = nlohmann::json::parse(w.text);
    const bool slots = vt.struct_size >= AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter) && vt.load_adapter && vt.unload_adapter;
    expect(!j.contains("adapters") || j["adapters"].is_boolean(), "info's \"adapters\" must be a boolean, was " + w.text);
    const bool says = j.value("adapters", false);
    expect(says == slots, says ? "info says \"adapters\": true but load_adapter/unload_adapter are missing"
                               : "the plugin has load_adapter/unload_adapter but info does not say \"adapters\": true");
    if (says) expect(j.contains("loaded_adapters") && j["loaded_adapters"].is_array(), "info with \"adapters\": true must list \"loaded_adapters\"");
  });
  if (vt.struct_size >= AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter) && vt.load_adapter && vt.unload_adapter) {
    c.run("inference: adapters: unknown names are NOT_FOUND, bad specs INVALID_ARGUMENT", [&] {
      const std::string unknown = "conformance-no-such-adapter";
      int32_t code = code_of(vt.unload_adapter(self, areal_str{unknown.data(), unknown.size()}));
      expect(code == AREAL_CODE_NOT_FOUND, std::string("unload_adapter of an unknown name returned ") + code_name(code));
      Request r(4);
      areal_gen_request req = r.get();
      req.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, adapter);
      req.adapter = areal_str{unknown.data(), unknown.size()};
      InFlight f;  // as above: outlives the check if the plugin accepted after all
      code = code_of(vt.submit(self, &req, f.sink->sink()));
      f.submitted = code == AREAL_CODE_OK;
      expect(code == AREAL_CODE_NOT_FOUND, std::string("a request naming an unknown adapter returned ") + code_name(code));
      expect(!f.sink->wait(100ms), "the sink was called for a rejected request");
      for (const std::string& bad : {std::string("{not json"), std::string(R"({"version": 1, "path": "/nonexistent"})"),
                                    std::string(R"({"name": "x", "path": "/nonexistent"})")}) {
        code = code_of(vt.load_adapter(self, areal_str{bad.data(), bad.size()}, nullptr));
        expect(code == AREAL_CODE_INVALID_ARGUMENT, "load_adapter(" + bad + ") returned " + code_name(code));
      }
    });
  }
  c.run("inference: update_weights rejects a malformed spec with a status", [&] {
    const std::string bad = "{not json";
    int32_t code = code_of(vt.update_weights(self, areal_str{bad.data(), bad.size()}));
    expect(code != AREAL_CODE_OK, "update_weights accepted '{not json'");
  });
}

}  // namespace areal::conformance
