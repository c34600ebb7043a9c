// Limits on what a client's bytes can make the gateway do: HTTP framing
// (server/request_reader), JSON nesting (core/text/json_depth) and schema
// compilation (core/structured_output). The same cases over a live socket
// are in tests/security/hostile_input.py.
#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/plugin_host/error.hpp"
#include "core/structured_output/json_schema_matcher.hpp"
#include "core/text/json_depth.hpp"
#include "plugins/gateway/server/request_reader.hpp"

namespace {

using areal::gateway::server::ParsedRequest;
using areal::gateway::server::RequestLimits;
using areal::gateway::server::RequestReader;
using State = RequestReader::State;

RequestLimits small_limits() {
  RequestLimits l;
  l.max_target_bytes = 100;
  l.max_head_bytes = 1000;
  l.max_header_count = 10;
  l.max_body_bytes = 64;
  return l;
}

// Feeds `bytes` whole and byte by byte; both must end in the same state.
State feed_both_ways(const std::string& bytes, RequestReader& whole) {
  RequestReader single(small_limits());
  for (char ch : bytes) single.feed(std::string_view(&ch, 1));
  const State s = whole.feed(bytes);
  EXPECT_EQ(single.state(), s) << bytes;
  if (s == State::kError) {
    EXPECT_EQ(single.error().status, whole.error().status);
  }
  return s;
}

int error_status(const std::string& bytes) {
  RequestReader r(small_limits());
  if (feed_both_ways(bytes, r) != State::kError) return 0;
  return r.error().status;
}

TEST(RequestReader, ReadsAContentLengthBodyAndAPipelinedRequestAfterIt) {
  RequestReader r(small_limits());
  const std::string two = "POST /v1/x?q=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /health HTTP/1.0\r\n\r\n";
  ASSERT_EQ(feed_both_ways(two, r), State::kReady);
  ParsedRequest first = r.take();
  EXPECT_EQ(first.method, "POST");
  EXPECT_EQ(first.target, "/v1/x?q=1");
  EXPECT_EQ(first.body, "hello");
  EXPECT_TRUE(first.keep_alive);
  ASSERT_EQ(r.advance(), State::kReady);
  ParsedRequest second = r.take();
  EXPECT_EQ(second.target, "/health");
  EXPECT_FALSE(second.keep_alive);  // HTTP/1.0 without keep-alive
  EXPECT_EQ(r.advance(), State::kIdle);
}

TEST(RequestReader, DechunksABodyWithExtensionsAndTrailers) {
  RequestReader r(small_limits());
  const std::string req = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: y\r\n\r\n";
  ASSERT_EQ(feed_both_ways(req, r), State::kReady);
  const ParsedRequest p = r.take();
  EXPECT_EQ(p.body, "hello!");
  EXPECT_TRUE(p.chunked);
}

TEST(RequestReader, WaitsForMoreBytesWithoutAnError) {
  RequestReader r(small_limits());
  EXPECT_EQ(r.feed("\r\n"), State::kIdle);  // blank lines before a request are allowed
  EXPECT_EQ(r.feed("GET / HT"), State::kHead);
  EXPECT_EQ(r.feed("TP/1.1\r\nContent-Length: 3\r\n\r\nab"), State::kBody);
  EXPECT_EQ(r.feed("c"), State::kReady);
}

TEST(RequestReader, ClientMistakesGetTheirOwnStatus) {
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n"), 400);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"), 400);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);  // smuggling
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 400);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX"), 400);
  EXPECT_EQ(error_status("GET / HTTP/2.0\r\n\r\n"), 400);
  EXPECT_EQ(error_status("GET / HTTP/!.1\r\n\r\n"), 400);
  EXPECT_EQ(error_status("GET /\r\n\r\n"), 400);
  EXPECT_EQ(error_status("G(T / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(error_status("GET /models/\xff\xfe HTTP/1.1\r\n\r\n"), 400);  // once a 500: the id went into a JSON reply
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nExpect: something\r\n\r\n"), 417);
}

TEST(RequestReader, SizeLimitsAnswer413To431) {
  EXPECT_EQ(error_status("GET /" + std::string(200, 'a') + " HTTP/1.1\r\n\r\n"), 414);
  EXPECT_EQ(error_status("GET /" + std::string(5000, 'a')), 414);  // no line end yet: refused without waiting for it
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 11; ++i) many += "H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(error_status(many + "\r\n"), 431);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nA: " + std::string(2000, 'v')), 431);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nContent-Length: 65\r\n\r\n"), 413);  // before any body byte
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nContent-Length: 99999999999999999\r\n\r\n"), 413);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + std::string(64, 'x') + "\r\n1\r\n"), 413);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n"), 413);
}

TEST(RequestReader, ExpectContinueIsAskedForOnce) {
  RequestReader r(small_limits());
  r.feed("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
  EXPECT_TRUE(r.wants_continue());
  r.continue_sent();
  EXPECT_FALSE(r.wants_continue());
  EXPECT_EQ(r.feed("ok"), State::kReady);
}

TEST(JsonDepth, RefusesPastTheLimitBeforeBuildingIt) {
  const auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  EXPECT_NO_THROW(areal::text::parse_json_bounded(nested(areal::text::kMaxJsonDepth)));
  EXPECT_THROW(areal::text::parse_json_bounded(nested(areal::text::kMaxJsonDepth + 1)), areal::text::JsonTooDeep);
  // What once overflowed the stack: 100k levels of arrays, and of objects.
  EXPECT_THROW(areal::text::parse_json_bounded(nested(100000)), areal::text::JsonTooDeep);
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EXPECT_THROW(areal::text::parse_json_bounded<nlohmann::ordered_json>(objects), areal::text::JsonTooDeep);
  EXPECT_TRUE(areal::text::parse_json_bounded_or_discarded(nested(100000)).is_discarded());
  EXPECT_TRUE(areal::text::parse_json_bounded_or_discarded("{not json").is_discarded());
}

nlohmann::json nested_items(size_t depth) {
  nlohmann::json s = {{"type", "string"}};
  for (size_t i = 0; i < depth; ++i) s = {{"type", "array"}, {"items", s}};
  return s;
}

TEST(SchemaLimits, DeepOrHugeSchemasAreRefusedWithAClearError) {
  using areal::structured_output::Schema;
  EXPECT_NO_THROW(Schema::compile(nested_items(60)));
  try {
    Schema::compile(nested_items(120));
    FAIL() << "a schema 120 levels deep compiled";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("deeper than 64"), std::string::npos) << e.what();
  }
  nlohmann::json wide = {{"type", "object"}, {"properties", nlohmann::json::object()}};
  for (int i = 0; i < 20001; ++i) wide["properties"]["p" + std::to_string(i)] = {{"type", "integer"}};
  try {
    Schema::compile(wide);
    FAIL() << "a schema of 20001 nodes compiled";
  } catch (const areal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 20000"), std::string::npos) << e.what();
  }
}

}  // namespace
