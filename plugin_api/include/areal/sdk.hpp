// areal plugin SDK for C++ (header-only, C++17, no dependencies).
//
// Write one class, add one export macro:
//
//   class MyWorkflow {
//    public:
//     static constexpr const char* kName = "my_workflow";
//     static constexpr const char* kVersion = "0.1.0";
//     explicit MyWorkflow(const areal::sdk::CreateContext& ctx);
//     std::string run_episode(areal::sdk::Episode& episode);   // returns result JSON
//   };
//   AREAL_EXPORT_WORKFLOW(MyWorkflow)
//
// Optional static members: kDescription, kConfigSchema (see
// docs/plugin-guide.md). Every exception thrown by the class is caught at
// the C boundary and returned as an areal_status; throw areal::sdk::Error to
// choose the code (e.g. INVALID_ARGUMENT for a bad config).
#ifndef AREAL_SDK_HPP_
#define AREAL_SDK_HPP_

#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <functional>
#include <type_traits>
#include <utility>
#include <vector>
#include <cstdint>

#include "areal/plugin_api.h"

#define AREAL_SDK_STRINGIFY_(x) #x
#define AREAL_SDK_STRINGIFY(x) AREAL_SDK_STRINGIFY_(x)

namespace areal::sdk {

// ---------------------------------------------------------------------------
// Host table of this plugin library (set once by areal_plugin_init).
// ---------------------------------------------------------------------------
namespace detail {
inline const areal_host_api*& host_slot() {
  static const areal_host_api* host = nullptr;  // one per .so: the SDK is compiled into each plugin
  return host;
}
}  // namespace detail

inline const areal_host_api& host() { return *detail::host_slot(); }

// ---------------------------------------------------------------------------
// Strings
// ---------------------------------------------------------------------------
inline areal_str str(std::string_view s) { return areal_str{s.data(), s.size()}; }
inline std::string_view view(areal_str s) {
  return s.size == 0 ? std::string_view() : std::string_view(s.data, s.size);
}

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// Throw this to return a specific areal_code across the boundary.
class Error : public std::runtime_error {
 public:
  Error(int32_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int32_t code() const noexcept { return code_; }

 private:
  int32_t code_;
};

inline Error invalid_argument(const std::string& m) { return Error(AREAL_CODE_INVALID_ARGUMENT, m); }
inline Error not_found(const std::string& m) { return Error(AREAL_CODE_NOT_FOUND, m); }
inline Error unsupported(const std::string& m) { return Error(AREAL_CODE_UNSUPPORTED, m); }
inline Error unavailable(const std::string& m) { return Error(AREAL_CODE_UNAVAILABLE, m); }

// Takes ownership of a status from the host or another plugin and throws it
// as an Error if it is not NULL.
inline void throw_if_error(areal_status* status) {
  if (status == nullptr) return;
  const int32_t code = host().status_code(status);
  std::string message(view(host().status_message(status)));
  host().status_free(status);
  throw Error(code, message);
}

// Runs f and converts any exception into a host status (NULL on success).
template <class F>
[[nodiscard]] areal_status* guard(F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const Error& e) {
    return host().status_new(e.code(), str(e.what()));
  } catch (const std::exception& e) {
    return host().status_new(AREAL_CODE_INTERNAL, str(e.what()));
  } catch (...) {
    return host().status_new(AREAL_CODE_INTERNAL, str("unknown C++ exception in plugin"));
  }
}

// ---------------------------------------------------------------------------
// Logging and output
// ---------------------------------------------------------------------------
inline void log(areal_log_level level, std::string_view component, std::string_view message) {
  if (level < host().log_level()) return;
  host().log(level, str(component), str(message));
}

// Runs f; an exception it throws is logged (ERROR, under `component`) and
// counted (areal_thread_exceptions_total{thread="component"}) instead of
// escaping: for callbacks and thread bodies, where an escaping exception
// ends the whole process (std::terminate). True when f threw.
template <class F>
bool contain(std::string_view component, F&& f) noexcept {
  std::string what;
  try {
    f();
    return false;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "unknown exception";
  }
  try {
    log(AREAL_LOG_ERROR, component, "exception contained (the process goes on): " + what);
    host().metric_add(str("areal_thread_exceptions_total{thread=\"" + std::string(component) + "\"}"), 1.0);
  } catch (...) {
    // Nothing more can be done without risking the process.
  }
  return true;
}

// A thread whose body runs under contain(): the only way plugins start
// threads (scripts/check_threads.py enforces it). Loops that serve requests
// also guard each iteration and end the request it was serving; this outer
// guard is the last line.
template <class F>
std::thread guarded_thread(std::string component, F&& body) {
  return std::thread([component = std::move(component), body = std::forward<F>(body)]() mutable { contain(component, body); });
}

// Writes text to a host writer; throws on writer failure.
inline void write(const areal_writer* out, std::string_view text) {
  if (out == nullptr) throw Error(AREAL_CODE_INVALID_ARGUMENT, "writer is NULL");
  throw_if_error(out->write(out->ctx, str(text)));
}

// A writer that collects into a std::string, for calling other plugins.
class StringWriter {
 public:
  StringWriter() : writer_{AREAL_OFFSET_OF_END(areal_writer, write), this, &StringWriter::append} {}
  StringWriter(const StringWriter&) = delete;
  StringWriter& operator=(const StringWriter&) = delete;
  const areal_writer* get() const { return &writer_; }
  const std::string& text() const { return text_; }

