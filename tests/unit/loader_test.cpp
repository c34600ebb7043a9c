// The loader against real shared libraries: the in-tree plugins load, each
// negative fixture is refused with its specific reason, never a crash.
#include <cstdlib>
#include <string>
#include <vector>
#include <cstdio>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "core/plugin_host/plugin_catalog.hpp"
#include "core/plugin_host/plugin_instance.hpp"
#include "gateway_builtin.h"

namespace {

std::string fixture(const std::string& name) { return std::string(AREAL_TEST_FIXTURE_DIR) + "/libareal-" + name + ".so"; }

std::string refusal(const std::string& path) {
  try {
    areal::PluginLoader::load_file(path);
  } catch (const areal::Error& e) {
    return e.what();
  }
  return "<loaded>";
}

}  // namespace

TEST(Loader, LoadsAnInTreePluginAndValidatesItsInfo) {
  auto p = areal::PluginLoader::load_file(std::string(AREAL_TEST_PLUGIN_DIR) + "/libareal-mock_inference.so");
  EXPECT_EQ(p->name(), "mock_inference");
  EXPECT_EQ(p->kind(), AREAL_KIND_INFERENCE);
  EXPECT_EQ(p->abi_version(), std::to_string(AREAL_ABI_MAJOR) + "." + std::to_string(AREAL_ABI_MINOR));
  ASSERT_NE(p->inference(), nullptr);
  EXPECT_EQ(p->workflow(), nullptr);
  // Loading the same file again gives the same object: init runs once.
  EXPECT_EQ(areal::PluginLoader::load_file(std::string(AREAL_TEST_PLUGIN_DIR) + "/../plugins/libareal-mock_inference.so"), p);
}

TEST(Loader, RefusesEachBrokenPluginWithItsReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"fixture_abi_mismatch", "plugin was built for ABI 2.0 but this host speaks ABI " AREAL_SDK_STRINGIFY(AREAL_ABI_MAJOR) "." AREAL_SDK_STRINGIFY(AREAL_ABI_MINOR)},
      {"fixture_no_entry", "no exported symbol 'areal_plugin_init'"},
      {"fixture_short_struct", "areal_plugin_info.struct_size is 12"},
      {"fixture_init_fail", "areal_plugin_init failed: no GPU visible (fixture)"},
      {"fixture_null_slot", "required slot workflow.run_episode is NULL"},
      {"fixture_name_mismatch", "plugin declares name 'some_other_name'"},
      {"fixture_throws", "threw a C++ exception across the C ABI: boom from a careless plugin"},
  };
  for (const auto& [name, reason] : cases) {
    const std::string msg = refusal(fixture(name));
    EXPECT_EQ(msg.rfind(fixture(name) + ": ", 0), 0u) << "message must start with the path: " << msg;
    EXPECT_NE(msg.find(reason), std::string::npos) << name << ": " << msg;
  }
  EXPECT_NE(refusal("/nonexistent/libareal-x.so").find("no such file"), std::string::npos);
}

// A plugin of a later minor loads; the host's copy of its table, which other
// plugins are handed, says only what the host holds (its struct_size had
// promised slots past the host's struct).
TEST(Loader, ALaterMinorsTableIsCutToWhatTheHostHolds) {
  auto p = areal::PluginLoader::load_file(fixture("fixture_future_minor"));
  ASSERT_NE(p->workflow(), nullptr);
  EXPECT_LE(p->workflow()->struct_size, sizeof(areal_workflow_vtable));
  EXPECT_GE(p->workflow()->struct_size, AREAL_OFFSET_OF_END(areal_workflow_vtable, run_episode));
  EXPECT_NE(p->workflow()->run_episode, nullptr);
}

TEST(Loader, RefusesAFileThatIsNotASharedLibrary) {
  const std::string path = std::string(::testing::TempDir()) + "/libareal-garbage.so";
  FILE* f = fopen(path.c_str(), "w");
  fputs("not an ELF file", f);
  fclose(f);
  EXPECT_NE(refusal(path).find("cannot load shared library"), std::string::npos) << refusal(path);
}

TEST(Loader, BuiltInGatewayPassesTheSameValidation) {
  areal::register_builtin("gateway", &areal_builtin_gateway_init);
  auto p = areal::load_builtin("gateway");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->builtin());
  EXPECT_EQ(p->kind(), AREAL_KIND_GATEWAY);
  EXPECT_EQ(areal::load_builtin("nope"), nullptr);
}

TEST(Catalog, ResolvesNamesInSearchDirsAndExplainsMisses) {
  areal::PluginCatalog catalog({AREAL_TEST_PLUGIN_DIR});
  EXPECT_EQ(catalog.resolve("token_match", AREAL_KIND_WORKFLOW)->name(), "token_match");
  try {
    catalog.resolve("tokenmatch");
    FAIL() << "resolved a missing plugin";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("did you mean 'token_match'?"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(AREAL_TEST_PLUGIN_DIR), std::string::npos) << "must list where it looked: " << e.what();
  }
  EXPECT_THROW(catalog.resolve("token_match", AREAL_KIND_INFERENCE), areal::Error);
}

TEST(Instance, CreateFailureCarriesThePluginsMessage) {
  auto p = areal::PluginLoader::load_file(fixture("fixture_create_throws"));
  std::string name = "workflow";
  areal_services s = areal::make_services(name);
  try {
    areal::PluginInstance inst(p, "{}", &s);
    FAIL() << "create succeeded";
  } catch (const areal::Error& e) {
    EXPECT_EQ(e.code(), AREAL_CODE_INTERNAL);
    EXPECT_EQ(std::string(e.what()), "workflow (fixture_create_throws): constructor exploded (fixture)");
  }
}
