// The recorder: parent matching by message prefix, linear turns for
// workflow calls, discounting along conversations, and both export styles.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <cstdint>
#include <string>
#include <vector>
#include <optional>

#include "core/plugin_host/error.hpp"
#include "core/recorder/recorder.hpp"

using areal::recorder::ExportStyle;
using areal::recorder::Json;
using areal::recorder::Recorder;

namespace {

Json msgs(std::initializer_list<std::pair<const char*, const char*>> list) {
  Json a = Json::array();
  for (const auto& [role, content] : list) a.push_back({{"role", role}, {"content", content}});
  return a;
}

Json reply(const char* content) { return {{"role", "assistant"}, {"content", content}, {"tool_calls", nullptr}}; }

// Completes call k with `n` output tokens numbered from `first`.
void finish(Recorder& c, size_t k, const Json& out, std::vector<int32_t> prompt, int32_t first, size_t n, bool concat, int64_t version = 3) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(first + static_cast<int32_t>(i));
  c.complete(k, out, std::move(prompt), ids, std::vector<float>(n, -0.5f), std::vector<int64_t>(n, version), "stop", concat);
}

}  // namespace

TEST(Recorder, ParentIsTheLongestCompletedPrefixIgnoringNullsAndKeyOrder) {
  Recorder c;
  const size_t a = c.insert("a", msgs({{"user", "hi"}}));
  EXPECT_EQ(c.get(a).parent, -1);
  finish(c, a, reply("hello"), {1, 2}, 10, 2, false);
  // The client echoes the reply without the null key and with keys reordered.
  Json next = msgs({{"user", "hi"}});
  next.push_back({{"content", "hello"}, {"role", "assistant"}});
  next.push_back({{"role", "user"}, {"content", "more"}});
  const size_t b = c.insert("b", next);
  EXPECT_EQ(c.get(b).parent, static_cast<int>(a));
  // A rewritten reply breaks the link (AReaL's rule: exact echo required).
  Json edited = msgs({{"user", "hi"}, {"assistant", "HELLO"}, {"user", "more"}});
  EXPECT_EQ(c.get(c.insert("c", edited)).parent, -1);
  EXPECT_THROW(c.insert("a", msgs({})), areal::Error);
}

TEST(Recorder, EchoedRepliesMayDropReasoningOrEmptyContent) {
  Recorder c;
  const size_t a = c.insert("a", msgs({{"user", "2+2?"}}));
  Json out = {{"role", "assistant"}, {"content", ""}, {"reasoning_content", "add"},
              {"tool_calls", Json::array({{{"id", "call_1"}, {"type", "function"}, {"function", {{"name", "add"}, {"arguments", "{}"}}}}})}};
  finish(c, a, out, {1}, 10, 1, false);
  Json next = msgs({{"user", "2+2?"}});
  Json echoed = out;
  echoed.erase("reasoning_content");
  echoed.erase("content");
  next.push_back(echoed);
  next.push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "4"}});
  EXPECT_EQ(c.get(c.insert("b", next)).parent, static_cast<int>(a));
}

TEST(Recorder, InFlightCallsAreNeverParents) {
  Recorder c;
  c.insert("a", msgs({{"user", "hi"}}));  // not completed
  Json next = msgs({{"user", "hi"}, {"assistant", "x"}, {"user", "y"}});
  EXPECT_EQ(c.get(c.insert("b", next)).parent, -1);
}

TEST(Recorder, DiscountIsReturnToGoAlongTheConversationOnly) {
  Recorder c;
  Json h = msgs({{"user", "q1"}});
  const size_t a = c.insert("a", h);
  finish(c, a, reply("r1"), {1}, 10, 1, true);
  h.push_back({{"role", "assistant"}, {"content", "r1"}});
  h.push_back({{"role", "user"}, {"content", "q2"}});
  const size_t b = c.insert("b", h);
  finish(c, b, reply("r2"), {1, 10, 5}, 20, 1, true);
  // A side call (e.g. a title generator) arrives between the turns.
  const size_t side = c.insert("side", msgs({{"user", "summarize"}}));
  finish(c, side, reply("s"), {9}, 30, 1, false);
  h.push_back({{"role", "assistant"}, {"content", "r2"}});
  h.push_back({{"role", "user"}, {"content", "q3"}});
  const size_t d = c.insert("d", h);
  finish(c, d, reply("r3"), {1, 10, 5, 20, 6}, 40, 1, true);
  c.set_reward("", 1.0);  // the last call
  const std::vector<double> ret = c.returns(0.9);
  EXPECT_DOUBLE_EQ(ret[d], 1.0);
  EXPECT_DOUBLE_EQ(ret[b], 0.9);
  EXPECT_DOUBLE_EQ(ret[a], 0.81);
  EXPECT_DOUBLE_EQ(ret[side], 0.0);  // AReaL's arrival-order chain would give it 0.9
}

