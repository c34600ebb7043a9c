#include "core/recorder/expert_routing.hpp"

#include <cstring>

#include "core/plugin_host/error.hpp"
#include "core/text/base64.hpp"

namespace areal::recorder {
namespace {

bool narrow(const ExpertRouting& r) { return r.num_experts < 255; }

}  // namespace

void check_routing(const ExpertRouting& r, const std::string& where) {
  if (r.experts.empty()) return;
  if (r.per_position() == 0 || r.experts.size() % r.per_position() != 0)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": " + std::to_string(r.experts.size()) + " experts do not fill positions x " +
                                                 std::to_string(r.moe_layers) + " layers x top-" + std::to_string(r.top_k));
  for (const uint16_t e : r.experts)
    if (e != ExpertRouting::kNotRecorded && e >= r.num_experts)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": expert " + std::to_string(e) + " of a model with " + std::to_string(r.num_experts));
}

ExpertRouting copy_routing(const areal_routing& v) {
  if (v.struct_size < AREAL_OFFSET_OF_END(areal_routing, experts))
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "routing: struct_size " + std::to_string(v.struct_size) + " is too small");
  ExpertRouting r;
  r.moe_layers = v.moe_layers;
  r.top_k = v.top_k;
  r.num_experts = v.num_experts;
  const size_t n = v.positions * r.per_position();
  if (n > 0 && v.experts == nullptr) throw Error(AREAL_CODE_INVALID_ARGUMENT, "routing: experts is NULL");
  if (n > 0) r.experts.assign(v.experts, v.experts + n);
  check_routing(r, "routing");
  return r;
}

areal_routing routing_view(const ExpertRouting& r) {
  areal_routing v{};
  v.struct_size = AREAL_OFFSET_OF_END(areal_routing, experts);
  v.moe_layers = r.moe_layers;
  v.top_k = r.top_k;
  v.num_experts = r.num_experts;
  v.positions = r.positions();
  v.experts = r.experts.data();
  return v;
}

std::string routing_blob(const ExpertRouting& r) {
  if (r.empty()) return {};
  const uint32_t head[3] = {r.moe_layers, r.top_k, r.num_experts};
  std::string out(sizeof head + r.experts.size() * sizeof(uint16_t), '\0');
  std::memcpy(out.data(), head, sizeof head);
  std::memcpy(out.data() + sizeof head, r.experts.data(), r.experts.size() * sizeof(uint16_t));
  return out;
}

ExpertRouting routing_from_blob(std::string_view blob) {
  ExpertRouting r;
  if (blob.empty()) return r;
  uint32_t head[3];
  if (blob.size() < sizeof head || (blob.size() - sizeof head) % sizeof(uint16_t) != 0)
    throw Error(AREAL_CODE_INVALID_ARGUMENT, "routing blob of " + std::to_string(blob.size()) + " bytes");
  std::memcpy(head, blob.data(), sizeof head);
  r.moe_layers = head[0], r.top_k = head[1], r.num_experts = head[2];
  r.experts.resize((blob.size() - sizeof head) / sizeof(uint16_t));
  std::memcpy(r.experts.data(), blob.data() + sizeof head, r.experts.size() * sizeof(uint16_t));
  check_routing(r, "routing blob");
  return r;
}

nlohmann::ordered_json routing_json(const ExpertRouting& r) {
  std::string bytes;
  if (narrow(r)) {
    bytes.resize(r.experts.size());
    for (size_t i = 0; i < r.experts.size(); ++i)
      bytes[i] = static_cast<char>(r.experts[i] == ExpertRouting::kNotRecorded ? 255 : r.experts[i]);
  } else {
    bytes.assign(reinterpret_cast<const char*>(r.experts.data()), r.experts.size() * sizeof(uint16_t));
  }
  return {{"moe_layers", r.moe_layers}, {"top_k", r.top_k},      {"num_experts", r.num_experts},
          {"positions", r.positions()}, {"dtype", narrow(r) ? "uint8" : "uint16"}, {"data", text::base64_encode(bytes)}};
}

ExpertRouting routing_from_json(const nlohmann::json& j) {
  const std::string where = "routed_experts";
  if (!j.is_object()) throw Error(AREAL_CODE_INVALID_ARGUMENT, where + " must be an object");
  ExpertRouting r;
  try {
    r.moe_layers = j.at("moe_layers").get<uint32_t>();
    r.top_k = j.at("top_k").get<uint32_t>();
    r.num_experts = j.at("num_experts").get<uint32_t>();
    const size_t positions = j.at("positions").get<size_t>();
    const std::string dtype = j.at("dtype").get<std::string>();
    const std::string bytes = text::base64_decode(j.at("data").get<std::string>());
    if (dtype != (narrow(r) ? "uint8" : "uint16"))
      throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": dtype '" + dtype + "' for " + std::to_string(r.num_experts) + " experts");
    const size_t width = narrow(r) ? 1 : 2;
    if (bytes.size() != positions * r.per_position() * width)
      throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": " + std::to_string(bytes.size()) + " bytes for " + std::to_string(positions) + " positions");
    r.experts.resize(positions * r.per_position());
    if (width == 2) {
      std::memcpy(r.experts.data(), bytes.data(), bytes.size());
    } else {
      for (size_t i = 0; i < bytes.size(); ++i) {
        const auto b = static_cast<uint8_t>(bytes[i]);
        r.experts[i] = b == 255 ? ExpertRouting::kNotRecorded : b;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(AREAL_CODE_INVALID_ARGUMENT, where + ": " + e.what());
  }
  check_routing(r, where);
  return r;
}

}  // namespace areal::recorder
