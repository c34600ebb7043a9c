#include "served_adapters.hpp"

#include <utility>

namespace areal::remote {

std::string ServedAdapters::new_served_name(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  return name + "@" + std::to_string(++loads_);
}

void ServedAdapters::install(std::shared_ptr<const RemoteAdapter> adapter, bool is_default) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string name = adapter->name;
  if (is_default) default_ = name;
  else if (default_ == name) default_.clear();
  auto& slot = current_[name];
  if (slot) retired_.push_back(std::move(slot));
  slot = std::move(adapter);
}

bool ServedAdapters::uninstall(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = current_.find(name);
  if (it == current_.end()) return false;
  retired_.push_back(std::move(it->second));
  current_.erase(it);
  if (default_ == name) default_.clear();
  return true;
}

std::vector<std::shared_ptr<const RemoteAdapter>> ServedAdapters::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<const RemoteAdapter>> out;
  for (const auto& [_, a] : current_) out.push_back(a);
  return out;
}

std::string ServedAdapters::default_name() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return default_;
}

bool ServedAdapters::resolve(const std::string& requested, std::shared_ptr<const RemoteAdapter>& held) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string& name = requested.empty() ? default_ : requested;
  if (name.empty()) {
    held.reset();
    return true;
  }
  if (const auto it = current_.find(name); it != current_.end()) {
    held = it->second;
    return true;
  }
  // Unloaded while the request ran: it finishes with what it had.
  return held && held->name == name;
}

std::vector<std::shared_ptr<const RemoteAdapter>> ServedAdapters::take_unused_retired() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<const RemoteAdapter>> unused, kept;
  for (auto& a : retired_) (a.use_count() == 1 ? unused : kept).push_back(std::move(a));
  retired_ = std::move(kept);
  return unused;
}

bool ServedAdapters::empty() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return current_.empty() && retired_.empty();
}

nlohmann::json ServedAdapters::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [name, a] : current_)
    out.push_back({{"name", name}, {"version", a->version}, {"served_as", a->served_name}, {"source", a->source}, {"default", name == default_}});
  return out;
}

}  // namespace areal::remote
