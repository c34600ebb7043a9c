// python_inline: seed-style Python agents (`async def run(data,
// **extra_kwargs)`) run inside the host process, as AReaL's inline mode
// does: one embedded interpreter, one asyncio event loop on a thread of its
// own, each episode a coroutine on it with base_url, api_key and (when httpx
// imports) a shared httpx.AsyncClient as http_client.
//
// Host threads hold the GIL only to schedule an episode; its result comes
// back through a C function (`_areal_inline.done`) that completes a waiter,
// so the gateway and trainer never wait on Python. agent_runtime.py, beside
// this plugin, is the Python half.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "areal/sdk.hpp"
#include "areal/sdk_json.hpp"
#include "common/agent_session.hpp"
#include "common/plugin_dir.hpp"

namespace {

using nlohmann::json;
namespace sdk = areal::sdk;
namespace fs = std::filesystem;

// The reply to one scheduled episode (token 0: the loop's "ready").
struct Waiter {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::string reply;
};

std::mutex g_waiters_mutex;
std::map<uint64_t, std::shared_ptr<Waiter>> g_waiters;

PyObject* done(PyObject*, PyObject* args) {
  unsigned long long token = 0;
  const char* reply = nullptr;
  if (!PyArg_ParseTuple(args, "Ks", &token, &reply)) return nullptr;
  std::shared_ptr<Waiter> w;
  {
    std::lock_guard<std::mutex> lock(g_waiters_mutex);
    auto it = g_waiters.find(token);
    if (it != g_waiters.end()) w = it->second, g_waiters.erase(it);
  }
  if (w) {
    std::lock_guard<std::mutex> lock(w->m);
    w->reply = reply;
    w->done = true;
    w->cv.notify_all();
  }
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {{"done", done, METH_VARARGS, "done(token, reply_json): an episode's reply, back to areal."}, {nullptr, nullptr, 0, nullptr}};
PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_areal_inline", "areal's side of the inline Python workflow.", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};
PyObject* init_module() { return PyModule_Create(&kModule); }

std::shared_ptr<Waiter> expect(uint64_t token) {
  auto w = std::make_shared<Waiter>();
  std::lock_guard<std::mutex> lock(g_waiters_mutex);
  g_waiters[token] = w;
  return w;
}

// The current Python exception as "Type: message" plus its traceback; clears it.
std::string python_error() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string text = "unknown Python error";
  PyObject* mod = PyImport_ImportModule("traceback");
  PyObject* lines = mod ? PyObject_CallMethod(mod, "format_exception", "OOO", type ? type : Py_None, value ? value : Py_None, tb ? tb : Py_None) : nullptr;
  if (lines) {
    PyObject* empty = PyUnicode_FromString("");
    PyObject* joined = PyUnicode_Join(empty, lines);
    if (joined) text = PyUnicode_AsUTF8(joined);
    Py_XDECREF(joined);
    Py_XDECREF(empty);
  }
  PyErr_Clear();
  Py_XDECREF(lines), Py_XDECREF(mod), Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
  return text;
}

// The one interpreter of the process and its event loop. CPython cannot be
// re-initialised safely, so it lives until exit; the loop thread stops and
// starts with the plugin's instances.
class Interpreter {
 public:
  static Interpreter& get() {
    static Interpreter* it = new Interpreter();  // never destroyed: no Py_Finalize with threads around
    return *it;
  }

