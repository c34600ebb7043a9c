#include "areal/core/gateway_control.hpp"

#include "areal/core/error.hpp"
#include "areal/core/string_writer.hpp"

namespace areal {

nlohmann::json call_gateway_control(const areal_gateway_vtable& gateway, void* self, const nlohmann::json& request) {
  if (gateway.control == nullptr) throw Error(AREAL_CODE_UNSUPPORTED, "the gateway has no control slot (ABI 1.1)");
  const std::string text = request.dump();
  StringCollector out;
  throw_if_status(gateway.control(self, areal_str{text.data(), text.size()}, out.writer()), "gateway control");
  return nlohmann::json::parse(out.text.empty() ? "{}" : out.text);
}

}  // namespace areal
