// Session store: keys, auth, capacity (HTTP 429), refresh, expiry, export.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <string>
#include <vector>
#include <chrono>
#include <memory>
#include <set>

#include "core/plugin_host/error.hpp"
#include "tests/support/error_code.hpp"
#include "plugins/gateway/proxy/session_store.hpp"

using areal::recorder::ExportStyle;
using areal::proxy::SessionStore;

TEST(SessionStore, MintsKeysAndSessionIdsAndAuthorizes) {
  SessionStore store({"admin-secret", -1, 3600});
  auto a = store.start("task", "", "").session;
  auto b = store.start("task", "", "").session;
  EXPECT_EQ(a->id, "task-0");
  EXPECT_EQ(b->id, "task-1");
  EXPECT_EQ(a->group_id, "task");  // default group: the task
  EXPECT_EQ(a->api_key.rfind("sk-sess-", 0), 0u);
  EXPECT_EQ(a->api_key.size(), 51u);
  EXPECT_NE(a->api_key, b->api_key);
  EXPECT_EQ(store.authorize(a->api_key), a);
  EXPECT_EQ(code_of([&] { store.authorize("sk-sess-nope"); }), AREAL_CODE_UNAUTHENTICATED);
  EXPECT_TRUE(store.is_admin("admin-secret"));
  EXPECT_FALSE(store.is_admin("admin-secreT"));
  EXPECT_FALSE(store.is_admin("admin-secret-longer"));
  EXPECT_FALSE(store.is_admin(""));
  EXPECT_EQ(store.start("t", "", "grp").session->group_id, "grp");
}

TEST(SessionStore, CapacityGatesStartsWith429) {
  SessionStore store({"admin-secret", 1, 3600});
  store.start("t", "", "");
  EXPECT_EQ(code_of([&] { store.start("t", "", ""); }), AREAL_CODE_RESOURCE_EXHAUSTED);
  EXPECT_EQ(store.grant_capacity(), 1);
  EXPECT_NO_THROW(store.start("t", "", ""));
}

TEST(SessionStore, RefreshAtZeroCapacityEndsTheOldSessionBeforeAnswering429) {
  // The online seed's fixed-key agent: it refreshes while the trainer has
  // granted nothing. The old session must end and be exportable first, or
  // the trainer (waiting for an ended session) and the agent (waiting for
  // capacity) wait on each other.
  SessionStore store({"admin-secret", 1, 3600});
  auto first = store.start("t", "sk-my-fixed-key", "").session;
  EXPECT_EQ(store.capacity(), 0);
  EXPECT_EQ(code_of([&] { store.start("t", "sk-my-fixed-key", ""); }), AREAL_CODE_RESOURCE_EXHAUSTED);
  EXPECT_TRUE(first->finished());
  EXPECT_EQ(first->end_reason(), "refreshed");
  auto taken = store.take_finished(std::chrono::milliseconds(0), 1.0, ExportStyle::kIndividual);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->session_id, first->id);
  store.grant_capacity(1);  // the trainer consumed it and frees a slot
  auto second = store.start("t", "sk-my-fixed-key", "");
  EXPECT_TRUE(second.ended_session_id.empty());  // nothing left to end
  EXPECT_EQ(store.authorize("sk-my-fixed-key"), second.session);
}

