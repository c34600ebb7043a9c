// The CUDA-only kernels' host side (torch_model/fused_kernels.hpp), which
// runs everywhere: the varlen offsets, and where the kernels must not apply
// (CPU, float32), so that the portable paths serve. gpu_check (c) runs them
// on a GPU.
#include <cstdint>
#include <vector>
#include <stdexcept>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "device.hpp"
#include "fused_kernels.hpp"

namespace fused = areal::torch_model::fused;

TEST(FusedKernels, VarlenOffsetsLeaveEmptySequencesOut) {
  EXPECT_EQ(fused::nonempty_offsets({0, 5, 9}), (std::vector<int32_t>{0, 5, 9}));
  EXPECT_EQ(fused::nonempty_offsets({0, 0, 5, 5, 9, 9}), (std::vector<int32_t>{0, 5, 9}));
  EXPECT_EQ(fused::nonempty_offsets({0, 1, 1, 2}), (std::vector<int32_t>{0, 1, 2}));  // one-token rows and an empty one
  EXPECT_EQ(fused::nonempty_offsets({0, 0}), (std::vector<int32_t>{0}));
}

TEST(FusedKernels, NoneAppliesOnCpuOrInFloat32) {
  const torch::Device cpu(torch::kCPU);
  for (const auto dt : {torch::kBFloat16, torch::kHalf, torch::kFloat32}) {
    EXPECT_FALSE(fused::varlen_attention_applies(cpu, dt, 64));
    EXPECT_FALSE(fused::float32_product_applies(cpu, dt));
    EXPECT_FALSE(fused::cached_attention_applies(cpu, dt, 64));
  }
  const auto bf16 = torch::TensorOptions().dtype(torch::kBFloat16);
  const torch::Tensor q = torch::randn({6, 4, 8}, bf16), kv = torch::randn({6, 2, 8}, bf16);
  EXPECT_FALSE(fused::varlen_causal_attention(q, kv, kv, torch::tensor({0, 2, 6}, torch::kInt32), 4).defined());
  const torch::Tensor cache = torch::zeros({3, 16, 2, 8}, bf16), seen = torch::tensor({5, 16}, torch::kInt32);
  EXPECT_FALSE(
      fused::cached_attention(q.narrow(0, 0, 2), cache, cache, seen, torch::tensor({0, 1, 2}, torch::kInt32), torch::tensor({0, 16, 32}, torch::kInt32), 1)
          .defined());
  EXPECT_FALSE(fused::float32_product(torch::ones({2, 8}, bf16), torch::ones({3, 8}, bf16)).defined());
  EXPECT_FALSE(fused::float32_matmul(torch::ones({2, 8}, bf16), torch::ones({8, 3}, bf16)).defined());
}

// cached_attention's written-out definition (the GPU probe's reference, and
// the kernel CPU tests emulate): a query seeing one key gets that key's value,
// of its KV head; a sequence reads its own slot; offsets of the wrong shape
// are refused as the flash kernel refuses them.
TEST(FusedKernels, CachedAttentionReferenceReadsEachSequencesSlot) {
  const torch::Tensor k = torch::randn({3, 8, 2, 4}), v = torch::randn({3, 8, 2, 4});
  const torch::Tensor q = torch::randn({2, 4, 4});  // two sequences of one query, 4 heads over 2 KV heads
  auto i32 = [](std::vector<int32_t> x) { return torch::tensor(x, torch::kInt32); };
  const torch::Tensor out = fused::cached_attention_reference(q, k, v, i32({1, 1}), i32({0, 1, 2}), i32({2 * 8, 0, 24}));
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2, 4, 4}));
  for (int64_t h = 0; h < 4; ++h) {
    EXPECT_TRUE(torch::allclose(out[0][h], v[2][0][h / 2])) << h;  // sequence 0 reads slot 2
    EXPECT_TRUE(torch::allclose(out[1][h], v[0][0][h / 2])) << h;  // sequence 1 reads slot 0
  }
  EXPECT_THROW(fused::cached_attention_reference(q, k, v, i32({1, 1}), i32({0, 1, 2}), i32({16, 0})), std::invalid_argument);
  EXPECT_THROW(fused::cached_attention_reference(q, k, v, torch::tensor({1, 1}), i32({0, 1, 2}), i32({16, 0, 24})), std::invalid_argument);
}

TEST(FusedKernels, UploadToTheCpuIsTheTensorItself) {
  const torch::Tensor host = torch::arange(10, torch::kInt64);
  const torch::Tensor up = areal::torch_model::upload(host, torch::kCPU);
  EXPECT_TRUE(up.equal(host));
  EXPECT_EQ(up.data_ptr(), host.data_ptr());
}