// finalize's reward goes to the last call that answered: a side call still
// in flight (a title, a summary) would be skipped by the export, reward and all.
TEST(Recorder, TheLastAnsweredCallIsFoundPastCallsInFlight) {
  Recorder c;
  EXPECT_FALSE(c.last_answered_id().has_value());
  const size_t a = c.insert("a", msgs({{"user", "q1"}}));
  EXPECT_FALSE(c.last_answered_id().has_value());  // in flight
  finish(c, a, reply("r1"), {1}, 10, 1, true);
  c.insert("side", msgs({{"user", "summarize"}}));  // in flight
  c.fail(c.insert("broken", msgs({{"user", "x"}})));
  EXPECT_EQ(c.last_answered_id(), std::optional<std::string>("a"));
}

TEST(Recorder, IndividualExportHasOneRowPerCompletedCall) {
  Recorder c;
  const size_t a = c.insert("a", msgs({{"user", "hi"}}));
  finish(c, a, reply("x"), {1, 2, 3}, 10, 2, false, 7);
  c.insert("inflight", msgs({{"user", "other"}}));
  c.set_reward("a", 0.5);
  size_t skipped = 0;
  auto rows = c.export_rows(ExportStyle::kIndividual, 1.0, &skipped);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(rows[0].input_ids, (std::vector<int32_t>{1, 2, 3, 10, 11}));
  EXPECT_EQ(rows[0].loss_mask, (std::vector<int32_t>{0, 0, 0, 1, 1}));
  EXPECT_EQ(rows[0].versions, (std::vector<int64_t>{-1, -1, -1, 7, 7}));
  EXPECT_EQ(rows[0].logprobs, (std::vector<float>{0, 0, 0, -0.5f, -0.5f}));
  EXPECT_DOUBLE_EQ(rows[0].reward, 0.5);
}

TEST(Recorder, ConcatExportIsOneRowWithEveryAssistantTurnTrained) {
  Recorder c;
  Json h = msgs({{"system", "s"}, {"user", "q1"}});
  const size_t a = c.insert("a", h);
  finish(c, a, reply("r1"), {1, 2}, 10, 2, true);
  h.push_back({{"role", "assistant"}, {"content", "r1"}});
  h.push_back({{"role", "tool"}, {"content", "42"}});
  const size_t b = c.insert("b", h);
  // The child's prompt literally extends the parent's prompt + sampled ids.
  finish(c, b, reply("r2"), {1, 2, 10, 11, 5, 6}, 20, 3, true);
  c.set_reward("", 1.0);
  auto rows = c.export_rows(ExportStyle::kConcat, 1.0);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].turns, 2u);
  EXPECT_EQ(rows[0].input_ids, (std::vector<int32_t>{1, 2, 10, 11, 5, 6, 20, 21, 22}));
  EXPECT_EQ(rows[0].loss_mask, (std::vector<int32_t>{0, 0, 1, 1, 0, 0, 1, 1, 1}));
  EXPECT_EQ(rows[0].versions, (std::vector<int64_t>{-1, -1, 3, 3, -1, -1, 3, 3, 3}));
  EXPECT_EQ(rows[0].interaction_id, "b");
  // Individual style of the same session: two rows.
  EXPECT_EQ(c.export_rows(ExportStyle::kIndividual, 1.0).size(), 2u);
}

TEST(Recorder, ConcatChildThatDoesNotExtendItsParentStandsAlone) {
  Recorder c;
  Json h = msgs({{"user", "q"}});
  const size_t a = c.insert("a", h);
  finish(c, a, reply("r"), {1, 2}, 10, 1, true);
  h.push_back({{"role", "assistant"}, {"content", "r"}});
  h.push_back({{"role", "user"}, {"content", "q2"}});
  const size_t b = c.insert("b", h);
  finish(c, b, reply("r2"), {1, 2, 99, 7}, 20, 1, true);  // 99 where the parent sampled 10
  EXPECT_FALSE(c.get(b).concat);
  auto rows = c.export_rows(ExportStyle::kConcat, 1.0);
  ASSERT_EQ(rows.size(), 2u);  // the parent's sampled tokens are still trained, in a row of their own
  EXPECT_EQ(rows[0].loss_mask, (std::vector<int32_t>{0, 0, 1}));
  EXPECT_EQ(rows[1].loss_mask, (std::vector<int32_t>{0, 0, 0, 0, 1}));
}

TEST(Recorder, RewardErrors) {
  Recorder c;
  EXPECT_THROW(c.set_reward("", 1.0), areal::Error);
  c.insert("a", msgs({{"user", "q"}}));
  try {
    c.set_reward("zzz", 1.0);
    FAIL();
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_NOT_FOUND);
    EXPECT_STREQ(e.what(), "Interaction zzz not found");
  }
}

