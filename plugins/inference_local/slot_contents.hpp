// The local engine's prefix cache (issue #36): what each slot of the KV
// cache holds, so a request whose prompt begins as another's did (the
// samples of a GRPO group, an agent's next turn, which resends the whole
// conversation) takes those keys and values instead of computing them.
// A slot keeps its rows after its request ends until another request takes
// it; rows count only for requests with the same adapter and weights.
// Bookkeeping only: the engine copies the rows (scheduler thread only).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace areal::local_inference {

class SlotContents {
 public:
  explicit SlotContents(int slots) : slots_(static_cast<size_t>(slots)) {}

  struct Match {
    int slot = -1;
    int64_t tokens = 0;  // rows [0, tokens) of `slot` hold the prompt's first tokens
  };
  // The slot sharing the longest prefix with `prompt`, among those computed
  // with `adapter` (null: the base model) and the current weights; at most
  // prompt.size() - 1 tokens, so the last prompt token is always computed
  // (its logits give the first sampled token).
  Match longest_prefix(const std::vector<int32_t>& prompt, const void* adapter) const;
  // `slot` now holds tokens[0, n), computed with `adapter`.
  void assign(int slot, const std::vector<int32_t>& tokens, int64_t n, std::shared_ptr<const void> adapter);
  // One more row written (a decode step) with `adapter`: another adapter
  // than the slot's rows were computed with (one replaced while the request
  // ran) leaves the slot holding nothing reusable.
  void append(int slot, int32_t token, const void* adapter);
  void forget(int slot);  // its rows are not reusable (computed with an adapter replaced mid-way)
  void release(int slot);                // its request ended; the rows stay
  // Which of the `free` slots a request takes when none holds its prefix:
  // the lowest one holding nothing (a decode step computes every slot row up
  // to the highest active one), else the one released longest ago.
  int pick(const std::vector<int>& free) const;
  void invalidate();  // the weights changed: no row counts any more
  void clear();       // the cache's memory was dropped

 private:
  struct Content {
    std::vector<int32_t> tokens;
    // The adapter its rows were computed with, not kept alive: a replaced
    // adapter (a new version every training step) frees its device memory
    // once no step uses it, and its rows then count for nothing (an
    // expired one cannot be mistaken for a new adapter at its address).
    std::weak_ptr<const void> adapter;
    const void* adapter_key = nullptr;
    int64_t epoch = -1;
    uint64_t released = 0;
    bool usable(int64_t epoch_now) const { return epoch == epoch_now && (adapter_key == nullptr || !adapter.expired()); }
  };
  std::vector<Content> slots_;
  int64_t epoch_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace areal::local_inference
