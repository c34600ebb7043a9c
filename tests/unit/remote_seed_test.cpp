// The seed a remote server gets: the ABI's is 64 unsigned bits, vLLM takes a
// signed 64-bit integer (a larger one is a 400 that ends the request) and
// SGLang an int64. Seeds past 2^63 arise on their own: a workflow episode's
// derived seed (seed_base * 1000003 + call) wraps, and an OpenAI client's
// seed of -1 arrives as 2^64 - 1.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sglang_protocol.hpp"
#include "vllm_protocol.hpp"

namespace {

nlohmann::json seed_sent(const areal::remote::BackendProtocol& p, uint64_t seed) {
  static const std::vector<int32_t> prompt = {1, 2, 3};
  areal::remote::Segment seg;
  seg.rid = "r1";
  seg.input_ids = &prompt;
  seg.sampling.has_seed = true;
  seg.sampling.seed = seed;
  const nlohmann::json body = p.generate_body(seg);
  return body.contains("sampling_params") ? body["sampling_params"]["sampling_seed"] : body["seed"];
}

TEST(RemoteSeed, EverySeedIsASigned64BitIntegerAndStaysTheSameSeed) {
  const areal::remote::SGLangProtocol sglang(true);
  const areal::remote::VLLMProtocol vllm("m", areal::remote::VLLMRoutes::from_config(nlohmann::json::object()));
  for (const areal::remote::BackendProtocol* p : {static_cast<const areal::remote::BackendProtocol*>(&sglang),
                                                   static_cast<const areal::remote::BackendProtocol*>(&vllm)}) {
    for (const uint64_t seed : {uint64_t{0}, uint64_t{42}, uint64_t{1} << 63, std::numeric_limits<uint64_t>::max(), uint64_t{7} * 1000003u * 9300000000000u}) {
      const nlohmann::json sent = seed_sent(*p, seed);
      ASSERT_TRUE(sent.is_number_integer()) << p->name() << " " << seed << ": " << sent.dump();
      EXPECT_FALSE(sent.is_number_unsigned() && sent.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          << p->name() << " sent " << sent.dump() << ", past int64";
      EXPECT_GE(sent.get<int64_t>(), 0) << p->name() << " " << seed;
      EXPECT_EQ(sent, seed_sent(*p, seed)) << "the same seed must be sent the same way";
    }
    EXPECT_EQ(seed_sent(*p, 42).get<int64_t>(), 42) << p->name() << ": a seed within range is sent as it is";
  }
}

}  // namespace
