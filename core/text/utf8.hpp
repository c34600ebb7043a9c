// UTF-8 well-formedness (RFC 3629): the one check every text boundary uses
// (HTTP bodies, YAML configs, the tokenizer's input).
#pragma once

#include <cstddef>
#include <string_view>

namespace areal::text {

// Offset of the first byte that does not start a well-formed UTF-8 sequence
// (overlong forms, surrogates and code points past U+10FFFF included), or
// std::string_view::npos when all of `s` is well formed.
size_t first_invalid_utf8(std::string_view s);

}  // namespace areal::text