// A call whose backend failed (the client got a 502) keeps the session
// consistent: "the last call" for a reward is the last one that answered,
// the failed call takes no reward, is no child in the discount chain and
// yields no row (nor counts as in flight).
TEST(Recorder, FailedCallsAreNeverRewardedDiscountedOrExported) {
  Recorder c;
  const size_t a = c.insert("a", msgs({{"user", "hi"}}));
  finish(c, a, reply("hello"), {1, 2}, 10, 2, false);
  Json next = msgs({{"user", "hi"}});
  next.push_back({{"role", "assistant"}, {"content", "hello"}});
  next.push_back({{"role", "user"}, {"content", "more"}});
  const size_t b = c.insert("b", next);
  EXPECT_EQ(c.get(b).parent, static_cast<int>(a));
  c.fail(b);
  c.set_reward("", 2.0);
  EXPECT_EQ(c.get(a).reward.value_or(-1), 2.0);
  EXPECT_FALSE(c.get(b).reward.has_value());
  try {
    c.set_reward("b", 1.0);
    FAIL() << "a failed call took a reward";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_FAILED_PRECONDITION);
  }
  EXPECT_DOUBLE_EQ(c.returns(0.5)[a], 2.0);  // not 2 + 0.5 * 0 through the failed child
  size_t skipped = 99;
  const auto rows = c.export_rows(ExportStyle::kIndividual, 1.0, &skipped);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].interaction_id, "a");
  EXPECT_EQ(skipped, 0u);
  Recorder only_failed;
  only_failed.fail(only_failed.insert("x", msgs({{"user", "hi"}})));
  EXPECT_THROW(only_failed.set_reward("", 1.0), areal::Error);
}

// A reward for "the last call" set while that call was in flight, which then
// failed, goes to the last call that answered instead of vanishing.
TEST(Recorder, ARewardSetOnACallThatThenFailsMovesToTheLastAnsweredCall) {
  Recorder c;
  const size_t a = c.insert("a", msgs({{"user", "hi"}}));
  finish(c, a, reply("hello"), {1, 2}, 10, 2, false);
  const size_t b = c.insert("b", msgs({{"user", "other"}}));  // in flight
  c.set_reward("", 0.5);
  EXPECT_EQ(c.get(b).reward.value_or(-1), 0.5);
  c.fail(b);
  EXPECT_EQ(c.get(a).reward.value_or(-1), 0.5);
  EXPECT_FALSE(c.get(b).reward.has_value());
}

TEST(Recorder, WorkflowTurnsFormOneConversationSoRewardsFlowBackLinearly) {
  // A workflow's api->generate calls: each continues the previous one, a
  // failed call is no link, and g_i = r_i + gamma * g_{i+1} (AReaL's
  // apply_reward_discount) with an unset reward counting 0.
  Recorder c;
  const size_t a = c.insert_next_turn("ep");
  finish(c, a, Json(), {1}, 10, 2, false);
  const size_t failed = c.insert_next_turn("ep");
  c.fail(failed);
  const size_t b = c.insert_next_turn("ep");
  EXPECT_EQ(c.get(b).parent, static_cast<int>(a));
  finish(c, b, Json(), {2}, 20, 1, false);
  const size_t d = c.insert_next_turn("ep");
  finish(c, d, Json(), {3}, 30, 1, false);
  EXPECT_EQ(c.get(d).id, "ep-c3");
  c.set_reward(c.get(a).id, 0.25);
  c.set_reward("", 1.0);  // the last call
  EXPECT_EQ(c.unrewarded(), 1u);
  EXPECT_EQ(c.rewards(), (std::vector<double>{0.25, 1.0}));
  const auto rows = c.export_rows(ExportStyle::kIndividual, 0.5);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[2].reward, 1.0);
  EXPECT_DOUBLE_EQ(rows[1].reward, 0.5);
  EXPECT_DOUBLE_EQ(rows[0].reward, 0.25 + 0.5 * 0.5);
  EXPECT_EQ(rows[0].input_ids, (std::vector<int32_t>{1, 10, 11}));
  EXPECT_EQ(rows[0].loss_mask, (std::vector<int32_t>{0, 1, 1}));
  EXPECT_EQ(rows[0].versions, (std::vector<int64_t>{-1, 3, 3}));
  EXPECT_EQ(rows[0].oldest_version(), 3);
  EXPECT_EQ(rows[0].sampled_tokens(), 2u);
}

