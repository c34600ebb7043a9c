// The C++ SDK's boundary behaviour, exercised in-process through the host
// table: exceptions become statuses with the right code, writers collect.
#include <cstdint>
#include <stdexcept>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/host_api.hpp"
#include "areal/sdk.hpp"

namespace {
struct SetHost {
  SetHost() { areal::sdk::detail::host_slot() = areal::host_api(); }
} set_host;
}  // namespace

TEST(SdkGuard, ConvertsEveryExceptionIntoAStatus) {
  namespace sdk = areal::sdk;
  EXPECT_EQ(sdk::guard([] {}), nullptr);
  areal::StatusPtr a(sdk::guard([] { throw sdk::invalid_argument("bad input"); }));
  EXPECT_EQ(areal::status_code(a.get()), AREAL_CODE_INVALID_ARGUMENT);
  EXPECT_EQ(areal::status_message(a.get()), "bad input");
  areal::StatusPtr b(sdk::guard([] { throw std::out_of_range("idx"); }));
  EXPECT_EQ(areal::status_code(b.get()), AREAL_CODE_INTERNAL);
  EXPECT_EQ(areal::status_message(b.get()), "idx");
  areal::StatusPtr c(sdk::guard([] { throw 42; }));
  EXPECT_EQ(areal::status_code(c.get()), AREAL_CODE_INTERNAL);
  // NULL (success): code OK and an empty message that is still a C string, as abi.h promises.
  const areal_str none = areal::host_api()->status_message(nullptr);
  ASSERT_NE(none.data, nullptr);
  EXPECT_EQ(none.size, 0u);
  EXPECT_EQ(none.data[0], '\0');
}

TEST(SdkGuard, ThrowIfErrorTakesOwnershipAndRethrows) {
  namespace sdk = areal::sdk;
  try {
    sdk::throw_if_error(areal::make_status(AREAL_CODE_NOT_FOUND, "gone"));
    FAIL();
  } catch (const sdk::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_NOT_FOUND);
    EXPECT_STREQ(e.what(), "gone");
  }
}

TEST(SdkWriter, CollectsChunks) {
  areal::sdk::StringWriter w;
  areal::sdk::write(w.get(), "hello ");
  areal::sdk::write(w.get(), "world");
  EXPECT_EQ(w.text(), "hello world");
}

TEST(HostApi, StatusWithCodeOkIsRecordedAsABug) {
  const areal_host_api* h = areal::host_api();
  areal_status* s = h->status_new(AREAL_CODE_OK, areal_str{"x", 1});
  EXPECT_EQ(h->status_code(s), AREAL_CODE_INTERNAL);
  h->status_free(s);
  h->status_free(nullptr);
  EXPECT_EQ(h->status_code(nullptr), AREAL_CODE_OK);
}

TEST(HostApi, AllocHonoursAlignmentAndConfigGetReadsDottedKeys) {
  const areal_host_api* h = areal::host_api();
  void* p = h->alloc(100, 64);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  h->free(p);
  EXPECT_EQ(h->alloc(0, 0), nullptr);
  EXPECT_EQ(h->alloc(8, 3), nullptr);  // not a power of two
  areal::set_effective_config(nlohmann::json::parse(R"({"experiment": {"name": "exp1"}})"));
  areal::sdk::StringWriter w;
  EXPECT_EQ(h->config_get(areal_str{"experiment.name", 15}, w.get()), nullptr);
  EXPECT_EQ(w.text(), "\"exp1\"");
  areal::StatusPtr missing(h->config_get(areal_str{"nope", 4}, w.get()));
  EXPECT_EQ(areal::status_code(missing.get()), AREAL_CODE_NOT_FOUND);
}
