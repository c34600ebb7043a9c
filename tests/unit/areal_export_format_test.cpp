// AReaL's export format (core/recorder/areal_interactions.hpp) and the
// base64 under it, decoded here by Poco's decoder (independent of ours).
#include <Poco/Base64Decoder.h>

#include <cstring>
#include <sstream>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/recorder/areal_interactions.hpp"
#include "core/text/base64.hpp"

namespace {

std::string poco_decode(const std::string& b64) {
  std::istringstream in(b64);
  Poco::Base64Decoder dec(in);
  return std::string(std::istreambuf_iterator<char>(dec), {});
}

template <typename T>
std::vector<T> decode_as(const nlohmann::json& tensor) {
  const std::string bytes = poco_decode(tensor.at("data").get<std::string>());
  EXPECT_EQ(bytes.size() % sizeof(T), 0u);
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

TEST(Base64, MatchesRfc4648TestVectors) {
  using areal::text::base64_encode;
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  EXPECT_EQ(poco_decode(base64_encode(all)), all);
}

TEST(ArealInteractions, EachRowIsATensorDictWithTheRowsValues) {
  areal::recorder::SessionTrajectory t;
  t.session_id = "s";
  areal::recorder::TrajectoryRow a;
  a.interaction_id = "chatcmpl-a";
  a.input_ids = {5, 6, 151645, 7};
  a.loss_mask = {0, 0, 1, 1};
  a.logprobs = {0, 0, -0.25f, -1.5f};
  a.versions = {-1, -1, 3, 4};
  a.reward = 0.75;
  t.rows.push_back(a);
  areal::recorder::TrajectoryRow b = a;
  b.interaction_id = "chatcmpl-b";
  b.input_ids = {1, 2};
  b.loss_mask = {0, 1};
  b.logprobs = {0, -0.5f};
  b.versions = {-1, 9};
  b.reward = -2;
  t.rows.push_back(b);

  const nlohmann::json j = areal::recorder::areal_interactions(t);
  ASSERT_EQ(j.size(), 2u);
  const auto& item = j.at("chatcmpl-a");
  EXPECT_EQ(item.at("interaction_id"), "chatcmpl-a");
  EXPECT_EQ(item.at("reward"), 0.75);
  const auto& td = item.at("tensor_dict");
  for (const char* k : {"input_ids", "loss_mask", "logprobs", "versions", "attention_mask"}) {
    EXPECT_EQ(td.at(k).at("type"), "tensor") << k;
    EXPECT_EQ(td.at(k).at("shape"), nlohmann::json::array({1, 4})) << k;
  }
  EXPECT_EQ(td.at("input_ids").at("dtype"), "torch.int64");
  EXPECT_EQ(decode_as<int64_t>(td.at("input_ids")), (std::vector<int64_t>{5, 6, 151645, 7}));
  EXPECT_EQ(decode_as<int64_t>(td.at("loss_mask")), (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(td.at("logprobs").at("dtype"), "torch.float32");
  EXPECT_EQ(decode_as<float>(td.at("logprobs")), (std::vector<float>{0, 0, -0.25f, -1.5f}));
  EXPECT_EQ(decode_as<int64_t>(td.at("versions")), (std::vector<int64_t>{-1, -1, 3, 4}));
  EXPECT_EQ(td.at("attention_mask").at("dtype"), "torch.bool");
  EXPECT_EQ(decode_as<uint8_t>(td.at("attention_mask")), (std::vector<uint8_t>{1, 1, 1, 1}));
  EXPECT_EQ(td.at("rewards").at("shape"), nlohmann::json::array({1}));
  EXPECT_EQ(decode_as<float>(td.at("rewards")), (std::vector<float>{0.75f}));
  EXPECT_EQ(decode_as<int64_t>(j.at("chatcmpl-b").at("tensor_dict").at("versions")), (std::vector<int64_t>{-1, 9}));
  EXPECT_EQ(j.at("chatcmpl-b").at("reward"), -2);
}

}  // namespace
