// Durable gateway state: what a restart gets back (sessions, calls, rewards,
// keys, capacity), exactly-once hand-off to the trainer, and a full disk
// (a file-size limit) refusing writes without losing or corrupting anything.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>
#include <memory>
#include <optional>

#include "core/plugin_host/error.hpp"
#include "tests/support/error_code.hpp"
#include "core/recorder/recorder.hpp"
#include "core/recorder/state_db.hpp"
#include "plugins/gateway/proxy/session_store.hpp"

namespace fs = std::filesystem;
using areal::proxy::SessionStore;
using areal::recorder::ExportStyle;
using areal::recorder::StateDb;
using areal::recorder::StateUnavailable;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("areal-state-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
  }
  ~TempDir() { fs::remove_all(path); }
};

// A gateway's store journaled to `dir`, as the gateway opens it.
struct Gateway {
  std::unique_ptr<StateDb> db;
  SessionStore store;
  areal::proxy::RecoverySummary recovered;
  Gateway(const fs::path& dir, int64_t capacity) : db(std::make_unique<StateDb>(areal::recorder::StateDbOptions{dir.string(), true})),
                                                  store({"admin-secret", capacity, 3600}) {
    store.journal_to(db.get());
    recovered = store.recover(db->take_recovered());
  }
};

// A call answered with tokens [prompt..] -> [out..], like the chat service records it.
// `history`: earlier messages the call continues (empty: a new conversation).
void answer(areal::proxy::Session& s, const std::string& id, const std::string& text, std::vector<int32_t> prompt, std::vector<int32_t> out,
            areal::recorder::Json history = areal::recorder::Json::array()) {
  history.push_back({{"role", "user"}, {"content", text}});
  const size_t i = s.record.insert(id, history);
  std::vector<float> lp(out.size(), -0.5f);
  std::vector<int64_t> v(out.size(), 3);
  s.record.complete(i, {{"role", "assistant"}, {"content", "ok " + text}}, prompt, out, lp, v, "stop", false);
}


}  // namespace

TEST(StateDb, RestartRecoversSessionsCallsRewardsAndKeys) {
  TempDir dir;
  std::string ended_id, live_id, live_key;
  std::vector<areal::recorder::TrajectoryRow> rows_before;
  {
    Gateway g(dir.path, -1);
    auto ended = g.store.start("task", "", "grp").session;
    answer(*ended, "c1", "one", {1, 2, 3}, {7, 8});
    answer(*ended, "c2", "two", {1, 2, 3, 7, 8, 4}, {9},
           {{{"role", "user"}, {"content", "one"}}, {{"role", "assistant"}, {"content", "ok one"}}});  // continues c1
    ended->record.set_reward("c1", 0.25);
    ended->record.set_reward("", 1.5);
    g.store.end(ended);
    rows_before = ended->record.export_rows(ExportStyle::kIndividual, 0.9);
    auto live = g.store.start("task", "fixed-key-123", "").session;
    answer(*live, "c3", "three", {5}, {6});
    live->record.insert("c4", {{{"role", "user"}, {"content", "in flight"}}});  // the crash comes before its answer
    ended_id = ended->id, live_id = live->id, live_key = live->api_key;
  }
  Gateway g(dir.path, -1);
  EXPECT_EQ(g.recovered.active, 1u);
  EXPECT_EQ(g.recovered.ended, 1u);
  EXPECT_EQ(g.recovered.failed_in_flight, 1u);
  // The live session continues under its key; its in-flight call came back failed.
  auto live = g.store.authorize(live_key);
  EXPECT_EQ(live->id, live_id);
  ASSERT_EQ(live->record.size(), 2u);
  EXPECT_TRUE(live->record.get(1).failed);
  EXPECT_EQ(live->record.get(0).output_ids, (std::vector<int32_t>{6}));
  answer(*live, "c5", "five", {5, 6, 1}, {2});
  EXPECT_EQ(live->record.get(2).parent, -1);  // a different first message: a new conversation
  // The ended session exports exactly what it exported before the restart.
  const auto t = g.store.export_session(ended_id, 0.9, ExportStyle::kIndividual);
  EXPECT_EQ(t.group_id, "grp");
  EXPECT_EQ(t.end_reason, "ended");
  ASSERT_EQ(t.rows.size(), rows_before.size());
  for (size_t i = 0; i < t.rows.size(); ++i) {
    EXPECT_EQ(t.rows[i].input_ids, rows_before[i].input_ids);
    EXPECT_EQ(t.rows[i].loss_mask, rows_before[i].loss_mask);
    EXPECT_EQ(t.rows[i].logprobs, rows_before[i].logprobs);
    EXPECT_EQ(t.rows[i].versions, rows_before[i].versions);
    EXPECT_DOUBLE_EQ(t.rows[i].reward, rows_before[i].reward);
  }
  EXPECT_DOUBLE_EQ(t.rows[0].reward, 0.25 + 0.9 * 1.5);
}

