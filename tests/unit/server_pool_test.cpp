// The remote plugins' server choice (plugins/remote_inference/server_pool):
// affinity, least load, and the three ways out of rotation.
#include <set>
#include <string>
#include <stdexcept>

#include <gtest/gtest.h>

#include "server_pool.hpp"

using areal::remote::ServerPool;
using areal::remote::parse_url;

namespace {

ServerPool three() {
  return ServerPool({parse_url("http://127.0.0.1:1"), parse_url("http://127.0.0.1:2"), parse_url("http://127.0.0.1:3")});
}

}  // namespace

TEST(ServerPool, ParsesBaseUrlsAndRefusesWhatItCannotReach) {
  const auto u = parse_url("http://10.0.0.5:30000/prefix/");
  EXPECT_EQ(u.host, "10.0.0.5");
  EXPECT_EQ(u.port, 30000);
  EXPECT_EQ(u.prefix, "/prefix");
  EXPECT_EQ(u.text, "http://10.0.0.5:30000/prefix");
  EXPECT_EQ(parse_url("http://host").port, 80);
  EXPECT_THROW(parse_url("https://host:1"), std::invalid_argument);
  EXPECT_THROW(parse_url("host:1"), std::invalid_argument);
  EXPECT_THROW(parse_url("http://host:99999"), std::invalid_argument);
  EXPECT_THROW(parse_url("http://:80"), std::invalid_argument);
}

TEST(ServerPool, SpreadsByLoadAndKeepsAKeyOnItsServer) {
  ServerPool pool = three();
  const int a = pool.acquire("session-a"), b = pool.acquire("session-b"), c = pool.acquire("session-c");
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_NE(a, c);  // one request each: the least loaded differ
  // The same key returns to its server even when that server is busier.
  EXPECT_EQ(pool.acquire("session-a"), a);
  EXPECT_EQ(pool.acquire("session-a"), a);
  // A keyless request goes to a least-loaded server, not to a's (3 in flight).
  EXPECT_NE(pool.acquire(""), a);
  for (int i = 0; i < 3; ++i) pool.release(a);
}

TEST(ServerPool, DownStaleAndHeldServersGetNoRequestsUntilCleared) {
  ServerPool pool = three();
  const int a = pool.acquire("k");
  pool.release(a);
  pool.mark_down(a, "connection refused");
  const int moved = pool.acquire("k");
  EXPECT_NE(moved, a);  // the key moves to a live server...
  pool.release(moved);
  EXPECT_TRUE(pool.mark_up(a));
  EXPECT_EQ(pool.acquire("k"), moved);  // ...and stays there
  pool.release(moved);
  const int other = (moved + 1) % 3, third = (moved + 2) % 3;
  pool.set_stale(moved, true);  // missed a weight update
  pool.set_held(other, true);   // a resume failed
  pool.mark_down(third, "gone");
  EXPECT_EQ(pool.acquire("k"), -1);  // nothing usable
  EXPECT_NE(pool.describe().find("missed the last weight update"), std::string::npos) << pool.describe();
  EXPECT_NE(pool.describe().find("still paused"), std::string::npos) << pool.describe();
  EXPECT_NE(pool.describe().find("down: gone"), std::string::npos) << pool.describe();
  pool.set_held(other, false);
  EXPECT_EQ(pool.acquire("k"), other);
}

// A server that missed an adapter's load gets no request for that adapter,
// and still every other request (it once left rotation for all of them, and
// another adapter's load put it back for the one it lacked).
TEST(ServerPool, AServerMissingAnAdapterGetsOnlyRequestsThatDoNotNeedIt) {
  ServerPool pool({parse_url("http://127.0.0.1:1"), parse_url("http://127.0.0.1:2")});
  pool.set_missing_adapter(1, "job-a@7", true);
  for (int i = 0; i < 6; ++i) {
    const int s = pool.acquire("session-" + std::to_string(i), "job-a@7");
    EXPECT_EQ(s, 0);
    pool.release(s);
  }
  std::set<int> any;
  for (int i = 0; i < 6; ++i) {
    const int s = pool.acquire("", "job-b@8");
    any.insert(s);
    pool.release(s);
  }
  EXPECT_EQ(any, (std::set<int>{0, 1}));
  pool.mark_down(0, "test");
  EXPECT_EQ(pool.acquire("", "job-a@7"), -1);  // nobody has it: the caller retries or fails, never a 404
  pool.forget_adapter("job-a@7");
  EXPECT_EQ(pool.acquire("", "job-a@7"), 1);
}
