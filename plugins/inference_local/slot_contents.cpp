#include "slot_contents.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace areal::local_inference {

SlotContents::Match SlotContents::longest_prefix(const std::vector<int32_t>& prompt, const void* adapter) const {
  Match best;
  const int64_t cap = static_cast<int64_t>(prompt.size()) - 1;
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Content& c = slots_[s];
    if (!c.usable(epoch_) || c.adapter_key != adapter) continue;
    const int64_t n = std::min<int64_t>(cap, static_cast<int64_t>(c.tokens.size()));
    int64_t k = 0;
    while (k < n && c.tokens[static_cast<size_t>(k)] == prompt[static_cast<size_t>(k)]) ++k;
    if (k > best.tokens) best = {static_cast<int>(s), k};
  }
  return best;
}

void SlotContents::assign(int slot, const std::vector<int32_t>& tokens, int64_t n, std::shared_ptr<const void> adapter) {
  Content& c = slots_[static_cast<size_t>(slot)];
  c.tokens.assign(tokens.begin(), tokens.begin() + n);
  c.adapter_key = adapter.get();
  c.adapter = adapter;
  c.epoch = epoch_;
}

void SlotContents::append(int slot, int32_t token, const void* adapter) {
  Content& c = slots_[static_cast<size_t>(slot)];
  if (c.adapter_key != adapter || (adapter != nullptr && c.adapter.expired())) forget(slot);
  c.tokens.push_back(token);
}

void SlotContents::forget(int slot) {
  Content& c = slots_[static_cast<size_t>(slot)];
  c.tokens.clear(), c.adapter.reset(), c.adapter_key = nullptr, c.epoch = -1;
}

void SlotContents::release(int slot) { slots_[static_cast<size_t>(slot)].released = ++clock_; }

int SlotContents::pick(const std::vector<int>& free) const {
  int best = free.back();
  auto rank = [&](int s) {
    const Content& c = slots_[static_cast<size_t>(s)];
    const bool holds = c.usable(epoch_) && !c.tokens.empty();
    return std::make_tuple(holds, holds ? c.released : 0, s);
  };
  for (const int s : free)
    if (rank(s) < rank(best)) best = s;
  return best;
}

void SlotContents::invalidate() { ++epoch_; }

void SlotContents::clear() {
  for (Content& c : slots_) c.tokens.clear(), c.adapter.reset(), c.adapter_key = nullptr, c.epoch = -1;
}

}  // namespace areal::local_inference
