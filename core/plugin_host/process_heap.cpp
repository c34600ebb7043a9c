#include "process_heap.hpp"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace areal {

void keep_tensor_buffers_on_heap() {
#if defined(__GLIBC__)
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 64 << 20);
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace areal
