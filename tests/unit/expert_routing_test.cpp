// Mixture-of-experts routing on its way from the engine to the trainer
// (issue #35): its compact encodings, which call's routing each position of
// an exported row takes, the ABI 1.8 row view, the packed batch's
// routed_experts, and the AReaL export. Durability is in state_db_test.cpp.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <Poco/Base64Decoder.h>

#include <sstream>

#include "core/plugin_host/error.hpp"
#include "core/recorder/areal_interactions.hpp"
#include "core/recorder/expert_routing.hpp"
#include "core/recorder/recorder.hpp"
#include "core/recorder/trajectory_view.hpp"
#include "core/text/base64.hpp"
#include "core/trainer/trajectory_batch.hpp"

using areal::recorder::ExpertRouting;

namespace {

// `positions` positions of 2 layers x top-2 whose experts encode where they came from.
ExpertRouting routing(size_t positions, uint16_t tag, uint32_t experts = 8) {
  ExpertRouting r;
  r.moe_layers = 2, r.top_k = 2, r.num_experts = experts;
  for (size_t p = 0; p < positions; ++p)
    for (uint16_t j = 0; j < 4; ++j) r.experts.push_back(static_cast<uint16_t>((tag + p + j) % experts));
  return r;
}

// The experts of position p, as recorded.
std::vector<uint16_t> at(const ExpertRouting& r, size_t p) {
  return {r.experts.begin() + static_cast<std::ptrdiff_t>(p * 4), r.experts.begin() + static_cast<std::ptrdiff_t>(p * 4 + 4)};
}

std::string poco_base64_decode(const std::string& text) {
  std::istringstream in(text);
  Poco::Base64Decoder d(in);
  return std::string(std::istreambuf_iterator<char>(d), {});
}

}  // namespace

TEST(ExpertRouting, Base64DecodesWhatPocoEncodes) {
  for (const std::string& s : std::vector<std::string>{"", "f", "fo", "foo", "foob", std::string("\0\xff\x10", 3)}) {
    EXPECT_EQ(areal::text::base64_decode(areal::text::base64_encode(s)), s);
    EXPECT_EQ(poco_base64_decode(areal::text::base64_encode(s)), s);
  }
  EXPECT_THROW(areal::text::base64_decode("abc"), areal::Error);
  EXPECT_THROW(areal::text::base64_decode("ab!d"), areal::Error);
}

TEST(ExpertRouting, BlobAndExportRoundTripNarrowAndWide) {
  for (const uint32_t experts : {8u, 254u, 255u, 300u}) {
    ExpertRouting r = routing(5, 3, experts);
    r.experts[6] = ExpertRouting::kNotRecorded;
    const ExpertRouting b = areal::recorder::routing_from_blob(areal::recorder::routing_blob(r));
    EXPECT_EQ(b.experts, r.experts);
    EXPECT_TRUE(b.same_shape(r));
    const auto j = areal::recorder::routing_json(r);
    EXPECT_EQ(j["dtype"], experts < 255 ? "uint8" : "uint16") << experts;
    EXPECT_EQ(j["positions"], 5);
    // One byte (or two) per expert, decoded by Poco: compact, and the marker as documented.
    const std::string bytes = poco_base64_decode(j["data"].get<std::string>());
    ASSERT_EQ(bytes.size(), r.experts.size() * (experts < 255 ? 1 : 2));
    if (experts < 255) {
      EXPECT_EQ(static_cast<uint8_t>(bytes[6]), 255);
    }
    EXPECT_EQ(areal::recorder::routing_from_json(j).experts, r.experts);
  }
  EXPECT_TRUE(areal::recorder::routing_blob(ExpertRouting{}).empty());
  EXPECT_TRUE(areal::recorder::routing_from_blob("").empty());
  EXPECT_THROW(areal::recorder::routing_from_blob("short"), areal::Error);
}

TEST(ExpertRouting, MalformedReportsAreRefused) {
  const std::vector<uint16_t> experts = {1, 2, 3, 9};  // 9 >= 8 experts
  areal_routing v{AREAL_OFFSET_OF_END(areal_routing, experts), 2, 2, 8, 1, experts.data()};
  EXPECT_THROW(areal::recorder::copy_routing(v), areal::Error);
  v.num_experts = 10;
  EXPECT_EQ(areal::recorder::copy_routing(v).experts, experts);
  v.positions = 2;
  v.experts = nullptr;
  EXPECT_THROW(areal::recorder::copy_routing(v), areal::Error);
  nlohmann::json j = areal::recorder::routing_json(routing(2, 0));
  j["positions"] = 3;
  EXPECT_THROW(areal::recorder::routing_from_json(j), areal::Error);
}

