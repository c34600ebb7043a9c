// The vllm plugin's launcher key: which control routes and reload call it uses.
#include <string>
#include <stdexcept>

#include <gtest/gtest.h>

#include "vllm_protocol.hpp"

namespace {

using areal::remote::VLLMLauncher;
using areal::remote::VLLMRoutes;

TEST(VLLMRoutes, AReaLsLauncherIsTheDefault) {
  const VLLMRoutes r = VLLMRoutes::from_config(nlohmann::json::object());
  EXPECT_EQ(r.launcher, VLLMLauncher::kAReaL);
  EXPECT_EQ(r.pause, "/areal_pause_generation");
  EXPECT_EQ(r.resume, "/areal_continue_generation");
  EXPECT_EQ(r.update_weights, "/areal_update_weights");
}

TEST(VLLMRoutes, StockUsesDevModeRoutesAndEmptyPathsKeepThem) {
  // Schema defaults arrive as empty strings.
  const VLLMRoutes r = VLLMRoutes::from_config({{"launcher", "stock"}, {"pause_path", ""}, {"resume_path", ""}, {"update_weights_path", ""}});
  EXPECT_EQ(r.launcher, VLLMLauncher::kStock);
  EXPECT_EQ(r.pause, "/pause?mode=abort");
  EXPECT_EQ(r.resume, "/resume");
  EXPECT_EQ(r.update_weights, "/collective_rpc");
}

TEST(VLLMRoutes, AnExplicitPathOverridesTheLaunchersRoute) {
  const VLLMRoutes r = VLLMRoutes::from_config({{"launcher", "stock"}, {"pause_path", "/pause?mode=keep"}});
  EXPECT_EQ(r.pause, "/pause?mode=keep");
  EXPECT_EQ(r.resume, "/resume");
}

TEST(VLLMRoutes, AnUnknownLauncherIsAClearError) {
  try {
    VLLMRoutes::from_config({{"launcher", "sglang"}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("launcher must be"), std::string::npos) << e.what();
  }
}

}  // namespace
