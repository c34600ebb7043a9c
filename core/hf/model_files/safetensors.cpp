#include "core/hf/model_files/safetensors.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/plugin_host/error.hpp"

namespace areal::model {
namespace {

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw Error(AREAL_CODE_INVALID_ARGUMENT, path + ": " + why);
}

constexpr uint64_t kMaxHeader = 100u << 20;  // safetensors' own limit

}  // namespace

DType dtype_from_name(const std::string& n) {
  if (n == "F32") return DType::kF32;
  if (n == "F16") return DType::kF16;
  if (n == "BF16") return DType::kBF16;
  if (n == "F64") return DType::kF64;
  if (n == "I64") return DType::kI64;
  if (n == "I32") return DType::kI32;
  if (n == "I16") return DType::kI16;
  if (n == "I8") return DType::kI8;
  if (n == "U8") return DType::kU8;
  if (n == "BOOL") return DType::kBool;
  throw Error(AREAL_CODE_INVALID_ARGUMENT, "unsupported safetensors dtype '" + n + "'");
}

std::string dtype_name(DType d) {
  switch (d) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF64: return "F64";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kI16: return "I16";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
  }
  return "?";
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16: return 2;
    default: return 1;
  }
}

size_t TensorInfo::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

namespace {

// The bytes a shape of `dt` holds; false when a dimension is negative or the
// product overflows (a header could otherwise wrap a huge shape to its bytes).
bool shape_bytes(const std::vector<int64_t>& shape, DType dt, size_t& out) {
  size_t n = dtype_size(dt);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, static_cast<size_t>(d), &n)) return false;
  out = n;
  return true;
}

}  // namespace

SafetensorsFile SafetensorsFile::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(AREAL_CODE_NOT_FOUND, path + ": cannot read");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8) bad(path, "too short to be a safetensors file");
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > kMaxHeader || n > size - 8) bad(path, "header length " + std::to_string(n) + " is larger than the file or the 100 MiB limit");
  SafetensorsFile f;
  f.header_.resize(n);
  in.read(f.header_.data(), static_cast<std::streamsize>(n));
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(f.header_);
  } catch (const nlohmann::json::exception& e) {
    bad(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!h.is_object()) bad(path, "header must be a JSON object");
  const uint64_t data_size = size - 8 - n;
  f.data_.resize(data_size);
  in.read(reinterpret_cast<char*>(f.data_.data()), static_cast<std::streamsize>(data_size));
  if (!in) bad(path, "truncated data section");
  for (const auto& [name, v] : h.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) bad(path, "__metadata__ must be an object");
      for (const auto& [k, x] : v.items())
        if (!x.is_string()) bad(path, "__metadata__." + k + " must be a string");
      f.metadata_ = v;
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      bad(path, "tensor '" + name + "' needs dtype, shape and data_offsets");
    TensorInfo t;
    t.name = name;
    try {
      t.dtype = dtype_from_name(v["dtype"].get<std::string>());
      t.shape = v["shape"].get<std::vector<int64_t>>();
      const auto offs = v["data_offsets"].get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > data_size)
        bad(path, "tensor '" + name + "' has data_offsets outside the data section");
      t.offset = offs[0];
      t.bytes = offs[1] - offs[0];
    } catch (const nlohmann::json::exception& e) {
      bad(path, "tensor '" + name + "': " + e.what());
    } catch (const Error& e) {
      if (std::string(e.what()).rfind(path, 0) == 0) throw;
      bad(path, "tensor '" + name + "': " + e.what());
    }
    for (int64_t d : t.shape)
      if (d < 0) bad(path, "tensor '" + name + "' has a negative dimension");
    size_t need = 0;
    if (!shape_bytes(t.shape, t.dtype, need)) bad(path, "tensor '" + name + "' has a shape whose size overflows");
    if (need != t.bytes)
      bad(path, "tensor '" + name + "' has " + std::to_string(t.bytes) + " bytes but its shape and dtype need " + std::to_string(need));
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.offset < b.offset; });
  size_t cursor = 0;
  for (const auto& t : f.tensors_) {  // contiguous, no overlap, no holes (the format requires it)
    if (t.offset != cursor) bad(path, "tensor '" + t.name + "' does not start where the previous one ends (overlap or gap)");
    cursor += t.bytes;
  }
  if (cursor != data_size) bad(path, "the data section has " + std::to_string(data_size - cursor) + " bytes no tensor owns");
  return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

