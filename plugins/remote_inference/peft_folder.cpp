#include "peft_folder.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include <dlpack/dlpack.h>

#include "areal/sdk.hpp"
#include "core/hf/model_files/safetensors.hpp"

namespace areal::remote {

namespace fs = std::filesystem;
namespace sdk = areal::sdk;
using model::DType;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

DType float_dtype(const DLDataType& t, const std::string& what) {
  if (t.lanes == 1 && t.code == kDLFloat && t.bits == 32) return DType::kF32;
  if (t.lanes == 1 && t.code == kDLFloat && t.bits == 16) return DType::kF16;
  if (t.lanes == 1 && t.code == kDLFloat && t.bits == 64) return DType::kF64;
  if (t.lanes == 1 && t.code == kDLBfloat && t.bits == 16) return DType::kBF16;
  throw sdk::invalid_argument(what + " is not a float tensor (float16, bfloat16, float32 or float64)");
}

}  // namespace

void write_peft_folder(const std::string& dir, const nlohmann::json& config, const areal_tensor_map& tensors) {
  if (!config.is_object()) throw sdk::invalid_argument("load_adapter: 'config' must be an object of PEFT's adapter_config.json fields");
  if (tensors.count == 0) throw sdk::invalid_argument("load_adapter: no tensors were given with 'config'");
  model::SafetensorsWriter writer;
  for (size_t i = 0; i < tensors.count; ++i) {
    const std::string name(sdk::view(tensors.names[i]));
    const std::string what = "load_adapter: tensor '" + name + "'";
    if (!ends_with(name, ".lora_A.weight") && !ends_with(name, ".lora_B.weight"))
      throw sdk::invalid_argument(what + " is not a LoRA weight (PEFT's names end in .lora_A.weight or .lora_B.weight)");
    const DLTensor& t = *tensors.tensors[i];
    if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost)
      throw sdk::invalid_argument(what + " is not in CPU memory (this plugin writes adapters to disk for its servers)");
    if (t.ndim != 2 || t.shape[0] <= 0 || t.shape[1] <= 0) throw sdk::invalid_argument(what + " must be 2-D and non-empty");
    const DType dtype = float_dtype(t.dtype, what);
    if (t.strides != nullptr && !(t.strides[1] == 1 && t.strides[0] == t.shape[1]))
      throw sdk::invalid_argument(what + " is not contiguous (row-major)");
    const size_t bytes = static_cast<size_t>(t.shape[0] * t.shape[1]) * model::dtype_size(dtype);
    writer.add(name, dtype, {t.shape[0], t.shape[1]}, static_cast<const uint8_t*>(t.data) + t.byte_offset, bytes);
  }
  nlohmann::json cfg = config;
  if (!cfg.contains("peft_type")) cfg["peft_type"] = "LORA";
  // Written beside the target, then renamed: a server never reads half a folder.
  const fs::path target(dir), partial(dir + ".partial");
  fs::remove_all(partial);
  fs::create_directories(partial);
  try {
    writer.save((partial / "adapter_model.safetensors").string());
    std::ofstream out(partial / "adapter_config.json");
    out << cfg.dump(2) << "\n";
    if (!out.flush()) throw sdk::unavailable("load_adapter: cannot write " + (partial / "adapter_config.json").string());
  } catch (...) {
    fs::remove_all(partial);
    throw;
  }
  fs::remove_all(target);
  fs::rename(partial, target);
}

}  // namespace areal::remote