  // Starts Python once (interpreter: the python executable whose prefix and
  // site-packages to use; empty: the linked one's).
  void start(const std::string& interpreter, const std::vector<std::string>& python_path, const std::string& agent) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Py_IsInitialized()) {
      promote_libpython();
      PyImport_AppendInittab("_areal_inline", &init_module);
      PyConfig config;
      PyConfig_InitPythonConfig(&config);
      config.install_signal_handlers = 0;  // SIGINT stays the host's
      config.parse_argv = 0;
      PyStatus st = PyStatus_Ok();
      if (!interpreter.empty()) st = PyConfig_SetBytesString(&config, &config.executable, interpreter.c_str());
      if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
      PyConfig_Clear(&config);
      if (PyStatus_Exception(st))
        throw sdk::invalid_argument(std::string("python_inline: cannot start Python") + (st.err_msg ? std::string(": ") + st.err_msg : ""));
      interpreter_ = interpreter;
      PyEval_SaveThread();  // released for good: every call takes the GIL with PyGILState_Ensure
    } else if (interpreter != interpreter_) {
      throw sdk::invalid_argument("python_inline: this process already runs Python from '" + interpreter_ + "'; one interpreter per process");
    }
    PyGILState_STATE g = PyGILState_Ensure();
    std::string error;
    PyObject* sys_path = PySys_GetObject("path");  // borrowed
    std::vector<std::string> dirs = python_path;
    dirs.push_back(areal::workflows::plugin_dir().string() + "/python_inline");
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
      PyObject* s = PyUnicode_FromString(it->c_str());
      if (PySequence_Contains(sys_path, s) == 0) PyList_Insert(sys_path, 0, s);
      Py_DECREF(s);
    }
    if (!runtime_) runtime_ = PyImport_ImportModule("agent_runtime");
    if (!runtime_) error = "python_inline: cannot import agent_runtime.py (install the plugin with it): " + python_error();
    if (error.empty()) {
      PyObject* r = PyObject_CallMethod(runtime_, "load", "s", agent.c_str());
      if (!r) error = "python_inline: cannot load agent '" + agent + "': " + python_error();
      Py_XDECREF(r);
    }
    PyGILState_Release(g);
    if (!error.empty()) throw sdk::invalid_argument(error);
    if (!loop_.joinable()) start_loop();
  }

  void stop_loop() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!loop_.joinable()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* r = PyObject_CallMethod(runtime_, "stop", nullptr);
    if (!r) python_error();
    Py_XDECREF(r);
    PyGILState_Release(g);
    loop_.join();
  }

  // Schedules an episode; the waiter completes with the reply.
  std::shared_ptr<Waiter> submit(const std::string& request, double timeout_s) {
    const uint64_t token = next_token_++;
    auto w = expect(token);
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject* r = PyObject_CallMethod(runtime_, "submit", "Ksd", static_cast<unsigned long long>(token), request.c_str(), timeout_s);
    std::string error;
    if (!r) error = python_error();
    Py_XDECREF(r);
    PyGILState_Release(g);
    if (!error.empty()) {
      std::lock_guard<std::mutex> lock(g_waiters_mutex);
      g_waiters.erase(token);
      throw sdk::Error(AREAL_CODE_INTERNAL, "python_inline: cannot schedule the episode: " + error);
    }
    return w;
  }

 private:
  // Plugins load RTLD_LOCAL; compiled Python modules (_asyncio, _json, ...)
  // look their libpython symbols up globally, so libpython must be global.
  static void promote_libpython() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&Py_InitializeFromConfig), &info) != 0 && info.dli_fname != nullptr)
      dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }

  void start_loop() {
    auto ready = expect(0);
    loop_ = sdk::guarded_thread("python_inline", [this] {
      PyGILState_STATE g = PyGILState_Ensure();
      PyObject* r = PyObject_CallMethod(runtime_, "serve", nullptr);
      if (!r) sdk::log(AREAL_LOG_ERROR, "python_inline", "the event loop stopped with an error: " + python_error());
      Py_XDECREF(r);
      PyGILState_Release(g);
    });
    std::unique_lock<std::mutex> lock(ready->m);
    if (!ready->cv.wait_for(lock, std::chrono::seconds(60), [&] { return ready->done; }))
      throw sdk::Error(AREAL_CODE_UNAVAILABLE, "python_inline: the asyncio event loop did not start");
  }

  std::mutex mutex_;
  std::string interpreter_;
  PyObject* runtime_ = nullptr;
  std::thread loop_;
  std::atomic<uint64_t> next_token_{1};
};

