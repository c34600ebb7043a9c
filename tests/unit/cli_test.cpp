#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/plugin_host/error.hpp"
#include "cli.hpp"

namespace {
areal::host::CommandLine parse(std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("areal-host")};
  for (auto& a : args) argv.push_back(a.data());
  return areal::host::parse_command_line(static_cast<int>(argv.size()), argv.data());
}
}  // namespace

TEST(Cli, ConfigAloneMeansRunAndKeyValueWordsAreOverrides) {
  auto cl = parse({"--config", "configs/x.yaml", "gateway.port=9000", "rollout.output=out/r.jsonl"});
  EXPECT_EQ(cl.command, "run");
  EXPECT_EQ(cl.flags["config"], "configs/x.yaml");
  EXPECT_EQ(cl.overrides, (std::vector<std::string>{"gateway.port=9000", "rollout.output=out/r.jsonl"}));
}

TEST(Cli, SubcommandsTakePositionalArgumentsAndJsonFlags) {
  auto cl = parse({"conformance", "./build/libareal-x.so", "--config", "{\"a\": 1}"});
  EXPECT_EQ(cl.command, "conformance");
  EXPECT_EQ(cl.positional, std::vector<std::string>{"./build/libareal-x.so"});
  EXPECT_EQ(cl.flags["config"], "{\"a\": 1}");
  EXPECT_EQ(parse({"plugins", "--json"}).flags.count("json"), 1u);
  EXPECT_THROW(parse({"conformance", "x", "--config"}), areal::Error);
}