// Individual rows take their call's routing; a concat row gives each
// position the routing of the first call of its chain that computed it, so
// every sampled token's predecessor is routed as when the token was sampled.
TEST(ExpertRouting, RowsTakeEachPositionFromTheFirstCallThatComputedIt) {
  areal::recorder::Recorder rec;
  const areal::recorder::Json m1 = {{{"role", "user"}, {"content", "a"}}};
  const size_t c1 = rec.insert("c1", m1);
  // 3 prompt + 2 output tokens: positions 0..3 routed.
  rec.complete(c1, {{"role", "assistant"}, {"content", "x"}}, {1, 2, 3}, {4, 5}, {-1.f, -1.f}, {0, 0}, "stop", false, routing(4, 100));
  areal::recorder::Json m2 = m1;
  m2.push_back({{"role", "assistant"}, {"content", "x"}});
  m2.push_back({{"role", "user"}, {"content", "b"}});
  const size_t c2 = rec.insert("c2", m2);
  // Extends c1 (1 2 3 4 5) by a tool result (6 7), then samples 8 9: positions 0..7.
  rec.complete(c2, {{"role", "assistant"}, {"content", "y"}}, {1, 2, 3, 4, 5, 6, 7}, {8, 9}, {-1.f, -1.f}, {1, 1}, "stop", true, routing(8, 200));
  const auto ind = rec.export_rows(areal::recorder::ExportStyle::kIndividual, 1.0);
  ASSERT_EQ(ind.size(), 2u);
  EXPECT_EQ(ind[0].routing.experts, routing(4, 100).experts);
  EXPECT_EQ(ind[1].routing.experts, routing(8, 200).experts);
  const auto cat = rec.export_rows(areal::recorder::ExportStyle::kConcat, 1.0);
  ASSERT_EQ(cat.size(), 1u);
  ASSERT_EQ(cat[0].routing.positions(), 8u);
  for (size_t p = 0; p < 4; ++p) EXPECT_EQ(at(cat[0].routing, p), at(routing(4, 100), p)) << p;   // c1 computed 0..3
  for (size_t p = 4; p < 8; ++p) EXPECT_EQ(at(cat[0].routing, p), at(routing(8, 200), p)) << p;  // c2 computed 4 (c1's last token) .. 7
  // A chain whose first call was not recorded takes what the later call recorded.
  areal::recorder::Recorder partial;
  const size_t d1 = partial.insert("d1", m1);
  partial.complete(d1, {{"role", "assistant"}, {"content", "x"}}, {1, 2, 3}, {4, 5}, {-1.f, -1.f}, {0, 0}, "stop", false);
  const size_t d2 = partial.insert("d2", m2);
  partial.complete(d2, {{"role", "assistant"}, {"content", "y"}}, {1, 2, 3, 4, 5, 6, 7}, {8, 9}, {-1.f, -1.f}, {1, 1}, "stop", true, routing(8, 7));
  const auto prow = partial.export_rows(areal::recorder::ExportStyle::kConcat, 1.0);
  ASSERT_EQ(prow.size(), 1u);
  EXPECT_EQ(prow[0].routing.experts, routing(8, 7).experts);
  // A routing that does not cover the call is a backend bug, refused.
  const size_t bad = rec.insert("c3", {{{"role", "user"}, {"content", "z"}}});
  EXPECT_THROW(rec.complete(bad, {{"role", "assistant"}, {"content", "q"}}, {1, 2}, {3}, {-1.f}, {0}, "stop", false, routing(3, 0)), areal::Error);
}