TEST(Recorder, RewardsThatWouldOverflowAReturnAreRefusedAndChangeNothing) {
  // Three turns of one conversation: with gamma 1 the first call's return is
  // the sum of all three rewards. Unbounded, 3 x 8e307 is inf, which the
  // export's JSON writes as null.
  Recorder c;
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    const size_t k = c.insert_next_turn("ep");
    finish(c, k, Json(), {i}, 10 * i, 1, false);
    ids.push_back(c.get(k).id);
  }
  c.set_reward(ids[0], 8e307);
  try {
    c.set_reward(ids[1], 8e307);
    FAIL() << "a reward past the bound was accepted";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("total magnitude"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c.set_reward(ids[2], -8e307), areal::Error);  // magnitudes add, whatever the sign
  EXPECT_THROW(c.set_reward("", std::numeric_limits<double>::infinity()), areal::Error);
  EXPECT_THROW(c.set_reward("", std::nan("")), areal::Error);
  EXPECT_EQ(c.rewards(), (std::vector<double>{8e307}));  // nothing changed
  // Setting a reward again replaces it: only the new value counts.
  c.set_reward(ids[0], 1e307);
  c.set_reward(ids[1], 7e307);
  c.set_reward(ids[2], 8e306);
  EXPECT_EQ(c.rewards(), (std::vector<double>{1e307, 7e307, 8e306}));
  areal::recorder::SessionTrajectory t;
  t.rows = c.export_rows(ExportStyle::kIndividual, 1.0);
  ASSERT_EQ(t.rows.size(), 3u);
  for (const auto& row : t.rows) EXPECT_TRUE(std::isfinite(row.reward)) << row.interaction_id;
  EXPECT_DOUBLE_EQ(t.rows[0].reward, 1e307 + 7e307 + 8e306);
  EXPECT_EQ(t.to_json().dump().find("null"), std::string::npos) << "every number the export writes is finite";
}

TEST(Recorder, CompletedCountsTheCallsAnExportHolds) {
  Recorder c;
  finish(c, c.insert("a", msgs({{"user", "1"}})), reply("x"), {1}, 10, 1, false);
  c.fail(c.insert("b", msgs({{"user", "2"}})));
  c.insert("c", msgs({{"user", "3"}}));  // in flight
  EXPECT_EQ(c.size(), 3u);
  EXPECT_EQ(c.completed(), 1u);
  EXPECT_EQ(c.export_rows(ExportStyle::kIndividual, 1.0).size(), c.completed());
}

// After its session was exported, a call or reward that was let in before
// (and arrives now) is refused, not answered for nothing: a call already
// in flight still completes (the export counted it as skipped).
TEST(Recorder, AClosedRecordRefusesNewCallsAndRewards) {
  Recorder r;
  const size_t done = r.insert("c1", Json::array({{{"role", "user"}, {"content", "a"}}}));
  r.complete(done, {{"role", "assistant"}, {"content", "b"}}, {1}, {2}, {-0.5f}, {0}, "stop", false);
  const size_t flying = r.insert("c2", Json::array({{{"role", "user"}, {"content", "c"}}}));
  r.close();
  EXPECT_THROW(r.insert("c3", Json::array({{{"role", "user"}, {"content", "d"}}})), areal::recorder::SessionClosed);
  EXPECT_THROW(r.insert_next_turn("w"), areal::recorder::SessionClosed);
  EXPECT_THROW(r.set_reward("c1", 1.0), areal::recorder::SessionClosed);
  EXPECT_THROW(r.set_reward("", 1.0), areal::recorder::SessionClosed);
  EXPECT_NO_THROW(r.complete(flying, {{"role", "assistant"}, {"content", "e"}}, {3}, {4}, {-0.5f}, {0}, "stop", false));
  EXPECT_EQ(r.size(), 2u);
  EXPECT_FALSE(r.get(0).reward.has_value());
}

// A long agent session (Claude Code sends the whole conversation every
// turn): each call's parent is the call before it, found from per-message
// hashes of the earlier histories, made once (not a JSON round trip of every
// history per call); echoes that differ only as SDKs make them differ still match.
TEST(Recorder, EachTurnOfALongSessionFindsThePreviousAsItsParent) {
  Recorder c;
  Json h = msgs({{"user", "start"}});
  const std::string pad(2000, 'x');
  for (size_t turn = 0; turn < 150; ++turn) {
    const size_t k = c.insert("t" + std::to_string(turn), h);
    EXPECT_EQ(c.get(k).parent, turn == 0 ? -1 : static_cast<int>(k) - 1) << turn;
    const std::string text = "reply " + std::to_string(turn) + pad;
    finish(c, k, {{"role", "assistant"}, {"content", text}, {"reasoning_content", "why"}}, {1}, 10, 1, false);
    h.push_back({{"content", text}, {"role", "assistant"}});  // echoed without the reasoning, keys in another order
    h.push_back({{"role", "user"}, {"content", "next " + std::to_string(turn)}});
  }
}
