// Hugging Face safetensors files, without libtorch.
//
// Format: 8-byte little-endian header length N, N bytes of JSON header
// ({"__metadata__": {...}, "<name>": {"dtype", "shape", "data_offsets"}}),
// then the tensor bytes. Loading validates everything a corrupt or
// truncated file could get wrong and names the file and tensor in errors.
// A loaded file keeps its header bytes, so saving it back is byte-identical.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace areal::model {

enum class DType { kF32, kF16, kBF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool };

DType dtype_from_name(const std::string& name);  // "F32", "BF16", ...; throws INVALID_ARGUMENT
std::string dtype_name(DType d);
size_t dtype_size(DType d);

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  size_t offset = 0;  // into the data section
  size_t bytes = 0;
  size_t numel() const;
};

class SafetensorsFile {
 public:
  // Throws areal::Error (NOT_FOUND / INVALID_ARGUMENT) naming the file.
  static SafetensorsFile load(const std::string& path);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in data order
  const TensorInfo* find(const std::string& name) const;
  const uint8_t* data(const TensorInfo& t) const { return data_.data() + t.offset; }
  const nlohmann::json& metadata() const { return metadata_; }

  // Writes the file as loaded: same header bytes, same data.
  void save(const std::string& path) const;

 private:
  std::string header_;  // raw JSON header bytes, padding included
  std::vector<uint8_t> data_;
  std::vector<TensorInfo> tensors_;
  nlohmann::json metadata_;
};

// Builds a new file: tensors are laid out in insertion order, the header has
// "__metadata__" first, then tensors by name, padded with spaces to 8 bytes.
class SafetensorsWriter {
 public:
  explicit SafetensorsWriter(nlohmann::json metadata = {{"format", "pt"}});
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t bytes);
  size_t data_bytes() const { return data_.size(); }
  void save(const std::string& path) const;

 private:
  nlohmann::json metadata_;
  std::vector<TensorInfo> tensors_;
  std::vector<uint8_t> data_;
};

// A (possibly sharded) checkpoint folder: model.safetensors, or
// model.safetensors.index.json with its weight_map and the shards.
class Checkpoint {
 public:
  static Checkpoint load(const std::string& dir);
  const TensorInfo& tensor(const std::string& name) const;  // NOT_FOUND names the folder
  const uint8_t* data(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t shard_count() const { return files_.size(); }

 private:
  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> file_of_;  // tensor -> index in files_
};

// float <-> bfloat16 / float16 (round to nearest even).
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);

}  // namespace areal::model