// ABI 1.8: a row's routing crosses the gateway's view and comes back whole;
// a 1.7 gateway's rows (struct_size ending at turns) come back without.
TEST(ExpertRouting, TheTrajectoryViewCarriesIt) {
  areal::recorder::SessionTrajectory t;
  t.session_id = "s";
  areal::recorder::TrajectoryRow a, b;
  a.interaction_id = "a", a.input_ids = {1, 2, 3}, a.loss_mask = {0, 1, 1}, a.logprobs = {0, -1, -1}, a.versions = {-1, 0, 0};
  a.routing = routing(2, 5);
  b = a;
  b.interaction_id = "b", b.routing = {};
  t.rows = {a, b};
  areal::recorder::TrajectoryView view(t);
  const auto back = areal::recorder::copy_trajectory(*view.get());
  EXPECT_EQ(back.rows[0].routing.experts, a.routing.experts);
  EXPECT_TRUE(back.rows[1].routing.empty());
  EXPECT_EQ(view.get()->rows[1].routing, nullptr);
  // A 1.7 gateway's rows as it lays them out: the row ends at turns and the
  // array's stride is that struct's size (80 bytes), not the host's 88.
  struct Row17 {
    uint32_t struct_size;
    areal_str interaction_id;
    size_t count;
    const int32_t *input_ids, *loss_mask;
    const float* logprobs;
    const int64_t* versions;
    double reward;
    uint32_t turns;
  };
  static_assert(offsetof(Row17, turns) + sizeof(uint32_t) == AREAL_OFFSET_OF_END(areal_trajectory_row, turns), "1.7's row layout");
  static_assert(sizeof(Row17) < sizeof(areal_trajectory_row), "1.8 appended routing");
  const std::vector<int32_t> ids{1, 2, 3}, mask{0, 1, 1};
  const std::vector<float> lps{0, -1, -1};
  const std::vector<int64_t> vers{-1, 0, 0};
  Row17 rows17[2];
  for (int i = 0; i < 2; ++i)
    rows17[i] = {static_cast<uint32_t>(AREAL_OFFSET_OF_END(areal_trajectory_row, turns)), {i ? "b" : "a", 1}, 3, ids.data(), mask.data(),
                 lps.data(), vers.data(), 1.0 + i, 1};
  areal_session_trajectory old = *view.get();
  old.rows = reinterpret_cast<const areal_trajectory_row*>(rows17);
  old.rows_count = 2;
  const auto back17 = areal::recorder::copy_trajectory(old);
  ASSERT_EQ(back17.rows.size(), 2u);
  EXPECT_EQ(back17.rows[1].interaction_id, "b");
  EXPECT_DOUBLE_EQ(back17.rows[1].reward, 2.0);
  EXPECT_EQ(back17.rows[1].input_ids, ids);
  EXPECT_TRUE(back17.rows[0].routing.empty());
}

// The batch's routed_experts: int16 [T, layers, k], -1 where the trainer's
// router chooses (rows without routing, each row's last token).
TEST(ExpertRouting, ThePackedBatchAlignsItWithTheTokens) {
  areal::recorder::TrajectoryRow plain, routed;
  plain.input_ids = {1, 2}, plain.loss_mask = {0, 1}, plain.logprobs = {0, -1}, plain.versions = {-1, 0};
  routed.input_ids = {3, 4, 5}, routed.loss_mask = {0, 1, 1}, routed.logprobs = {0, -1, -1}, routed.versions = {-1, 0, 0};
  routed.routing = routing(2, 1);
  areal::trainer::PackedBatch batch(0, 1.0f);
  batch.add(plain, 0);
  batch.add(routed, 0);
  batch.add(plain, 1);
  auto m = batch.map();
  const areal_tensor_map* map = m.get();
  const DLTensor* t = nullptr;
  for (size_t i = 0; i < map->count; ++i)
    if (std::string(map->names[i].data, map->names[i].size) == "routed_experts") t = map->tensors[i];
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->ndim, 3);
  EXPECT_EQ(t->shape[0], 7);
  EXPECT_EQ(t->shape[1], 2);
  EXPECT_EQ(t->shape[2], 2);
  EXPECT_EQ(t->dtype.bits, 16);
  const auto& v = batch.routed_experts.values();
  std::vector<int16_t> want(8, -1);                                        // the first row: none
  for (const uint16_t e : routing(2, 1).experts) want.push_back(static_cast<int16_t>(e));  // positions 2, 3
  want.insert(want.end(), 4 + 8, -1);                                      // its last token, the third row
  EXPECT_EQ(v, want);
  areal::recorder::TrajectoryRow other = routed;
  other.routing.top_k = 1, other.routing.moe_layers = 4;
  EXPECT_THROW(batch.add(other, 2), areal::Error);
  areal::trainer::PackedBatch none(0, 1.0f);
  none.add(plain, 0);
  EXPECT_TRUE(none.routed_experts.values().empty());
}

TEST(ExpertRouting, TheArealExportHasItAsSGLangShapesIt) {
  areal::recorder::SessionTrajectory t;
  areal::recorder::TrajectoryRow a;
  a.interaction_id = "a", a.input_ids = {1, 2, 3}, a.loss_mask = {0, 1, 1}, a.logprobs = {0, -1, -1}, a.versions = {-1, 0, 0};
  a.routing = routing(2, 5);
  a.routing.experts[1] = ExpertRouting::kNotRecorded;
  t.rows = {a};
  const auto j = areal::recorder::areal_interactions(t);
  const auto& r = j["a"]["tensor_dict"]["routed_experts"];
  EXPECT_EQ(r["dtype"], "torch.int32");
  EXPECT_EQ(r["shape"], nlohmann::json::array({1, 2, 4}));
  const std::string bytes = poco_base64_decode(r["data"].get<std::string>());
  ASSERT_EQ(bytes.size(), 8u * 4);
  const auto* v = reinterpret_cast<const int32_t*>(bytes.data());
  EXPECT_EQ(v[0], a.routing.experts[0]);
  EXPECT_EQ(v[1], -1);
  EXPECT_EQ(v[7], a.routing.experts[7]);
  EXPECT_TRUE(t.to_json()["rows"][0].contains("routed_experts"));
}
