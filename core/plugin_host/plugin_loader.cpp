#include "core/plugin_host/plugin_loader.hpp"

#include <algorithm>
#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <cstdint>
#include <exception>

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_api.hpp"
#include "core/telemetry/logging.hpp"

namespace areal {
namespace {

// Minimum sizes of what ABI 1.0 defined; a plugin struct shorter than this
// cannot be from any 1.x release.
constexpr uint32_t kInfoMin = AREAL_OFFSET_OF_END(areal_plugin_info, finalize);
constexpr uint32_t kInferenceMin = AREAL_OFFSET_OF_END(areal_inference_vtable, info);
constexpr uint32_t kTrainMin = AREAL_OFFSET_OF_END(areal_train_vtable, set_version);
constexpr uint32_t kAlgorithmMin = AREAL_OFFSET_OF_END(areal_algorithm_vtable, loss);
constexpr uint32_t kWorkflowMin = AREAL_OFFSET_OF_END(areal_workflow_vtable, run_episode);
constexpr uint32_t kGatewayMin = AREAL_OFFSET_OF_END(areal_gateway_vtable, stop);

std::mutex& load_mutex() {
  static std::mutex m;  // dlopen + init are serialised (Triton's lesson on CUDA)
  return m;
}
std::map<std::string, std::weak_ptr<LoadedPlugin>>& loaded_by_path() {
  static std::map<std::string, std::weak_ptr<LoadedPlugin>> m;
  return m;
}
// (The init function sits in a struct: a function-pointer type carrying
// AREAL_MUST_USE cannot be a template argument without losing it.)
struct BuiltinInit {
  areal_plugin_init_fn init;
};
std::map<std::string, BuiltinInit>& builtins() {
  static std::map<std::string, BuiltinInit> m;
  return m;
}

[[noreturn]] void refuse(const std::string& where, int32_t code, const std::string& reason) {
  throw Error(code, where + ": " + reason);
}

// Copies min(plugin size, host size) bytes into a zeroed host struct.
template <class T>
void copy_prefix(T& dst, const void* src) {
  uint32_t size = 0;
  std::memcpy(&size, src, sizeof size);
  std::memset(&dst, 0, sizeof dst);
  std::memcpy(&dst, src, size < sizeof(T) ? size : sizeof(T));
  // The copy says what it holds: a newer plugin's larger struct_size would
  // promise members past the host's struct.
  dst.struct_size = static_cast<uint32_t>(size < sizeof(T) ? size : sizeof(T));
}

struct SlotCheck {
  const char* name;
  const void* ptr;
};

void require_slots(const std::string& where, const char* vtable, std::initializer_list<SlotCheck> slots) {
  for (const auto& s : slots)
    if (s.ptr == nullptr)
      refuse(where, AREAL_CODE_ABI_MISMATCH, std::string("required slot ") + vtable + "." + s.name + " is NULL");
}

#define AREAL_SLOT(v, n) SlotCheck{#n, reinterpret_cast<const void*>(v.n)}

}  // namespace

std::string kind_name(int32_t kind) {
  switch (kind) {
    case AREAL_KIND_INFERENCE: return "inference";
    case AREAL_KIND_TRAIN: return "train";
    case AREAL_KIND_ALGORITHM: return "algorithm";
    case AREAL_KIND_WORKFLOW: return "workflow";
    case AREAL_KIND_GATEWAY: return "gateway";
    default: return "unknown(" + std::to_string(kind) + ")";
  }
}

int32_t kind_from_name(const std::string& name) {
  for (int32_t k = AREAL_KIND_INFERENCE; k <= AREAL_KIND_GATEWAY; ++k)
    if (kind_name(k) == name) return k;
  return 0;
}

LoadedPlugin::~LoadedPlugin() {
  // Instances are gone by now (they hold a shared_ptr to us); let the plugin
  // join its threads before the library may be unmapped.
  if (info_.finalize != nullptr) {
    try {
      info_.finalize();
    } catch (...) {
    }
  }
}

std::string LoadedPlugin::abi_version() const {
  return std::to_string(info_.abi_major) + "." + std::to_string(info_.abi_minor);
}

const areal_inference_vtable* LoadedPlugin::inference() const { return kind() == AREAL_KIND_INFERENCE ? &vtable_.inference : nullptr; }
const areal_train_vtable* LoadedPlugin::train() const { return kind() == AREAL_KIND_TRAIN ? &vtable_.train : nullptr; }
const areal_algorithm_vtable* LoadedPlugin::algorithm() const { return kind() == AREAL_KIND_ALGORITHM ? &vtable_.algorithm : nullptr; }
const areal_workflow_vtable* LoadedPlugin::workflow() const { return kind() == AREAL_KIND_WORKFLOW ? &vtable_.workflow : nullptr; }
const areal_gateway_vtable* LoadedPlugin::gateway() const { return kind() == AREAL_KIND_GATEWAY ? &vtable_.gateway : nullptr; }

LoadedPlugin::CreateFn LoadedPlugin::create_fn() const {
  switch (kind()) {
    case AREAL_KIND_INFERENCE: return vtable_.inference.create;
    case AREAL_KIND_TRAIN: return vtable_.train.create;
    case AREAL_KIND_ALGORITHM: return vtable_.algorithm.create;
    case AREAL_KIND_WORKFLOW: return vtable_.workflow.create;
    default: return vtable_.gateway.create;
  }
}
LoadedPlugin::DestroyFn LoadedPlugin::destroy_fn() const {
  switch (kind()) {
    case AREAL_KIND_INFERENCE: return vtable_.inference.destroy;
    case AREAL_KIND_TRAIN: return vtable_.train.destroy;
    case AREAL_KIND_ALGORITHM: return vtable_.algorithm.destroy;
    case AREAL_KIND_WORKFLOW: return vtable_.workflow.destroy;
    default: return vtable_.gateway.destroy;
  }
}

// Runs init and validates everything the plugin declared. Shared by files
// and built-ins so both are held to the same rules.
static void init_and_validate(LoadedPlugin& p, const std::string& where, areal_plugin_init_fn init,
                              areal_plugin_info& info_out, void* vtable_out, size_t vtable_out_size) {
  const areal_plugin_info* info = nullptr;
  areal_status* st = nullptr;
  try {
    st = init(host_api(), &info);
  } catch (const std::exception& e) {
    refuse(where, AREAL_CODE_INTERNAL, std::string("areal_plugin_init threw a C++ exception across the C ABI: ") + e.what());
  } catch (...) {
    refuse(where, AREAL_CODE_INTERNAL, "areal_plugin_init threw a C++ exception across the C ABI");
  }
  if (st != nullptr) {
    StatusPtr owned(st);
    refuse(where, status_code(st), std::string("areal_plugin_init failed: ") + std::string(status_message(st)));
  }
  if (info == nullptr) refuse(where, AREAL_CODE_ABI_MISMATCH, "areal_plugin_init returned no plugin info");
  if (info->struct_size < kInfoMin)
    refuse(where, AREAL_CODE_ABI_MISMATCH, "areal_plugin_info.struct_size is " + std::to_string(info->struct_size) +
                                               ", shorter than the " + std::to_string(kInfoMin) + " bytes ABI 1.0 requires");
  if (info->abi_major != AREAL_ABI_MAJOR)
    refuse(where, AREAL_CODE_ABI_MISMATCH, "plugin was built for ABI " + std::to_string(info->abi_major) + "." +
                                               std::to_string(info->abi_minor) + " but this host speaks ABI " +
                                               std::to_string(AREAL_ABI_MAJOR) + "." + std::to_string(AREAL_ABI_MINOR) +
                                               " (major versions must match; rebuild the plugin against this SDK)");
  copy_prefix(info_out, info);
  static const std::regex kName("^[a-z0-9_]+$");
  if (info_out.name == nullptr || !std::regex_match(info_out.name, kName))
    refuse(where, AREAL_CODE_INVALID_ARGUMENT, "plugin name must match [a-z0-9_]+");
  if (info_out.version == nullptr || info_out.version[0] == '\0')
    refuse(where, AREAL_CODE_INVALID_ARGUMENT, "plugin version is empty");
  if (info_out.description == nullptr) info_out.description = "";
  if (info_out.vtable == nullptr) refuse(where, AREAL_CODE_ABI_MISMATCH, "plugin info has no vtable");

  uint32_t vt_size = 0;
  std::memcpy(&vt_size, info_out.vtable, sizeof vt_size);
  uint32_t min = 0;
  size_t known = 0;  // this host's struct of that kind
  switch (info_out.kind) {
    case AREAL_KIND_INFERENCE: min = kInferenceMin, known = sizeof(areal_inference_vtable); break;
    case AREAL_KIND_TRAIN: min = kTrainMin, known = sizeof(areal_train_vtable); break;
    case AREAL_KIND_ALGORITHM: min = kAlgorithmMin, known = sizeof(areal_algorithm_vtable); break;
    case AREAL_KIND_WORKFLOW: min = kWorkflowMin, known = sizeof(areal_workflow_vtable); break;
    case AREAL_KIND_GATEWAY: min = kGatewayMin, known = sizeof(areal_gateway_vtable); break;
    default: refuse(where, AREAL_CODE_ABI_MISMATCH, "unknown plugin kind " + std::to_string(info_out.kind));
  }
  if (vt_size < min)
    refuse(where, AREAL_CODE_ABI_MISMATCH, kind_name(info_out.kind) + " vtable struct_size is " + std::to_string(vt_size) +
                                               ", shorter than the " + std::to_string(min) + " bytes ABI 1.0 requires");
  std::memset(vtable_out, 0, vtable_out_size);
  const uint32_t kept = static_cast<uint32_t>(std::min<size_t>({vt_size, known, vtable_out_size}));
  std::memcpy(vtable_out, info_out.vtable, kept);
  // The host's copy is handed to other plugins (an inference table reaches
  // workflows and gateways), which read struct_size before a newer slot: it
  // must say what the copy holds, not what a newer plugin's table had.
  std::memcpy(vtable_out, &kept, sizeof kept);
  (void)p;
}

static void check_required_slots(const LoadedPlugin& p, const std::string& where) {
  switch (p.kind()) {
    case AREAL_KIND_INFERENCE: {
      const auto& v = *p.inference();
      require_slots(where, "inference", {AREAL_SLOT(v, create), AREAL_SLOT(v, destroy), AREAL_SLOT(v, submit),
                                         AREAL_SLOT(v, abort), AREAL_SLOT(v, pause), AREAL_SLOT(v, resume),
                                         AREAL_SLOT(v, update_weights), AREAL_SLOT(v, get_version),
                                         AREAL_SLOT(v, set_version), AREAL_SLOT(v, info)});
      break;
    }
    case AREAL_KIND_TRAIN: {
      const auto& v = *p.train();
      require_slots(where, "train", {AREAL_SLOT(v, create), AREAL_SLOT(v, destroy), AREAL_SLOT(v, compute_logprobs),
                                     AREAL_SLOT(v, train_step), AREAL_SLOT(v, save), AREAL_SLOT(v, load),
                                     AREAL_SLOT(v, get_version), AREAL_SLOT(v, set_version)});
      break;
    }
    case AREAL_KIND_ALGORITHM: {
      const auto& v = *p.algorithm();
      require_slots(where, "algorithm", {AREAL_SLOT(v, create), AREAL_SLOT(v, destroy),
                                         AREAL_SLOT(v, compute_advantages), AREAL_SLOT(v, loss)});
      break;
    }
    case AREAL_KIND_WORKFLOW: {
      const auto& v = *p.workflow();
      require_slots(where, "workflow", {AREAL_SLOT(v, create), AREAL_SLOT(v, destroy), AREAL_SLOT(v, run_episode)});
      break;
    }
    case AREAL_KIND_GATEWAY: {
      const auto& v = *p.gateway();
      require_slots(where, "gateway", {AREAL_SLOT(v, create), AREAL_SLOT(v, destroy), AREAL_SLOT(v, start), AREAL_SLOT(v, stop)});
      break;
    }
  }
}

std::shared_ptr<LoadedPlugin> PluginLoader::load_file(const std::string& path) {
  std::error_code fs_ec;
  if (!std::filesystem::exists(path, fs_ec)) refuse(path, AREAL_CODE_NOT_FOUND, "no such file");
  const std::string canonical = std::filesystem::canonical(path, fs_ec).string();
  std::lock_guard<std::mutex> lock(load_mutex());
  if (auto it = loaded_by_path().find(canonical); it != loaded_by_path().end())
    if (auto existing = it->second.lock()) return existing;

  auto lib = std::make_shared<boost::dll::shared_library>();
  std::error_code ec;
  lib->load(canonical, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    // Boost.DLL keeps only a generic error code; ask the dynamic loader
    // again for its precise reason (missing dependency, undefined symbol).
    void* retry = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* why = retry ? nullptr : dlerror();
    if (retry) dlclose(retry);
    refuse(path, AREAL_CODE_INVALID_ARGUMENT, std::string("cannot load shared library: ") + (why ? why : ec.message()));
  }
  if (!lib->has(AREAL_PLUGIN_INIT_SYMBOL))
    refuse(path, AREAL_CODE_ABI_MISMATCH, std::string("not an areal plugin: no exported symbol '") + AREAL_PLUGIN_INIT_SYMBOL + "'");
  auto init = lib->get<areal_status*(const areal_host_api*, const areal_plugin_info**)>(AREAL_PLUGIN_INIT_SYMBOL);

  std::shared_ptr<LoadedPlugin> p(new LoadedPlugin());
  p->path_ = canonical;
  p->library_ = lib;
  init_and_validate(*p, path, init, p->info_, &p->vtable_, sizeof p->vtable_);
  check_required_slots(*p, path);
  const std::string expected_file = "libareal-" + p->name() + ".so";
  const std::string file = std::filesystem::path(canonical).filename().string();
  if (file.rfind("libareal-", 0) == 0 && file != expected_file)
    refuse(path, AREAL_CODE_INVALID_ARGUMENT, "plugin declares name '" + p->name() + "' but the file is named '" + file +
                                                  "' (expected '" + expected_file + "')");
  loaded_by_path()[canonical] = p;
  logging::get("loader")->debug("loaded {} plugin '{}' {} (ABI {}) from {}", kind_name(p->kind()), p->name(),
                                p->version(), p->abi_version(), canonical);
  return p;
}

std::shared_ptr<LoadedPlugin> PluginLoader::load_builtin(const std::string& name, areal_plugin_init_fn init) {
  const std::string where = "<built-in " + name + ">";
  std::lock_guard<std::mutex> lock(load_mutex());
  if (auto it = loaded_by_path().find(where); it != loaded_by_path().end())
    if (auto existing = it->second.lock()) return existing;
  std::shared_ptr<LoadedPlugin> p(new LoadedPlugin());
  p->path_ = "<built-in>";
  init_and_validate(*p, where, init, p->info_, &p->vtable_, sizeof p->vtable_);
  check_required_slots(*p, where);
  if (p->name() != name) refuse(where, AREAL_CODE_INVALID_ARGUMENT, "built-in declares name '" + p->name() + "'");
  loaded_by_path()[where] = p;
  return p;
}

void register_builtin(const std::string& name, areal_plugin_init_fn init) { builtins()[name] = BuiltinInit{init}; }

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (const auto& [n, _] : builtins()) names.push_back(n);
  return names;
}

std::shared_ptr<LoadedPlugin> load_builtin(const std::string& name) {
  auto it = builtins().find(name);
  if (it == builtins().end()) return nullptr;
  return PluginLoader::load_builtin(name, it->second.init);
}

}  // namespace areal