// Many threads committing and waiting at once (the gateway under load):
// each is woken for its own batch, none is lost or left waiting, and every
// session, call and reward is back after a restart.
// A reward for "the last call" set while that call was still generating
// was answered 200. After a crash the call comes back failed; the reward
// goes where a running gateway's Recorder::fail puts it (the last earlier
// call that answered, unless that one has its own), not away.
TEST(StateDb, ARewardOnACallInFlightAtTheCrashGoesToTheLastAnsweredCall) {
  TempDir dir;
  std::string moved_id, kept_id, nowhere_id;
  {
    Gateway g(dir.path, -1);
    auto moved = g.store.start("t1", "", "").session;
    answer(*moved, "m1", "one", {1}, {2});
    moved->record.insert("m2", {{{"role", "user"}, {"content", "in flight"}}});
    moved->record.set_reward("", 2.5);  // lands on m2, still generating
    auto kept = g.store.start("t2", "", "").session;
    answer(*kept, "k1", "one", {1}, {2});
    kept->record.set_reward("k1", 0.5);
    kept->record.insert("k2", {{{"role", "user"}, {"content", "in flight"}}});
    kept->record.set_reward("", 9.0);  // k1 has its own: this one has nowhere to go
    auto nowhere = g.store.start("t3", "", "").session;
    nowhere->record.insert("n1", {{{"role", "user"}, {"content", "in flight"}}});
    nowhere->record.set_reward("", 1.0);
    moved_id = moved->id, kept_id = kept->id, nowhere_id = nowhere->id;
  }
  for (int restart = 0; restart < 2; ++restart) {  // and the same again after a second restart
    Gateway g(dir.path, -1);
    EXPECT_EQ(g.recovered.failed_in_flight, restart == 0 ? 3u : 0u);
    auto get = [&](const std::string& id) { return g.store.find(id); };
    auto moved = get(moved_id), kept = get(kept_id), nowhere = get(nowhere_id);
    ASSERT_TRUE(moved && kept && nowhere);
    ASSERT_EQ(moved->record.size(), 2u);
    EXPECT_TRUE(moved->record.get(1).failed);
    EXPECT_FALSE(moved->record.get(1).reward.has_value());
    ASSERT_TRUE(moved->record.get(0).reward.has_value()) << "the committed reward was lost in the crash";
    EXPECT_EQ(*moved->record.get(0).reward, 2.5);
    EXPECT_EQ(kept->record.get(0).reward, std::optional<double>(0.5));
    EXPECT_FALSE(kept->record.get(1).reward.has_value());
    EXPECT_FALSE(nowhere->record.get(0).reward.has_value());
  }
}