 private:
  static areal_status* append(void* ctx, areal_str chunk) {
    return guard([&] { static_cast<StringWriter*>(ctx)->text_.append(chunk.data, chunk.size); });
  }
  areal_writer writer_;
  std::string text_;
};

// ---------------------------------------------------------------------------
// Other plugins, as handed over in areal_services
// ---------------------------------------------------------------------------

// A thin checked wrapper over an inference instance.
class InferenceClient {
 public:
  explicit InferenceClient(const areal_inference_ref* ref) : ref_(ref) {
    if (ref_ == nullptr || ref_->vtable == nullptr)
      throw Error(AREAL_CODE_FAILED_PRECONDITION, "no inference backend is configured");
  }
  void submit(const areal_gen_request& request, const areal_gen_sink& sink) const {
    throw_if_error(ref_->vtable->submit(ref_->self, &request, &sink));
  }
  void abort(uint64_t request_id) const { throw_if_error(ref_->vtable->abort(ref_->self, request_id)); }
  int64_t version() const {
    int64_t v = 0;
    throw_if_error(ref_->vtable->get_version(ref_->self, &v));
    return v;
  }
  std::string info() const {
    StringWriter w;
    throw_if_error(ref_->vtable->info(ref_->self, w.get()));
    return w.text();
  }

 private:
  const areal_inference_ref* ref_;
};

// What a plugin class constructor receives.
class CreateContext {
 public:
  CreateContext(areal_str config_json, const areal_services* services)
      : config_json_(view(config_json)), services_(services) {}
  // The plugin's config section as a JSON object (defaults filled in when
  // the plugin declares kConfigSchema).
  std::string_view config_json() const { return config_json_; }
  const areal_services* services() const { return services_; }
  std::string_view instance_name() const {
    return services_ == nullptr ? std::string_view() : view(services_->instance_name);
  }
  bool has_inference() const { return services_ != nullptr && services_->inference != nullptr; }
  InferenceClient inference() const {
    return InferenceClient(services_ == nullptr ? nullptr : services_->inference);
  }

 private:
  std::string_view config_json_;
  const areal_services* services_;
};

// ---------------------------------------------------------------------------
// Workflow episode helper
// ---------------------------------------------------------------------------
struct Completion {
  std::string id;
  std::vector<int32_t> output_ids;
  std::vector<float> logprobs;
  std::vector<int64_t> versions;
  int32_t finish_reason = 0;
};

struct Sampling {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  int32_t max_new_tokens = 64;
  bool has_seed = false;
  uint64_t seed = 0;
  std::vector<int32_t> stop_token_ids;
};

class Episode {
 public:
  explicit Episode(const areal_episode* e) : e_(e) {}
  std::string_view id() const { return view(e_->episode_id); }
  std::string_view data_json() const { return view(e_->data_json); }
  std::string_view base_url() const { return view(e_->base_url); }
  std::string_view api_key() const { return view(e_->api_key); }

