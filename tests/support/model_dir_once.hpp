// A model folder written by init-model's code once per test process, under
// test_temp_dir(stem): the torch tests' tiny models.
#pragma once

#include <filesystem>
#include <string>

#include "core/hf/model_files/init_model.hpp"
#include "test_temp_dir.hpp"

namespace areal::testing {

inline std::string model_dir_once(const std::string& stem, areal::model::InitModelOptions options) {
  options.out_dir = test_temp_dir(stem);
  if (!std::filesystem::exists(options.out_dir + "/config.json")) areal::model::init_model(options);
  return options.out_dir;
}

}  // namespace areal::testing
