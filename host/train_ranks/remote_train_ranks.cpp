#include "remote_train_ranks.hpp"

#include <poll.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <exception>
#include <algorithm>

#include "batch_split.hpp"
#include "core/plugin_host/error.hpp"

namespace areal::host::ranks {

using nlohmann::json;

RemoteTrainRanks::RemoteTrainRanks(int world_size, const std::string& bind_host)
    : world_(world_size), loopback_(bind_host == "127.0.0.1" || bind_host == "localhost"), ranks_(world_size) {
  listen_fd_ = listen_on(bind_host, 0, &port_);
}

RemoteTrainRanks::~RemoteTrainRanks() {
  for (auto& r : ranks_)
    if (r.fd >= 0) ::close(r.fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string RemoteTrainRanks::peer(int rank) const { return "train rank " + std::to_string(rank); }

std::string RemoteTrainRanks::describe(int rank) const {
  const Rank& r = ranks_.at(rank);
  return peer(rank) + (r.fd >= 0 ? " (pid " + std::to_string(r.pid) + " on " + r.host + ")" : "");
}

void RemoteTrainRanks::accept_ranks(int timeout_seconds, const std::function<void()>& check) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  int connected = 0;
  while (connected < world_) {
    check();
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      for (int r = 0; r < world_; ++r)
        if (ranks_[r].fd < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw Error(AREAL_CODE_UNAVAILABLE, "train ranks " + missing + " did not connect within " + std::to_string(timeout_seconds) +
                                              " s (launcher.rank_start_timeout_seconds); see their logs");
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 500) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // A rank says hello at once; anything else on this port is dropped within seconds.
    timeval limit{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    Message hello;
    int rank = -1;
    try {
      hello = read_message(fd, "a connecting train rank");
      if (hello.header.contains("rank") && hello.header["rank"].is_number_integer()) rank = hello.header["rank"].get<int>();
    } catch (const std::exception&) {
      ::close(fd);
      continue;
    }
    timeval none{0, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
    if (hello.header.value("op", "") != "hello" || rank < 0 || rank >= world_ || ranks_[rank].fd >= 0) {
      Message no;
      no.header = {{"ok", false}, {"error", "rank " + std::to_string(rank) + " is not an expected rank of world_size " + std::to_string(world_)}};
      try {
        write_message(fd, no, "a connecting train rank");
      } catch (const std::exception&) {
      }
      ::close(fd);
      continue;
    }
    try {
      ranks_[rank] = Rank{fd, hello.header.value("host", std::string("?")), hello.header.value("pid", int64_t{0}), hello.header.value("free_port", 0)};
    } catch (const std::exception&) {  // a malformed hello: not one of our ranks
      ::close(fd);
      continue;
    }
    ++connected;
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
}

std::string RemoteTrainRanks::create(const RankPlugin& train, const RankPlugin& algorithm, const std::string& log_level) {
  json train_config = train.config;
  std::string init = train_config.value("init_method", std::string());
  // Ranks that reach the controller on loopback share its machine: their
  // rendezvous is on loopback too, so a host name that does not resolve
  // (a container, a sandbox) cannot stop them.
  if (init.empty()) init = "tcp://" + (loopback_ ? std::string("127.0.0.1") : ranks_[0].host) + ":" + std::to_string(ranks_[0].free_port);
  train_config["init_method"] = init;
  train_config["world_size"] = world_;
  std::vector<Message> requests(world_);
  for (int r = 0; r < world_; ++r) {
    json c = train_config;
    c["rank"] = r;
    requests[r].header = {{"op", "create"},
                          {"log_level", log_level},
                          {"train", {{"path", train.path}, {"name", train.name}, {"config", c}}},
                          {"algorithm", {{"path", algorithm.path}, {"name", algorithm.name}, {"config", algorithm.config}}}};
  }
  call_all(std::move(requests));
  return init;
}

void RemoteTrainRanks::shutdown() {
  for (int r = 0; r < world_; ++r) {
    if (ranks_[r].fd < 0) continue;
    Message bye;
    bye.header = {{"op", "shutdown"}};
    try {
      write_message(ranks_[r].fd, bye, peer(r));
    } catch (const std::exception&) {
    }
  }
}

std::vector<Message> RemoteTrainRanks::call_all(std::vector<Message> requests) {
  if (!broken_.empty()) throw Error(AREAL_CODE_UNAVAILABLE, broken_);
  auto fail = [&](int32_t code, const std::string& why) {
    broken_ = why;
    throw Error(code, why);
  };
  for (int r = 0; r < world_; ++r) {
    try {
      write_message(ranks_[r].fd, requests[r], describe(r));
    } catch (const std::exception& e) {
      fail(AREAL_CODE_UNAVAILABLE, e.what());
    }
  }
  std::vector<Message> replies(world_);
  std::vector<bool> done(world_, false);
  int remaining = world_;
  while (remaining > 0) {
    std::vector<pollfd> fds;
    std::vector<int> which;
    for (int r = 0; r < world_; ++r)
      if (!done[r]) fds.push_back({ranks_[r].fd, POLLIN, 0}), which.push_back(r);
    if (::poll(fds.data(), fds.size(), 1000) < 0 && errno != EINTR) fail(AREAL_CODE_INTERNAL, std::string("poll: ") + std::strerror(errno));
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int r = which[i];
      try {
        replies[r] = read_message(ranks_[r].fd, describe(r));
      } catch (const std::exception& e) {
        fail(AREAL_CODE_UNAVAILABLE, e.what());
      }
      done[r] = true;
      --remaining;
      if (!replies[r].header.value("ok", false))
        fail(replies[r].header.value("code", int32_t{AREAL_CODE_INTERNAL}), describe(r) + ": " + replies[r].header.value("error", std::string("failed")));
    }
  }
  return replies;
}

std::vector<Message> RemoteTrainRanks::scatter(const areal_tensor_map& batch, const json& request, std::vector<BatchSlice>* slices) {
  *slices = trainer::plan_slices(cu_seqlens_of(batch), world_, shared_prefixes(batch), "train ranks (train.world_size)");
  std::vector<std::vector<OwnedTensor>> parts = split_batch(batch, *slices);
  std::vector<Message> requests(world_);
  for (int r = 0; r < world_; ++r) {
    requests[r].header = request;
    requests[r].tensors = std::move(parts[r]);
  }
  return call_all(std::move(requests));
}

std::vector<float> RemoteTrainRanks::compute_logprobs(const areal_tensor_map& batch, float temperature) {
  std::vector<BatchSlice> slices;
  const std::vector<Message> replies = scatter(batch, {{"op", "compute_logprobs"}, {"temperature", temperature}}, &slices);
  std::vector<float> out;
  for (int r = 0; r < world_; ++r) {
    const int64_t n = slices[r].end_token - slices[r].first_token;
    if (replies[r].tensors.size() != 1) throw Error(AREAL_CODE_INTERNAL, describe(r) + " returned no log-probs");
    const OwnedTensor& lp = replies[r].tensors[0];
    if (lp.dtype.code != kDLFloat || lp.dtype.bits != 32 || lp.numel() != n)
      throw Error(AREAL_CODE_INTERNAL, describe(r) + " returned log-probs that are not float32 [" + std::to_string(n) + "]");
    const float* p = reinterpret_cast<const float*>(lp.bytes.data());
    out.insert(out.end(), p, p + n);
  }
  return out;
}

std::string RemoteTrainRanks::train_step(const areal_tensor_map& batch) {
  std::vector<BatchSlice> slices;
  const std::vector<Message> replies = scatter(batch, {{"op", "train_step"}}, &slices);
  // The engine's stats are global (every rank reports the reduced loss,
  // norm and counts); rank 0's stand. The algorithm's per-rank stats are
  // loss-token weighted sums, joined here into batch averages.
  json stats = replies[0].header.value("stats", json::object());
  std::map<std::string, double> weighted, maxima;
  double tokens = 0;
  for (const auto& reply : replies) {
    const json algo = reply.header.value("algorithm_stats", json::object());
    const json sums = algo.value("weighted", json::object());  // named: items() must not outlive a temporary
    for (const auto& [k, v] : sums.items())
      if (v.is_number()) weighted[k] += v.get<double>();  // a NaN stat arrives as null: left out
    const json maxes = algo.value("maxima", json::object());
    for (const auto& [k, v] : maxes.items())
      if (v.is_number()) maxima[k] = maxima.count(k) ? std::max(maxima[k], v.get<double>()) : v.get<double>();
    tokens += algo.value("tokens", 0.0);
  }
  for (const auto& [k, v] : weighted) stats["algo_" + k] = tokens > 0 ? v / tokens : 0.0;
  for (const auto& [k, v] : maxima) stats["algo_" + k] = v;
  stats["train_ranks"] = world_;
  return stats.dump();
}

std::vector<Message> RemoteTrainRanks::broadcast(const json& request) {
  std::vector<Message> requests(world_);
  for (auto& m : requests) m.header = request;
  return call_all(std::move(requests));
}

int64_t RemoteTrainRanks::version() { return broadcast({{"op", "get_version"}})[0].header.value("version", int64_t{0}); }

std::vector<OwnedTensor> RemoteTrainRanks::export_weights() {
  std::vector<Message> requests(world_);
  for (int r = 0; r < world_; ++r) requests[r].header = {{"op", "export_weights"}, {"send", r == 0}};
  return std::move(call_all(std::move(requests))[0].tensors);
}

bool RemoteTrainRanks::export_adapter(std::string& config_json, std::vector<OwnedTensor>& tensors) {
  std::vector<Message> requests(world_);
  for (int r = 0; r < world_; ++r) requests[r].header = {{"op", "export_adapter"}, {"send", r == 0}};
  std::vector<Message> replies = call_all(std::move(requests));
  if (!replies[0].header.value("adapter", false)) return false;
  config_json = replies[0].header.value("config", std::string("{}"));
  tensors = std::move(replies[0].tensors);
  return true;
}

// ---- the train vtable over the ranks ---------------------------------------

namespace {

RemoteTrainRanks& of(void* self) { return *static_cast<RemoteTrainRanks*>(self); }

template <class F>
areal_status* guarded(F&& f) {
  try {
    f();
    return nullptr;
  } catch (const Error& e) {
    return make_status(e.code(), e.what());
  } catch (const std::exception& e) {
    return make_status(AREAL_CODE_INTERNAL, e.what());
  }
}

struct OwnedLogprobs {
  DLManagedTensor managed{};
  std::vector<float> values;
  int64_t shape = 0;
};

areal_status* create_unused(areal_str, const areal_services*, void**) {
  return make_status(AREAL_CODE_UNSUPPORTED, "train ranks are created by the controller, not through create");
}
void destroy_unused(void*) {}

areal_status* vt_compute_logprobs(void* self, const areal_tensor_map* batch, float temperature, DLManagedTensor** out) {
  return guarded([&] {
    auto owned = std::make_unique<OwnedLogprobs>();
    owned->values = of(self).compute_logprobs(*batch, temperature);
    owned->shape = static_cast<int64_t>(owned->values.size());
    DLTensor& t = owned->managed.dl_tensor;
    t.data = owned->values.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = &owned->shape;
    owned->managed.manager_ctx = owned.get();
    owned->managed.deleter = [](DLManagedTensor* m) { delete static_cast<OwnedLogprobs*>(m->manager_ctx); };
    *out = &owned.release()->managed;
  });
}

areal_status* vt_train_step(void* self, const areal_tensor_map* batch, const areal_loss_fn*, const areal_writer* out_stats) {
  return guarded([&] {
    const std::string stats = of(self).train_step(*batch);
    if (out_stats != nullptr) throw_if_status(out_stats->write(out_stats->ctx, areal_str{stats.data(), stats.size()}), "train_step stats");
  });
}

areal_status* vt_save(void* self, areal_str spec) {
  return guarded([&] { of(self).broadcast({{"op", "save"}, {"spec", std::string(spec.data, spec.size)}}); });
}
areal_status* vt_load(void* self, areal_str spec) {
  return guarded([&] { of(self).broadcast({{"op", "load"}, {"spec", std::string(spec.data, spec.size)}}); });
}
areal_status* vt_get_version(void* self, int64_t* out) {
  return guarded([&] { *out = of(self).version(); });
}
areal_status* vt_set_version(void* self, int64_t version) {
  return guarded([&] { of(self).broadcast({{"op", "set_version"}, {"version", version}}); });
}

areal_status* vt_export_weights(void* self, areal_status* (*fn)(void*, const areal_tensor_map*), void* ctx) {
  areal_status* from_fn = nullptr;
  areal_status* st = guarded([&] {
    std::vector<OwnedTensor> weights = of(self).export_weights();
    TensorMapView map(weights);
    from_fn = fn(ctx, map.get());
  });
  return st != nullptr ? st : from_fn;
}

areal_status* vt_export_adapter(void* self, areal_status* (*fn)(void*, areal_str, const areal_tensor_map*), void* ctx) {
  areal_status* from_fn = nullptr;
  areal_status* st = guarded([&] {
    std::string config;
    std::vector<OwnedTensor> tensors;
    if (!of(self).export_adapter(config, tensors)) throw Error(AREAL_CODE_NOT_FOUND, "the train plugin trains no LoRA adapter");
    TensorMapView map(tensors);
    from_fn = fn(ctx, areal_str{config.data(), config.size()}, map.get());
  });
  return st != nullptr ? st : from_fn;
}

}  // namespace

const areal_train_vtable* RemoteTrainRanks::vtable() const {
  static const areal_train_vtable vt = [] {
    areal_train_vtable v{};
    v.struct_size = AREAL_OFFSET_OF_END(areal_train_vtable, export_adapter);
    v.create = &create_unused;
    v.destroy = &destroy_unused;
    v.compute_logprobs = &vt_compute_logprobs;
    v.train_step = &vt_train_step;
    v.save = &vt_save;
    v.load = &vt_load;
    v.get_version = &vt_get_version;
    v.set_version = &vt_set_version;
    v.export_weights = &vt_export_weights;
    v.export_adapter = &vt_export_adapter;
    return v;
  }();
  return &vt;
}

}  // namespace areal::host::ranks