namespace {

void write_file(const std::string& path, const std::string& header, const std::vector<uint8_t>& data) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(AREAL_CODE_UNAVAILABLE, path + ": cannot write");
  unsigned char len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) throw Error(AREAL_CODE_UNAVAILABLE, path + ": write failed");
}

}  // namespace

void SafetensorsFile::save(const std::string& path) const { write_file(path, header_, data_); }

SafetensorsWriter::SafetensorsWriter(nlohmann::json metadata) : metadata_(std::move(metadata)) {}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t bytes) {
  TensorInfo t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.offset = data_.size();
  t.bytes = bytes;
  size_t need = 0;
  if (!shape_bytes(t.shape, dtype, need) || need != bytes) throw Error(AREAL_CODE_INTERNAL, "safetensors writer: '" + name + "' size mismatch");
  for (const auto& x : tensors_)
    if (x.name == name) throw Error(AREAL_CODE_ALREADY_EXISTS, "safetensors writer: duplicate tensor '" + name + "'");
  const auto* p = static_cast<const uint8_t*>(data);
  data_.insert(data_.end(), p, p + bytes);
  tensors_.push_back(std::move(t));
}

void SafetensorsWriter::save(const std::string& path) const {
  // nlohmann::json (std::map) orders keys; "__metadata__" sorts before
  // lower-case tensor names, as HF's writer puts it first.
  nlohmann::json h = nlohmann::json::object();
  h["__metadata__"] = metadata_;
  for (const auto& t : tensors_)
    h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {t.offset, t.offset + t.bytes}}};
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  write_file(path, header, data_);
}

Checkpoint Checkpoint::load(const std::string& dir) {
  namespace fs = std::filesystem;
  Checkpoint c;
  c.dir_ = dir;
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::exists(index)) {
    nlohmann::json j;
    try {
      std::ifstream in(index);
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      bad(index.string(), std::string("not valid JSON: ") + e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) bad(index.string(), "has no weight_map");
    std::map<std::string, size_t> shard_index;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      const std::string file = shard.get<std::string>();
      if (!shard_index.count(file)) {
        shard_index[file] = c.files_.size();
        c.files_.push_back(SafetensorsFile::load((fs::path(dir) / file).string()));
      }
      if (!c.files_[shard_index[file]].find(name)) bad(index.string(), "maps '" + name + "' to " + file + ", which does not contain it");
      c.file_of_[name] = shard_index[file];
    }
  } else if (fs::exists(single)) {
    c.files_.push_back(SafetensorsFile::load(single.string()));
    for (const auto& t : c.files_[0].tensors()) c.file_of_[t.name] = 0;
  } else {
    throw Error(AREAL_CODE_NOT_FOUND, dir + ": no model.safetensors or model.safetensors.index.json");
  }
  return c;
}

const TensorInfo& Checkpoint::tensor(const std::string& name) const {
  auto it = file_of_.find(name);
  if (it == file_of_.end()) throw Error(AREAL_CODE_NOT_FOUND, dir_ + ": the checkpoint has no tensor '" + name + "'");
  return *files_[it->second].find(name);
}

const uint8_t* Checkpoint::data(const std::string& name) const {
  const TensorInfo& t = tensor(name);
  return files_[file_of_.at(name)].data(t);
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : file_of_) out.push_back(n);
  return out;
}

uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu)) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFFu;
  if (((x >> 23) & 0xFF) == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FFu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) out = sign;
    else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      out = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3FFu) << 13);
    }
  } else if (exp == 31) {
    out = sign | 0x7F800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
}

}  // namespace areal::model
