#include "server_pool.hpp"

#include <climits>

namespace areal::remote {

namespace {
constexpr size_t kMaxAffinityKeys = 8192;
}

ServerPool::ServerPool(std::vector<Url> servers) {
  for (auto& u : servers) {
    Server s;
    s.url = std::move(u);
    servers_.push_back(std::move(s));
  }
}

int ServerPool::acquire(const std::string& key, const std::string& adapter) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!key.empty()) {
    auto it = affinity_.find(key);
    if (it != affinity_.end() && usable_for(servers_[it->second], adapter)) {
      ++servers_[it->second].inflight;
      return it->second;
    }
  }
  int best = -1, best_load = INT_MAX;
  const size_t n = servers_.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (next_ + k) % n;
    const Server& s = servers_[i];
    if (!usable_for(s, adapter)) continue;
    if (s.inflight < best_load) best = static_cast<int>(i), best_load = s.inflight;
  }
  if (best < 0) return -1;
  next_ = (static_cast<size_t>(best) + 1) % n;
  ++servers_[best].inflight;
  if (!key.empty()) {
    if (!affinity_.count(key)) {
      affinity_order_.push_back(key);
      if (affinity_order_.size() > kMaxAffinityKeys) {
        affinity_.erase(affinity_order_.front());
        affinity_order_.pop_front();
      }
    }
    affinity_[key] = best;
  }
  return best;
}

void ServerPool::release(int server) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (server >= 0) --servers_[server].inflight;
}

void ServerPool::mark_down(int server, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  servers_[server].healthy = false;
  servers_[server].last_error = why;
}

bool ServerPool::mark_up(int server) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool was_down = !servers_[server].healthy;
  servers_[server].healthy = true;
  return was_down;
}

bool ServerPool::healthy(int server) {
  std::lock_guard<std::mutex> lock(mutex_);
  return servers_[server].healthy;
}

void ServerPool::set_missing_adapter(int server, const std::string& adapter, bool missing) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& m = servers_.at(static_cast<size_t>(server)).missing_adapters;
  if (missing) m.insert(adapter);
  else m.erase(adapter);
}

void ServerPool::forget_adapter(const std::string& adapter) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& s : servers_) s.missing_adapters.erase(adapter);
}

void ServerPool::set_stale(int server, bool stale) {
  std::lock_guard<std::mutex> lock(mutex_);
  servers_[server].stale = stale;
}

void ServerPool::set_held(int server, bool held) {
  std::lock_guard<std::mutex> lock(mutex_);
  servers_[server].held = held;
}

bool ServerPool::held(int server) {
  std::lock_guard<std::mutex> lock(mutex_);
  return servers_[server].held;
}

std::string ServerPool::describe() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const auto& s : servers_) {
    if (!out.empty()) out += ", ";
    out += s.url.text;
    if (!s.healthy) out += " (down: " + s.last_error + ")";
    else if (s.stale) out += " (missed the last weight update)";
    else if (s.held) out += " (still paused: a resume failed)";
    else out += " (up)";
  }
  return out;
}

}  // namespace areal::remote