// A call that finishes after its session was exported writes no row: a
// later session that reuses the id after a restart starts empty (a stray row
// would have been attached to it as its own first call).
TEST(StateDb, ACallFinishingAfterItsSessionWasExportedLeavesNothingBehind) {
  TempDir dir;
  std::string exported_id;
  {
    Gateway g(dir.path, -1);
    auto s = g.store.start("reused", "", "").session;
    const size_t late = s->record.insert("late", {{{"role", "user"}, {"content", "slow"}}});
    g.store.end(s);
    g.store.export_session(s->id, 1.0, ExportStyle::kIndividual);
    s->record.complete(late, {{"role", "assistant"}, {"content", "too late"}}, {1}, {2}, {-0.5f}, {3}, "stop", false);
    EXPECT_THROW(s->record.set_reward("late", 1.0), areal::recorder::SessionClosed);  // 410 over HTTP
    exported_id = s->id;
  }
  std::string reused_id;
  {
    Gateway g(dir.path, -1);
    EXPECT_EQ(g.recovered.active + g.recovered.ended, 0u);
    auto again = g.store.start("reused", "", "").session;
    reused_id = again->id;
    EXPECT_EQ(reused_id, exported_id) << "the test needs the id reused (ids restart per task after a restart)";
    EXPECT_EQ(again->record.size(), 0u);
  }
  Gateway g(dir.path, -1);
  auto again = g.store.find(reused_id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->record.size(), 0u) << "the exported session's late call came back as this session's";
}

TEST(StateDb, ConcurrentWritersAreEachWokenAndLoseNothing) {
  TempDir dir;
  constexpr int kThreads = 12, kSessionsEach = 25;
  std::vector<std::vector<std::string>> ids(kThreads);
  {
    Gateway g(dir.path, -1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < kSessionsEach; ++i) {
          auto s = g.store.start("task", "", "").session;
          answer(*s, "c", "q" + std::to_string(i), {1, 2}, {static_cast<int32_t>(t), static_cast<int32_t>(i)});
          s->record.set_reward("c", t + i / 100.0);
          g.store.end(s);
          ids[t].push_back(s->id);
        }
      });
    for (auto& th : threads) th.join();
  }
  Gateway g(dir.path, -1);
  EXPECT_EQ(g.recovered.ended, static_cast<size_t>(kThreads * kSessionsEach));
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(ids[t].size(), static_cast<size_t>(kSessionsEach));
    for (int i = 0; i < kSessionsEach; ++i) {
      const auto rows = g.store.export_session(ids[t][i], 1.0, ExportStyle::kIndividual).rows;
      ASSERT_EQ(rows.size(), 1u);
      EXPECT_EQ(rows[0].input_ids.back(), i);
      EXPECT_DOUBLE_EQ(rows[0].reward, t + i / 100.0);
    }
  }
}

// MoE routing (issue #35) is committed with its call and exported the same
// after a restart; a format-1 database (before routing) is migrated in place
// and its calls come back without routing.
TEST(StateDb, RoutingSurvivesARestartAndAFormat1DatabaseIsMigrated) {
  TempDir dir;
  areal::recorder::ExpertRouting r;
  r.moe_layers = 2, r.top_k = 2, r.num_experts = 128;
  for (uint16_t i = 0; i < 4 * 4; ++i) r.experts.push_back(static_cast<uint16_t>(i * 7 % 128));
  std::string id;
  {
    Gateway g(dir.path, -1);
    auto s = g.store.start("task", "", "").session;
    const size_t i = s->record.insert("c1", {{{"role", "user"}, {"content", "x"}}});
    s->record.complete(i, {{"role", "assistant"}, {"content", "y"}}, {1, 2, 3}, {4, 5}, {-1.f, -1.f}, {0, 0}, "stop", false, r);
    g.store.end(s);
    id = s->id;
  }
  {
    Gateway g(dir.path, -1);
    const auto t = g.store.export_session(id, 1.0, ExportStyle::kIndividual);
    ASSERT_EQ(t.rows.size(), 1u);
    EXPECT_EQ(t.rows[0].routing.experts, r.experts);
    EXPECT_EQ(t.rows[0].routing.num_experts, 128u);
  }
  // A format-1 file: the calls table without its routing column.
  TempDir old;
  fs::create_directories(old.path);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((old.path / StateDb::kFileName).c_str(), &db), SQLITE_OK);
  const char* v1 = R"sql(
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE sessions(id TEXT PRIMARY KEY, task_id TEXT NOT NULL, group_id TEXT NOT NULL, api_key TEXT NOT NULL,
      state TEXT NOT NULL, end_reason TEXT NOT NULL, trained_step INTEGER NOT NULL DEFAULT -1);
    CREATE TABLE calls(session_id TEXT NOT NULL, idx INTEGER NOT NULL, id TEXT NOT NULL, parent INTEGER NOT NULL,
      state TEXT NOT NULL, messages TEXT, output TEXT, concat INTEGER NOT NULL, prompt_ids BLOB, output_ids BLOB, logprobs BLOB,
      versions BLOB, finish_reason TEXT NOT NULL, reward REAL, PRIMARY KEY(session_id, idx)) WITHOUT ROWID;
    INSERT INTO sessions VALUES('old-0', 'old', 'old', 'key-old', 'ended', 'ended', -1);
    INSERT INTO calls VALUES('old-0', 0, 'c0', -1, 'complete', '[]', '{}', 0, x'01000000', x'02000000', x'000080bf', x'0000000000000000', 'stop', 1.0);
    PRAGMA user_version=1;)sql";
  ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
  {
    Gateway g(old.path, -1);
    const auto t = g.store.export_session("old-0", 1.0, ExportStyle::kIndividual);
    ASSERT_EQ(t.rows.size(), 1u);
    EXPECT_EQ(t.rows[0].input_ids, (std::vector<int32_t>{1, 2}));
    EXPECT_TRUE(t.rows[0].routing.empty());
  }
  ASSERT_EQ(sqlite3_open((old.path / StateDb::kFileName).c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), StateDb::kFormatVersion);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

