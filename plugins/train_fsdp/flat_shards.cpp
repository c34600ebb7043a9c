#include "flat_shards.hpp"

namespace areal::fsdp {

FlatShards::FlatShards(std::vector<torch::Tensor> params, ProcessGroup& group) : params_(std::move(params)), group_(group) {
  for (const auto& p : params_) {
    offsets_.push_back(total_);
    numels_.push_back(p.numel());
    shapes_.push_back(p.sizes().vec());
    total_ += p.numel();
  }
  const int64_t w = group_.world_size();
  padded_ = (total_ + w - 1) / w * w;
  const auto opts = params_.empty() ? torch::TensorOptions(torch::kFloat32) : params_[0].options().requires_grad(false);
  torch::Tensor full = torch::zeros({padded_}, opts);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) full.narrow(0, offsets_[i], params_[i].numel()).copy_(params_[i].detach().reshape(-1));
  }
  const int64_t n = padded_ / w;
  if (w == 1) {
    shard_ = full;  // one rank: the master weights are the parameters' storage
    full_ = full;
    for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(full.narrow(0, offsets_[i], params_[i].numel()).view(params_[i].sizes()));
  } else {
    shard_ = full.narrow(0, group_.rank() * n, n).clone();
    full = torch::Tensor();
    release();
  }
}

void FlatShards::gather() {
  if (group_.world_size() == 1) return;
  full_ = torch::empty({padded_}, shard_.options());
  group_.all_gather(shard_, full_);
  for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(full_.narrow(0, offsets_[i], numels_[i]).view(shapes_[i]));
}

void FlatShards::release() {
  if (group_.world_size() == 1) return;
  for (auto& p : params_) {
    p.set_data(torch::empty({0}, shard_.options()));
    p.mutable_grad() = torch::Tensor();
  }
  full_ = torch::Tensor();
}

torch::Tensor FlatShards::reduce_gradients() {
  torch::Tensor flat = torch::zeros({padded_}, shard_.options());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].grad().defined()) flat.narrow(0, offsets_[i], numels_[i]).copy_(params_[i].grad().reshape(-1));
    params_[i].mutable_grad() = torch::Tensor();
  }
  return group_.reduce_scatter_sum(flat);
}

void FlatShards::load_full(const std::vector<torch::Tensor>& values) {
  torch::Tensor flat = torch::zeros({padded_}, shard_.options());
  for (size_t i = 0; i < params_.size(); ++i) flat.narrow(0, offsets_[i], numels_[i]).copy_(values.at(i).reshape(-1));
  const int64_t n = padded_ / group_.world_size();
  torch::NoGradGuard no_grad;
  shard_.copy_(flat.narrow(0, group_.rank() * n, n));
}

}  // namespace areal::fsdp