  // Generates from token ids through the host (which records the call).
  Completion generate(const std::vector<int32_t>& input_ids, const Sampling& s) const {
    areal_sampling_params p{};
    p.struct_size = AREAL_OFFSET_OF_END(areal_sampling_params, stop_strings_count);
    p.temperature = s.temperature;
    p.top_p = s.top_p;
    p.top_k = s.top_k;
    p.max_new_tokens = s.max_new_tokens;
    p.seed = s.seed;
    p.has_seed = s.has_seed ? 1 : 0;
    p.stop_token_ids = s.stop_token_ids.data();
    p.stop_token_ids_count = s.stop_token_ids.size();
    areal_gen_request r{};
    r.struct_size = AREAL_OFFSET_OF_END(areal_gen_request, sampling);
    r.affinity_key = e_->episode_id;
    r.input_ids = input_ids.data();
    r.input_ids_count = input_ids.size();
    r.sampling = &p;
    const areal_completion* c = nullptr;
    throw_if_error(e_->api->generate(e_->api->ctx, &r, &c));
    Completion out;
    out.id.assign(view(c->completion_id));
    out.output_ids.assign(c->output_ids, c->output_ids + c->count);
    out.logprobs.assign(c->logprobs, c->logprobs + c->count);
    out.versions.assign(c->versions, c->versions + c->count);
    out.finish_reason = c->finish_reason;
    return out;
  }
  void set_reward(std::string_view completion_id, double reward) const {
    throw_if_error(e_->api->set_reward(e_->api->ctx, str(completion_id), reward));
  }
  // An OpenAI chat completion (request and response as JSON text) through
  // the gateway in process, recorded in this episode's session (ABI 1.1).
  std::string chat(std::string_view request_json) const {
    if (e_->api->struct_size < AREAL_OFFSET_OF_END(areal_episode_api, chat) || e_->api->chat == nullptr)
      throw Error(AREAL_CODE_UNSUPPORTED, "this host has no in-process chat (ABI 1.1 with a gateway is needed)");
    std::string out;
    areal_writer w{AREAL_OFFSET_OF_END(areal_writer, write), &out, [](void* ctx, areal_str chunk) -> areal_status* {
                     static_cast<std::string*>(ctx)->append(chunk.data, chunk.size);
                     return nullptr;
                   }};
    throw_if_error(e_->api->chat(e_->api->ctx, str(request_json), &w));
    return out;
  }