TEST(SessionStore, ClientMistakesAreRejected) {
  SessionStore store({"admin-secret", -1, 3600});
  EXPECT_EQ(code_of([&] { store.start("t", "admin-secret", ""); }), AREAL_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of([&] { store.start("t", "short", ""); }), AREAL_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(code_of([&] { store.start("", "", ""); }), AREAL_CODE_INVALID_ARGUMENT);
  auto s = store.start("t", "", "").session;
  store.end(s);
  EXPECT_EQ(code_of([&] { store.end(s); }), AREAL_CODE_FAILED_PRECONDITION);          // 410
  EXPECT_EQ(code_of([&] { store.authorize(s->api_key); }), AREAL_CODE_FAILED_PRECONDITION);
  EXPECT_EQ(code_of([&] { store.export_session("nope-0", 1.0, ExportStyle::kIndividual); }), AREAL_CODE_NOT_FOUND);
  auto active = store.start("t", "", "").session;
  EXPECT_EQ(code_of([&] { store.export_session(active->id, 1.0, ExportStyle::kIndividual); }), AREAL_CODE_FAILED_PRECONDITION);
  EXPECT_EQ(code_of([&] { store.export_session(s->id, 1.5, ExportStyle::kIndividual); }), AREAL_CODE_INVALID_ARGUMENT);
}

TEST(SessionStore, RefreshingAFixedKeyEndsAndKeepsTheOldSession) {
  SessionStore store({"admin-secret", -1, 3600});
  auto first = store.start("t", "sk-my-fixed-key", "").session;
  first->record.insert("c1", nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}}));
  auto refreshed = store.start("t", "sk-my-fixed-key", "");
  EXPECT_EQ(refreshed.ended_session_id, first->id);
  EXPECT_TRUE(first->finished());
  EXPECT_EQ(first->end_reason(), "refreshed");
  EXPECT_EQ(store.authorize("sk-my-fixed-key"), refreshed.session);  // the key now means the new session
  auto exported = store.export_session(first->id, 1.0, ExportStyle::kIndividual);
  EXPECT_EQ(exported.end_reason, "refreshed");
  EXPECT_EQ(exported.skipped_incomplete, 1u);  // in flight when refreshed: reported, not hidden
}

TEST(SessionStore, IdleSessionsExpireButStayExportable) {
  SessionStore store({"admin-secret", -1, 10});
  auto s = store.start("t", "", "").session;
  EXPECT_TRUE(store.expire_idle(std::chrono::steady_clock::now() + std::chrono::seconds(5)).empty());
  auto expired = store.expire_idle(std::chrono::steady_clock::now() + std::chrono::seconds(11));
  ASSERT_EQ(expired, std::vector<std::string>{s->id});
  EXPECT_EQ(store.finished_session_ids(), std::vector<std::string>{s->id});
  auto e = store.export_session(s->id, 0.9, ExportStyle::kConcat);
  EXPECT_EQ(e.end_reason, "expired");
  const auto j = e.to_json();
  EXPECT_EQ(j["style"], "concat");
  EXPECT_EQ(j["group_id"], "t");
  EXPECT_EQ(code_of([&] { store.export_session(s->id, 0.9, ExportStyle::kConcat); }), AREAL_CODE_NOT_FOUND);  // exported once
}

TEST(SessionStore, TakeFinishedWaitsForAnEndedSessionAndRemovesIt) {
  SessionStore store({"admin-secret", -1, 3600});
  EXPECT_FALSE(store.take_finished(std::chrono::milliseconds(5), 1.0, ExportStyle::kIndividual).has_value());
  auto s = store.start("task", "", "g1").session;
  std::thread ender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    store.end(s);
  });
  auto taken = store.take_finished(std::chrono::seconds(10), 1.0, ExportStyle::kIndividual);
  ender.join();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->session_id, s->id);
  EXPECT_EQ(taken->group_id, "g1");
  EXPECT_EQ(taken->end_reason, "ended");
  // Taken means gone: neither a second take nor an export finds it.
  EXPECT_FALSE(store.take_finished(std::chrono::milliseconds(5), 1.0, ExportStyle::kIndividual).has_value());
  EXPECT_THROW(store.export_session(s->id, 1.0, ExportStyle::kIndividual), areal::Error);
}

