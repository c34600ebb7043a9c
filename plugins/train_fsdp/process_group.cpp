#include "process_group.hpp"

#include <chrono>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "areal/sdk.hpp"

namespace areal::fsdp {

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};

ProcessGroup::ProcessGroup(int rank, int world_size, const std::string& init_method, int timeout_seconds)
    : rank_(rank), world_(world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw sdk::invalid_argument("fsdp: rank " + std::to_string(rank) + " is outside world_size " + std::to_string(world_size));
  if (world_size == 1) return;
  const auto timeout = std::chrono::seconds(timeout_seconds);
  c10::intrusive_ptr<c10d::Store> store;
  if (init_method.rfind("file://", 0) == 0) {
    auto fs = c10::make_intrusive<c10d::FileStore>(init_method.substr(7), world_size);
    fs->setTimeout(timeout);
    store = fs;
  } else if (init_method.rfind("tcp://", 0) == 0) {
    const std::string hostport = init_method.substr(6);
    const auto colon = hostport.rfind(':');
    if (colon == std::string::npos) throw sdk::invalid_argument("fsdp: init_method '" + init_method + "' needs tcp://HOST:PORT");
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(std::stoi(hostport.substr(colon + 1)));
    o.isServer = rank == 0;
    o.numWorkers = world_size;
    o.timeout = timeout;
    store = c10::make_intrusive<c10d::TCPStore>(hostport.substr(0, colon), o);
  } else {
    throw sdk::invalid_argument("fsdp: init_method '" + init_method + "' must start with file:// or tcp:// when world_size > 1");
  }
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->timeout = timeout;
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  impl_ = std::make_unique<Impl>();
  try {
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, opts);
  } catch (const std::exception& e) {
    throw sdk::Error(AREAL_CODE_UNAVAILABLE, std::string("fsdp: cannot form the Gloo group: ") + e.what());
  }
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::all_reduce_sum(torch::Tensor& t) {
  if (world_ == 1) return;
  std::vector<torch::Tensor> v{t};
  impl_->pg->allreduce(v)->wait();
}

void ProcessGroup::all_gather(const torch::Tensor& shard, torch::Tensor& full) {
  if (world_ == 1) {
    full.copy_(shard);
    return;
  }
  const int64_t n = shard.numel();
  std::vector<std::vector<torch::Tensor>> out(1);
  for (int r = 0; r < world_; ++r) out[0].push_back(full.narrow(0, r * n, n));
  std::vector<torch::Tensor> in{shard};
  impl_->pg->allgather(out, in)->wait();
}

torch::Tensor ProcessGroup::reduce_scatter_sum(const torch::Tensor& full) {
  const int64_t n = full.numel() / world_;
  if (world_ == 1) return full;  // callers pass a buffer of their own
  torch::Tensor mine;
  // One reduce per owner: each rank's slice is summed onto that rank only.
  for (int r = 0; r < world_; ++r) {
    std::vector<torch::Tensor> v{full.narrow(0, r * n, n).clone()};
    c10d::ReduceOptions o;
    o.rootRank = r;
    impl_->pg->reduce(v, o)->wait();
    if (r == rank_) mine = v[0];
  }
  return mine;
}

void ProcessGroup::barrier() {
  if (world_ > 1) impl_->pg->barrier()->wait();
}

}  // namespace areal::fsdp