 private:
  const areal_episode* e_;
};

// ---------------------------------------------------------------------------
// Adapters: C vtables that forward to a C++ class
// ---------------------------------------------------------------------------
// What a train plugin's export_weights(fn) calls with its full weights (ABI 1.1).
using WeightsFn = std::function<void(const areal_tensor_map&)>;
// export_adapter's callback: PEFT's adapter_config fields (JSON) and the tensors.
using AdapterFn = std::function<void(std::string_view config_json, const areal_tensor_map&)>;

namespace detail {

template <class T, class = void>
struct description_of {
  static constexpr const char* value = "";
};
template <class T>
struct description_of<T, std::void_t<decltype(T::kDescription)>> {
  static constexpr const char* value = T::kDescription;
};
template <class T, class = void>
struct schema_of {
  static constexpr const char* value = nullptr;
};
template <class T>
struct schema_of<T, std::void_t<decltype(T::kConfigSchema)>> {
  static constexpr const char* value = T::kConfigSchema;
};

template <class T, class = void>
struct sample_data_of {
  static constexpr const char* value = nullptr;
};
template <class T>
struct sample_data_of<T, std::void_t<decltype(T::kSampleData)>> {
  static constexpr const char* value = T::kSampleData;
};

// get_proc_address for SDK plugins: serves the documented extensions the
// class opted into through static members.
template <class T>
void* proc_address(const char* name) {
  if constexpr (sample_data_of<T>::value != nullptr) {
    if (name != nullptr && std::strcmp(name, AREAL_WORKFLOW_SAMPLE_DATA_PROC) == 0) {
      areal_workflow_sample_data_fn fn = [] { return sample_data_of<T>::value; };
      return reinterpret_cast<void*>(fn);
    }
  }
  return nullptr;
}

template <class T>
[[nodiscard]] areal_status* create(areal_str config_json, const areal_services* services, void** out_self) {
  return guard([&] {
    if (out_self == nullptr) throw Error(AREAL_CODE_INVALID_ARGUMENT, "out_self is NULL");
    *out_self = new T(CreateContext(config_json, services));
  });
}
template <class T>
void destroy(void* self) {
  try {
    delete static_cast<T*>(self);
  } catch (...) {
    // A destructor that throws is a bug; swallowing keeps the host alive.
  }
}
template <class T>
T& self_of(void* self) {
  if (self == nullptr) throw Error(AREAL_CODE_INVALID_ARGUMENT, "instance is NULL");
  return *static_cast<T*>(self);
}

// Optional ABI 1.1 methods, detected at compile time: a class that has one
// gets its slot filled and the longer struct_size; one that has none stays a
// 1.0 table (the slot NULL).
//   inference: void update_weights_from_tensors(const areal_tensor_map& weights, int64_t version)
//   train:     void export_weights(const WeightsFn& fn)  (call fn once with the full weights)
template <class T, class = void>
struct has_update_weights_from_tensors : std::false_type {};
template <class T>
struct has_update_weights_from_tensors<T, std::void_t<decltype(std::declval<T&>().update_weights_from_tensors(
                                              std::declval<const areal_tensor_map&>(), int64_t()))>> : std::true_type {};
// Optional ABI 1.6 methods (both or neither):
//   inference: void load_adapter(std::string_view spec_json, const areal_tensor_map* tensors)
//              void unload_adapter(std::string_view name)
template <class T, class = void>
struct has_adapters : std::false_type {};
template <class T>
struct has_adapters<T, std::void_t<decltype(std::declval<T&>().load_adapter(std::string_view(), std::declval<const areal_tensor_map*>())),
                                   decltype(std::declval<T&>().unload_adapter(std::string_view()))>> : std::true_type {};
//   train:     void export_adapter(const AdapterFn& fn)  (ABI 1.6: call fn once with the LoRA adapter, or throw NOT_FOUND)
template <class T, class = void>
struct has_export_adapter : std::false_type {};
template <class T>
struct has_export_adapter<T, std::void_t<decltype(std::declval<T&>().export_adapter(std::declval<const AdapterFn&>()))>> : std::true_type {};
template <class T, class = void>
struct has_export_weights : std::false_type {};
template <class T>
struct has_export_weights<T, std::void_t<decltype(std::declval<T&>().export_weights(std::declval<const WeightsFn&>()))>>
    : std::true_type {};

template <class T>
struct InferenceAdapter {
  static areal_status* update_weights_from_tensors(void* s, const areal_tensor_map* m, int64_t version) {
    return guard([&] {
      if constexpr (has_update_weights_from_tensors<T>::value) {
        if (m == nullptr) throw invalid_argument("weights are required");
        self_of<T>(s).update_weights_from_tensors(*m, version);
      }
    });
  }
  static areal_status* load_adapter(void* s, areal_str spec, const areal_tensor_map* m) {
    return guard([&] {
      if constexpr (has_adapters<T>::value) self_of<T>(s).load_adapter(view(spec), m);
    });
  }
  static areal_status* unload_adapter(void* s, areal_str name) {
    return guard([&] {
      if constexpr (has_adapters<T>::value) self_of<T>(s).unload_adapter(view(name));
    });
  }
  static constexpr areal_inference_vtable vtable = {
      /* .struct_size    = */ has_adapters<T>::value ? AREAL_OFFSET_OF_END(areal_inference_vtable, unload_adapter)
                              : has_update_weights_from_tensors<T>::value
                                  ? AREAL_OFFSET_OF_END(areal_inference_vtable, update_weights_from_tensors)
                                  : AREAL_OFFSET_OF_END(areal_inference_vtable, info),
      /* .create         = */ &create<T>,
      /* .destroy        = */ &destroy<T>,
      /* .submit         = */
      [](void* s, const areal_gen_request* r, const areal_gen_sink* k) {
        return guard([&] {
          if (r == nullptr || k == nullptr) throw invalid_argument("request and sink are required");
          self_of<T>(s).submit(*r, *k);
        });
      },
      /* .abort          = */ [](void* s, uint64_t id) { return guard([&] { self_of<T>(s).abort(id); }); },
      /* .pause          = */ [](void* s) { return guard([&] { self_of<T>(s).pause(); }); },
      /* .resume         = */ [](void* s) { return guard([&] { self_of<T>(s).resume(); }); },
      /* .update_weights = */
      [](void* s, areal_str spec) { return guard([&] { self_of<T>(s).update_weights(view(spec)); }); },
      /* .get_version    = */
      [](void* s, int64_t* v) {
        return guard([&] {
          if (v == nullptr) throw invalid_argument("out_version is NULL");
          *v = self_of<T>(s).version();
        });
      },
      /* .set_version    = */ [](void* s, int64_t v) { return guard([&] { self_of<T>(s).set_version(v); }); },
      /* .info           = */
      [](void* s, const areal_writer* w) { return guard([&] { write(w, self_of<T>(s).info()); }); },
      /* .update_weights_from_tensors = */
      has_update_weights_from_tensors<T>::value ? &InferenceAdapter::update_weights_from_tensors : nullptr,
      /* .load_adapter   = */ has_adapters<T>::value ? &InferenceAdapter::load_adapter : nullptr,
      /* .unload_adapter = */ has_adapters<T>::value ? &InferenceAdapter::unload_adapter : nullptr,
  };
};

template <class T>
struct WorkflowAdapter {
  static constexpr areal_workflow_vtable vtable = {
      /* .struct_size = */ AREAL_OFFSET_OF_END(areal_workflow_vtable, run_episode),
      /* .create      = */ &create<T>,
      /* .destroy     = */ &destroy<T>,
      /* .run_episode = */
      [](void* s, const areal_episode* e, const areal_writer* w) {
        return guard([&] {
          if (e == nullptr || e->api == nullptr) throw invalid_argument("episode is NULL");
          Episode episode(e);
          write(w, self_of<T>(s).run_episode(episode));
        });
      },
  };
};

template <class T>
struct AlgorithmAdapter {
  static constexpr areal_algorithm_vtable vtable = {
      /* .struct_size        = */ AREAL_OFFSET_OF_END(areal_algorithm_vtable, loss),
      /* .create             = */ &create<T>,
      /* .destroy            = */ &destroy<T>,
      /* .compute_advantages = */
      [](void* s, const areal_tensor_map* b, const areal_tensor_map* o) {
        return guard([&] {
          if (b == nullptr || o == nullptr) throw invalid_argument("batch and out are required");
          self_of<T>(s).compute_advantages(*b, *o);
        });
      },
      /* .loss               = */
      [](void* s, const areal_tensor_map* b, double* l, DLTensor* g, const areal_writer* w) {
        return guard([&] {
          if (b == nullptr || l == nullptr || g == nullptr) throw invalid_argument("batch, loss and grad are required");
          std::string stats = "{}";
          *l = self_of<T>(s).loss(*b, *g, stats);
          if (w != nullptr) write(w, stats);
        });
      },
  };
};

template <class T>
struct TrainAdapter {
  static areal_status* export_weights(void* s, areal_status* (*fn)(void*, const areal_tensor_map*), void* ctx) {
    return guard([&] {
      if constexpr (has_export_weights<T>::value) {
        if (fn == nullptr) throw invalid_argument("fn is required");
        self_of<T>(s).export_weights([&](const areal_tensor_map& m) { throw_if_error(fn(ctx, &m)); });
      }
    });
  }
  static areal_status* export_adapter(void* s, areal_status* (*fn)(void*, areal_str, const areal_tensor_map*), void* ctx) {
    return guard([&] {
      if constexpr (has_export_adapter<T>::value) {
        if (fn == nullptr) throw invalid_argument("fn is required");
        self_of<T>(s).export_adapter([&](std::string_view config, const areal_tensor_map& m) { throw_if_error(fn(ctx, str(config), &m)); });
      }
    });
  }
  static constexpr areal_train_vtable vtable = {
      /* .struct_size      = */ has_export_adapter<T>::value   ? AREAL_OFFSET_OF_END(areal_train_vtable, export_adapter)
                                : has_export_weights<T>::value ? AREAL_OFFSET_OF_END(areal_train_vtable, export_weights)
                                                               : AREAL_OFFSET_OF_END(areal_train_vtable, set_version),
      /* .create           = */ &create<T>,
      /* .destroy          = */ &destroy<T>,
      /* .compute_logprobs = */
      [](void* s, const areal_tensor_map* b, float t, DLManagedTensor** out) {
        return guard([&] {
          if (b == nullptr || out == nullptr) throw invalid_argument("batch and out are required");
          *out = self_of<T>(s).compute_logprobs(*b, t);
        });
      },
      /* .train_step       = */
      [](void* s, const areal_tensor_map* b, const areal_loss_fn* l, const areal_writer* w) {
        return guard([&] {
          if (b == nullptr || l == nullptr) throw invalid_argument("batch and loss are required");
          std::string stats = self_of<T>(s).train_step(*b, *l);
          if (w != nullptr) write(w, stats);
        });
      },
      /* .save             = */ [](void* s, areal_str spec) { return guard([&] { self_of<T>(s).save(view(spec)); }); },
      /* .load             = */ [](void* s, areal_str spec) { return guard([&] { self_of<T>(s).load(view(spec)); }); },
      /* .get_version      = */
      [](void* s, int64_t* v) {
        return guard([&] {
          if (v == nullptr) throw invalid_argument("out_version is NULL");
          *v = self_of<T>(s).version();
        });
      },
      /* .set_version      = */ [](void* s, int64_t v) { return guard([&] { self_of<T>(s).set_version(v); }); },
      /* .export_weights   = */ has_export_weights<T>::value ? &TrainAdapter::export_weights : nullptr,
      /* .export_adapter   = */ has_export_adapter<T>::value ? &TrainAdapter::export_adapter : nullptr,
  };
};

// Gateways may implement `std::string control(std::string_view request_json)`
// (ABI 1.1, superseded by the session slots) and the ABI 1.4 session slots
// as one set, detected by `grant_capacity`:
//   int64_t grant_capacity(int64_t n);
//   std::pair<std::string, std::string> start_session(std::string_view task_id, std::string_view group_id);  // {id, key}
//   void set_session_reward(std::string_view session_id, std::string_view interaction_id, double reward);
//   void end_session(std::string_view session_id);
//   void take_finished(int64_t timeout_ms, const areal_trajectory_sink& sink);  // calls the sink at most once
//   void export_session(std::string_view session_id, double discount, const areal_trajectory_sink& sink);
//   std::string session_chat(std::string_view session_id, std::string_view request_json);
// and, when they keep durable state, the ABI 1.5 pair (detected by commit_checkpoint):
//   void mark_sessions_trained(const std::vector<std::string>& session_ids, int64_t checkpoint_step);
//   void commit_checkpoint(int64_t step);
// Without them the slots are NULL and struct_size stops at the last one set.
template <class T, class = void>
struct has_control : std::false_type {};
template <class T>
struct has_control<T, std::void_t<decltype(std::declval<T&>().control(std::string_view()))>> : std::true_type {};
template <class T, class = void>
struct has_sessions : std::false_type {};
template <class T>
struct has_sessions<T, std::void_t<decltype(std::declval<T&>().grant_capacity(int64_t{1}))>> : std::true_type {};

template <class T, class = void>
struct has_checkpoints : std::false_type {};
template <class T>
struct has_checkpoints<T, std::void_t<decltype(std::declval<T&>().commit_checkpoint(int64_t{0}))>> : std::true_type {};

template <class T>
struct GatewayAdapter {
  static areal_status* control(void* s, areal_str request, const areal_writer* w) {
    return guard([&] {
      if constexpr (has_control<T>::value) write(w, self_of<T>(s).control(view(request)));
    });
  }
  static const areal_trajectory_sink& sink_of(const areal_trajectory_sink* sink) {
    if (sink == nullptr || sink->struct_size < AREAL_OFFSET_OF_END(areal_trajectory_sink, on_session) || sink->on_session == nullptr)
      throw invalid_argument("a trajectory sink with on_session is required");
    return *sink;
  }
  static areal_status* grant_capacity(void* s, int64_t n, int64_t* out) {
    return guard([&] {
      if constexpr (has_sessions<T>::value) {
        if (out == nullptr) throw invalid_argument("out_capacity is NULL");
        *out = self_of<T>(s).grant_capacity(n);
      }
    });
  }
  static areal_status* start_session(void* s, areal_str task, areal_str group, const areal_writer* id, const areal_writer* key) {
    return guard([&] {
      if constexpr (has_sessions<T>::value) {
        const auto started = self_of<T>(s).start_session(view(task), view(group));
        write(id, started.first);
        write(key, started.second);
      }
    });
  }
  static areal_status* set_session_reward(void* s, areal_str session, areal_str interaction, double reward) {
    return guard([&] {
      if constexpr (has_sessions<T>::value) self_of<T>(s).set_session_reward(view(session), view(interaction), reward);
    });
  }
  static areal_status* end_session(void* s, areal_str session) {
    return guard([&] {
      if constexpr (has_sessions<T>::value) self_of<T>(s).end_session(view(session));
    });
  }
  static areal_status* take_finished(void* s, int64_t timeout_ms, const areal_trajectory_sink* sink) {
    return guard([&] {
      if constexpr (has_sessions<T>::value) self_of<T>(s).take_finished(timeout_ms, sink_of(sink));
    });
  }
  static areal_status* export_session(void* s, areal_str session, double discount, const areal_trajectory_sink* sink) {
    return guard([&] {
      if constexpr (has_sessions<T>::value) self_of<T>(s).export_session(view(session), discount, sink_of(sink));
    });
  }
  static areal_status* session_chat(void* s, areal_str session, areal_str request, const areal_writer* w) {
    return guard([&] {
      if constexpr (has_sessions<T>::value) write(w, self_of<T>(s).session_chat(view(session), view(request)));
    });
  }
  static areal_status* mark_sessions_trained(void* s, const areal_str* ids, size_t n, int64_t step) {
    return guard([&] {
      if constexpr (has_checkpoints<T>::value) {
        if (ids == nullptr && n > 0) throw invalid_argument("session_ids is NULL");
        std::vector<std::string> list;
        for (size_t i = 0; i < n; ++i) list.emplace_back(view(ids[i]));
        self_of<T>(s).mark_sessions_trained(list, step);
      }
    });
  }
  static areal_status* commit_checkpoint(void* s, int64_t step) {
    return guard([&] {
      if constexpr (has_checkpoints<T>::value) self_of<T>(s).commit_checkpoint(step);
    });
  }
  static constexpr uint32_t kSize = has_checkpoints<T>::value ? AREAL_OFFSET_OF_END(areal_gateway_vtable, commit_checkpoint)
                                    : has_sessions<T>::value  ? AREAL_OFFSET_OF_END(areal_gateway_vtable, session_chat)
                                    : has_control<T>::value ? AREAL_OFFSET_OF_END(areal_gateway_vtable, control)
                                                            : AREAL_OFFSET_OF_END(areal_gateway_vtable, stop);
  static constexpr bool kSessions = has_sessions<T>::value;
  static constexpr areal_gateway_vtable vtable = {
      /* .struct_size        = */ kSize,
      /* .create             = */ &create<T>,
      /* .destroy            = */ &destroy<T>,
      /* .start              = */
      [](void* s, const areal_writer* w) { return guard([&] { write(w, self_of<T>(s).start()); }); },
      /* .stop               = */ [](void* s) { return guard([&] { self_of<T>(s).stop(); }); },
      /* .control            = */ has_control<T>::value ? &GatewayAdapter::control : nullptr,
      /* .grant_capacity     = */ kSessions ? &GatewayAdapter::grant_capacity : nullptr,
      /* .start_session      = */ kSessions ? &GatewayAdapter::start_session : nullptr,
      /* .set_session_reward = */ kSessions ? &GatewayAdapter::set_session_reward : nullptr,
      /* .end_session        = */ kSessions ? &GatewayAdapter::end_session : nullptr,
      /* .take_finished      = */ kSessions ? &GatewayAdapter::take_finished : nullptr,
      /* .export_session     = */ kSessions ? &GatewayAdapter::export_session : nullptr,
      /* .session_chat       = */ kSessions ? &GatewayAdapter::session_chat : nullptr,
      /* .mark_sessions_trained = */ has_checkpoints<T>::value ? &GatewayAdapter::mark_sessions_trained : nullptr,
      /* .commit_checkpoint  = */ has_checkpoints<T>::value ? &GatewayAdapter::commit_checkpoint : nullptr,
  };
};

// The minimum host table this SDK calls into.
constexpr uint32_t kMinHostApiSize = AREAL_OFFSET_OF_END(areal_host_api, metrics_render);

template <class T, class Adapter>
[[nodiscard]] areal_status* plugin_init(int32_t kind, const areal_host_api* host_api, const areal_plugin_info** out_info) noexcept {
  if (host_api == nullptr || host_api->struct_size < kMinHostApiSize || host_api->abi_major != AREAL_ABI_MAJOR) {
    // Cannot build a status without a usable host table: refuse by NULL info.
    // The host reports "init returned no info".
    if (host_api != nullptr && host_api->struct_size >= AREAL_OFFSET_OF_END(areal_host_api, status_new))
      return host_api->status_new(AREAL_CODE_ABI_MISMATCH,
                                  str("plugin was built for ABI major " AREAL_SDK_STRINGIFY(AREAL_ABI_MAJOR)
                                      " and needs a host table of at least that version"));
    return nullptr;
  }
  detail::host_slot() = host_api;
  static const areal_plugin_info info = {
      /* .struct_size        = */ AREAL_OFFSET_OF_END(areal_plugin_info, finalize),
      /* .abi_major          = */ AREAL_ABI_MAJOR,
      /* .abi_minor          = */ AREAL_ABI_MINOR,
      /* .kind               = */ kind,
      /* .name               = */ T::kName,
      /* .version            = */ T::kVersion,
      /* .description        = */ description_of<T>::value,
      /* .config_schema_json = */ schema_of<T>::value,
      /* .vtable             = */ &Adapter::vtable,
      /* .get_proc_address   = */ &proc_address<T>,
      /* .finalize           = */ nullptr,
  };
  if (out_info == nullptr) return host_api->status_new(AREAL_CODE_INVALID_ARGUMENT, str("out_info is NULL"));
  *out_info = &info;
  return nullptr;
}

}  // namespace detail
}  // namespace areal::sdk

