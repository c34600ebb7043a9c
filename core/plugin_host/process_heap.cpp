#include "process_heap.hpp"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace areal {

void keep_tensor_buffers_on_heap() {
#if defined(__GLIBC__)
  // 32 MiB: the most every glibc takes (before 2.35, half its 64 MiB heap
  // size); refused, the trim setting would freeze the threshold at 128 KiB.
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr && mallopt(M_MMAP_THRESHOLD, 32 << 20) == 0) return;
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace areal