// The trainer's hand-off: taken sessions come back after a restart unless a
// committed checkpoint holds them; marked for a checkpoint that was never
// committed (the run resumes from an earlier one) they come back first.
TEST(StateDb, TakenSessionsComeBackUnlessTheirCheckpointWasCommitted) {
  TempDir dir;
  std::string in_ckpt_10, in_ckpt_20, only_taken;
  {
    Gateway g(dir.path, -1);
    for (int i = 0; i < 4; ++i) {
      auto s = g.store.start("t" + std::to_string(i), "", "").session;
      answer(*s, "c", "x", {1}, {2});
      s->record.set_reward("", i);
      g.store.end(s);
    }
    EXPECT_EQ(g.store.export_session("t0-0", 1.0, ExportStyle::kIndividual).rows.size(), 1u);  // exported: never again
    auto take = [&] { return g.store.take_finished(std::chrono::milliseconds(0), 1.0, ExportStyle::kIndividual)->session_id; };
    in_ckpt_10 = take(), in_ckpt_20 = take(), only_taken = take();
    EXPECT_EQ(in_ckpt_10, "t1-0");  // oldest-ended first
    g.store.mark_trained({in_ckpt_10}, 10);
    g.store.commit_checkpoint(10);
    g.store.mark_trained({in_ckpt_20, "unknown-id"}, 20);  // the run dies before checkpoint 20 is written
    // A taken, uncommitted id stays reserved: a new session must not take it.
    auto again = g.store.start("t2", "", "").session;
    EXPECT_NE(again->id, in_ckpt_20);
  }
  Gateway g(dir.path, -1);
  EXPECT_EQ(g.recovered.trained, 1u);
  EXPECT_EQ(g.recovered.ended, 1u);  // the taken, unmarked one
  EXPECT_EQ(g.recovered.active, 1u);
  EXPECT_EQ(g.store.commit_checkpoint(10), 1u);  // resumed from 10: step 20's session comes back
  auto first = g.store.take_finished(std::chrono::milliseconds(0), 1.0, ExportStyle::kIndividual);
  auto second = g.store.take_finished(std::chrono::milliseconds(0), 1.0, ExportStyle::kIndividual);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->session_id, in_ckpt_20);
  EXPECT_EQ(second->session_id, only_taken);
  EXPECT_EQ(first->rows.size(), 1u);
  EXPECT_FALSE(g.store.take_finished(std::chrono::milliseconds(0), 1.0, ExportStyle::kIndividual).has_value());
  EXPECT_EQ(code_of([&] { g.store.find(in_ckpt_10); }), AREAL_CODE_NOT_FOUND);
  EXPECT_EQ(code_of([&] { g.store.find("t0-0"); }), AREAL_CODE_NOT_FOUND);
}

