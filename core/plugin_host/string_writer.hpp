// A host-side areal_writer that collects what a plugin writes.
#pragma once

#include <string>

#include "areal/abi.h"

namespace areal {

struct StringCollector {
  std::string text;
  areal_writer w{AREAL_OFFSET_OF_END(areal_writer, write), this, &StringCollector::append};

  StringCollector() = default;
  StringCollector(const StringCollector&) = delete;
  StringCollector& operator=(const StringCollector&) = delete;
  const areal_writer* writer() const { return &w; }

 private:
  static areal_status* append(void* ctx, areal_str chunk) {
    if (chunk.size > 0) static_cast<StringCollector*>(ctx)->text.append(chunk.data, chunk.size);
    return nullptr;
  }
};

}  // namespace areal
