// Hugging Face folders <-> DecoderModel parameters.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plugin_host/error.hpp"
#include "core/hf/model_files/safetensors.hpp"
#include "decoder_model.hpp"
#include "tensor_file.hpp"

namespace areal::torch_model {

namespace fs = std::filesystem;

torch::Tensor tensor_from_file(const model::TensorInfo& t, const uint8_t* data, torch::Dtype dtype) {
  const std::vector<int64_t> shape(t.shape.begin(), t.shape.end());
  switch (t.dtype) {
    case model::DType::kF32: return torch::from_blob(const_cast<uint8_t*>(data), shape, torch::kFloat32).to(dtype, /*non_blocking=*/false, /*copy=*/true);
    case model::DType::kF64: return torch::from_blob(const_cast<uint8_t*>(data), shape, torch::kFloat64).to(dtype, false, true);
    case model::DType::kBF16: return torch::from_blob(const_cast<uint8_t*>(data), shape, torch::kBFloat16).to(dtype, false, true);
    case model::DType::kF16: return torch::from_blob(const_cast<uint8_t*>(data), shape, torch::kFloat16).to(dtype, false, true);
    default: throw Error(AREAL_CODE_INVALID_ARGUMENT, "tensor '" + t.name + "' has dtype " + model::dtype_name(t.dtype) + ", not a float type");
  }
}

namespace {

// An MXFP4 tensor (OpenAI's GPT-OSS release) as the [E, cols, rows] weight
// it stands for: `blocks` [E, rows, cols / 32, 16] bytes hold two 4-bit
// e2m1 values each (the low nibble first), `scales` [E, rows, cols / 32]
// one power-of-two exponent (bias 127) per 32 values. Every value is exact
// in bfloat16 and float32.
torch::Tensor dequantize_mxfp4(const model::Checkpoint& ck, const std::string& name, torch::Dtype dtype) {
  const model::TensorInfo &bi = ck.tensor(name + "_blocks"), &si = ck.tensor(name + "_scales");  // shapes checked by ModelConfig::check
  const torch::Tensor blocks = torch::from_blob(const_cast<uint8_t*>(ck.data(bi.name)), bi.shape, torch::kUInt8);
  const torch::Tensor scales = torch::from_blob(const_cast<uint8_t*>(ck.data(si.name)), si.shape, torch::kUInt8);
  static const std::vector<float> kE2m1 = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  static const std::vector<float> kPowers = [] {
    std::vector<float> p(256);
    for (int s = 0; s < 256; ++s) p[static_cast<size_t>(s)] = std::ldexp(1.0f, s - 127);
    return p;
  }();
  const torch::Tensor lut = torch::tensor(kE2m1), pow2 = torch::tensor(kPowers);
  const torch::Tensor low = lut.index({blocks.bitwise_and(0x0F).to(torch::kInt64)}), high = lut.index({blocks.bitwise_right_shift(4).to(torch::kInt64)});
  const int64_t E = bi.shape[0], rows = bi.shape[1], groups = bi.shape[2];
  const torch::Tensor values = torch::stack({low, high}, -1).reshape({E, rows, groups, 32}) * pow2.index({scales.to(torch::kInt64)}).unsqueeze(-1);
  return values.reshape({E, rows, groups * 32}).transpose(1, 2).to(dtype).contiguous();
}

}  // namespace

DecoderModel DecoderModel::load(const std::string& dir, torch::Dtype dtype, torch::Device device) {
  const fs::path cfg_path = fs::path(dir) / "config.json";
  std::ifstream in(cfg_path);
  if (!in) throw Error(AREAL_CODE_NOT_FOUND, cfg_path.string() + ": cannot read (is '" + dir + "' a Hugging Face model folder?)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, cfg_path.string() + ": not valid JSON: " + e.what());
  }
  model::ModelConfig config = model::ModelConfig::from_hf_json(j, cfg_path.string());
  const model::Checkpoint ck = model::Checkpoint::load(dir);
  try {
    config.check(ck);
  } catch (const Error& e) {
    throw Error(e.code(), dir + ": " + e.what());
  }
  DecoderModel m(config, dtype, device);
  for (const auto& w : config.weights()) {
    torch::Tensor t = config.mxfp4_experts && model::is_mxfp4_weight(w.name) ? dequantize_mxfp4(ck, w.name, dtype)
                                                                              : tensor_from_file(ck.tensor(w.name), ck.data(w.name), dtype);
    m.params_[w.name] = t.to(device).set_requires_grad(true);
  }
  // Dequantized: it trains and saves as an ordinary checkpoint.
  m.config_.mxfp4_experts = false;
  return m;
}

void DecoderModel::save(const std::string& dir, const std::string& file_dtype) const { save(dir, file_dtype, parameters()); }

void DecoderModel::save(const std::string& dir, const std::string& file_dtype, const std::vector<torch::Tensor>& values) const {
  const auto specs = config_.weights();
  if (values.size() != specs.size())
    throw Error(AREAL_CODE_INTERNAL, "save: " + std::to_string(values.size()) + " tensors for " + std::to_string(specs.size()) + " weights");
  model::DType dt;
  torch::Dtype td;
  if (file_dtype == "float32") dt = model::DType::kF32, td = torch::kFloat32;
  else if (file_dtype == "bfloat16") dt = model::DType::kBF16, td = torch::kBFloat16;
  else if (file_dtype == "float16") dt = model::DType::kF16, td = torch::kFloat16;
  else throw Error(AREAL_CODE_INVALID_ARGUMENT, "save dtype must be float32, bfloat16 or float16, got '" + file_dtype + "'");
  fs::create_directories(dir);
  model::SafetensorsWriter writer;
  for (size_t i = 0; i < specs.size(); ++i) {
    const torch::Tensor t = values[i].detach().to(torch::kCPU, td).contiguous();  // the writer copies it
    writer.add(specs[i].name, dt, specs[i].shape, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  }
  const std::string tmp = (fs::path(dir) / "model.safetensors.tmp").string();
  writer.save(tmp);
  fs::rename(tmp, fs::path(dir) / "model.safetensors");  // readers never see half a file
  fs::remove(fs::path(dir) / "model.safetensors.index.json");
  model::ModelConfig c = config_;
  c.torch_dtype = file_dtype;
  std::ofstream(fs::path(dir) / "config.json") << c.to_hf_json().dump(2) << "\n";
}

}  // namespace areal::torch_model
