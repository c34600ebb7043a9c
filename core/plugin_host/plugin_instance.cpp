#include "core/plugin_host/plugin_instance.hpp"

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_api.hpp"

namespace areal {

PluginInstance::PluginInstance(std::shared_ptr<LoadedPlugin> plugin, const std::string& config_json,
                               const areal_services* services)
    : plugin_(std::move(plugin)) {
  label_ = (services && services->instance_name.size ? std::string(services->instance_name.data, services->instance_name.size)
                                                      : kind_name(plugin_->kind())) +
           " (" + plugin_->name() + ")";
  areal_status* st = nullptr;
  try {
    st = plugin_->create_fn()(areal_str{config_json.data(), config_json.size()}, services, &self_);
  } catch (...) {
    throw Error(AREAL_CODE_INTERNAL, label_ + ": create threw a C++ exception across the C ABI (a plugin bug)");
  }
  throw_if_status(st, label_);
  if (self_ == nullptr) throw Error(AREAL_CODE_INTERNAL, label_ + ": create succeeded but returned no instance");
}

PluginInstance::~PluginInstance() {
  try {
    plugin_->destroy_fn()(self_);
  } catch (...) {
  }
}

areal_services make_services(const std::string& instance_name_storage) {
  areal_services s{};
  s.struct_size = AREAL_OFFSET_OF_END(areal_services, inference);
  s.host = host_api();
  s.instance_name = areal_str{instance_name_storage.data(), instance_name_storage.size()};
  s.inference = nullptr;
  return s;
}

}  // namespace areal