// A session the trainer took before the crash (and never trained) holds the
// oldest policy versions: after the restart it is handed out before the
// sessions that were still waiting, whatever order they started in.
TEST(StateDb, SessionsTakenBeforeACrashAreHandedOutFirstAfterIt) {
  TempDir dir;
  std::string taken;
  {
    Gateway g(dir.path, -1);
    auto early = g.store.start("early", "", "").session;  // starts first, ends last
    auto late = g.store.start("late", "", "").session;
    answer(*early, "c", "x", {1}, {2});
    answer(*late, "c", "y", {1}, {3});
    g.store.end(late);
    g.store.end(early);
    taken = g.store.take_finished(std::chrono::milliseconds(0), 1.0, ExportStyle::kIndividual)->session_id;
    ASSERT_EQ(taken, late->id);  // oldest-ended first
  }
  Gateway g(dir.path, -1);
  EXPECT_EQ(g.recovered.ended, 2u);
  auto first = g.store.take_finished(std::chrono::milliseconds(0), 1.0, ExportStyle::kIndividual);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->session_id, taken);
}

TEST(StateDb, TrainerGrantedCapacityGoesToRecoveredSessionsFirst) {
  TempDir dir;
  {
    Gateway g(dir.path, 0);
    g.store.grant_capacity(2);
    g.store.start("a", "", "");
    auto b = g.store.start("b", "", "").session;
    g.store.end(b);
    g.store.grant_capacity(1);  // granted by a rollout task that dies with the process
  }
  Gateway g(dir.path, 0);
  EXPECT_EQ(g.recovered.owed_grants, 2);
  EXPECT_EQ(g.store.capacity(), 0);
  EXPECT_EQ(code_of([&] { g.store.start("c", "", ""); }), AREAL_CODE_RESOURCE_EXHAUSTED);
  EXPECT_EQ(g.store.grant_capacity(1), 0);  // owed to the two recovered sessions
  EXPECT_EQ(g.store.grant_capacity(1), 0);
  EXPECT_EQ(g.store.grant_capacity(1), 1);
  EXPECT_NO_THROW(g.store.start("c", "", ""));
}

TEST(StateDb, AdminGrantedCapacityIsKept) {
  TempDir dir;
  {
    Gateway g(dir.path, 2);
    g.store.start("a", "", "");
    g.store.grant_capacity(3);
  }
  Gateway g(dir.path, 2);
  EXPECT_EQ(g.store.capacity(), 4);
}

TEST(StateDb, ASecondProcessOrAnUnusableDirectoryIsAClearError) {
  TempDir dir;
  Gateway g(dir.path, -1);
  try {
    StateDb second({dir.path.string(), true});
    FAIL() << "a second open of a state dir in use must fail";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_FAILED_PRECONDITION);
    EXPECT_NE(std::string(e.what()).find("in use by another process (pid " + std::to_string(::getpid()) + ")"), std::string::npos) << e.what();
  }
  const fs::path file = dir.path / "a-file";
  std::ofstream(file) << "x";
  try {
    StateDb bad({(file / "state").string(), true});
    FAIL() << "a state dir under a regular file must fail";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_FAILED_PRECONDITION);
    EXPECT_NE(std::string(e.what()).find("cannot create it"), std::string::npos) << e.what();
  }
}

TEST(StateDb, ANewerFormatIsRefused) {
  TempDir dir;
  { Gateway g(dir.path, -1); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path / StateDb::kFileName).string().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  try {
    StateDb again({dir.path.string(), true});
    FAIL() << "format 99 must be refused";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("format 99"), std::string::npos) << e.what();
  }
}

