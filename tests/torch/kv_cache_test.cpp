// The local engine's KV cache (plugins/inference_local/kv_cache.hpp): how it
// grows, what it keeps, and the token-major layout the flash decode kernel
// relies on (slot i's rows start at row i * capacity of the flattened cache).
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kv_cache.hpp"

using areal::local_inference::KvCache;

namespace {

KvCache make(int64_t max_context = 4096) { return KvCache(/*slots=*/3, /*layers=*/2, /*kv_heads=*/2, /*head_dim=*/4, max_context, torch::kFloat32, torch::kCPU); }

}  // namespace

TEST(KvCache, GrowsToMultiplesOf64AtLeastDoublingAndKeepsItsRows) {
  KvCache cache = make();
  EXPECT_EQ(cache.capacity(), 0);
  EXPECT_TRUE(cache.reserve(10));
  EXPECT_EQ(cache.capacity(), 64);
  EXPECT_FALSE(cache.reserve(64));  // room already: nothing moves
  const torch::Tensor rows = torch::arange(2 * 64 * 2 * 4, torch::kFloat32).view({2, 64, 2, 4});
  cache.keys(1).narrow(0, 0, 2).copy_(rows);
  cache.values(0).narrow(0, 0, 2).copy_(-rows);
  EXPECT_TRUE(cache.reserve(65));
  EXPECT_EQ(cache.capacity(), 128);
  EXPECT_EQ(cache.keys(1).sizes(), (std::vector<int64_t>{3, 128, 2, 4}));
  EXPECT_TRUE(cache.keys(1).narrow(0, 0, 2).narrow(1, 0, 64).equal(rows));
  EXPECT_TRUE(cache.values(0).narrow(0, 0, 2).narrow(1, 0, 64).equal(-rows));
  EXPECT_EQ(cache.keys(1).narrow(1, 64, 64).abs().sum().item<float>(), 0.0f);  // new rows are zeros, not garbage
  EXPECT_TRUE(cache.reserve(300));
  EXPECT_EQ(cache.capacity(), 320);  // 300 rounded up to 64, more than doubling
  cache.clear();
  EXPECT_EQ(cache.capacity(), 0);
}

TEST(KvCache, NeverGrowsPastMaxContext) {
  KvCache cache = make(/*max_context=*/100);
  cache.reserve(90);
  EXPECT_EQ(cache.capacity(), 100);
}

TEST(KvCache, EachSlotIsOneBlockOfTheFlattenedCache) {
  KvCache cache = make();
  cache.reserve(5);
  const int64_t cap = cache.capacity();
  cache.keys(0).copy_(torch::randn(cache.keys(0).sizes()));
  ASSERT_TRUE(cache.keys(0).is_contiguous());
  const torch::Tensor flat = cache.keys(0).view({-1, 2, 4});
  for (int64_t slot = 0; slot < 3; ++slot)
    for (int64_t t : {int64_t{0}, int64_t{3}, cap - 1}) EXPECT_TRUE(flat[slot * cap + t].equal(cache.keys(0)[slot][t])) << slot << " " << t;
}

TEST(KvCache, CopiesAPrefixBetweenSlotsInEveryLayer) {
  KvCache cache = make();
  cache.reserve(8);
  for (int64_t l = 0; l < 2; ++l) {
    cache.keys(l).copy_(torch::randn(cache.keys(l).sizes()));
    cache.values(l).copy_(torch::randn(cache.values(l).sizes()));
  }
  const torch::Tensor before = cache.keys(1)[2].clone();
  cache.copy_prefix(/*from=*/0, /*to=*/2, /*tokens=*/5);
  for (int64_t l = 0; l < 2; ++l) {
    EXPECT_TRUE(cache.keys(l)[2].narrow(0, 0, 5).equal(cache.keys(l)[0].narrow(0, 0, 5)));
    EXPECT_TRUE(cache.values(l)[2].narrow(0, 0, 5).equal(cache.values(l)[0].narrow(0, 0, 5)));
  }
  EXPECT_TRUE(cache.keys(1)[2].narrow(0, 5, cache.capacity() - 5).equal(before.narrow(0, 5, cache.capacity() - 5)));  // the rest stays
}