#define AREAL_SDK_EXPORT_(Class, kind, Adapter)                                                             \
  extern "C" AREAL_PLUGIN_EXPORT areal_status* areal_plugin_init(const areal_host_api* host,                \
                                                                 const areal_plugin_info** out_info) {       \
    return ::areal::sdk::detail::plugin_init<Class, ::areal::sdk::detail::Adapter<Class>>(kind, host, out_info); \
  }

// One of these per plugin library, after the class definition.
#define AREAL_EXPORT_INFERENCE(Class) AREAL_SDK_EXPORT_(Class, AREAL_KIND_INFERENCE, InferenceAdapter)
#define AREAL_EXPORT_TRAIN(Class) AREAL_SDK_EXPORT_(Class, AREAL_KIND_TRAIN, TrainAdapter)
#define AREAL_EXPORT_ALGORITHM(Class) AREAL_SDK_EXPORT_(Class, AREAL_KIND_ALGORITHM, AlgorithmAdapter)
#define AREAL_EXPORT_WORKFLOW(Class) AREAL_SDK_EXPORT_(Class, AREAL_KIND_WORKFLOW, WorkflowAdapter)
#define AREAL_EXPORT_GATEWAY(Class) AREAL_SDK_EXPORT_(Class, AREAL_KIND_GATEWAY, GatewayAdapter)

// For plugins linked into areal-host itself (the built-in gateway): the same
// init, under its own name, registered with the host's built-in table.
#define AREAL_DEFINE_BUILTIN(Class, kind, Adapter, init_name)                                    \
  areal_status* init_name(const areal_host_api* host, const areal_plugin_info** out_info) {      \
    return ::areal::sdk::detail::plugin_init<Class, ::areal::sdk::detail::Adapter<Class>>(kind, host, out_info); \
  }

#endif  // AREAL_SDK_HPP_
