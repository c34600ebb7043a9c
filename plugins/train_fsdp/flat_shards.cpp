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
  compute_ = params_.empty() ? torch::TensorOptions(torch::kFloat32) : params_[0].options().requires_grad(false);
  const auto dtype = compute_.dtype().toScalarType();
  mixed_ = dtype == torch::kBFloat16 || dtype == torch::kHalf;
  const torch::TensorOptions master = compute_.dtype(mixed_ ? torch::kFloat32 : dtype);
  torch::Tensor full = torch::zeros({padded_}, master);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) full.narrow(0, offsets_[i], numels_[i]).copy_(params_[i].detach().reshape(-1));
  }
  const int64_t n = padded_ / w;
  if (w == 1) {
    shard_ = full;  // one rank: the master is the whole flat buffer
    // Without mixed precision the parameters are views of the master itself.
    full_ = mixed_ ? full.to(compute_.dtype()) : full;
    for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(full_.narrow(0, offsets_[i], numels_[i]).view(shapes_[i]));
  } else {
    shard_ = full.narrow(0, group_.rank() * n, n).clone();
    full = torch::Tensor();
    release();
  }
}

void FlatShards::gather() {
  if (group_.world_size() == 1) return;
  full_ = torch::empty({padded_}, compute_);
  group_.all_gather(mixed_ ? shard_.to(compute_.dtype()) : shard_, full_);  // gathered in the compute dtype, as FSDP does
  for (size_t i = 0; i < params_.size(); ++i) params_[i].set_data(full_.narrow(0, offsets_[i], numels_[i]).view(shapes_[i]));
}

void FlatShards::release() {
  if (group_.world_size() == 1) return;
  for (auto& p : params_) {
    p.set_data(torch::empty({0}, compute_));
    p.mutable_grad() = torch::Tensor();
  }
  full_ = torch::Tensor();
}

void FlatShards::accumulate_gradients() {
  torch::NoGradGuard no_grad;
  // The first micro-batch's gradients are copied in rather than added to
  // zeros: one pass over the buffer fewer (a step of one micro-batch, the
  // common case on a GPU, writes it once).
  const bool first = !grad_sum_.defined();
  if (first) grad_sum_ = torch::empty({padded_}, shard_.options());
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor slice = grad_sum_.narrow(0, offsets_[i], numels_[i]);
    const torch::Tensor& g = params_[i].grad();
    if (g.defined()) first ? slice.copy_(g.reshape(-1)) : slice.add_(g.reshape(-1));
    else if (first) slice.zero_();  // no gradient (frozen, unused): a zero contribution
    params_[i].mutable_grad() = torch::Tensor();
  }
  if (first && padded_ > total_) grad_sum_.narrow(0, total_, padded_ - total_).zero_();
}

torch::Tensor FlatShards::reduce_gradients() {
  accumulate_gradients();  // whatever the last micro-batch left on the parameters
  torch::Tensor flat = std::move(grad_sum_);
  grad_sum_ = torch::Tensor();
  return group_.reduce_scatter_sum(flat);
}

void FlatShards::discard_gradients() {
  grad_sum_ = torch::Tensor();
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
}

void FlatShards::master_updated() {
  if (group_.world_size() == 1 && mixed_) {
    torch::NoGradGuard no_grad;
    full_.copy_(shard_);
  }
}

void FlatShards::load_full(const std::vector<torch::Tensor>& values) {
  torch::Tensor flat = torch::zeros({padded_}, shard_.options());
  for (size_t i = 0; i < params_.size(); ++i) flat.narrow(0, offsets_[i], numels_[i]).copy_(values.at(i).reshape(-1));
  const int64_t n = padded_ / group_.world_size();
  torch::NoGradGuard no_grad;
  shard_.copy_(flat.narrow(0, group_.rank() * n, n));
  master_updated();
}

std::vector<torch::Tensor> FlatShards::gather_master() {
  torch::Tensor flat = shard_;
  if (group_.world_size() > 1) {
    flat = torch::empty({padded_}, shard_.options());
    group_.all_gather(shard_, flat);
  }
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) out.push_back(flat.narrow(0, offsets_[i], numels_[i]).view(shapes_[i]));
  return out;
}

}  // namespace areal::fsdp
