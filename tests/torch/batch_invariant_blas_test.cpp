// The bitwise mode takes for granted that a matrix product computes a row
// the same wherever the row sits among its rows. OpenBLAS's FMA kernels (its
// Haswell, Zen and newer cores) do not: there the mode must refuse to start,
// naming the way out, rather than record log-probs that depend on the
// batch. This runs with the BLAS as the machine picks it; whether that BLAS
// keeps rows alike is measured here on other products than the mode's own
// check uses, and the mode's decision must agree.
// (The mode's own tests run with OPENBLAS_CORETYPE=Nehalem:
// areal_batch_invariant_tests.)
#include <cstdint>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "batch_invariant.hpp"
#include "core/plugin_host/error.hpp"
#include "decoder_model.hpp"
#include "model_dir_once.hpp"

namespace {

// Does any row of x @ w^T change when the rows are reordered?
bool rows_depend_on_their_place(torch::ScalarType dtype) {
  torch::manual_seed(11);
  for (int64_t rows : {32, 8}) {
    const torch::Tensor x = torch::randn({rows, 128}).to(dtype), w = torch::randn({200, 128}).to(dtype);
    const torch::Tensor y = torch::matmul(x, w.t());
    const torch::Tensor perm = torch::randperm(rows);
    const torch::Tensor moved = torch::matmul(x.index_select(0, perm), w.t());
    if (!torch::equal(moved, y.index_select(0, perm))) return true;
  }
  return false;
}

}  // namespace

TEST(BatchInvariantBlas, TheModeStartsExactlyWhereRowsDoNotDependOnTheirPlace) {
  areal::model::InitModelOptions o;
  o.family = "qwen3", o.preset = "tiny", o.tokenizer_dir = "bytes", o.seed = 17;
  const std::string dir = areal::testing::model_dir_once("batch-invariant-blas", o);
  for (auto dtype : {torch::kFloat32, torch::kBFloat16}) {
    // The log-prob head is float32 whatever the model's dtype.
    const bool depend = rows_depend_on_their_place(dtype) || rows_depend_on_their_place(torch::kFloat32);
    auto m = areal::torch_model::DecoderModel::load(dir, dtype);
    if (depend) {
      try {
        m.set_batch_invariant(true);
        ADD_FAILURE() << "this BLAS computes rows by their place (" << c10::toString(dtype) << "), yet the mode started";
      } catch (const areal::Error& e) {
        EXPECT_NE(std::string(e.what()).find("OPENBLAS_CORETYPE=Nehalem"), std::string::npos) << e.what();
      }
    } else {
      EXPECT_NO_THROW(m.set_batch_invariant(true)) << c10::toString(dtype);
    }
    std::printf("%s: rows %s on their place here; the mode %s\n", c10::toString(dtype), depend ? "depend" : "do not depend",
                depend ? "refuses" : "starts");
  }
}
