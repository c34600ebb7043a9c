// Random text from the OS CSPRNG (getrandom): session keys, API key
// secrets, job and link tokens, tool-call and request ids. One place, so
// every secret is drawn the same way and none from a seeded PRNG.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace areal::text {

// `n` characters, each uniform over `alphabet` (no modulo bias). Throws
// areal::Error INVALID_ARGUMENT for an alphabet of 0 or more than 256
// characters, INTERNAL if the OS cannot supply randomness.
std::string random_text(size_t n, std::string_view alphabet);

// `n` lowercase hex digits (4 bits each).
std::string random_hex(size_t n);

}  // namespace areal::text