// A full disk, made with a file-size limit: writes fail with StateUnavailable
// and are undone in memory; once space returns everything works, and the
// database is intact and agrees with what clients were told.
TEST(StateDb, FullDiskRefusesWritesAndLosesNothing) {
  TempDir dir;
  std::string kept_id;
  {
    Gateway g(dir.path, 5);
    auto a = g.store.start("a", "", "").session;
    answer(*a, "c1", "one", {1}, {2});
    kept_id = a->id;
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    rlimit tiny = old;
    tiny.rlim_cur = 1024;  // every file is already longer: no write that extends one succeeds
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &tiny), 0);
    int refused = 0;
    // Some writes may still land in WAL space already allocated; push until refused.
    for (int i = 0; i < 200 && refused == 0; ++i) {
      try {
        g.store.start("b" + std::to_string(i), "", "");
      } catch (const StateUnavailable& e) {
        ++refused;
        EXPECT_NE(std::string(e.what()).find("retry"), std::string::npos);
      }
    }
    EXPECT_EQ(refused, 1);
    const int64_t capacity_while_full = g.store.capacity();
    EXPECT_THROW(a->record.set_reward("c1", 9.0), StateUnavailable);
    EXPECT_FALSE(a->record.get(0).reward.has_value());  // undone
    EXPECT_THROW(g.store.end(a), StateUnavailable);
    EXPECT_FALSE(a->finished());                            // still active: the client may end it again
    EXPECT_EQ(g.store.capacity(), capacity_while_full);     // a refused start gives its slot back
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);            // space returns
    a->record.set_reward("c1", 9.0);
    g.store.end(a);
  }
  Gateway g(dir.path, 5);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path / StateDb::kFileName).string().c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "ok");
  sqlite3_finalize(st);
  sqlite3_close(db);
  const auto t = g.store.export_session(kept_id, 1.0, ExportStyle::kIndividual);
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(t.rows[0].reward, 9.0);
}

// A full disk under concurrent writers: a batch that fails refuses every
// request waiting in it (each gets the error, none hangs), and what was
// refused is not there after a restart while everything answered is.
TEST(StateDb, AFailedBatchRefusesEachOfItsWaitersAndKeepsWhatWasAnswered) {
  TempDir dir;
  constexpr int kThreads = 6;
  std::atomic<int> refused{0}, other_errors{0};
  std::vector<std::vector<std::string>> started(kThreads);
  {
    Gateway g(dir.path, -1);
    g.store.start("before", "", "");
    rlimit old{};
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    rlimit tiny = old;
    tiny.rlim_cur = 1024;  // as in FullDiskRefusesWritesAndLosesNothing: no write that extends a file succeeds
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &tiny), 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          try {
            started[t].push_back(g.store.start("t" + std::to_string(t), "", "").session->id);
          } catch (const StateUnavailable&) {
            ++refused;
            return;
          } catch (...) {
            ++other_errors;
            return;
          }
        }
      });
    for (auto& th : threads) th.join();
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  }
  EXPECT_GE(refused.load(), 1);
  EXPECT_EQ(other_errors.load(), 0);
  size_t answered = 1;  // "before"
  for (const auto& ids : started) answered += ids.size();
  Gateway g(dir.path, -1);
  EXPECT_EQ(g.recovered.active, answered);
  for (const auto& ids : started)
    for (const auto& id : ids) EXPECT_NO_THROW(g.store.find(id)) << id;
}

// The online seed's fixed-key refresh at zero capacity, journaled: the old
// session's end is committed before the 429, it survives a restart, and it
// is handed out once.
TEST(StateDb, RefreshAtZeroCapacityCommitsTheOldSessionsEndFirst) {
  TempDir dir;
  std::string first_id;
  {
    Gateway g(dir.path, 0);
    g.store.grant_capacity(1);
    auto first = g.store.start("t", "sk-my-fixed-key", "").session;
    answer(*first, "c1", "hi", {1}, {2});
    first_id = first->id;
    EXPECT_EQ(code_of([&] { g.store.start("t", "sk-my-fixed-key", ""); }), AREAL_CODE_RESOURCE_EXHAUSTED);
    EXPECT_TRUE(first->finished());
  }
  Gateway g(dir.path, 0);
  EXPECT_EQ(g.recovered.ended, 1u);
  auto taken = g.store.take_finished(std::chrono::milliseconds(0), 1.0, ExportStyle::kIndividual);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(taken->session_id, first_id);
  EXPECT_EQ(taken->end_reason, "refreshed");
  EXPECT_EQ(taken->rows.size(), 1u);
}
