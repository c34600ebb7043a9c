#include "process_group.hpp"

#include <chrono>
#include <vector>
#include <exception>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef AREAL_TORCH_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#ifdef AREAL_TORCH_NCCL
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL  // PyTorch's CUDA builds have it; the header is guarded by it
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "areal/sdk.hpp"

namespace areal::fsdp {

struct ProcessGroup::Impl {
#ifdef AREAL_TORCH_GLOO
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#endif
#ifdef AREAL_TORCH_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
};

bool ProcessGroup::gloo_built() {
#ifdef AREAL_TORCH_GLOO
  return true;
#else
  return false;
#endif
}

bool ProcessGroup::nccl_built() {
#ifdef AREAL_TORCH_NCCL
  return true;
#else
  return false;
#endif
}

namespace {

c10::intrusive_ptr<c10d::Store> make_store(int rank, int world_size, const std::string& init_method, std::chrono::seconds timeout) {
  if (init_method.rfind("file://", 0) == 0) {
    auto fs = c10::make_intrusive<c10d::FileStore>(init_method.substr(7), world_size);
    fs->setTimeout(timeout);
    return fs;
  }
  if (init_method.rfind("tcp://", 0) == 0) {
    const std::string hostport = init_method.substr(6);
    const auto colon = hostport.rfind(':');
    if (colon == std::string::npos) throw sdk::invalid_argument("fsdp: init_method '" + init_method + "' needs tcp://HOST:PORT");
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(std::stoi(hostport.substr(colon + 1)));
    o.isServer = rank == 0;
    o.numWorkers = world_size;
    o.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(hostport.substr(0, colon), o);
  }
  throw sdk::invalid_argument("fsdp: init_method '" + init_method + "' must start with file:// or tcp:// when world_size > 1");
}

}  // namespace

ProcessGroup::ProcessGroup(int rank, int world_size, const std::string& init_method, int timeout_seconds, const torch::Device& device,
                           const std::string& backend)
    : rank_(rank), world_(world_size), device_(device) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw sdk::invalid_argument("fsdp: rank " + std::to_string(rank) + " is outside world_size " + std::to_string(world_size));
  if (backend != "auto" && backend != "nccl" && backend != "gloo")
    throw sdk::invalid_argument("fsdp: backend '" + backend + "' must be auto, nccl or gloo");
  if (backend == "nccl" && !device.is_cuda()) throw sdk::invalid_argument("fsdp: backend nccl needs a CUDA device (train.device)");
  if (backend == "nccl" && !nccl_built())
    throw sdk::unsupported("fsdp: backend nccl, but this build's libtorch has no NCCL (built against a CPU libtorch?)");
  if (backend == "gloo" && !gloo_built())
    throw sdk::unsupported("fsdp: backend gloo, but this build found no Gloo headers (PyTorch's wheels ship none; Debian's libgloo-dev does)");
  if (world_size == 1) return;
  backend_ = backend == "auto" ? (device.is_cuda() && nccl_built() ? "nccl" : "gloo") : backend;
  if (backend_ == "gloo" && !gloo_built())
    throw sdk::unsupported("fsdp: world_size > 1 on " + std::string(device.is_cuda() ? "CUDA" : "CPU") +
                           " needs Gloo, but this build found no Gloo headers (PyTorch's wheels ship none; Debian's libgloo-dev does)" +
                           (nccl_built() ? "; on GPUs use device cuda (NCCL)" : ""));
  const auto timeout = std::chrono::seconds(timeout_seconds);
  const c10::intrusive_ptr<c10d::Store> store = make_store(rank, world_size, init_method, timeout);
  impl_ = std::make_unique<Impl>();
  try {
#ifdef AREAL_TORCH_NCCL
    if (backend_ == "nccl") {
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, opts);
      return;
    }
#endif
#ifdef AREAL_TORCH_GLOO
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->timeout = timeout;
    // Gloo tells its peers the device's address: loopback only works when
    // every rank is on this machine (a rendezvous on loopback, or a file
    // store); across nodes each rank's own address (its host name's).
    const bool local = init_method.rfind("file://", 0) == 0 || init_method.rfind("tcp://127.", 0) == 0 || init_method.rfind("tcp://localhost:", 0) == 0;
    opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1") : c10d::ProcessGroupGloo::createDefaultDevice());
    impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, opts);
