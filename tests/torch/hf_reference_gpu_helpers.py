"""bench/gpu/hf_reference.py's GPU-only helpers, which no CPU run reaches
(gpu_check's rehearsal runs them with ON_GPU false): with a CUDA device each
must call its torch.cuda function. A rename once had them call themselves,
which only a GPU session would have found. torch.cuda is replaced by
recorders here: no GPU is used.
  hf_reference_gpu_helpers.py SOURCE_DIR
"""
import os
import sys

os.environ["AREAL_REFERENCE_DEVICE"] = "cuda"
sys.path.insert(0, os.path.join(sys.argv[1], "bench", "gpu"))
import torch  # noqa: E402

calls = []
torch.cuda.synchronize = lambda *a, **k: calls.append("synchronize")
torch.cuda.reset_peak_memory_stats = lambda *a, **k: calls.append("reset_peak_memory_stats")
torch.cuda.max_memory_allocated = lambda *a, **k: calls.append("max_memory_allocated") or 12345

import hf_reference  # noqa: E402

assert hf_reference.ON_GPU, "AREAL_REFERENCE_DEVICE=cuda should mean the GPU"
hf_reference.synchronize()
hf_reference.reset_peak_memory()
assert hf_reference.peak_memory() == 12345, "peak_memory() should return torch.cuda.max_memory_allocated()"
assert calls == ["synchronize", "reset_peak_memory_stats", "max_memory_allocated"], calls
print(f"hf_reference GPU helpers: {len(calls)} reach torch.cuda")