class PythonInline {
 public:
  static constexpr const char* kName = "python_inline";
  static constexpr const char* kVersion = "1.0.0";
  static constexpr const char* kDescription =
      "Seed-style Python agents (async def run(data, **extra_kwargs)) in process: one embedded interpreter, episodes as "
      "coroutines on one asyncio loop, with base_url, api_key and an httpx.AsyncClient (when httpx imports).";
  static constexpr const char* kConfigSchema = R"({"type": "object", "keys": {
    "agent": {"type": "string", "doc": "module:Class, module:function or module (its run). A class is instantiated once; run should be async (a sync run goes to a worker thread)."},
    "interpreter": {"type": "string", "default": "", "doc": "A python executable (e.g. a virtual environment's bin/python, made from the same Python version areal links) whose prefix and site-packages to use; empty: the linked Python's."},
    "python_path": {"type": "array", "items": {"type": "string", "format": "path"}, "default": [], "doc": "Directories put first on sys.path (where the agent's module lives); relative to the config file."},
    "timeout_seconds": {"type": "number", "default": 600, "minimum": 0.001, "doc": "An episode running longer is cancelled and fails."}
  }})";
  static constexpr const char* kSampleData = R"({"question": "hello"})";

  explicit PythonInline(const sdk::CreateContext& ctx) : config_(sdk::parse_object(ctx.config_json(), "python_inline: config")) {
    if (!config_.contains("agent") || !config_["agent"].is_string() || config_["agent"].get<std::string>().empty())
      throw sdk::invalid_argument("python_inline: 'agent' is required (module:Class or module:function)");
    std::vector<std::string> path;
    for (const auto& p : config_.value("python_path", json::array())) path.push_back(fs::absolute(p.get<std::string>()).string());
    timeout_s_ = config_.value("timeout_seconds", 600.0);
    Interpreter::get().start(config_.value("interpreter", std::string()), path, config_["agent"]);
  }

  ~PythonInline() { Interpreter::get().stop_loop(); }

  std::string run_episode(sdk::Episode& episode) {
    const auto session = areal::workflows::agent_session(episode, "python_inline");
    json data = json::parse(episode.data_json(), nullptr, false);
    if (data.is_discarded()) data = std::string(episode.data_json());
    const json request = {{"episode_id", std::string(episode.id())}, {"data", data}, {"base_url", session.base_url},
                          {"api_key", session.api_key}, {"anthropic_base_url", session.anthropic_base_url}};
    auto w = Interpreter::get().submit(request.dump(), timeout_s_);
    std::unique_lock<std::mutex> lock(w->m);
    // The coroutine is cancelled at timeout_seconds; the margin covers a loop
    // so busy that even the cancellation is late.
    if (!w->cv.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000) + 30000), [&] { return w->done; }))
      throw sdk::Error(AREAL_CODE_DEADLINE_EXCEEDED, "python_inline: no reply from the event loop within timeout_seconds + 30 s (is an agent blocking the loop?)");
    const json reply = json::parse(w->reply, nullptr, false);
    if (!reply.is_object()) throw sdk::Error(AREAL_CODE_INTERNAL, "python_inline: malformed reply " + w->reply.substr(0, 200));
    if (reply.value("op", "") == "error") {
      const std::string tb = reply.value("traceback", std::string());
      if (!tb.empty()) sdk::log(AREAL_LOG_WARN, "python_inline", "episode " + std::string(episode.id()) + " failed:\n" + tb);
      throw sdk::Error(AREAL_CODE_INVALID_ARGUMENT, "python_inline: " + reply.value("message", std::string("the agent failed")));
    }
    json result = json::object();
    if (reply.contains("reward") && !reply["reward"].is_null()) result["reward"] = reply["reward"];
    return result.dump();
  }

 private:
  json config_;
  double timeout_s_ = 600;
};

}  // namespace

AREAL_EXPORT_WORKFLOW(PythonInline)
