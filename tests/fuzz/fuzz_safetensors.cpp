// Fuzz target: safetensors files (the 8-byte header length, the JSON
// header, offsets into the data). The input is written as a file and
// loaded; a bad file must be an areal::Error, never a read out of bounds.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/hf/model_files/safetensors.hpp"
#include "core/plugin_host/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/areal-fuzz-" + std::to_string(::getpid()) + ".safetensors";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  try {
    const auto file = areal::model::SafetensorsFile::load(path);
    for (const auto& t : file.tensors())
      if (t.bytes > 0) (void)file.data(t)[t.bytes - 1];  // every tensor's bytes lie inside the file
  } catch (const areal::Error&) {
  }
  return 0;
}
