// How the process's heap treats large tensor buffers (glibc malloc).
#pragma once

namespace areal {

// glibc serves an allocation above a dynamic threshold (128 KiB at start)
// with mmap and gives it back with munmap when freed. Each decode or train
// step allocates and frees the same vocabulary-sized buffers (megabytes),
// so every step pays fresh pages until the threshold happens to have grown
// past them, which depends on what the process did before: a tiny model's
// CPU generation ran at 250 or 460 tokens/s by that alone. Fixed thresholds
// keep buffers of up to 32 MiB on the heap for reuse, and hand heap memory
// back once 256 MiB lie free at its top. MALLOC_MMAP_THRESHOLD_ and
// MALLOC_TRIM_THRESHOLD_ in the environment win. No-op off glibc.
// Called first thing by areal-host, areal-engine-server and the model benchmark.
void keep_tensor_buffers_on_heap();

}  // namespace areal
