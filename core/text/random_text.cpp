#include "core/text/random_text.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <ios>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/plugin_host/error.hpp"

namespace areal::text {

namespace {
// Fills `buf` from the OS CSPRNG: getrandom, retrying short reads and
// interrupted calls; /dev/urandom where the call is missing or filtered
// (an old kernel, a seccomp profile that refuses it).
void fill_random(std::vector<uint8_t>& buf) {
  size_t got = 0;
  while (got < buf.size()) {
    const ssize_t r = ::getrandom(buf.data() + got, buf.size() - got, 0);
    if (r >= 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    const int e = errno;
    if (e == EINTR) continue;
    if (e != ENOSYS && e != EPERM) throw Error(AREAL_CODE_INTERNAL, "getrandom failed: " + std::generic_category().message(e));
    std::ifstream urandom("/dev/urandom", std::ios::binary);
    if (!urandom.read(reinterpret_cast<char*>(buf.data() + got), static_cast<std::streamsize>(buf.size() - got)))
      throw Error(AREAL_CODE_INTERNAL, "getrandom is unavailable (" + std::generic_category().message(e) + ") and /dev/urandom cannot be read");
    return;
  }
}
}  // namespace

std::string random_text(size_t n, std::string_view alphabet) {
  if (alphabet.empty() || alphabet.size() > 256) throw Error(AREAL_CODE_INVALID_ARGUMENT, "random_text: the alphabet must have 1 to 256 characters");
  // Bytes at or above the largest multiple of the alphabet's size are drawn
  // again, so every character is equally likely.
  const unsigned k = static_cast<unsigned>(alphabet.size()), limit = 256 - 256 % k;
  std::string out;
  out.reserve(n);
  std::vector<uint8_t> buf(n + n / 2 + 8);
  while (out.size() < n) {
    fill_random(buf);
    for (const uint8_t b : buf) {
      if (out.size() == n) break;
      if (b < limit) out.push_back(alphabet[b % k]);
    }
  }
  return out;
}

std::string random_hex(size_t n) { return random_text(n, "0123456789abcdef"); }

}  // namespace areal::text