TEST(SessionStore, EveryWaitingTakerGetsOneOfTheSessionsEndedOneByOne) {
  // The trainer waits with one taker per rollout slot; an end wakes one of
  // them (notify_one). A wake-up lost on the way leaves a taker asleep until
  // its timeout (then it finds the session): each must be woken long before.
  SessionStore store({"admin-secret", -1, 3600});
  constexpr int kTakers = 8;
  std::vector<std::shared_ptr<areal::proxy::Session>> sessions;
  for (int i = 0; i < kTakers; ++i) sessions.push_back(store.start("task", "", "").session);
  std::vector<std::string> taken(kTakers);
  std::vector<std::thread> takers;
  for (int i = 0; i < kTakers; ++i)
    takers.emplace_back([&, i] {
      auto t = store.take_finished(std::chrono::seconds(20), 1.0, ExportStyle::kIndividual);
      if (t) taken[i] = t->session_id;
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let them wait
  const auto first_end = std::chrono::steady_clock::now();
  for (auto& s : sessions) {
    store.end(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  for (auto& t : takers) t.join();
  // Far from the 20 s timeout, however slow the machine: woken, not timed out.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - first_end).count(), 10.0);
  std::set<std::string> distinct(taken.begin(), taken.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kTakers));
  EXPECT_EQ(distinct.count(""), 0u) << "a taker returned without a session";
}

TEST(SessionStore, ABadDiscountLosesNoSession) {
  SessionStore store({"admin-secret", -1, 3600});
  auto s = store.start("task", "", "").session;
  store.end(s);
  EXPECT_THROW(store.export_session(s->id, 1.5, ExportStyle::kIndividual), areal::Error);
  EXPECT_EQ(store.export_session(s->id, 1.0, ExportStyle::kIndividual).session_id, s->id);  // still there
}

TEST(SessionStore, EndCountsOnlyTheCallsThatAnswered) {
  // interaction_count is what the export will hold: a failed or refused call
  // (the client got an error) and a call still in flight are not counted.
  SessionStore store({"admin-secret", -1, 3600});
  auto s = store.start("t", "", "").session;
  const auto hi = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  const size_t answered = s->record.insert("c0", hi);
  s->record.complete(answered, {{"role", "assistant"}, {"content", "hello"}}, {1, 2}, {3}, {-0.5f}, {0}, "stop", false);
  s->record.fail(s->record.insert("c1", hi));  // e.g. a prompt over the context: 400, nothing sampled
  s->record.insert("c2", hi);                  // in flight
  EXPECT_EQ(store.end(s), 1u);
  const auto exported = store.export_session(s->id, 1.0, ExportStyle::kIndividual);
  EXPECT_EQ(exported.rows.size(), 1u);
  EXPECT_EQ(exported.skipped_incomplete, 1u);
}

// A session whose agent waits on its own call is not idle: it does not
// expire while the call generates (a long generation, a queue under RL
// load), and its idle time starts again from about when the call answers.
TEST(SessionStore, ASessionWaitingOnItsCallDoesNotExpire) {
  SessionStore store({"admin-secret", -1, 10});
  auto s = store.start("t", "", "").session;
  const auto hi = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  const size_t call = s->record.insert("c0", hi);  // in flight for 23 s, sweeps every 9 s
  const auto t0 = std::chrono::steady_clock::now();
  for (int t : {5, 14, 23}) EXPECT_TRUE(store.expire_idle(t0 + std::chrono::seconds(t)).empty()) << t;
  s->record.complete(call, {{"role", "assistant"}, {"content", "hello"}}, {1, 2}, {3}, {-0.5f}, {0}, "stop", false);
  EXPECT_TRUE(store.expire_idle(t0 + std::chrono::seconds(30)).empty());  // 7 s idle since the last sweep of the call
  EXPECT_EQ(store.expire_idle(t0 + std::chrono::seconds(34)), std::vector<std::string>{s->id});
}

// Two ends racing for one session (no journal): exactly one wins, the other
// is told the session ended (410 at the route), as with a journal.
TEST(SessionStore, OfTwoRacingEndsWithoutAJournalOneLoses) {
  for (int round = 0; round < 50; ++round) {
    SessionStore store({"admin-secret", -1, 3600});
    auto s = store.start("t", "", "").session;
    std::atomic<int> lost{0};
    auto end = [&] {
      try {
        store.end(s);
      } catch (const areal::Error& e) {
        if (e.code() == AREAL_CODE_FAILED_PRECONDITION) ++lost;
      }
    };
    std::thread a(end), b(end);
    a.join(), b.join();
    ASSERT_EQ(lost.load(), 1) << round;
    EXPECT_EQ(store.finished_session_ids().size(), 1u);
  }
}