#endif
  } catch (const std::exception& e) {
    throw sdk::Error(AREAL_CODE_UNAVAILABLE, "fsdp: cannot form the " + backend_ + " group: " + e.what());
  }
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::all_reduce_sum(torch::Tensor& t) {
  if (world_ == 1) return;
#ifdef AREAL_TORCH_NCCL
  if (impl_->nccl) {
    std::vector<torch::Tensor> v{t.to(device_)};  // NCCL reduces device memory; small host scalars travel there and back
    impl_->nccl->allreduce(v)->wait();
    t.copy_(v[0]);
    return;
  }
#endif
#ifdef AREAL_TORCH_GLOO
  std::vector<torch::Tensor> v{t.is_cuda() ? t.cpu() : t};
  impl_->gloo->allreduce(v)->wait();
  if (t.is_cuda()) t.copy_(v[0]);
#endif
}

void ProcessGroup::all_gather(const torch::Tensor& shard, torch::Tensor& full) {
  if (world_ == 1) {
    full.copy_(shard);
    return;
  }
#ifdef AREAL_TORCH_NCCL
  if (impl_->nccl) {
    impl_->nccl->_allgather_base(full, const_cast<torch::Tensor&>(shard))->wait();
    return;
  }
#endif
#ifdef AREAL_TORCH_GLOO
  // Gloo works on host memory, and libtorch 1.13's Gloo knows no bfloat16:
  // such a gather goes through float32 (exact: bf16 -> f32 -> bf16).
  const int64_t n = shard.numel();
  const bool widen = full.scalar_type() == torch::kBFloat16;
  const auto host_opts = full.options().device(torch::kCPU).dtype(widen ? torch::kFloat32 : full.scalar_type());
  torch::Tensor host_full = full.is_cuda() || widen ? torch::empty({full.numel()}, host_opts) : full;
  std::vector<std::vector<torch::Tensor>> out(1);
  for (int r = 0; r < world_; ++r) out[0].push_back(host_full.narrow(0, r * n, n));
  std::vector<torch::Tensor> in{shard.to(torch::kCPU, host_opts.dtype().toScalarType())};
  impl_->gloo->allgather(out, in)->wait();
  if (!host_full.is_same(full)) full.copy_(host_full);
#endif
}

torch::Tensor ProcessGroup::reduce_scatter_sum(const torch::Tensor& full) {
  const int64_t n = full.numel() / world_;
  if (world_ == 1) return full;  // callers pass a buffer of their own
#ifdef AREAL_TORCH_NCCL
  if (impl_->nccl) {
    torch::Tensor mine = torch::empty({n}, full.options());
    impl_->nccl->_reduce_scatter_base(mine, const_cast<torch::Tensor&>(full))->wait();
    return mine;
  }
#endif
  torch::Tensor mine;
#ifdef AREAL_TORCH_GLOO
  const torch::Tensor host = full.is_cuda() ? full.cpu() : full;
  // One reduce per owner: each rank's slice is summed onto that rank only.
  for (int r = 0; r < world_; ++r) {
    std::vector<torch::Tensor> v{host.narrow(0, r * n, n).clone()};
    c10d::ReduceOptions o;
    o.rootRank = r;
    impl_->gloo->reduce(v, o)->wait();
    if (r == rank_) mine = v[0];
  }
#endif
  return full.is_cuda() ? mine.to(full.device()) : mine;
}

void ProcessGroup::barrier() {
  if (world_ == 1) return;
#ifdef AREAL_TORCH_NCCL
  if (impl_->nccl) {
    impl_->nccl->barrier()->wait();
    return;
  }
#endif
#ifdef AREAL_TORCH_GLOO
  impl_->gloo->barrier()->wait();
#endif
}

}  // namespace areal::fsdp
